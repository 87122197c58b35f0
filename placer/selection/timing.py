"""Scheduled cycles for relay selection: what the machine's exchange takes, not the estimate.

The estimate (docs/cost.md) charges a phase its busiest port, every tile's sends and receives running side by
side. A relay host does its work in series: the gathers land on its port, and only then may its lane forward the
segment, whose payload then lands on every replica; a replica, in turn, takes its forwards no sooner than their
gathers have landed. The estimate sees none of that, so a plan that keeps the estimate can still be slower on the
machine (docs/selection.md, "Scheduled cycles").

Selection therefore judges a plan by the figures of its rewritten phases under the reference's rules
(``placer.refschedule.reference``):
- the **lower bound** of each phase (port with releases, lane, dependency chain, memory elements, relay hosts):
  no order of the phase is faster; its sum over the selection phases (times their Repeat iterations) is the
  *cycles* objective, and placer's ordering search reaches within a few per cent of it on relayed phases;
- the **B1024 horizon**: what the reference's own scheduler makes of the phase, i.e. what a compiler that takes
  the plan and keeps its scheduler gets.
Phases no option can change are the same in every plan and left out of both sums; ``placer solve --schedule``
adds them (every phase scheduled).

To *choose* relays whose phases stay at a target, ``schedule_caps`` turns each phase's target into caps the
selection models (``placer.selection.capacity``) understand, per tile and per option:
- a host's port takes its direct receives and its segment's gathers: its direct port bound plus the gather words
  within the target;
- a host's lane sends its direct sends and the forwards, and the last forward must still land;
- a segment's chain (gathers land, then the forward goes and lands) within the target;
- a replica's forwards are released only when their gathers have landed: the latest release plus the words relays
  forward to it within the target.
These use typical latencies (the tiles' rows where known, a select delay most routes do not exceed): they steer the
choice; the exact bound of every rewritten phase is computed afterwards, and a phase over its target has its
target lowered by the excess and is chosen again (``placer.selection.select``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from placer.capture.model import Phase
from placer.machine import Machine
from placer.refschedule.reference import GUARD, POINTER_DELAY, materialize, reference_order, reference_profile
from placer.selection.capacity import PhaseCaps, Release, with_room
from placer.selection.problem import SelectionProblem
from placer.streams.dependencies import transfer_dependencies, transfer_levels
from placer.threads import ordered_map

SELECT_PERCENTILE = 90  # the select delay the caps assume: most routes' (the exact bound is checked afterwards)


@dataclass(frozen=True)
class PhaseFigures:
    """One phase's scheduled figures (cycles, sync excluded), under the reference's rules."""

    bound: int  # no order of the phase is faster
    kind: str  # which bound sets it: port, lane, chain, memory or host
    b1024: int  # the reference's B1024 horizon

    def to_json(self) -> dict[str, int | str]:
        return {"lower_bound": self.bound, "lower_bound_kind": self.kind, "b1024": self.b1024}


@dataclass(frozen=True, eq=False)
class PhaseTiming:
    """A selection phase as the direct program has it: its figures and each tile's share of its bound."""

    figures: PhaseFigures
    port: np.ndarray  # per tile: its receive port's bound alone (0: receives nothing)
    lane: np.ndarray  # per tile: words it sends


def load_solvers() -> None:
    """Execute the lazily loaded LP module now: the relay-host bound builds linear programs, and two threads
    measuring phases at once would otherwise both start loading it (``placer.solver.lazy_module``)."""
    from ortools.linear_solver import pywraplp

    assert pywraplp.Solver is not None


class OutOfTime(Exception):
    """The command's clock passed ``until`` before a measurement started: the caller keeps what it has."""


T = TypeVar("T")
R = TypeVar("R")


def in_time(fn: Callable[[T], R], until: float | None) -> Callable[[T], R]:
    """``fn``, refusing to start once ``time.perf_counter()`` has passed ``until`` (None: no limit). One phase's
    measurement takes well under a second on the largest captures, so a command overruns by at most that."""
    if until is None:
        return fn

    def run(x: T) -> R:
        if time.perf_counter() > until:
            raise OutOfTime
        return fn(x)
    return run


def phase_figures(phase: Phase, machine: Machine, tiles: int) -> PhaseFigures:
    """The lower bound and the B1024 horizon of one phase."""
    return _profile(phase, machine, tiles).figures


def _profile(phase: Phase, machine: Machine, tiles: int) -> PhaseTiming:
    if phase.n == 0:
        zero = np.zeros(tiles, np.int64)
        return PhaseTiming(PhaseFigures(0, "port", 0), zero, zero)
    deps = transfer_dependencies(phase)
    prof = reference_profile(phase, machine, tiles=tiles, deps=deps)
    order = reference_order(phase, transfer_levels(phase.n, deps), tiles=tiles)
    b1024 = materialize(phase, order, deps, machine, tiles).horizon
    return PhaseTiming(PhaseFigures(prof.bound.best, prof.bound.kind, int(b1024)), prof.port, prof.lane)


def direct_timings(problem: SelectionProblem, ids: list[int], workers: int = 1,
                   until: float | None = None) -> dict[int, PhaseTiming]:
    """The direct figures of the capture's phases ``ids`` (each measured once per prepared problem: they do not
    depend on the budget); :class:`OutOfTime` once the clock passes ``until``."""
    cache: dict[int, PhaseTiming] = problem.shared.setdefault("timings", {})
    todo = [pid for pid in ids if pid not in cache]
    capture = problem.capture
    load_solvers()
    for pid, tm in zip(todo, ordered_map(in_time(lambda pid: _profile(capture.phase_by_id(pid), problem.machine,
                                                                      problem.tiles), until), todo, workers),
                        strict=True):
        cache[pid] = tm
    return {pid: cache[pid] for pid in ids}


def relay_free_bound(problem: SelectionProblem, phase_id: int) -> int:
    """A lower bound on a phase's horizon under any plan: a direct-receive relay never lowers a tile's receive
    or send words (replicas get the same bytes, senders send them once, hosts add both), a receive lands no
    sooner than one cycle after its transfer's offset plus 52 + 2·row, and then the guard."""
    pc = next(p for p in problem.direct.phases if p.phase == phase_id)
    tiles = problem.tiles
    bpc = problem.machine.exchange.bytes_per_cycle
    rx = -(-pc.rx_bytes[:tiles].astype(np.int64) // bpc)
    tx = -(-pc.tx_bytes[:tiles].astype(np.int64) // bpc)
    port = np.where(rx > 0, rx + 1 + Latency.landing(problem.machine.row(np.arange(tiles))), 0)
    return int(max(port.max(initial=0), tx.max(initial=0)))


def other_bounds(problem: SelectionProblem, ids: list[int], workers: int = 1, until: float | None = None) -> int:
    """Σ of the direct lower bound (times Repeat iterations) of every phase but ``ids``: the part of every plan's
    program-wide Σ lower bound that no plan changes (each phase's bound computed once per prepared problem)."""
    cache: dict[int, int] = problem.shared.setdefault("bounds", {})
    capture = problem.capture
    rest = [p for p in capture.phases if p.phase not in set(ids)]
    todo = [p for p in rest if p.phase not in cache]
    load_solvers()
    for p, b in zip(todo, ordered_map(in_time(lambda p: reference_profile(p, problem.machine, tiles=problem.tiles)
                                              .bound.best, until), todo, workers), strict=True):
        cache[p.phase] = int(b)
    return sum(cache[p.phase] * capture.iterations(p.phase) for p in rest)


@dataclass(frozen=True)
class Latency:
    """The delays the schedule-true caps assume, in cycles (``placer.refschedule.reference``'s timing rules)."""

    gather_select: int  # a unicast's select after its offset: its route's mux delay, at least 1
    forward_select: int  # a multicast receiver's select after the send's offset (the spread of its routes)
    max_row: int

    @staticmethod
    def of(machine: Machine) -> Latency:
        # mux delays over a grid of tile pairs (every 7th tile: the routes' spread, cheaply and deterministically)
        t = np.arange(0, machine.tiles, 7)
        m = machine.mux_time(np.repeat(t, len(t)), np.tile(t, len(t)))
        hi = int(np.percentile(m, SELECT_PERCENTILE))
        lo = int(np.percentile(m, 100 - SELECT_PERCENTILE))
        return Latency(max(hi, 0) + 1, hi - lo + 1, machine.geometry.rows - 1)

    @staticmethod
    def landing(row: Any) -> Any:
        """From a receiver's select to the end of its guard, less the words (52 + 2·row + 5)."""
        return POINTER_DELAY + 2 * row + GUARD


def schedule_caps(problem: SelectionProblem, timings: dict[int, PhaseTiming], targets: list[int]
                  ) -> list[PhaseCaps]:
    """Caps that keep each selection phase at or under its target (cycles, in ``problem.phases``' order; see the
    module docstring); ``timings``: the direct figures of every selection phase, by phase id. Only
    direct-receive options are offered: a local-pack relay adds a phase, its sync and its kernel."""
    tiles = problem.tiles
    machine = problem.machine
    lat = Latency.of(machine)
    row = machine.row(np.arange(tiles))
    mid = lat.max_row // 2  # a host's row, not known when an option is judged
    bpc = machine.exchange.bytes_per_cycle
    out = []
    for pd, k in zip(problem.phases, targets, strict=True):
        tm = timings[pd.phase.phase]
        st = pd.state
        port = np.where(tm.port[:tiles] > 0, tm.port[:tiles], lat.gather_select + lat.landing(row))
        rx_cap = st.rx[:tiles].astype(np.int64) + bpc * (k - port)
        tail = lat.forward_select + int(lat.landing(lat.max_row))  # the last forward's landing after its send
        tx_cap = st.tx[:tiles].astype(np.int64) + bpc * (k - tm.lane[:tiles] - tail)
        release_cap = k - lat.forward_select - lat.landing(row)
        options: list[list[int]] = []
        delay: dict[tuple[int, int], int] = {}
        words: list[int] = []
        for gi, opts in enumerate(pd.options):
            keep = [0]
            for oi, op in enumerate(opts):
                if op.variant != "direct-receive" or op.host is None:
                    continue
                gather = -(-op.host.rx // bpc)
                forward = -(-op.host.tx // bpc)
                release = lat.gather_select + gather + POINTER_DELAY - 1 + 2 * mid
                if int((release + tail + forward).max(initial=0)) > k:
                    continue  # a segment's gathers and forward in series overrun the target on any host
                keep.append(oi)
                delay[(gi, oi)] = int(release.max(initial=0))
            options.append(keep)
            words.append(-(-int(opts[0].group.nbytes.sum()) // bpc))
        caps = PhaseCaps(rx_cap, tx_cap, np.full(tiles, np.iinfo(np.int64).max // 4, np.int64), options,
                         np.zeros(tiles, bool), Release(release_cap.astype(np.int64), delay, words))
        out.append(with_room(pd, caps))
    return out


__all__ = [
    "Latency",
    "PhaseFigures",
    "PhaseTiming",
    "direct_timings",
    "load_solvers",
    "other_bounds",
    "phase_figures",
    "relay_free_bound",
    "schedule_caps",
]
