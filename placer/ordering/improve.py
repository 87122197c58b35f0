"""Better orders for a phase under the reference's rules (``placer.ordering.reference``).

``materialize`` times transfers in a list order, each at its earliest offset, and a tile takes its receives in
that order: the list decides every receive stream. B1024's list appends every gather of a relay before any forward
and a host's gathers interleave its segments, so every forward of a host waits for all of them; and a forward's
send may not overlap a receive into an SRAM element it reads (the memory rule), so a host whose segments share
elements serialises its gathers and its forwards. ``OrderSearch`` tries, after B1024, while the time limit allows:

- *gathers by forward* (``group``): a host's gathers in blocks, one block per forward it feeds, the blocks in the
  forwards' lane order in the incumbent (or reversed); a receive into an element a forward reads joins that
  forward's block if it is earlier; everything else keeps its place;
- *forwards first* (``forwards``): every gather, then every forward, then the direct traffic, so a replica takes
  its forwards before its direct receives and a host's lane is not broken up by small sends before its forwards;
- *host plans* (``hosts``, ``placer.ordering.hosts``): per host, the order of its forwards and which gathers go
  before each, chosen on a small model of the host, with its forwards after every gather or interleaved with
  them;
- the chunk model's CP-SAT order (in ``placer.ordering.schedule``);
- *by release* (``release``): every transfer at its offset in a grouped schedule, a forward at its gathers' last
  arrival (a source's forwards one after another), so a replica takes each forward when it can be sent, between
  its direct receives, instead of after all of them.

Each order is a topological order of the dependencies, so each schedule keeps every rule (the checker runs on the
result in ``schedule_phase``); only a shorter horizon replaces the incumbent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from placer.capture.model import Phase
from placer.ordering.hosts import host_order
from placer.ordering.reference import ReferenceSchedule, hazard_pairs
from placer.ordering.streams import Dependencies

Timer = Callable[[np.ndarray], ReferenceSchedule]  # an order → its schedule (``materialize`` bound to a phase)


def gathers_by_forward(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule,
                       *, reverse: bool = False) -> np.ndarray:
    """``schedule``'s order with each transfer that feeds a forward, or writes an SRAM element a forward reads on
    its tile, moved into the block of the first such forward (see the module docstring); stable otherwise."""
    place = np.empty(phase.n, np.int64)
    place[schedule.order] = np.arange(phase.n)
    forwards = np.unique(deps.succ)
    o = np.lexsort((schedule.tx_start[forwards], phase.source[forwards]))
    src = phase.source[forwards][o]
    first = np.ones(len(o), bool)
    first[1:] = src[1:] != src[:-1]
    host = np.cumsum(first) - 1
    at = np.arange(len(o))
    rank = at - np.maximum.accumulate(np.where(first, at, 0))
    if reverse:
        rank = np.bincount(host)[host] - 1 - rank
    never = np.iinfo(np.int64).max
    block_of = np.full(phase.n, never)
    block_of[forwards[o]] = rank
    block = np.full(phase.n, never)
    np.minimum.at(block, deps.pred, block_of[deps.succ])
    # a receive into an element a forward reads must land before that forward is sent (the hazard rule)
    s_tr, s_key, entry, d_key = hazard_pairs(phase)
    reads = block_of[s_tr] < never
    if reads.any():
        keys, first_read = s_key[reads], block_of[s_tr[reads]]
        o = np.lexsort((first_read, keys))
        keys, first_read = keys[o], first_read[o]
        lowest = np.ones(len(keys), bool)
        lowest[1:] = keys[1:] != keys[:-1]
        keys, first_read = keys[lowest], first_read[lowest]
        k = np.searchsorted(keys, d_key)
        hit = (k < len(keys)) & (keys[np.minimum(k, len(keys) - 1)] == d_key)
        np.minimum.at(block, phase.dst_transfer()[entry[hit]], first_read[k[hit]])
    block[block == never] = 0
    return np.lexsort((place, block, levels))


def forwards_first(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule,
                   ) -> np.ndarray:
    """``schedule``'s order with every transfer some dependent waits for (its gathers, transitively) first, then
    the dependents of depth one, then the rest of depth zero, then deeper transfers: every replica takes its
    forwards before its direct receives, and a host's lane sends its forwards before the small sends that would
    otherwise leave it no gap long enough."""
    n = phase.n
    place = np.empty(n, np.int64)
    place[schedule.order] = np.arange(n)
    needed = np.zeros(n, bool)
    needed[deps.succ] = True
    frontier = needed.copy()
    while frontier.any():
        before = np.zeros(n, bool)
        before[deps.pred[frontier[deps.succ]]] = True
        frontier = before & ~needed
        needed |= before
    group = np.select([levels > 1, levels == 1, needed], [3, 1, 0], default=2)
    return np.lexsort((place, levels, group))


def by_release(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule,
               lead: np.ndarray) -> np.ndarray:
    """Every transfer keyed by its offset in ``schedule``; a dependent by its predecessors' last arrival there,
    a source's dependents one after another on its lane (see the module docstring)."""
    words = phase.words.astype(np.int64)
    owner = phase.dst_transfer()
    arrival = schedule.tx_start + words
    np.maximum.at(arrival, owner, schedule.rx_start + words[owner])
    key = schedule.tx_start - lead
    ready = np.zeros(phase.n, np.int64)
    np.maximum.at(ready, deps.succ, arrival[deps.pred])
    dependents = np.unique(deps.succ)
    # never ahead of a receiving host's own gathers: they would wait for it, and so would its forwards
    gathered = np.zeros(int(phase.dst_tile.max()) + 1, np.int64)
    fed = np.isin(owner, deps.pred) & np.isin(phase.dst_tile, phase.source[dependents])
    np.maximum.at(gathered, phase.dst_tile[fed], (schedule.rx_start + words[owner])[fed])
    into = np.isin(owner, dependents)
    np.maximum.at(ready, owner[into], gathered[phase.dst_tile[into]])
    dependents = dependents[np.lexsort((ready[dependents], phase.source[dependents]))]
    src = phase.source[dependents].tolist()
    w = words[dependents].tolist()
    at = ready[dependents].tolist()
    for k in range(1, len(at)):
        if src[k] == src[k - 1] and at[k] < at[k - 1] + w[k - 1]:
            at[k] = at[k - 1] + w[k - 1]
    key[dependents] = at
    for lv in range(1, int(levels.max(initial=0)) + 1):  # a transfer after its predecessors, whatever the estimates
        edge = levels[deps.succ] == lv
        np.maximum.at(key, deps.succ[edge], key[deps.pred[edge]] + 1)
    return np.lexsort((np.arange(phase.n), levels, key))


@dataclass
class OrderSearch:
    """The shortest schedule found so far for one phase, and the steps that try the orders of the module
    docstring. A step starts only if one more timing (about ``step_seconds``, then as long as the slowest so far)
    fits before the wall-clock ``deadline``; ``cut`` says one did not."""

    phase: Phase
    deps: Dependencies
    levels: np.ndarray
    time_order: Timer
    lead: np.ndarray
    best: ReferenceSchedule
    deadline: float
    step_seconds: float
    found: str = "greedy"
    cut: bool = False
    grouped: dict[bool, tuple[np.ndarray, ReferenceSchedule]] = field(default_factory=dict)
    greedy: ReferenceSchedule = field(init=False)  # the schedule the search started from

    def __post_init__(self) -> None:
        self.greedy = self.best

    def offer(self, schedule: ReferenceSchedule, label: str) -> None:
        if schedule.horizon < self.best.horizon:
            self.best, self.found = schedule, label

    def fits(self) -> bool:
        self.cut = self.cut or time.perf_counter() + self.step_seconds > self.deadline
        return not self.cut

    def _time(self, order: np.ndarray) -> ReferenceSchedule:
        clock = time.perf_counter()
        schedule = self.time_order(order)
        self.step_seconds = max(self.step_seconds, time.perf_counter() - clock)
        return schedule

    def group(self) -> None:
        """Gathers by forward, in the incumbent's forward order and reversed (an order equal to one already
        timed is not timed again)."""
        if not len(self.deps):
            return
        base = self.best
        for reverse in (False, True):
            order = gathers_by_forward(self.phase, self.deps, self.levels, base, reverse=reverse)
            if np.array_equal(order, base.order) or any(np.array_equal(order, o) for o, _ in self.grouped.values()):
                continue
            if not self.fits():
                return
            schedule = self._time(order)
            self.grouped[reverse] = order, schedule
            self.offer(schedule, "gathers by forward" + (", reversed" if reverse else ""))

    def forwards(self) -> None:
        """Forwards first, on the greedy's order."""
        if len(self.deps) and self.fits():
            self.offer(self._time(forwards_first(self.phase, self.deps, self.levels, self.greedy)), "forwards first")

    def hosts(self) -> None:
        """Each relay host's plan (``placer.ordering.hosts``) on the greedy's schedule, its forwards after every
        gather and interleaved with them."""
        for interleave in (False, True):
            order = host_order(self.phase, self.deps, self.levels, self.greedy, interleave=interleave)
            if order is None:
                return
            if not self.fits():
                return
            self.offer(self._time(order), "host plans" + (", interleaved" if interleave else ""))

    def release(self) -> None:
        """By release, after each grouping (the costlier step: it is tried last)."""
        for reverse, (_, schedule) in sorted(self.grouped.items()):
            if not self.fits():
                return
            self.offer(self._time(by_release(self.phase, self.deps, self.levels, schedule, self.lead)),
                       "gathers by forward" + (", reversed" if reverse else "") + " + by release")


__all__ = ["OrderSearch", "by_release", "forwards_first", "gathers_by_forward"]
