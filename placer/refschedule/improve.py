"""Better orders for a phase under the reference's rules (``placer.refschedule.reference``).

``materialize`` times transfers in a list order, each at its earliest offset, and a tile takes its receives in
that order: the list decides every receive stream. B1024's list appends every gather of a relay before any forward
and a host's gathers interleave its segments, so every forward of a host waits for all of them; and a forward's
send may not overlap a receive into an SRAM element it reads (the memory rule), so a host whose segments share
elements serialises its gathers and its forwards. ``OrderSearch`` holds the shortest schedule found, and its steps
each time one order built from the greedy's (``placer.ordering.schedule`` runs them, and the chunk model's CP-SAT
order, while the time limit allows):

- *gathers by forward* (``group``): a host's gathers in blocks, one block per forward it feeds, the blocks in the
  forwards' lane order (or reversed); a receive into an element a forward reads joins that forward's block if it
  is earlier; everything else keeps its place;
- *forwards first* (``forwards``): every gather, then every forward, then the direct traffic, so a replica takes
  its forwards before its direct receives and a host's lane is not broken up by small sends before its forwards;
- *host plans* (``hosts``, ``placer.refschedule.hosts``): per host, the order of its forwards and which gathers go
  before each, chosen on a small model of the host, with its forwards after every gather or interleaved with
  them;
- *aligned slots* (``aligned``, ``placer.refschedule.slots``): where the direct senders form columns (weight homes
  multicasting to the rest of theirs) and relay hosts are among them, the direct multicasts in slots, each
  host's gathers listed just before its own direct sends, so they land while its port would idle (a tile never
  receives its own multicast) instead of holding up the multicasts that wait for its port; slots chosen so that
  no sender gathers into a host of its own slot; a spare host's gathers first;
- *relay tiles first* (``relay_tiles``): every gather, then the hosts' own direct sends and every direct transfer
  into a replica, then the forwards, then the other direct traffic (and then gathers by forward on the result), so
  the relay tiles' own traffic goes while the gathers land, before the forwards hold their lanes and ports;
- *relay windows* (``windows``): each host's gathers in its plan's blocks and its forwards in its plan's order,
  the direct traffic by the non-delay scheme; the forwards after the direct traffic (the hosts' own sends and the
  replicas' receives first in it), or before it;
- *calendar list* (``calendar``, ``placer.refschedule.calendar``): where the replicas take direct traffic and the
  direct senders are not in columns, the list built by placing the replicas' direct receives, then the hosts' own
  sends, the gathers and the forwards, then the rest, each in the first gap of every lane and port it needs;
- *non-delay list* (``nondelay``, ``placer.refschedule.nondelay``): the list built by the parallel scheme, B1024's
  order as priority, so that no tile's receive stream waits on a multicast while receives listed after it could
  go (on any phase, relayed or not);
- *polish* (``polish``): host plans, then gathers by forward, then the non-delay list with the best order as its
  priority (then gathers by forward on it), on the best schedule found so far, then on the second best;
- *late hosts* (``late_hosts``): on the best order, for a host whose payload lands last, the forwards to its
  replicas listed in the order their gathers land (``forwards_by_landing``), or what its forwards wait for moved
  to half its place in the list or to its front (``gathers_earlier``), host after host while that shortens the
  schedule.

Each order is a topological order of the dependencies, so each schedule keeps every rule (the checker runs on the
result in ``schedule_phase``); only a shorter horizon replaces the incumbent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from placer.arrays import unique
from placer.capture.model import Phase
from placer.refschedule.calendar import calendar_order, relay_tiles, replicas_take_direct
from placer.refschedule.hosts import held_gathers, host_order, plan_hosts
from placer.refschedule.nondelay import nondelay_order
from placer.refschedule.reference import ReferenceSchedule, hazard_pairs
from placer.refschedule.slots import aligned_slots, sender_slots
from placer.streams.dependencies import Dependencies

Timer = Callable[[np.ndarray], ReferenceSchedule]  # an order → its schedule (``materialize`` bound to a phase)


def gathers_by_forward(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule,
                       *, reverse: bool = False) -> np.ndarray:
    """``schedule``'s order with each transfer that feeds a forward, or writes an SRAM element a forward reads on
    its tile, moved into the block of the first such forward (see the module docstring); stable otherwise."""
    place = np.empty(phase.n, np.int64)
    place[schedule.order] = np.arange(phase.n)
    forwards = unique(deps.succ)
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


def _needed(phase: Phase, deps: Dependencies) -> np.ndarray:
    """Which transfers some dependent waits for, transitively (a relay's gathers, and what they wait for)."""
    needed = np.zeros(phase.n, bool)
    needed[deps.succ] = True
    frontier = needed.copy()
    while frontier.any():
        before = np.zeros(phase.n, bool)
        before[deps.pred[frontier[deps.succ]]] = True
        frontier = before & ~needed
        needed |= before
    return needed


def forwards_first(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule,
                   ) -> np.ndarray:
    """``schedule``'s order with every transfer some dependent waits for (its gathers, transitively) first, then
    the dependents of depth one, then the rest of depth zero, then deeper transfers: every replica takes its
    forwards before its direct receives, and a host's lane sends its forwards before the small sends that would
    otherwise leave it no gap long enough."""
    place = np.empty(phase.n, np.int64)
    place[schedule.order] = np.arange(phase.n)
    group = np.select([levels > 1, levels == 1, _needed(phase, deps)], [3, 1, 0], default=2)
    return np.lexsort((place, levels, group))


def relay_tiles_first(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule,
                      ) -> np.ndarray:
    """``schedule``'s order with every transfer some dependent waits for first (as in forwards first), then the
    relay tiles' own direct traffic — every other depth-0 send of a host and every depth-0 transfer into a
    replica (a receiver of a forward) — then the forwards, then the other direct traffic, then deeper transfers.

    Why: a tile takes its receives in list order and a multicast waits for every receiver. Listed after the
    forwards (forwards first), a replica's direct receives wait for forwards that are only ready once their
    gathers have landed, and a host's own multicasts queue behind its long forwards on its lane, holding up
    every later receive of their receivers; listed after all the direct traffic (B1024), the forwards wait for
    the replicas' last direct receive. Here both go while the gathers land, and the traffic of the tiles no relay
    touches fills in after."""
    n = phase.n
    place = np.empty(n, np.int64)
    place[schedule.order] = np.arange(n)
    src = phase.source.astype(np.int64)
    dst = phase.dst_tile.astype(np.int64)
    owner = phase.dst_transfer()
    tiles = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    forward = levels == 1
    is_host = np.zeros(tiles, bool)
    is_host[src[forward]] = True
    is_replica = np.zeros(tiles, bool)
    is_replica[dst[forward[owner]]] = True
    relay_tile = is_host[src]
    relay_tile[owner[is_replica[dst]]] = True
    group = np.select([levels > 1, forward, _needed(phase, deps), relay_tile], [4, 2, 0, 1], default=3)
    return np.lexsort((place, levels, group))


def relay_windows(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule, *,
                  forwards_last: bool = True, plan: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Each host's gathers in its plan's blocks (``plan_hosts``, or ``plan``) and its forwards in its plan's order,
    the direct traffic listed by the non-delay scheme (``nondelay_order``), ``schedule``'s order among equals.

    ``forwards_last``: every depth-0 transfer but the later blocks in one non-delay list, the first blocks' gathers
    first, then the hosts' own sends, then the replicas' direct receives, then the rest; then the relay part: each
    forward of rank b, then the gathers of block b + 1 (those free to land during that forward's send first), and
    so on. Else the first blocks' gathers (a non-delay list of their own), then the relay part, then the direct
    traffic (another).

    Why: a host's forwards hold its lane, and its replicas' ports, from when its first block of gathers has landed
    to the end of the phase, so its own sends and its replicas' direct receives have until then. Listed by the
    non-delay scheme with these first, they go while the gathers land, and the traffic no relay touches fills the
    gaps; listed after every direct transfer, each forward goes as soon as its gathers and its replicas allow (on
    the CP-SAT plan's phase 60, where every host sends two forwards: 14,115 → 12,968). Where the replicas take
    little direct traffic, the relay part is better listed before it (phase 54, where host 1471's later block
    lands during its first forward only if it is listed early enough to find its senders' lanes free)."""
    n = phase.n
    place = _positions(schedule.order)
    src = phase.source.astype(np.int64)
    tiles = _tiles(phase)
    forward = np.zeros(n, bool)
    forward[deps.succ] = True
    gather = np.zeros(n, bool)
    gather[deps.pred] = True
    slot, rank = plan if plan is not None else plan_hosts(phase, deps, levels, np.zeros(n, np.int64))
    # a planned host's later blocks go with its forwards: block b after its forward of rank b − 1, so that the
    # gathers that must not land while that forward reads their element are placed after it
    later = (slot > 0) & (levels == 0)
    relay = np.flatnonzero((levels > 0) | later)
    block = np.where(later, 2 * slot, 2 * np.maximum(rank, 0) + 1)[relay]
    # within a block, the gathers free to land during the send before it first (a host's port takes them in list
    # order: one held back by that send would hold up the rest)
    held = held_gathers(phase, forward, rank, later, slot)[relay]
    relay = relay[np.lexsort((place[relay], held, block, np.maximum(levels[relay], 1)))]
    no_deps = Dependencies(np.zeros(0, np.int64), np.zeros(0, np.int64))

    def listed(members: np.ndarray, priority: np.ndarray) -> np.ndarray:
        ordered: np.ndarray = members[nondelay_order(phase.take(members), no_deps, priority[members], tiles=tiles)]
        return ordered

    if forwards_last:
        is_host, _, into_replica = relay_tiles(phase, deps)
        kind = np.select([gather, is_host[src], into_replica], [0, 1, 2], 3)
        first = np.flatnonzero((levels == 0) & ~later)
        return np.concatenate([listed(first, kind * n + place), relay])
    gathered = np.flatnonzero((levels == 0) & gather & ~later)
    direct = np.flatnonzero((levels == 0) & ~gather)
    return np.concatenate([listed(gathered, place), relay, listed(direct, place)])


def hosts_landing_last(phase: Phase, deps: Dependencies, schedule: ReferenceSchedule, count: int) -> list[int]:
    """The relay hosts of the forwards whose payload lands last in ``schedule``, latest first (at most ``count``)."""
    forwards = unique(deps.succ)
    end = _last_arrival(phase, schedule)
    hosts = phase.source[forwards[np.lexsort((forwards, -end[forwards]))]].astype(np.int64)
    _, first = np.unique(hosts, return_index=True)
    landing: list[int] = hosts[np.sort(first)][:count].tolist()
    return landing


def _last_arrival(phase: Phase, schedule: ReferenceSchedule) -> np.ndarray:
    """Per transfer, when its payload has landed on its last receiver in ``schedule``."""
    owner = phase.dst_transfer()
    end = np.zeros(phase.n, np.int64)
    np.maximum.at(end, owner, schedule.rx_start + phase.words[owner].astype(np.int64))
    return end


def gathers_earlier(phase: Phase, deps: Dependencies, order: np.ndarray, host: int, share: float
                    ) -> np.ndarray | None:
    """``order`` with what the forwards of ``host`` wait for each moved to ``share`` of its place (just before the
    transfer there; 0: to the front), in the same order among themselves; None if nothing moves or a dependency
    would break."""
    place = _positions(order)
    waited = unique(deps.pred[phase.source[deps.succ] == host])
    key = 2 * place
    key[waited] = 2 * np.floor(place[waited] * share).astype(np.int64) - 1
    moved = np.lexsort((place, key))
    if np.array_equal(moved, order):
        return None
    at = _positions(moved)
    if (at[deps.pred] >= at[deps.succ]).any():  # something it waits for now comes later
        return None
    return moved


def forwards_by_landing(phase: Phase, deps: Dependencies, schedule: ReferenceSchedule, host: int
                        ) -> np.ndarray | None:
    """``schedule``'s order with the forwards to the replicas of ``host`` (every forward whose destination set is
    that of one of ``host``'s forwards) listed in the order their gathers land in ``schedule``, in the list places
    they had (ties: list order); None if nothing moves or a gather would then come after its forward.

    Why: a replica takes its receives in list order, so of two forwards to the same replicas the one listed first
    goes first even when the other's gathers landed long before (CP-SAT plan's phase 54: a group's two 3,552-word
    segments, one ready at 3,635 but listed after the other, ready at 4,240; the replicas idled until 4,318)."""
    forwards = unique(deps.succ)
    land = np.zeros(phase.n, np.int64)
    np.maximum.at(land, deps.succ, _last_arrival(phase, schedule)[deps.pred])

    def replicas(f: int) -> bytes:
        return np.sort(phase.dst_tile[phase.dst_ptr[f]:phase.dst_ptr[f + 1]]).tobytes()

    sets = {replicas(int(f)) for f in forwards[phase.source[forwards] == host]}
    same = np.array([f for f in forwards.tolist() if replicas(f) in sets], np.int64)
    place = _positions(schedule.order)
    listed = same[np.argsort(place[same])]
    by_landing = same[np.lexsort((place[same], land[same]))]
    if np.array_equal(listed, by_landing):
        return None
    place[by_landing] = place[listed]
    if (place[deps.pred] >= place[deps.succ]).any():
        return None
    order = np.empty(phase.n, np.int64)
    order[place] = np.arange(phase.n)
    return order


@dataclass
class OrderSearch:
    """The shortest schedule found so far for one phase, and the steps that try the orders of the module
    docstring. A step starts only if one more timing (``margin`` times ``step_seconds``: the first timing's, then
    the slowest so far) fits before the wall-clock ``deadline``; ``cut`` says one did not."""

    phase: Phase
    deps: Dependencies
    levels: np.ndarray
    time_order: Timer
    best: ReferenceSchedule
    deadline: float
    step_seconds: float
    found: str = "greedy"
    cut: bool = False
    margin: float = 1.3  # another order of one phase has taken up to 1.3x the first timing (PE MLP-up: 4.4, 5.6 s)
    greedy: ReferenceSchedule = field(init=False)  # the schedule the search started from
    # the second shortest schedule found (shorter than the greedy's), and how
    runner_up: tuple[ReferenceSchedule, str] | None = field(init=False, default=None)
    columns: bool = field(init=False, default=False)  # the direct senders form columns (``sender_slots``)

    def __post_init__(self) -> None:
        self.greedy = self.best

    def offer(self, schedule: ReferenceSchedule, label: str) -> None:
        if not self._keeps_dependencies(schedule.order):
            # a list that puts a transfer before one it depends on is timed as listed, hazard and all: never kept
            # (host plans on the interleaved host plans' order once built such lists; see docs/ordering.md)
            return
        if schedule.horizon < self.best.horizon:
            if self.best is not self.greedy:
                self.runner_up = (self.best, self.found)
            self.best, self.found = schedule, label
        elif self.best.horizon < schedule.horizon < self.greedy.horizon and (
                self.runner_up is None or schedule.horizon < self.runner_up[0].horizon):
            self.runner_up = (schedule, label)

    def _keeps_dependencies(self, order: np.ndarray) -> bool:
        place = np.empty(len(order), np.int64)
        place[order] = np.arange(len(order))
        return bool(np.all(place[self.deps.pred] < place[self.deps.succ]))

    def fits(self, extra: float = 0.0) -> bool:
        """Does one more timing (and ``extra`` seconds of building its order) fit before the deadline?"""
        self.cut = self.cut or time.perf_counter() + extra + self.margin * self.step_seconds > self.deadline
        return not self.cut

    def _list_fits(self) -> bool:
        """Does building a non-delay list and one timing fit? The compiled list lists about 500k transfers a second,
        next to nothing beside a timing."""
        return self.fits()

    def timed(self, order: np.ndarray) -> ReferenceSchedule:
        """Time ``order`` (and learn how long a timing takes)."""
        clock = time.perf_counter()
        schedule = self.time_order(order)
        self.step_seconds = max(self.step_seconds, time.perf_counter() - clock)
        return schedule

    def group(self, *, reverse: bool = False) -> None:
        """Gathers by forward on the greedy's order, in its forwards' lane order or reversed (not timed when the
        order is the greedy's)."""
        if not len(self.deps) or not self.fits():
            return
        order = gathers_by_forward(self.phase, self.deps, self.levels, self.greedy, reverse=reverse)
        if not np.array_equal(order, self.greedy.order):
            self.offer(self.timed(order), "gathers by forward" + (", reversed" if reverse else ""))

    def forwards(self) -> None:
        """Forwards first, on the greedy's order."""
        if len(self.deps) and self.fits():
            self.offer(self.timed(forwards_first(self.phase, self.deps, self.levels, self.greedy)), "forwards first")

    def hosts(self, *, interleave: bool = False) -> None:
        """The relay hosts' plans (``placer.refschedule.hosts``) on the greedy's schedule, their forwards after every
        gather or interleaved with them (none without a host of several forwards)."""
        if not len(self.deps) or not self.fits():
            return
        order = host_order(self.phase, self.deps, self.levels, self.greedy, interleave=interleave)
        if order is not None:
            self.offer(self.timed(order), "host plans" + (", interleaved" if interleave else ""))

    def relay_tiles(self) -> None:
        """Relay tiles first, on the greedy's order, and then gathers by forward on its schedule."""
        if not len(self.deps) or not self.fits():
            return
        schedule = self.timed(relay_tiles_first(self.phase, self.deps, self.levels, self.greedy))
        self.offer(schedule, "relay tiles first")
        if self.fits():
            order = gathers_by_forward(self.phase, self.deps, self.levels, schedule)
            if not np.array_equal(order, schedule.order):
                self.offer(self.timed(order), "relay tiles first, then gathers by forward")

    def windows(self) -> None:
        """Relay windows on the greedy's order, forwards last and then early, each followed by gathers by forward
        on its schedule."""
        if not len(self.deps) or not self._list_fits():
            return
        plan = plan_hosts(self.phase, self.deps, self.levels, np.zeros(self.phase.n, np.int64))
        for last, label in ((True, "relay windows"), (False, "relay windows, forwards early")):
            if not self._list_fits():
                return
            order = relay_windows(self.phase, self.deps, self.levels, self.greedy, forwards_last=last, plan=plan)
            schedule = self.timed(order)
            self.offer(schedule, label)
            if self.fits():
                order = gathers_by_forward(self.phase, self.deps, self.levels, schedule)
                if not np.array_equal(order, schedule.order):
                    self.offer(self.timed(order), f"{label}, then gathers by forward")

    def calendar(self) -> None:
        """The calendar list on the greedy's order, where the replicas take direct traffic and aligned slots did not
        apply (its model is placed in Python: about 150k receiver entries a second)."""
        if (not len(self.deps) or self.columns or not replicas_take_direct(self.phase, self.deps, self.levels)
                or not self.fits(self.phase.dst_tile.size / 150_000)):
            return
        self.offer(self.timed(calendar_order(self.phase, self.deps, self.levels, self.greedy)), "calendar list")

    def nondelay(self) -> None:
        """The non-delay list with the greedy's order as priority (on any phase: it needs no relay)."""
        if not self.phase.n or not self._list_fits():
            return
        order = nondelay_order(self.phase, self.deps, _positions(self.greedy.order), tiles=_tiles(self.phase))
        self.offer(self.timed(order), "non-delay list")

    def polish(self) -> None:
        """Host plans, then gathers by forward, then the non-delay list with the best order as its priority (and
        gathers by forward on its schedule), each on the best schedule so far (once a step has beaten the greedy);
        then the same from the second shortest, if one more list and timing fit.

        Why: each step starts from the greedy's order, but what a host plan can gain depends on the rest of the
        list: on the CP-SAT plan's phase 54 the host whose pieces share two SRAM elements gains from sending its
        second piece first only once the forwards are listed before the direct traffic; and the non-delay list
        seeded with a good order keeps its relay structure while letting each tile take what is ready. Which
        seed gives the shortest list is not always the shortest seed (phase 16: 18,764 from the second)."""
        if not len(self.deps) or self.best is self.greedy:
            return
        second = self.runner_up
        self._polish_from(self.best, self.found)
        if second is not None:
            self._polish_from(*second)

    def _polish_from(self, base: ReferenceSchedule, found: str) -> None:
        steps: tuple[tuple[Callable[[ReferenceSchedule], np.ndarray | None], str], ...] = (
            (lambda base: host_order(self.phase, self.deps, self.levels, base, interleave=False), "host plans"),
            (lambda base: gathers_by_forward(self.phase, self.deps, self.levels, base), "gathers by forward"))
        for build, label in steps:
            if not self.fits():
                return
            order = build(base)
            if order is not None and not np.array_equal(order, base.order):
                schedule = self.timed(order)
                self.offer(schedule, f"{found}, then {label}")
                if schedule.horizon < base.horizon:
                    base, found = schedule, f"{found}, then {label}"
        # the non-delay list with the order as its priority, then gathers by forward on its schedule (the list
        # alone is rarely shorter: it breaks up each host's blocks of gathers, which the second step restores)
        if not self._list_fits():
            return
        listed = self.timed(nondelay_order(self.phase, self.deps, _positions(base.order), tiles=_tiles(self.phase)))
        self.offer(listed, f"{found}, then the non-delay list")
        if self.fits():
            order = gathers_by_forward(self.phase, self.deps, self.levels, listed)
            self.offer(self.timed(order), f"{found}, then the non-delay list and gathers by forward")

    def late_hosts(self, candidates: int = 4) -> None:
        """Of the ``candidates`` hosts whose forwards land last, the first for which one of three moves shortens
        the best schedule, and the best of its moves: its replicas' forwards listed in the order their gathers
        land (``forwards_by_landing``), its gathers at half their places or at the front of the list
        (``gathers_earlier``); again from there, until no move does.

        Why: the steps list a host's gathers in blocks and place the blocks among the direct traffic, but the
        lanes that send a gather are also direct senders, and a host whose forwards wait for dozens of senders
        gets its last gather as late as the busiest of them sends it; and a replica takes its forwards in list
        order, ready or not. On the CP-SAT plan's phase 54 (docs/ordering.md) a group's two segments were listed
        in the order opposite to their gathers' landing, and the replicas idled until 4,318: in landing order the
        phase ends at 11,335 instead of 11,427; then host 1471's gathers at the front, 10,878. The best of the
        three, not the first that gains: on phase 16 a replica set's forwards in landing order gain a little
        (19,393 → 19,145) where a host's gathers earlier gain more and lead further (18,859)."""
        if not len(self.deps):
            return
        found = self.found
        done = {"gathers": 0, "forwards": 0}
        while True:
            for host in hosts_landing_last(self.phase, self.deps, self.best, candidates):
                base, best = self.best, None
                for move in ("forwards", 0.5, 0.0):
                    if not self.fits():
                        return
                    if move == "forwards":
                        order = forwards_by_landing(self.phase, self.deps, base, host)
                    else:
                        order = gathers_earlier(self.phase, self.deps, base.order, host, float(move))
                    if order is None:
                        continue
                    kind = "forwards" if move == "forwards" else "gathers"
                    tried = dict(done, **{kind: done[kind] + 1})
                    before = self.best.horizon
                    self.offer(self.timed(order), f"{found}, then {_late_label(tried)}")
                    if self.best.horizon < before:
                        best = tried
                if best is not None:
                    done = best
                    break
            else:
                return

    def aligned(self) -> None:
        """Aligned slots (``placer.refschedule.slots``) on the greedy's order, then again with the spare hosts' gathers
        paced against that schedule's other sends (only where the direct traffic is in columns and some relay
        host is one of their senders)."""
        if not len(self.deps) or not self.fits():
            return
        slot = sender_slots(self.phase, self.deps, self.levels)  # the swap search once, for both orders
        self.columns = slot is not None
        order = None if slot is None else aligned_slots(self.phase, self.deps, self.levels, self.greedy, slot=slot)
        if order is None:
            return
        schedule = self.timed(order)
        self.offer(schedule, "aligned slots")
        if self.fits():
            order = aligned_slots(self.phase, self.deps, self.levels, self.greedy, paced=schedule, slot=slot)
            assert order is not None
            if not np.array_equal(order, schedule.order):
                self.offer(self.timed(order), "aligned slots, spare hosts paced")


def _late_label(done: dict[str, int]) -> str:
    """What ``late_hosts`` moved, for the result's label."""
    parts = []
    if done["gathers"]:
        n = done["gathers"]
        parts.append(f"the gathers of {n} late host{'s' if n > 1 else ''} earlier")
    if done["forwards"]:
        n = done["forwards"]
        parts.append(f"the forwards of {n} late replica set{'s' if n > 1 else ''} in landing order")
    return " and ".join(parts)


def _positions(order: np.ndarray) -> np.ndarray:
    """Each transfer's position in ``order`` (a priority for ``nondelay_order``)."""
    at = np.empty(len(order), np.int64)
    at[order] = np.arange(len(order))
    return at


def _tiles(phase: Phase) -> int:
    return int(max(phase.source.max(), phase.dst_tile.max())) + 1


__all__ = ["OrderSearch", "forwards_by_landing", "forwards_first", "gathers_by_forward",
           "relay_tiles_first", "relay_windows"]
