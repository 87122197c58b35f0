"""Peak first: where some steps fill the memory exactly, place the buffers live at those steps on their own, then
the others around them.

At a full step the live buffers tile the memory, and a wrong tiling there is what the canonical search spends its
time refuting, interleaved with the decisions for every other buffer (pph-500-s0 of the benchmark set: ten million
nodes in 180 s and MiniMalloc nothing in 30 s). The buffers live at any full step (the *core*), with their whole
lifetimes, are a smaller problem that the canonical search answers in milliseconds; their placement is then fixed
and the others are placed around it by the compiled general search (fixed allocations). A core tiling the others
cannot fit around is refuted quickly (the sections next to the full steps are nearly full too), so a wrong one
costs little. Sound (the caller checks every placement) and incomplete: if the core's first tiling is wrong, or the
core itself is not placed quickly, there is no answer and the caller goes on with the complete search. Cores
widened by a few steps around the full ones are tried next.

Measured: pph-500-s0 placed in 0.05 s; the heuristic runs only after the canonical search's short probe, so the
problems that search answers at once are unaffected.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from placer.placement.bounds import live_runs
from placer.placement.canonical import solve_flat, solve_general
from placer.placement.model import FixedAllocation, PlacementProblem

# widenings of the core (steps on each side of the full ones) tried in turn
WIDENINGS = (0, 5)


@dataclass(frozen=True)
class PeakOutcome:
    addresses: tuple[int, ...] | None  # absolute, one per request; None: no answer (not a proof)
    core: int  # buffers in the last core tried
    runtime: float
    reason: str = ""


def full_steps(problem: PlacementProblem) -> list[tuple[int, int]]:
    """The runs of steps ``(first, last)`` at which the live bytes of a flat problem equal its one free range (none
    for other problems)."""
    if len(problem.ranges) != 1 or not problem.is_flat or problem.n < 2:
        return []
    capacity = problem.ranges[0][1] - problem.ranges[0][0]
    out: list[tuple[int, int]] = []
    for first, last, live in live_runs(problem):
        if live == capacity:
            if out and out[-1][1] == first - 1:
                out[-1] = (out[-1][0], last)
            else:
                out.append((first, last))
    return out


PEAK_MAX_BUFFERS = 4000
"""Above this many buffers peak-first is not tried: placing the rest around a fixed core prepares the general
search in Python, which alone took 2.5 s at 20,000 buffers, four times the share of the limit it had."""


def peak_first(problem: PlacementProblem, time_limit: float, each: float = 0.05) -> PeakOutcome:
    """Place the core (buffers live at a full step, see :func:`full_steps`), then the rest around it; each search
    gets at most ``each`` seconds, all of them together ``time_limit``."""
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    if problem.n > PEAK_MAX_BUFFERS:
        return PeakOutcome(None, 0, 0.0, f"more than {PEAK_MAX_BUFFERS:,} buffers")
    full = full_steps(problem)
    if not full:
        return PeakOutcome(None, 0, 0.0, "no step fills the memory")
    reason, size = "no core tiling the others fit around", 0
    for widen in WIDENINGS:
        lo, hi = full[0][0] - widen, full[-1][1] + widen
        core = [i for i, r in enumerate(problem.requests) if r.first <= hi and r.last >= lo]
        rest = [i for i, r in enumerate(problem.requests) if r.last < lo or r.first > hi]
        size = len(core)
        if not rest:
            reason = "the core is the whole problem"
            break  # nothing to gain over the complete search
        left = deadline - time.perf_counter()
        if left <= 0:
            return PeakOutcome(None, size, time.perf_counter() - t0, "time limit")
        sub = replace(problem, requests=tuple(problem.requests[i] for i in core), name=f"{problem.name} core")
        placed = solve_flat(sub, min(each, left))
        if placed.status != "placed" or placed.offsets is None:
            continue
        fixed = tuple(FixedAllocation(o, o + problem.requests[i].bytes, problem.requests[i].first,
                                      problem.requests[i].last, name=f"core {i}")
                      for i, o in zip(core, placed.offsets, strict=True))
        others = replace(problem, requests=tuple(problem.requests[i] for i in rest), fixed=problem.fixed + fixed,
                         name=f"{problem.name} around the core")
        left = deadline - time.perf_counter()
        if left <= 0:
            return PeakOutcome(None, size, time.perf_counter() - t0, "time limit")
        around = solve_general(others, min(each, left))
        if around is None:
            return PeakOutcome(None, size, time.perf_counter() - t0, "the compiled search is not built")
        if around.status != "placed" or around.offsets is None:
            continue
        addresses = [0] * problem.n
        for i, o in zip(core, placed.offsets, strict=True):
            addresses[i] = o
        for i, o in zip(rest, around.offsets, strict=True):
            addresses[i] = o
        return PeakOutcome(tuple(addresses), size, time.perf_counter() - t0)
    return PeakOutcome(None, size, time.perf_counter() - t0, reason)


__all__ = ["PeakOutcome", "full_steps", "peak_first"]
