"""Scheduling a phase end to end: chunks → greedy → (CP-SAT) → per-transfer times, bounds and timed table rows.

Under ``OrderingParams.rules == OrderingRules.REFERENCE`` (the default) the greedy is the reference's own B1024 schedule
(``placer.ordering.reference``: its order, timing, bounds and row encoding), and a CP-SAT order found in the chunk
model is timed by the same rules before it is compared. Under ``"model"`` everything below is placer's chunk model.

Times are exchange cycles from the start of the phase's exchange, sync excluded (a phase costs horizon + the
machine's ``sync_cycles``). The horizon is the last cycle any payload lands (under the reference's rules, + its
5-cycle guard).

Timed rows of the chunk model (the table bytes of a scheduled phase, docs/reference.md §7), per tile, from its events in
time order:
- instructions are 4-byte words; a send is one word for up to 64 words plus one per further 4,096, preceded by an
  outgoing base write (one word) when its source does not continue the lane's previous send;
- a receive is one receive control (two words: source select and count), plus one incoming base word when its
  address is not the end of the tile's previous receive *in scheduled order* (the pointer reset);
- an idle gap before a send or a base write costs one DELAY word per 2^19 cycles (no minimum gap); a lone receive
  control (no base write) absorbs gaps up to ``receive_gap_absorb`` cycles (128, PIC; 4,096 on XPIC);
- each active tile's row ends with a delay to the horizon and a RETURN (two words); the total is rounded to 8 bytes.
A tile's activity: a send from its base write to its last word; a receive from its control (the sender's send
cycle) to its payload's end plus the short-receive hold.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from placer.capture.model import Capture, Phase
from placer.cost.model import tile_counters
from placer.machine import Machine
from placer.modes import OrderingRules, ScheduleMode
from placer.ordering.bounds import LowerBound, lower_bound
from placer.ordering.cpsat import compact, horizon_of, improve_lns, solve_exact
from placer.ordering.greedy import greedy_starts, retime
from placer.ordering.improve import OrderSearch
from placer.ordering.justify import forward_backward
from placer.ordering.reference import (
    materialize,
    reference_bound,
    reference_order,
    reference_table_bytes,
)
from placer.ordering.streams import Chunks, Timing, build_chunks, continues_previous, transfer_levels
from placer.progress import SolverCallback, both, task
from placer.solver import RunConfig, SolveResult, SolverParams, Status
from placer.units import ceil_div

Mode = ScheduleMode  # how a phase is ordered (placer.modes)
RULES = tuple(OrderingRules)  # placer's chunk model (fast; CP-SAT works in it), the reference's own rules
_SECOND_RULE_CHUNKS = 50_000  # above this, a second greedy pass costs more than it usually gains
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
    receive_gap_absorb: int = 128  # idle cycles a lone receive control absorbs (PIC; XPIC: 4,096)
    delay_max: int = 1 << 19  # cycles one DELAY word covers


@dataclass(eq=False)
class Schedule:
    """Per-transfer times of one phase: ``tx_start[i]`` on the source's lane (``words[i]`` cycles), and
    ``rx_start[e]`` for destination entry ``e`` (the phase's ``dst_*`` order) on that tile's receive port."""

    tx_start: np.ndarray  # int64 (n,)
    rx_start: np.ndarray  # int64 (destination entries,)
    horizon: int

    def to_json(self) -> dict[str, Any]:
        return {"horizon": self.horizon, "tx_start": self.tx_start.tolist(), "rx_start": self.rx_start.tolist()}


def expand(phase: Phase, chunks: Chunks, starts: np.ndarray) -> Schedule:
    """Chunk starts → transfer times: a chunk's transfers go back to back in its send order."""
    tx = np.zeros(phase.n, np.int64)
    chunk_of = np.repeat(np.arange(chunks.count), np.diff(chunks.ptr))
    tx[chunks.order] = starts[chunk_of] + chunks.offset
    rx = tx[phase.dst_transfer()] + chunks.latency[phase.dst_tile]
    ends = rx + phase.words[phase.dst_transfer()]
    horizon = int(max(ends.max(initial=0), (tx + phase.words).max(initial=0)))
    return Schedule(tx, rx, horizon)


@dataclass(eq=False)
class TimedRows:
    table_bytes: np.ndarray  # per tile, rounded
    delay_words: np.ndarray  # per tile
    resets: np.ndarray  # per tile, in scheduled receive order
    base_writes: np.ndarray  # per tile, outgoing


def timed_rows(phase: Phase, schedule: Schedule, machine: Machine, tiles: int,
               params: OrderingParams = OrderingParams()) -> TimedRows:
    n = phase.n
    words = phase.words.astype(np.int64)
    nbytes = 4 * words
    dt = phase.dst_transfer()
    tim = params.timing
    send_words_limit = machine.exchange.send_count_words

    # sends in lane order: a base write unless the source continues the previous send's (every Repeat address)
    s_order = np.lexsort((schedule.tx_start, phase.source))
    s_tile = phase.source[s_order].astype(np.int64)
    same = np.zeros(n, bool)
    same[1:] = s_tile[1:] == s_tile[:-1]
    base = ~continues_previous(phase.src_ptr, phase.src_addr, s_order, nbytes, same)
    s_start = schedule.tx_start[s_order] - np.where(base, tim.base_write, 0)
    s_end = schedule.tx_start[s_order] + words[s_order]
    extra = np.maximum(0, words[s_order] - send_words_limit)
    s_words = base + 1 + (extra + 4095) // 4096

    # receives in port order: pointer resets, receive runs and their short-receive holds
    r_order = np.lexsort((schedule.rx_start, phase.dst_tile))
    r_tile = phase.dst_tile[r_order].astype(np.int64)
    r_tr = dt[r_order]
    rx = schedule.rx_start[r_order]
    a = phase.dst_addr[r_order]
    w = words[r_tr]
    m = len(r_order)
    prev_same = np.zeros(m, bool)
    prev_same[1:] = r_tile[1:] == r_tile[:-1]
    contiguous = np.zeros(m, bool)
    contiguous[1:] = prev_same[1:] & (a[1:] == a[:-1] + 4 * w[:-1])
    reset = ~contiguous
    cont_run = np.zeros(m, bool)
    cont_run[1:] = contiguous[1:] & (phase.source[r_tr][1:] == phase.source[r_tr][:-1]) & (rx[1:] == rx[:-1] + w[:-1])
    run_id = np.cumsum(~cont_run) - 1
    run_words = np.bincount(run_id, weights=w).astype(np.int64) if m else np.zeros(0, np.int64)
    run_end = np.ones(m, bool)
    run_end[:-1] = ~cont_run[1:]
    hold = np.where(run_end & (run_words[run_id] <= tim.short_receive_words), tim.short_receive_hold, 0)
    lat = machine.latency(r_tile).astype(np.int64)
    r_start = rx - lat
    r_end = r_start + w + hold
    r_words = 2 + reset

    # every event of a tile in time order; the gap before it is from the latest end of the events before it
    tile = np.concatenate([s_tile, r_tile])
    start = np.concatenate([s_start, r_start])
    end = np.concatenate([s_end, r_end])
    absorbs = np.concatenate([np.zeros(n, np.int64), np.where(reset, 0, params.receive_gap_absorb)])
    ev_words = np.concatenate([s_words, r_words])
    o = np.lexsort((start, tile))
    tile, start, end, absorbs, ev_words = tile[o], start[o], end[o], absorbs[o], ev_words[o]
    k = len(o)
    first = np.ones(k, bool)
    first[1:] = tile[1:] != tile[:-1]
    group = np.cumsum(first) - 1
    offset = (group * (int(end.max(initial=0)) + 1)) if k else group
    running = np.maximum.accumulate(end + offset) - offset  # latest end so far within the tile
    prev_end = np.zeros(k, np.int64)
    prev_end[1:] = running[:-1]
    prev_end[first] = 0
    gap = start - prev_end
    delays = np.where(gap > absorbs, ceil_div(gap, params.delay_max), 0)
    total = np.bincount(tile, weights=ev_words + delays, minlength=tiles).astype(np.int64)
    delay_words = np.bincount(tile, weights=delays, minlength=tiles).astype(np.int64)
    active = np.bincount(tile, minlength=tiles) > 0
    total += 2 * active  # delay to the horizon and RETURN
    table = machine.cost.rounded(4 * total)
    return TimedRows(table.astype(np.int64), delay_words,
                     np.bincount(r_tile, weights=reset, minlength=tiles).astype(np.int64),
                     np.bincount(s_tile, weights=base, minlength=tiles).astype(np.int64))


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
    starts: np.ndarray = field(repr=False)  # chunk starts (model rules; empty under the reference's rules)
    rules: OrderingRules = OrderingRules.REFERENCE
    # the transfers in the order the reference's row builder appends them (reference rules; empty under the model)
    order: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)

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
        improved, result, method = _improve(chunks, greedy, bound, params, ordering, progress,
                                            deadline=clock + params.time_limit - greedy_s)
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
    """The reference's B1024 order timed by its rules. In cpsat mode, also (``placer.ordering.improve``): gathers
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
                started, staged, how = _improve(chunks, hint, lower_bound(chunks),
                                                replace(params, time_limit=share), ordering, progress,
                                                deadline=backstop, second_rule=False)
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


def _improve(
    chunks: Chunks,
    greedy: np.ndarray,
    bound: LowerBound,
    params: SolverParams,
    ordering: OrderingParams,
    progress: SolverCallback | None,
    deadline: float | None = None,
    second_rule: bool = True,
) -> tuple[np.ndarray, SolveResult, str]:
    """CP-SAT in the chunk model: one exact model on small phases, else repairs then neighbourhoods (``deadline``:
    a wall-clock backstop for the neighbourhoods; ``second_rule``: also try the ``nowave`` list rule as the
    incumbent)."""
    lower = bound.best
    greedy_h = horizon_of(chunks, greedy)
    if chunks.count <= ordering.exact_chunks:
        starts, res = solve_exact(chunks, greedy, lower, params, progress)
        h = horizon_of(chunks, starts)
        best_bound = max(float(lower), res.bound if res.bound is not None else float(lower))
        if res.status is Status.OPTIMAL or h <= best_bound:
            return starts, SolveResult(Status.OPTIMAL, float(h), float(h), res.runtime,
                                       backstop=res.backstop), "exact"
        if res.status is Status.INFEASIBLE:  # cannot happen: the greedy is a solution; report it honestly
            return starts, res, "exact"
        # no CP-SAT solution: the greedy (its hint) stands, with our bound
        return starts, SolveResult(Status.FEASIBLE, float(h), best_bound, res.runtime, backstop=res.backstop), "exact"
    clock = time.perf_counter()
    if greedy_h <= lower:
        return greedy, SolveResult(Status.OPTIMAL, float(greedy_h), float(greedy_h), 0.0), "neighbourhood"
    # cheap repairs first (the other list rule, forward-backward passes), then CP-SAT on neighbourhoods; a quarter
    # of the budget goes to the repairs (as a work budget when deterministic)
    deterministic = bool(getattr(params, "deterministic", False))
    incumbent = greedy
    if chunks.count <= _SECOND_RULE_CHUNKS and second_rule:
        other = greedy_starts(chunks, "nowave")
        if horizon_of(chunks, other) < greedy_h:
            incumbent = other
    passes = 0.25 * params.time_limit
    incumbent = forward_backward(chunks, incumbent, time_limit=passes, deterministic=deterministic)
    # deterministic: the neighbourhoods get the rest as work whatever the passes took on the clock, so the same
    # input and seed give the same schedule
    left = params.time_limit - (passes if deterministic else time.perf_counter() - clock)
    starts, cut = improve_lns(chunks, incumbent, lower, replace(params, time_limit=max(0.1, left)),
                              neighbourhood=ordering.neighbourhood, step_time=ordering.step_time,
                              progress=progress, deadline=deadline)
    h = horizon_of(chunks, starts)
    status = Status.OPTIMAL if h <= lower else Status.FEASIBLE
    return starts, SolveResult(status, float(h), float(lower), time.perf_counter() - clock,
                               backstop=cut), "neighbourhood"


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


__all__ = ["RULES", "Mode", "OrderingParams", "PhaseSchedule", "Schedule", "TimedRows", "compact", "expand",
           "schedule_capture", "schedule_phase", "timed_rows"]
