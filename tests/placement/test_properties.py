"""Property tests: checker agreement, greedy ⇒ exact, infeasible ⇔ brute force, rules respected, determinism."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.modes import PlacementMode
from placer.placement import (
    MemoryClass,
    PlacementProblem,
    Request,
    check_placement,
    greedy_place,
    solve_placement,
)
from placer.solver import SolverParams, Status

from .brute import brute_force

PARAMS = SolverParams(time_limit=20, workers=2, seed=3)
EXAMPLES = int(os.environ.get("PLACER_HYPOTHESIS_EXAMPLES", "80"))  # raise it locally for a deeper run
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def flat_problems(draw: st.DrawFn) -> PlacementProblem:
    capacity = draw(st.integers(4, 12))
    n = draw(st.integers(1, 4))
    reqs = []
    for k in range(n):
        first = draw(st.integers(0, 5))
        last = draw(st.integers(first, 6))
        reqs.append(Request(bytes=draw(st.integers(1, capacity)), alignment=draw(st.sampled_from([1, 2, 4])),
                            first=first, last=last, aliases=((k, 0),), name=f"r{k}"))
    return PlacementProblem(ranges=((0, capacity),), requests=tuple(reqs), region_boundary=None, host_scratch=None)


@st.composite
def region_problems(draw: st.DrawFn) -> PlacementProblem:
    """A scaled-down tile: region boundary at 64, 16-byte and 32-byte elements, up to two free ranges."""
    cut = draw(st.sampled_from([32, 48, 64, 80, 96]))
    ranges: tuple[tuple[int, int], ...] = ((0, 128),)
    if draw(st.booleans()):  # the coin before the split point: the draw order, so the same examples as before
        ranges = ((0, cut), (cut + draw(st.sampled_from([0, 16])), 128))
    ranges = tuple((a, b) for a, b in ranges if a < b)
    n = draw(st.integers(1, 3))
    reqs = []
    for k in range(n):
        first = draw(st.integers(0, 3))
        last = draw(st.integers(first, 4))
        conflicts = tuple(j for j in range(n) if j != k and draw(st.booleans()) and draw(st.booleans()))
        reqs.append(Request(
            bytes=draw(st.sampled_from([8, 16, 24, 32, 48])), alignment=draw(st.sampled_from([16, 32])),
            first=first, last=last, klass=draw(st.sampled_from(list(MemoryClass))), aliases=((k, 0),),
            conflicts=conflicts, name=f"r{k}",
        ))
    return PlacementProblem(ranges=ranges, requests=tuple(reqs), region_boundary=64, region0_element=16,
                            region1_element=32, host_scratch=None, interleaved_offset=draw(st.sampled_from([0, 16])))


def _agree(problem: PlacementProblem) -> None:
    exact = solve_placement(problem, PARAMS)
    assert exact.status is not Status.UNKNOWN
    if exact.addresses is not None:
        assert check_placement(problem, exact.addresses) == []
    assert exact.placed == brute_force(problem)
    if exact.status is Status.INFEASIBLE:
        assert exact.reason
    greedy = greedy_place(problem)
    if greedy.addresses is not None:
        assert check_placement(problem, greedy.addresses) == []
        assert exact.placed
    again = solve_placement(problem, PARAMS)
    assert again.addresses == exact.addresses
    assert again.status == exact.status


@SETTINGS
@given(flat_problems())
def test_flat_exact_agrees_with_brute_force(problem: PlacementProblem) -> None:
    _agree(problem)


@SETTINGS
@given(region_problems())
def test_regions_alignment_conflicts_agree_with_brute_force(problem: PlacementProblem) -> None:
    _agree(problem)


@settings(max_examples=25, deadline=None)
@given(region_problems())
def test_greedy_mode_placements_always_pass_the_checker(problem: PlacementProblem) -> None:
    result = solve_placement(problem, PARAMS, mode=PlacementMode.GREEDY)
    if result.placed:
        assert result.addresses is not None
        assert check_placement(problem, result.addresses) == []
        for i, a in enumerate(result.addresses):
            r = problem.requests[i]
            assert a % r.alignment == 0
            if r.klass is MemoryClass.INTERLEAVED:
                assert a >= 64 + problem.interleaved_offset
    else:
        assert result.status in (Status.UNKNOWN, Status.INFEASIBLE)
