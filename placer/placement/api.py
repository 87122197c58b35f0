"""The entry points: :func:`solve_placement` (CLI, benchmarks) and :func:`place_requests` (relay selection).

The engines run cheapest first and the first definite answer wins:

1. bounds: a cheap proof of infeasibility (request fits nowhere, live bytes over capacity, region argument);
2. the production mirror (online first-fit, then the offline retry): most tiles end here in well under 1 ms;
3. flat problems (one interval, no regions or conflicts: the MiniMalloc class): the canonical search, which either
   places, or proves infeasibility by exhausting its (complete) search, or times out; after a short probe of it,
   where live bytes fill the memory at every step, zero-slack stacking (``placer.placement.stacking``), and where
   they fill it at some steps, peak-first (``placer.placement.peak``): both sound, incomplete and fast;
4. general problems: zero-slack stacking where it applies, then the compiled canonical search, then the bounded
   edge search (fast, can only place), then CP-SAT hinted with the mirror's partial placement, which places,
   proves infeasibility, or times out.

Every placement is run through the independent checker before it is returned.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from placer.modes import PlacementMode
from placer.placement.bounds import flat_overflow_proof, infeasibility_proof, peak_live_bytes
from placer.placement.canonical import solve_flat, solve_general
from placer.placement.checker import check_placement
from placer.placement.edges import edge_search
from placer.placement.greedy import GreedyOutcome, greedy_place, offline_order, online_order, run_order
from placer.placement.model import (
    END_OF_PROGRAM,
    REGION_BOUNDARY,
    FixedAllocation,
    MemoryClass,
    PlacementProblem,
    Request,
)
from placer.placement.peak import full_steps, peak_first
from placer.placement.result import PlacementResult
from placer.placement.stacking import stack, zero_slack
from placer.solver import SolverParams, Status

Mode = PlacementMode
StageProgress = Callable[[str, float, str], None]
"""Called with (engine, elapsed seconds, a short status) while a long solve runs."""


class PlacementBug(AssertionError):
    """An engine returned a placement the checker rejects: a bug, never a user error."""


def _peak(problem: PlacementProblem, addresses: Sequence[int]) -> int:
    return max((a + problem.span_bytes(i, a) for i, a in enumerate(addresses)), default=0)


def _bound(problem: PlacementProblem) -> int | None:
    if problem.is_flat and problem.ranges:
        return problem.ranges[0][0] + peak_live_bytes(problem)
    return None


def greedy_summary(problem: PlacementProblem, outcome: GreedyOutcome | None = None) -> str:
    """What the production mirror does here; for flat problems also the capacity it would need."""
    outcome = outcome or greedy_place(problem)
    text = outcome.describe()
    if outcome.addresses is None and problem.is_flat and problem.n:
        base, limit = problem.ranges[0]
        wide = PlacementProblem(ranges=((base, base + 2**62),), requests=problem.requests, region_boundary=None,
                                host_scratch=None, name=problem.name)
        needs = []
        for offline in (False, True):
            order = offline_order(wide) if offline else online_order(wide)
            addresses, failed = run_order(wide, order, offline)
            if failed is None:
                needs.append(_peak(wide, [a for a in addresses if a is not None]) - base)
        if needs:
            need = min(needs)
            text += f"; needs {need:,} bytes = {need / (limit - base):.3f} x capacity"
    return text


def _placed(problem: PlacementProblem, addresses: Sequence[int], engine: str, t0: float, nodes: int = 0,
            greedy: str | None = None, cpu: float | None = None, bound: int | None = None) -> PlacementResult:
    errors = check_placement(problem, addresses)
    if errors:
        raise PlacementBug(f"{engine} returned an invalid placement: {errors[0]}")
    return PlacementResult(Status.FEASIBLE, tuple(int(a) for a in addresses), engine, time.perf_counter() - t0,
                           objective=_peak(problem, addresses), bound=bound if bound is not None else _bound(problem),
                           nodes=nodes, greedy=greedy,
                           search_cpu=cpu)


MIRROR_FIRST = 32
"""Flat problems with more requests than this go straight to the canonical search (see solve_placement)."""


def _node_report(progress: StageProgress | None) -> Callable[[float, int], None] | None:
    """The canonical search's progress callback: nodes so far, as a line of the stage's progress."""
    if progress is None:
        return None

    def report(elapsed: float, nodes: int) -> None:
        progress("canonical", elapsed, f"{nodes:,} nodes")

    return report


def _flat_exact(problem: PlacementProblem, params: SolverParams, t0: float, deadline: float,
                progress: StageProgress | None, greedy: str | None, bound: int | None) -> PlacementResult:
    report = _node_report(progress)
    out = solve_flat(problem, max(deadline - time.perf_counter(), 0.001), report, workers=params.workers,
                     seed=params.seed)
    if out.status == "placed" and out.offsets is not None:
        return _placed(problem, out.offsets, "canonical", t0, out.nodes, greedy, out.cpu, bound)
    if out.status == "infeasible":
        return PlacementResult(Status.INFEASIBLE, None, "canonical", time.perf_counter() - t0,
                               reason=f"exhaustive canonical search ({out.nodes:,} nodes) found no placement",
                               nodes=out.nodes, greedy=greedy, bound=bound, search_cpu=out.cpu)
    reason = (f"the search stopped at its memory ceiling (1 GiB of path state) after {out.nodes:,} nodes"
              if out.memory_full else f"time limit after {out.nodes:,} nodes")
    return PlacementResult(Status.UNKNOWN, None, "canonical", time.perf_counter() - t0, reason=reason,
                           nodes=out.nodes, greedy=greedy, bound=bound)


PROBE_SECONDS = 0.1
"""Where stacking applies, the complete search runs this long first (most packings take it milliseconds)."""

STACKING_SHARE = 0.25
"""Of the time limit, what zero-slack stacking may take before the complete search runs (it answers in well under
a second where it applies; when it does not, the rest of the limit is the complete search's)."""


PEAK_PROBE_SECONDS = 0.25
"""Where some steps are full, the complete search runs this long before peak-first (MiniMalloc's A-F take it
0.005-0.25 s; a failed peak-first costs about 0.06 s, and the complete search then starts again)."""

PEAK_SHARE = 0.1
"""Of the time limit, what peak-first may take (each of its searches at most 0.05 s) before the complete search."""


def _peak_first(problem: PlacementProblem, params: SolverParams, t0: float, deadline: float,
                progress: StageProgress | None) -> PlacementResult | None:
    """Some steps exactly full: the buffers live there placed first, the others around them
    (``placer.placement.peak``); None when that finds nothing."""
    if progress is not None:
        progress("peak-first", time.perf_counter() - t0, "the buffers of the full steps first")
    out = peak_first(problem, max(0.0, min(PEAK_SHARE * params.time_limit, deadline - time.perf_counter())))
    if out.addresses is None:
        return None
    return _placed(problem, out.addresses, "peak-first", t0)


def _stacked(problem: PlacementProblem, params: SolverParams, t0: float, progress: StageProgress | None,
             greedy: str | None = None) -> PlacementResult | None:
    """Zero slack at every step (the perfect packings): stacking by time sections and strips, which places what
    the canonical search cannot (``placer.placement.stacking``); None when it does not apply or finds nothing."""
    if not zero_slack(problem):
        return None
    if progress is not None:
        progress("stacking", time.perf_counter() - t0, "zero slack at every step: sections and strips")
    out = stack(problem, STACKING_SHARE * params.time_limit)
    if out.addresses is None:
        return None
    return _placed(problem, out.addresses, "stacking", t0, out.atoms, greedy)


def solve_placement(  # noqa: PLR0911, PLR0912
    problem: PlacementProblem,
    params: SolverParams | None = None,
    *,
    mode: Mode = PlacementMode.EXACT,
    progress: StageProgress | None = None,
    deadline: float | None = None,
) -> PlacementResult:
    """Place every request of ``problem`` or prove that it cannot be done, within ``params.time_limit`` (and by
    ``deadline``, a ``time.perf_counter`` value, when given: the command's own limit, counted from its start)."""
    params = params or SolverParams()
    t0 = time.perf_counter()
    deadline = min(t0 + params.time_limit, deadline if deadline is not None else t0 + params.time_limit)
    flat = problem.is_flat and problem.n > 0
    bound = _bound(problem) if flat else None
    if flat and bound is not None and bound > problem.ranges[0][1]:
        # live bytes over capacity: the sweep proves it faster than the mirror would fail (MiniMalloc's class)
        proof = flat_overflow_proof(problem)
        if proof is not None:
            return PlacementResult(Status.INFEASIBLE, None, "bound", time.perf_counter() - t0, reason=proof,
                                   bound=bound, greedy="not run: live bytes exceed the capacity")
    if flat and mode == PlacementMode.EXACT and problem.n > MIRROR_FIRST:
        # MiniMalloc's class beyond a handful of buffers: the canonical search is complete, and where the mirror
        # would place the buffers it needs about n nodes too, so running the mirror first only adds its own time
        # (4.6 ms at 300 buffers, a third of the whole answer). The peak bound above is every cheap proof a flat
        # problem has. The mirror's outcome is left to the reports that print it (greedy=None).
        if zero_slack(problem):
            # the canonical search answers most packings in milliseconds; stacking imports CP-SAT (0.3 s) and is
            # for the ones it cannot
            probe = _flat_exact(problem, params, t0, min(deadline, time.perf_counter() + PROBE_SECONDS), progress,
                                None, bound)
            if probe.status is not Status.UNKNOWN:
                return probe
            stacked = _stacked(problem, params, t0, progress)
            if stacked is not None:
                return stacked
        elif full_steps(problem):
            # some steps exactly full: the canonical search answers most such problems at once; for the others,
            # placing the buffers of the full steps first often does (``placer.placement.peak``)
            probe = _flat_exact(problem, params, t0, min(deadline, time.perf_counter() + PEAK_PROBE_SECONDS),
                                progress, None, bound)
            if probe.status is not Status.UNKNOWN:
                return probe
            peaked = _peak_first(problem, params, t0, deadline, progress)
            if peaked is not None:
                return peaked
            if time.perf_counter() >= deadline:
                return probe  # the probe had the whole limit: starting the search again would only overrun it
        return _flat_exact(problem, params, t0, deadline, progress, None, bound)
    g = greedy_place(problem, deadline=deadline)
    if g.addresses is not None:
        return _placed(problem, g.addresses, f"greedy-{g.phase}", t0, greedy=g.describe())
    proof = None if flat else infeasibility_proof(problem)  # flat: the peak bound above already passed
    if proof is not None:
        return PlacementResult(Status.INFEASIBLE, None, "bound", time.perf_counter() - t0, reason=proof,
                               bound=bound, greedy=g.describe())
    if mode == PlacementMode.GREEDY:
        return PlacementResult(Status.UNKNOWN, None, "greedy", time.perf_counter() - t0,
                               reason="the production allocator failed (not a proof)", greedy=g.describe(),
                               bound=bound)
    if flat:
        return _flat_exact(problem, params, t0, deadline, progress, g.describe(), bound)
    report = _node_report(progress)
    out = None
    if zero_slack(problem):
        out = solve_general(problem, min(PROBE_SECONDS, max(deadline - time.perf_counter(), 0.001)), report,
                            workers=params.workers, seed=params.seed)
        if out is None or out.status == "unknown":
            stacked = _stacked(problem, params, t0, progress, g.describe())
            if stacked is not None:
                return stacked
            out = None
    if out is None:
        out = solve_general(problem, max(deadline - time.perf_counter(), 0.001), report, workers=params.workers,
                            seed=params.seed)
    if out is not None:  # the compiled search applies (no region-1 sequences): complete, so it decides
        if out.status == "placed" and out.offsets is not None:
            return _placed(problem, out.offsets, "canonical", t0, out.nodes, g.describe(), out.cpu)
        if out.status == "infeasible":
            return PlacementResult(Status.INFEASIBLE, None, "canonical", time.perf_counter() - t0,
                                   reason=f"exhaustive canonical search ({out.nodes:,} nodes) found no placement",
                                   nodes=out.nodes, greedy=g.describe(), search_cpu=out.cpu)
        return PlacementResult(Status.UNKNOWN, None, "canonical", time.perf_counter() - t0,
                               reason=f"time limit after {out.nodes:,} nodes", nodes=out.nodes, greedy=g.describe())
    budget = min(5.0, 0.25 * params.time_limit)
    e = edge_search(problem, node_limit=20000, time_limit=budget)
    if e.addresses is not None:
        return _placed(problem, e.addresses, "edge-search", t0, e.nodes, g.describe())
    remaining = max(deadline - time.perf_counter(), 0.05)
    cp_progress = None
    if progress is not None:
        def cp_progress(elapsed: float, objective: float | None, _bound: float | None) -> None:
            progress("cp-sat", elapsed, "solution" if objective is not None else "searching")

    from placer.placement.cpsat import solve_cpsat  # ortools takes a third of a second to import: only when needed

    # the wall clock bounds this solve too (deterministic mode's default backstop is 2 x its work budget + 5 s)
    result, addresses = solve_cpsat(problem, params.with_overrides(time_limit=remaining, backstop=remaining),
                                    hint=g.partial,
                                    progress=cp_progress)
    if addresses is not None:
        return _placed(problem, addresses, "cp-sat", t0, e.nodes, g.describe())
    if result.status is Status.INFEASIBLE:
        return PlacementResult(Status.INFEASIBLE, None, "cp-sat", time.perf_counter() - t0,
                               reason="CP-SAT proved the model infeasible", greedy=g.describe())
    return PlacementResult(Status.UNKNOWN, None, "cp-sat", time.perf_counter() - t0,
                           reason="time limit (edge search gave up, CP-SAT found no placement and no proof)",
                           nodes=e.nodes, greedy=g.describe())


# ---------------------------------------------------------------------------------------------- integration
def tile_problem(
    free_ranges: Sequence[tuple[int, int]],
    live: Sequence[tuple[int, int, int, int]],
    requests: Sequence[tuple[int, int, int, int]],
    *,
    interleaved_offset: int = 0,
    regions: bool = True,
    name: str = "tile",
) -> PlacementProblem:
    """Build the problem relay selection asks: ``live`` are (start, end, first, last) allocations already placed;
    ``requests`` are (bytes, alignment, first, last) standard-class buffers to place (last = 2**32 - 1: to the end).
    With ``regions=False`` the ranges are a flat address space (no region or element rules)."""
    reqs = tuple(
        Request(bytes=b, alignment=a, first=f, last=min(last, END_OF_PROGRAM), klass=MemoryClass.STANDARD,
                aliases=((k, 0),), name=f"{name}: request {k}")
        for k, (b, a, f, last) in enumerate(requests)
    )
    fixed = tuple(FixedAllocation(s, e, f, min(last, END_OF_PROGRAM), name=f"{name}: live allocation {k}")
                  for k, (s, e, f, last) in enumerate(live))
    return PlacementProblem(
        ranges=tuple((int(a), int(b)) for a, b in free_ranges), requests=reqs, fixed=fixed,
        interleaved_offset=interleaved_offset,
        region_boundary=REGION_BOUNDARY if regions else None,
        host_scratch=None, name=name,
    )


def place_requests(problem: PlacementProblem, params: SolverParams | None = None) -> PlacementResult:
    """Place a tile's new requests around its live allocations: the mirror first (microseconds for a handful of
    requests), then the exact engines. ``result.addresses[i]`` is request ``i``'s address when ``result.placed``;
    ``result.status is Status.INFEASIBLE`` comes with ``result.reason``, a proof; UNKNOWN only at the time limit."""
    params = params or SolverParams(time_limit=10.0, workers=2)
    return solve_placement(problem, params, mode=PlacementMode.EXACT)
