"""CP-SAT on a phase in the chunk model, end to end: the exact model on small phases; on large ones the other list
rule, forward-backward passes, then neighbourhoods, on one time budget (docs/ordering.md, "Schedulers")."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from placer.chunkmodel.bounds import LowerBound
from placer.chunkmodel.chunks import Chunks
from placer.chunkmodel.cpsat import horizon_of, improve_lns, solve_exact
from placer.chunkmodel.greedy import greedy_starts
from placer.chunkmodel.justify import forward_backward
from placer.progress import SolverCallback
from placer.solver import SolveResult, SolverParams, Status

_SECOND_RULE_CHUNKS = 50_000  # above this, a second greedy pass costs more than it usually gains


def improve_starts(
    chunks: Chunks,
    greedy: np.ndarray,
    bound: LowerBound,
    params: SolverParams,
    *,
    exact_chunks: int,
    neighbourhood: int,
    step_time: float,
    progress: SolverCallback | None,
    deadline: float | None = None,
    second_rule: bool = True,
) -> tuple[np.ndarray, SolveResult, str]:
    """CP-SAT in the chunk model: one exact model on phases of up to ``exact_chunks`` chunks, else repairs then
    neighbourhoods (``neighbourhood`` chunks freed at first, ``step_time`` seconds a step at most; ``deadline``: a
    wall-clock backstop for the neighbourhoods; ``second_rule``: also try the ``nowave`` list rule as the
    incumbent). Returns the starts, the outcome and the method (``"exact"`` or ``"neighbourhood"``)."""
    lower = bound.best
    greedy_h = horizon_of(chunks, greedy)
    if chunks.count <= exact_chunks:
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
                              neighbourhood=neighbourhood, step_time=step_time,
                              progress=progress, deadline=deadline)
    h = horizon_of(chunks, starts)
    status = Status.OPTIMAL if h <= lower else Status.FEASIBLE
    return starts, SolveResult(status, float(h), float(lower), time.perf_counter() - clock,
                               backstop=cut), "neighbourhood"
