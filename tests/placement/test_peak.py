"""Peak first (``placer.placement.peak``): it places the packing with holes that neither the canonical search nor
MiniMalloc places, whatever it returns is legal, it never claims anything where no step is full, and it is
deterministic."""

from __future__ import annotations

import itertools
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from placer.placement import check_placement, solve_placement
from placer.placement.formats import parse_minimalloc_csv
from placer.placement.generate import Piece, minimalloc_csv, perfect_packing
from placer.placement.model import PlacementProblem
from placer.placement.peak import full_steps, peak_first
from placer.solver import SolverParams, Status


def _csv(pieces: list[Piece], capacity: int = 1 << 20) -> PlacementProblem:
    return parse_minimalloc_csv(minimalloc_csv(pieces), f"pph.{capacity}.csv")


def test_places_the_packing_with_holes_nothing_else_places() -> None:
    # pph-500-s0 of the benchmark set: the canonical search finds nothing in 180 s, MiniMalloc nothing in 30 s
    problem = _csv(perfect_packing(500, seed=0, holes=0.4))
    cpu = time.process_time()
    result = solve_placement(problem, SolverParams(time_limit=30, workers=1))
    assert result.placed
    assert result.engine == "peak-first"
    assert check_placement(problem, result.addresses) == []
    # CPU seconds of this process (one worker), not wall time, which a busy machine stretches: about 0.2 s (0.1 s
    # of it the canonical search's probe)
    assert time.process_time() - cpu < 10


def test_full_steps() -> None:
    problem = _csv(perfect_packing(100, seed=0, holes=0.4))
    full = full_steps(problem)
    assert any(first <= 50 <= last for first, last in full)  # the generator keeps the middle step full
    assert all(last < nxt - 1 for (_, last), (nxt, _) in itertools.pairwise(full))  # maximal runs
    assert full_steps(_csv(perfect_packing(40, seed=1))) == [(0, 39)]  # zero slack: every step
    roomy = parse_minimalloc_csv("id,lower,upper,size\n0,0,2,8\n1,1,3,8\n", "roomy.64.csv")
    assert full_steps(roomy) == []
    assert peak_first(roomy, 5).reason == "no step fills the memory"


def test_same_problem_same_placement() -> None:
    problem = _csv(perfect_packing(500, seed=0, holes=0.4))
    a, b = peak_first(problem, 10), peak_first(problem, 10)
    assert a.addresses is not None
    assert a.addresses == b.addresses


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 120), seed=st.integers(0, 10_000), align=st.sampled_from([1, 64, 256]))
def test_whatever_it_places_is_legal_and_feasible_packings_are_never_called_infeasible(n: int, seed: int,
                                                                                    align: int) -> None:
    problem = _csv(perfect_packing(n, seed=seed, capacity=1 << 16, max_alignment=align, holes=0.4), 1 << 16)
    out = peak_first(problem, 5)
    if out.addresses is not None:
        assert check_placement(problem, out.addresses) == []
    result = solve_placement(problem, SolverParams(time_limit=5, workers=1))
    assert result.status is not Status.INFEASIBLE  # a placement exists by construction
    if result.placed:
        assert check_placement(problem, result.addresses) == []

