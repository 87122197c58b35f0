"""Scheduling a phase end to end: chunks → greedy → (CP-SAT) → per-transfer times, bounds and timed table rows.

Times are exchange cycles from the start of the phase's exchange, sync excluded (a phase costs horizon + the
machine's ``sync_cycles``). The horizon is the last cycle any payload lands.

Timed rows (what a scheduled phase costs in exchange-table bytes, to compare with the cost model's estimate):
- entry/return, send rows and receive rows as in the cost model (BRIEF §3), except that a receive's pointer reset
  is decided in the tile's *scheduled* receive order, not the listed order;
- plus one delay row (``delay_row_bytes``, 8) for every idle gap of at least ``delay_threshold`` cycles on a tile's
  transmit timeline (from cycle 0 to its first send, and between sends) and on its receive timeline (from its own
  latency, the first cycle anything could land, to its first receive, and between receives). Shorter gaps are
  absorbed by the instruction-issue slots of the surrounding rows (2 control cycles per fragment), so they cost no
  row. Timelines end at the tile's last activity: waiting for the sync costs nothing extra.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from placer.capture.model import Capture, Phase
from placer.machine import Machine
from placer.ordering.bounds import LowerBound, lower_bound
from placer.ordering.cpsat import compact, horizon_of, improve_lns, solve_exact
from placer.ordering.greedy import greedy_starts
from placer.ordering.justify import forward_backward
from placer.ordering.streams import Chunks, build_chunks
from placer.problem.cost import tile_counters
from placer.solver import Progress, SolveResult, SolverParams, Status

Mode = Literal["greedy", "cpsat"]
_SECOND_RULE_CHUNKS = 50_000  # above this, a second greedy pass costs more than it usually gains


@dataclass(frozen=True)
class OrderingParams:
    """Scheduling knobs; CP-SAT time, workers and seed come from :class:`placer.solver.SolverParams`."""

    wave_words: int = 1024
    exact_chunks: int = 160  # up to this many chunks: one exact model; above: neighbourhood search
    neighbourhood: int = 120  # initial chunks freed per neighbourhood step (adapts to how fast steps solve)
    step_time: float = 1.5  # seconds per neighbourhood step at most
    delay_threshold: int = 8  # idle cycles that cost one delay row
    delay_row_bytes: int = 8


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
    table_bytes: np.ndarray  # per tile, rounded, delay rows included
    delay_rows: np.ndarray  # per tile
    resets: np.ndarray  # per tile, in scheduled receive order


def timed_rows(phase: Phase, schedule: Schedule, machine: Machine, tiles: int,
               params: OrderingParams = OrderingParams()) -> TimedRows:
    c = machine.cost
    words = phase.words.astype(np.int64)
    sends = np.bincount(phase.source, minlength=tiles)
    long_sends = np.bincount(phase.source, weights=words > machine.exchange.send_count_words, minlength=tiles)
    dt = phase.dst_transfer()
    receives = np.bincount(phase.dst_tile, minlength=tiles)

    # pointer resets in scheduled receive order
    order = np.lexsort((schedule.rx_start, phase.dst_tile))
    t = phase.dst_tile[order]
    a = phase.dst_addr[order]
    end = a + 4 * words[dt][order]
    reset = np.ones(len(order), np.int64)
    if len(order) > 1:
        reset[1:] = ~((t[1:] == t[:-1]) & (a[1:] == end[:-1]))
    resets = np.bincount(t, weights=reset, minlength=tiles).astype(np.int64)

    latency = machine.latency(np.arange(tiles)).astype(np.int64)
    gaps_tx = _gaps(phase.source.astype(np.int64), schedule.tx_start, words, np.zeros(tiles, np.int64),
                    params.delay_threshold, tiles)
    gaps_rx = _gaps(phase.dst_tile.astype(np.int64), schedule.rx_start, words[dt], latency,
                    params.delay_threshold, tiles)
    delays = gaps_tx + gaps_rx
    active = (sends + receives) > 0
    raw = (c.phase_entry_bytes * active + c.send_bytes * sends + c.long_send_extra_bytes * long_sends
           + c.receive_bytes * receives + c.pointer_reset_extra_bytes * resets + params.delay_row_bytes * delays)
    rounding = c.table_rounding
    table = (-(-raw.astype(np.int64) // rounding) * rounding).astype(np.int64)
    return TimedRows(table, delays.astype(np.int64), resets)


def _gaps(tile: np.ndarray, start: np.ndarray, length: np.ndarray, origin: np.ndarray, threshold: int,
          tiles: int) -> np.ndarray:
    """Idle gaps of at least ``threshold`` cycles per tile, including the lead-in from ``origin[tile]``."""
    if len(tile) == 0:
        return np.zeros(tiles, np.int64)
    order = np.lexsort((start, tile))
    t, s, e = tile[order], start[order], start[order] + length[order]
    prev_end = np.empty_like(e)
    prev_end[1:] = e[:-1]
    first = np.ones(len(t), bool)
    first[1:] = t[1:] != t[:-1]
    prev_end[first] = origin[t[first]]
    gap = (s - prev_end) >= threshold
    return np.bincount(t, weights=gap, minlength=tiles).astype(np.int64)


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
    starts: np.ndarray = field(repr=False)  # chunk starts

    @property
    def lower(self) -> int:
        """Best proved lower bound: ours, or CP-SAT's when an exact model proved more."""
        proved = self.cpsat.bound if self.cpsat is not None and self.cpsat.bound is not None else 0
        return max(self.bound.best, int(-(-proved // 1)))

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
            "transfers": self.transfers,
            "chunks": self.chunks,
            "dependencies": self.dependencies,
            "greedy_horizon": self.greedy_horizon,
            "horizon": self.horizon,
            "lower_bound": self.lower,
            "lower_bound_kind": self.lower_kind,
            "bounds": {"port": self.bound.port, "clique": self.bound.clique, "chain": self.bound.chain},
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
    mode: Mode = "greedy",
    params: SolverParams | None = None,
    ordering: OrderingParams | None = None,
    *,
    tiles: int | None = None,
    progress: Progress | None = None,
) -> PhaseSchedule:
    params = params or SolverParams(time_limit=10.0, workers=2)
    ordering = ordering or OrderingParams()
    clock = time.perf_counter()
    chunks = build_chunks(phase, machine, wave_words=ordering.wave_words, tiles=tiles)
    starts = greedy_starts(chunks)
    greedy_h = horizon_of(chunks, starts)
    greedy_s = time.perf_counter() - clock
    bound = lower_bound(chunks)
    result: SolveResult | None = None
    method = "greedy"
    if mode == "cpsat" and chunks.count:
        starts, result, method = _improve(chunks, starts, bound, params, ordering, progress)
    schedule = expand(phase, chunks, starts)
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
    )


def _improve(
    chunks: Chunks,
    greedy: np.ndarray,
    bound: LowerBound,
    params: SolverParams,
    ordering: OrderingParams,
    progress: Progress | None,
) -> tuple[np.ndarray, SolveResult, str]:
    lower = bound.best
    greedy_h = horizon_of(chunks, greedy)
    if chunks.count <= ordering.exact_chunks:
        starts, res = solve_exact(chunks, greedy, lower, params, progress)
        h = horizon_of(chunks, starts)
        best_bound = max(float(lower), res.bound if res.bound is not None else float(lower))
        if res.status is Status.OPTIMAL or h <= best_bound:
            return starts, SolveResult(Status.OPTIMAL, float(h), float(h), res.runtime), "exact"
        if res.status is Status.INFEASIBLE:  # cannot happen: the greedy is a solution; report it honestly
            return starts, res, "exact"
        # no CP-SAT solution: the greedy (its hint) stands, with our bound
        return starts, SolveResult(Status.FEASIBLE, float(h), best_bound, res.runtime), "exact"
    clock = time.perf_counter()
    if greedy_h <= lower:
        return greedy, SolveResult(Status.OPTIMAL, float(greedy_h), float(greedy_h), 0.0), "neighbourhood"
    # cheap repairs first (the other list rule, forward-backward passes), then CP-SAT on neighbourhoods; a quarter
    # of the budget goes to the repairs (as a work budget when deterministic)
    deterministic = bool(getattr(params, "deterministic", False))
    incumbent = greedy
    if chunks.count <= _SECOND_RULE_CHUNKS:
        other = greedy_starts(chunks, "nowave")
        if horizon_of(chunks, other) < greedy_h:
            incumbent = other
    incumbent = forward_backward(chunks, incumbent, time_limit=0.25 * params.time_limit,
                                 deterministic=deterministic)
    left = params.time_limit - (time.perf_counter() - clock)
    starts, _ = improve_lns(chunks, incumbent, lower, replace(params, time_limit=max(0.1, left)),
                            neighbourhood=ordering.neighbourhood, step_time=ordering.step_time,
                            progress=progress)
    h = horizon_of(chunks, starts)
    status = Status.OPTIMAL if h <= lower else Status.FEASIBLE
    return starts, SolveResult(status, float(h), float(lower), time.perf_counter() - clock), "neighbourhood"


def schedule_capture(
    capture: Capture,
    machine: Machine,
    mode: Mode = "greedy",
    params: SolverParams | None = None,
    *,
    phases: list[int] | None = None,
    ordering: OrderingParams | None = None,
    progress: Any = None,
) -> list[PhaseSchedule]:
    """Schedule every phase (or ``phases``) of ``capture``; ``progress(phase_id, elapsed, objective, bound)``."""
    tiles = max(capture.tile_count, machine.tiles)
    out = []
    for phase in capture.phases:
        if phases is not None and phase.phase not in phases:
            continue
        cb = None
        if progress is not None:
            pid = phase.phase

            def cb(elapsed: float, obj: float | None, bound: float | None, pid: int = pid) -> None:
                progress(pid, elapsed, obj, bound)

        out.append(schedule_phase(phase, machine, mode, params, ordering, tiles=tiles, progress=cb))
    return out


__all__ = ["Mode", "OrderingParams", "PhaseSchedule", "Schedule", "TimedRows", "compact", "expand",
           "schedule_capture", "schedule_phase", "timed_rows"]
