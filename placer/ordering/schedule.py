"""Scheduling a phase end to end: chunks → greedy → (CP-SAT) → per-transfer times, bounds and timed table rows.

Under ``OrderingParams.rules == OrderingRules.REFERENCE`` (the default) the greedy is the reference's own B1024 schedule
(``placer.refschedule.reference``: its order, timing, bounds and row encoding), and a CP-SAT order found in the chunk
model is timed by the same rules before it is compared. Under ``"model"`` everything below is placer's chunk model.

Times are exchange cycles from the start of the phase's exchange, sync excluded (a phase costs horizon + the
machine's ``sync_cycles``). The horizon is the last cycle any payload lands (under the reference's rules, + its
5-cycle guard).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from placer.capture.model import Capture, Phase
from placer.chunkmodel.bounds import LowerBound, lower_bound
from placer.chunkmodel.chunks import Chunks, Timing, build_chunks
from placer.chunkmodel.greedy import greedy_starts, retime
from placer.chunkmodel.rows import DELAY_MAX, RECEIVE_GAP_ABSORB, Schedule, expand, timed_rows
from placer.chunkmodel.search import improve_starts
from placer.cost.model import tile_counters
from placer.machine import Machine
from placer.modes import OrderingRules, ScheduleMode
from placer.progress import SolverCallback, both, task
from placer.refschedule.improve import OrderSearch
from placer.refschedule.reference import materialize, reference_bound, reference_order, reference_table_bytes
from placer.solver import RunConfig, SolveResult, SolverParams, Status
from placer.streams.dependencies import transfer_levels
from placer.units import ceil_div

Mode = ScheduleMode  # how a phase is ordered (placer.modes)
RULES = tuple(OrderingRules)  # placer's chunk model (fast; CP-SAT works in it), the reference's own rules
# how long the chunk model's neighbourhood search may run past its wall-clock backstop: its last CP-SAT solve stops
# a little after its limit, then the window is compacted (measured: 0.51 s on SigLIP b2's relayed MLP-up, whose
# 20 s schedule then took 20.2–20.5 s)
_CPSAT_OVERRUN = 0.75


@dataclass(frozen=True)
class OrderingParams:
    """Scheduling knobs; CP-SAT time, workers and seed come from :class:`placer.solver.SolverParams`."""

    wave_words: int = 1024
    exact_chunks: int = 160  # up to this many chunks: one exact model; above: neighbourhood search
    neighbourhood: int = 120  # initial chunks freed per neighbourhood step (adapts to how fast steps solve)
    step_time: float = 1.5  # seconds per neighbourhood step at most
    timing: Timing = field(default_factory=Timing)
    rules: OrderingRules = OrderingRules.REFERENCE  # the reference's own rules; MODEL: placer's chunk model
    receive_gap_absorb: int = RECEIVE_GAP_ABSORB  # idle cycles a lone receive control absorbs (PIC; XPIC: 4,096)
    delay_max: int = DELAY_MAX  # cycles one DELAY word covers


@dataclass(eq=False)
class PhaseSchedule:
    """The outcome for one phase, as the CLI and ``placer solve --schedule`` report it."""

    phase: int
    transfers: int
    chunks: int
    dependencies: int  # transfer-level edges
    greedy_horizon: int
    horizon: int  # best found (CP-SAT-improved when mode is cpsat)
    bound: LowerBound
    cpsat: SolveResult | None  # None in greedy mode
    method: str  # "greedy", "exact" or "neighbourhood"
    estimate_cycles: int  # the cost model's analytical estimate, sync excluded
    table_worst: int  # timed rows, worst tile
    estimate_table_worst: int  # cost model, worst tile
    seconds: float
    greedy_seconds: float
    schedule: Schedule = field(repr=False)
    starts: npt.NDArray[np.int64] = field(repr=False)  # chunk starts (model rules; empty under the reference's rules)
    rules: OrderingRules = OrderingRules.REFERENCE
    # the transfers in the order the reference's row builder appends them (reference rules; empty under the model)
    order: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)

    @property
    def lower(self) -> int:
        """Best proved lower bound: ours, or CP-SAT's when an exact model proved more."""
        proved = self.cpsat.bound if self.cpsat is not None and self.cpsat.bound is not None else 0
        return max(self.bound.best, int(ceil_div(proved, 1)))

    @property
    def lower_kind(self) -> str:
        return self.bound.kind if self.lower == self.bound.best else "cp-sat"

    @property
    def gap(self) -> float:
        """(horizon − lower bound) / horizon."""
        return 0.0 if self.horizon == 0 else (self.horizon - self.lower) / self.horizon

    def to_json(self) -> dict[str, Any]:
        return {
            "phase": self.phase,
            "rules": self.rules,
            "transfers": self.transfers,
            "chunks": self.chunks,
            "dependencies": self.dependencies,
            "greedy_horizon": self.greedy_horizon,
            "horizon": self.horizon,
            "lower_bound": self.lower,
            "lower_bound_kind": self.lower_kind,
            "bounds": {"port": self.bound.port, "clique": self.bound.clique, "chain": self.bound.chain,
                       "head_tail": self.bound.head_tail, "memory": self.bound.memory, "host": self.bound.host},
            "gap": round(self.gap, 6),
            "method": self.method,
            "cpsat": None if self.cpsat is None else self.cpsat.to_json(),
            "estimate_cycles": self.estimate_cycles,
            "table_worst_bytes": self.table_worst,
            "estimate_table_worst_bytes": self.estimate_table_worst,
            "seconds": round(self.seconds, 4),
            "greedy_seconds": round(self.greedy_seconds, 4),
        }


def schedule_phase(
    phase: Phase,
    machine: Machine,
    mode: Mode | str = ScheduleMode.GREEDY,
    params: SolverParams | None = None,
    ordering: OrderingParams | None = None,
    *,
    tiles: int | None = None,
    progress: SolverCallback | None = None,
) -> PhaseSchedule:
    params = params or RunConfig.load().ordering  # the run configuration's [ordering] (10 s, 2 workers)
    ordering = ordering or OrderingParams()
    if ordering.rules not in RULES:
        raise ValueError(f"unknown scheduling rules {ordering.rules!r} (known: {', '.join(RULES)})")
    clock = time.perf_counter()
    chunks = build_chunks(phase, machine, wave_words=ordering.wave_words, tiles=tiles, timing=ordering.timing)
    if ordering.rules == OrderingRules.REFERENCE:
        return _schedule_reference(phase, machine, mode, params, ordering, chunks, clock, progress)
    greedy = greedy_starts(chunks)
    greedy_schedule = expand(phase, chunks, greedy)
    greedy_h = greedy_schedule.horizon
    greedy_s = time.perf_counter() - clock
    bound = lower_bound(chunks)
    result: SolveResult | None = None
    method = "greedy"
    starts, schedule = greedy, greedy_schedule
    if mode == ScheduleMode.CPSAT and chunks.count:
        # the limit bounds the whole call: re-timing, expanding and encoding the result take about what the greedy
        # took, so the neighbourhoods' wall-clock backstop leaves that much
        improved, result, method = improve_starts(
            chunks, greedy, bound, params, exact_chunks=ordering.exact_chunks, neighbourhood=ordering.neighbourhood,
            step_time=ordering.step_time, progress=progress, deadline=clock + params.time_limit - greedy_s)
        improved = retime(chunks, improved)  # the models do not see control-event cycles; this resolves them
        candidate = expand(phase, chunks, improved)
        if candidate.horizon < greedy_h:
            starts, schedule = improved, candidate
        # optimal only if a bound (ours, or the exact model's) is reached after control conflicts were resolved
        proved = max(float(bound.best), result.bound if result.bound is not None else 0.0)
        h = schedule.horizon
        status = Status.OPTIMAL if h <= proved else Status.FEASIBLE
        result = SolveResult(status, float(h), float(h) if status is Status.OPTIMAL else proved, result.runtime,
                             backstop=result.backstop)
    horizon = schedule.horizon
    rows = timed_rows(phase, schedule, machine, chunks.tiles, ordering)
    cost = tile_counters(phase, machine, chunks.tiles)
    estimate = max(0, cost.cycles - machine.exchange.sync_cycles) if phase.n else 0
    return PhaseSchedule(
        phase=phase.phase,
        transfers=phase.n,
        chunks=chunks.count,
        dependencies=len(chunks.transfer_deps),
        greedy_horizon=greedy_h,
        horizon=horizon,
        bound=bound,
        cpsat=result,
        method=method,
        estimate_cycles=estimate,
        table_worst=int(rows.table_bytes.max(initial=0)),
        estimate_table_worst=cost.worst_table(),
        seconds=time.perf_counter() - clock,
        greedy_seconds=greedy_s,
        schedule=schedule,
        starts=starts,
        rules=OrderingRules.MODEL,
    )


def _schedule_reference(phase: Phase, machine: Machine, mode: Mode | str, params: SolverParams,
                        ordering: OrderingParams, chunks: Chunks, clock: float,
                        progress: SolverCallback | None) -> PhaseSchedule:
    """The reference's B1024 order timed by its rules. In cpsat mode, also (``placer.refschedule.improve``): gathers
    by forward, forwards first, host plans, aligned slots, relay tiles first, relay windows, the calendar list, the
    non-delay list, the CP-SAT order of the chunk model (half the time limit), interleaved host plans, gathers by
    forward reversed, the polish (``OrderSearch.polish``) from the best and the second best order so far, then the
    late hosts (their replicas' forwards in landing order, their gathers earlier), each timed by the same rules
    while the time limit allows; the shortest is kept. The bound is the reference rules' own."""
    tiles = chunks.tiles
    deps = chunks.transfer_deps
    levels = transfer_levels(phase.n, deps)
    order = reference_order(phase, levels, wave_words=ordering.wave_words, tiles=tiles)
    timed = time.perf_counter()
    greedy = materialize(phase, order, deps, machine, tiles)
    greedy_s = time.perf_counter() - clock
    timing_s = time.perf_counter() - timed  # one timing of an order: what each further candidate costs
    ref = reference_bound(phase, machine, tiles=tiles, deps=deps)
    bound = LowerBound(max(ref.port, ref.lane), 0, ref.chain, memory=ref.memory, host=ref.host)
    best, method, result = greedy, "greedy", None
    greedy_table: np.ndarray | None = None
    if mode == ScheduleMode.CPSAT and chunks.count and greedy.horizon > bound.best:
        # the time limit bounds the whole call: the winner's row encoding (timed here on the greedy's, reused if
        # the greedy stays best) must still fit after the search
        encoded = time.perf_counter()
        greedy_table = reference_table_bytes(phase, greedy, machine, tiles)
        deadline = clock + params.time_limit - (time.perf_counter() - encoded)
        search = OrderSearch(phase, deps, levels, lambda order: materialize(phase, order, deps, machine, tiles),
                             greedy, deadline, timing_s)
        search.group()  # the steps that won on the measured phases first (docs/ordering.md)
        search.forwards()
        search.hosts()
        search.aligned()
        search.relay_tiles()
        search.windows()
        search.calendar()
        search.nondelay()
        # CP-SAT in the chunk model on half the limit (as deterministic work), if, after its chunk-model greedy
        # (its hint), a quarter of its share and one timing fit; its backstop leaves room for the search's overrun,
        # to re-time its order in the chunk model (about as long as the hint took) and to time it by the reference's
        # rules
        share = params.time_limit / 2
        reserve = search.margin * search.step_seconds
        skipped = False  # the CP-SAT step did not fit; the cheaper steps after it still run if they fit
        if search.best.horizon > bound.best and time.perf_counter() + reserve + share / 4 < deadline:
            hinted = time.perf_counter()
            hint = greedy_starts(chunks)
            chunk_s = time.perf_counter() - hinted
            skipped = time.perf_counter() + chunk_s + reserve + share / 4 >= deadline
            if not skipped:
                backstop = deadline - reserve - chunk_s - _CPSAT_OVERRUN
                started, staged, how = improve_starts(
                    chunks, hint, lower_bound(chunks), replace(params, time_limit=share),
                    exact_chunks=ordering.exact_chunks, neighbourhood=ordering.neighbourhood,
                    step_time=ordering.step_time, progress=progress, deadline=backstop, second_rule=False)
                search.cut = search.cut or staged.backstop  # its work was cut short
                # CP-SAT's order is its start times (a topological order: every dependency lag is positive), not
                # the depth-first order of B1024, which appends every gather before any forward
                tx = expand(phase, chunks, retime(chunks, started)).tx_start
                order = np.lexsort((np.arange(phase.n), levels, tx))
                search.offer(search.timed(order), f"{how} (chunk model)")
        elif search.best.horizon > bound.best:
            skipped = True
        if search.best.horizon > bound.best:
            search.hosts(interleave=True)
            search.group(reverse=True)
        if search.best.horizon > bound.best:
            search.polish()
        if search.best.horizon > bound.best:
            search.late_hosts()
        search.cut = search.cut or skipped
        best, method = search.best, search.found
        h = best.horizon
        status = Status.OPTIMAL if h <= bound.best else Status.FEASIBLE
        result = SolveResult(status, float(h), float(min(h, bound.best)), time.perf_counter() - clock,
                             backstop=search.cut)
    elif mode == ScheduleMode.CPSAT and chunks.count:  # B1024 reaches the bound
        result = SolveResult(Status.OPTIMAL, float(greedy.horizon), float(greedy.horizon), greedy_s)
    cost = tile_counters(phase, machine, tiles)
    table = greedy_table if best is greedy and greedy_table is not None else \
        reference_table_bytes(phase, best, machine, tiles)
    return PhaseSchedule(
        phase=phase.phase, transfers=phase.n, chunks=chunks.count, dependencies=len(deps),
        greedy_horizon=greedy.horizon, horizon=best.horizon, bound=bound, cpsat=result, method=method,
        estimate_cycles=max(0, cost.cycles - machine.exchange.sync_cycles) if phase.n else 0,
        table_worst=int(table.max(initial=0)), estimate_table_worst=cost.worst_table(),
        seconds=time.perf_counter() - clock, greedy_seconds=greedy_s,
        schedule=Schedule(best.tx_start, best.rx_start, best.horizon), starts=np.zeros(0, np.int64),
        rules=OrderingRules.REFERENCE, order=best.order)


def schedule_capture(
    capture: Capture,
    machine: Machine,
    mode: Mode | str = ScheduleMode.GREEDY,
    params: SolverParams | None = None,
    *,
    phases: list[int] | None = None,
    ordering: OrderingParams | None = None,
    progress: SolverCallback | None = None,
) -> list[PhaseSchedule]:
    """Schedule every phase (or those in ``phases``) of ``capture``, in capture order.

    Each phase is one step of the current progress display (``placer.progress``), its CP-SAT news shown there;
    ``progress`` is also called with them (a :data:`placer.progress.SolverCallback`)."""
    tiles = max(capture.tile_count, machine.tiles)
    ids = [p.phase for p in capture.phases if phases is None or p.phase in phases]  # in capture order
    out = []
    for k, pid in enumerate(ids):
        phase = capture.phase_by_id(pid)
        with task(f"schedule phase {pid} ({k + 1}/{len(ids)}, {phase.n:,} transfers)") as shown:
            out.append(schedule_phase(phase, machine, mode, params, ordering, tiles=tiles,
                                      progress=both(shown.solver, progress)))
    return out


__all__ = ["RULES", "Mode", "OrderingParams", "PhaseSchedule", "schedule_capture", "schedule_phase"]
