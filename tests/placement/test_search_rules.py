"""Property tests for the compiled canonical search's own rules (blocked levels, forced placements, the
failed-state table, the thread portfolio, tiles with regions): on random small instances it must agree with brute
force, report "infeasible" only when brute force finds nothing, and be deterministic for a fixed seed."""

from __future__ import annotations

import math
import os
from pathlib import Path

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from placer.placement import MemoryClass, PlacementProblem, Request, check_placement, read_problem, tile_problem
from placer.placement.canonical import _build, solve_flat, solve_general
from placer.placement.checker import _any_overlap, _overlaps, _span
from placer.placement.formats import parse_minimalloc_csv
from placer.placement.generate import minimalloc_csv, perfect_packing
from placer.placement.model import FixedAllocation

from .brute import brute_force, choices, exhaustive

EXAMPLES = int(os.environ.get("PLACER_HYPOTHESIS_EXAMPLES", "120"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# every order the searches use, alone and in portfolios: each must be complete on its own
ORDERS = ["TAW", "TWA", "WAT", "RZ", "R", "L", "LZ", "Z", "X"]


@st.composite
def tight_flat(draw: st.DrawFn) -> PlacementProblem:
    """Flat problems near zero slack (where the blocked-level and forced-placement rules fire most)."""
    capacity = draw(st.integers(4, 10))
    n = draw(st.integers(1, 5))
    reqs = []
    for k in range(n):
        first = draw(st.integers(0, 4))
        last = draw(st.integers(first, 5))
        reqs.append(Request(bytes=draw(st.integers(1, capacity)), alignment=draw(st.sampled_from([1, 1, 2, 4])),
                            first=first, last=last, aliases=((k, 0),), name=f"r{k}"))
    return PlacementProblem(ranges=((0, capacity),), requests=tuple(reqs), region_boundary=None, host_scratch=None)


@SETTINGS
@given(tight_flat(), st.sampled_from(ORDERS), st.integers(0, 3))
def test_each_order_agrees_with_brute_force(problem: PlacementProblem, order: str, seed: int) -> None:
    search = _build(problem)
    out = search.solve_shares(((order,),), 10, seed=seed)
    assert out.status != "unknown"
    if out.status == "placed":
        assert out.offsets is not None
        assert check_placement(problem, list(out.offsets)) == []
    assert (out.status == "placed") == brute_force(problem)
    again = _build(problem).solve_shares(((order,),), 10, seed=seed)
    assert (again.status, again.offsets, again.nodes) == (out.status, out.offsets, out.nodes)  # deterministic


@SETTINGS
@given(tight_flat(), st.integers(1, 3))
def test_portfolio_agrees_with_brute_force(problem: PlacementProblem, workers: int) -> None:
    out = solve_flat(problem, 10, workers=workers)
    assert out.status != "unknown"
    assert (out.status == "placed") == brute_force(problem)
    if out.offsets is not None:
        assert check_placement(problem, list(out.offsets)) == []


@st.composite
def tiles(draw: st.DrawFn) -> PlacementProblem:
    """A scaled-down tile: region boundary at 64, 16- and 32-byte elements, up to two free ranges, conflicts,
    interleaved requests and live (fixed) allocations with their own lifetimes."""
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
        if draw(st.booleans()) and draw(st.booleans()):
            conflicts += (100,)  # the fixed allocation below
        reqs.append(Request(
            bytes=draw(st.sampled_from([8, 16, 24, 32, 48])), alignment=draw(st.sampled_from([8, 16, 32])),
            first=first, last=last, klass=draw(st.sampled_from(list(MemoryClass))), aliases=((k, 0),),
            conflicts=conflicts, name=f"r{k}",
        ))
    fixed: tuple[FixedAllocation, ...] = ()
    if draw(st.booleans()):
        start = draw(st.sampled_from([0, 16, 40, 64, 96]))
        first = draw(st.integers(0, 3))
        fixed = (FixedAllocation(start, start + draw(st.sampled_from([8, 16, 24])), first,
                                 draw(st.integers(first, 4)), root=100, name="live"),)
    return PlacementProblem(ranges=ranges, requests=tuple(reqs), fixed=fixed, region_boundary=64,
                            region0_element=16, region1_element=32, host_scratch=None,
                            interleaved_offset=draw(st.sampled_from([0, 16])))


@SETTINGS
@given(tiles(), st.integers(1, 2))
def test_tiles_with_regions_agree_with_brute_force(problem: PlacementProblem, workers: int) -> None:
    out = solve_general(problem, 10, workers=workers)
    assert out is not None
    assert out.status != "unknown"
    if out.offsets is not None:
        assert check_placement(problem, list(out.offsets)) == []
    assert (out.status == "placed") == brute_force(problem)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.one_of(tight_flat(), tiles()))
def test_the_pruned_brute_force_answers_as_the_exhaustive_one(problem: PlacementProblem) -> None:
    assume(math.prod(len(c) for c in choices(problem)) <= 10_000)  # every combination tried in a fraction of a second
    assert brute_force(problem) == exhaustive(problem)


def test_forced_placements_and_blocked_levels_cut_the_perfect_packing_search() -> None:
    # zero slack everywhere: every level is tight, so the two rules fire at almost every node
    pieces = perfect_packing(100, seed=0, capacity=1 << 16, max_alignment=1)
    problem = parse_minimalloc_csv(minimalloc_csv(pieces), "pp.65536.csv")
    out = _build(problem).solve_shares((("TAW",),), 20)
    assert out.status == "placed"
    assert out.offsets is not None
    assert check_placement(problem, list(out.offsets)) == []
    assert out.nodes < 20_000  # MiniMalloc's rules alone: over 100,000 nodes on this instance


def test_fragmented_dump_is_placed_by_the_general_search(data: Path) -> None:
    problem = read_problem(data / "ipu-placement-dumps" / "fragmented.json")
    out = solve_general(problem, 20, workers=1)
    assert out is not None
    assert out.status == "placed"
    assert out.offsets is not None
    assert check_placement(problem, list(out.offsets)) == []


def test_live_allocations_are_avoided_while_live() -> None:
    problem = tile_problem([(0, 64)], live=[(0, 32, 0, 3), (32, 64, 5, 9)], requests=[(32, 8, 2, 6), (16, 8, 4, 4)],
                           regions=False)
    out = solve_general(problem, 5)
    assert out is not None
    assert out.status == "infeasible"  # request 0 needs [0, 32) after 3 and [32, 64) before 5
    problem = tile_problem([(0, 64)], live=[(0, 32, 0, 3)], requests=[(32, 8, 2, 6), (16, 8, 4, 4)], regions=False)
    out = solve_general(problem, 5)
    assert out is not None
    assert out.status == "placed"
    assert out.offsets is not None
    assert check_placement(problem, list(out.offsets)) == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 4), st.integers(0, 40), st.integers(1, 16)),
                min_size=1, max_size=8))
def test_checker_sweep_agrees_with_the_pairwise_loop(rows: list[tuple[int, int, int, int]]) -> None:
    reqs = tuple(Request(bytes=size, alignment=1, first=first, last=first + length, aliases=((k, 0),))
                 for k, (first, length, _a, size) in enumerate(rows))
    problem = PlacementProblem(ranges=((0, 64),), requests=reqs, region_boundary=None, host_scratch=None)
    spans = [_span(problem, i, a) for i, (_f, _l, a, _s) in enumerate(rows)]
    assert _any_overlap(problem, spans) == bool(_overlaps(problem, spans))


@SETTINGS
@given(tight_flat())
def test_flat_overflow_proof_is_sound_and_found_whenever_live_bytes_overflow(problem: PlacementProblem) -> None:
    from placer.placement.bounds import flat_overflow_proof, peak_live_bytes

    if problem.is_flat:
        proof = flat_overflow_proof(problem)
        assert (proof is not None) == (peak_live_bytes(problem) > problem.capacity)
        if proof is not None:
            assert not brute_force(problem)


def test_a_level_buffer_that_may_be_raised_is_not_forced() -> None:
    """The forced-placement rule once placed r0 at the level because it was the only buffer there of its section,
    although r1, placed at the level in another section, may raise it within the section's room: order L then
    claimed "infeasible" where brute force places all four (r1 0, r0 2, r3 8)."""
    reqs = [(5, 1, 1, 2), (2, 4, 2, 2), (1, 1, 0, 0), (1, 4, 0, 2)]  # bytes, alignment, first, last
    problem = PlacementProblem(ranges=((0, 9),), requests=tuple(
        Request(bytes=b, alignment=a, first=f, last=last, aliases=((k, 0),), name=f"r{k}")
        for k, (b, a, f, last) in enumerate(reqs)), region_boundary=None, host_scratch=None)
    assert brute_force(problem)
    for order in ORDERS:
        out = _build(problem).solve_shares(((order,),), 10, seed=0)
        assert out.status == "placed", order
        assert out.offsets is not None
        assert check_placement(problem, list(out.offsets)) == [], order
