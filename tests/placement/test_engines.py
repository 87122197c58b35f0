from __future__ import annotations

from pathlib import Path

import pytest

from placer.placement import (
    check_placement,
    greedy_place,
    place_requests,
    read_problem,
    solve_placement,
    tile_problem,
)
from placer.placement.canonical import solve_flat
from placer.placement.greedy import offline_order, online_order
from placer.solver import SolverParams, Status

PARAMS = SolverParams(time_limit=30, workers=2, seed=0)


def test_greedy_orders_mirror_the_production_keys(fixtures: Path) -> None:
    p = read_problem(fixtures / "tiny_dump.json")
    # (first, interleaved first, -alignment, -bytes, last); then (-alignment, -bytes, -duration, first)
    assert online_order(p) == [2, 0, 1, 3]
    assert offline_order(p) == [0, 2, 1, 3]


def test_tiny_dump_respects_regions_conflicts_and_aliases(fixtures: Path) -> None:
    p = read_problem(fixtures / "tiny_dump.json")
    r = solve_placement(p, PARAMS)
    assert r.placed
    assert r.addresses is not None
    assert check_placement(p, r.addresses) == []
    assert r.addresses[0] >= 0x80000  # interleaved: region 1 only
    # the sequence is live at step 0 and to the end: never in the host scratch window, so region 0 here
    assert not (0x50000 <= r.addresses[2] < 0x58000)


def test_reference_dumps_are_placed_and_verified(data: Path) -> None:
    for name in ("fragmented.json", "bank-branching.json"):
        p = read_problem(data / "ipu-placement-dumps" / name)
        assert greedy_place(p).addresses is None  # the production allocator fails on both
        r = solve_placement(p, PARAMS)
        assert r.placed, (name, r.describe())
        assert check_placement(p, r.addresses) == []


def test_over_capacity_is_proved_quickly(fixtures: Path, data: Path) -> None:
    r = solve_placement(read_problem(fixtures / "over_capacity.8.csv"), PARAMS)
    assert r.status is Status.INFEASIBLE
    assert r.engine == "bound"
    assert r.reason is not None
    assert "10 bytes but only 8" in r.reason
    r = solve_placement(read_problem(data / "minimalloc" / "A.1048576.csv", capacity=1_000_000), PARAMS)
    # quick by construction, not by the clock: the live-bytes bound proves it before any search (no node)
    assert r.status is Status.INFEASIBLE
    assert r.reason is not None
    assert "over" in r.reason
    assert r.engine == "bound"
    assert r.nodes == 0


def test_region_argument_proves_interleaved_overflow(fixtures: Path) -> None:
    r = solve_placement(read_problem(fixtures / "region_overflow.json"), PARAMS)
    assert r.status is Status.INFEASIBLE
    assert r.engine == "bound"
    assert r.reason is not None
    assert "0x80000" in r.reason


def test_canonical_search_proves_infeasibility_without_a_bound() -> None:
    # peak live bytes fit (8 <= 8) but no placement exists: the three-in-a-cycle staircase
    p = tile_problem([(0, 8)], [], [(4, 1, 0, 1), (4, 1, 1, 2), (4, 1, 2, 3), (4, 1, 0, 0), (4, 1, 3, 3)],
                     regions=False)
    assert p.is_flat
    r = solve_placement(p, PARAMS)
    assert r.status in (Status.FEASIBLE, Status.INFEASIBLE)
    if r.status is Status.INFEASIBLE:
        assert r.engine in ("bound", "canonical")


def test_minimalloc_instance_d_is_placed(data: Path) -> None:
    p = read_problem(data / "minimalloc" / "D.1048576.csv")
    out = solve_flat(p, 60)
    assert out.status == "placed"
    assert check_placement(p, out.offsets) == []


def test_place_requests_common_case_is_fast_and_avoids_live_allocations() -> None:
    problem = tile_problem([(0x60000, 0x70000)], [(0x60000, 0x64000, 0, 10), (0x68000, 0x69000, 5, 20)],
                           [(4096, 32, 2, 8), (8192, 8, 0, 3), (1024, 4, 12, 30)])
    r = place_requests(problem, SolverParams(time_limit=5, workers=2))
    # fast by construction, not by the clock (a busy machine): the production allocator placed it, no search ran
    assert r.engine == "greedy-online"
    assert r.placed
    assert check_placement(problem, r.addresses) == []


def test_place_requests_reports_a_proof_when_it_cannot_place() -> None:
    problem = tile_problem([(0, 4096)], [(0, 2048, 0, 10)], [(4096, 4, 5, 6)], regions=False)
    r = place_requests(problem, SolverParams(time_limit=5, workers=2))
    assert r.status is Status.INFEASIBLE
    assert r.reason


def test_cpsat_placement_is_bounded_by_the_wall_clock(monkeypatch: pytest.MonkeyPatch, fixtures: Path) -> None:
    # a problem that reaches CP-SAT (the cheaper engines stubbed out) gets the remaining wall time as its backstop:
    # deterministic mode alone would let it run to 2 x its budget + 5 s, past the command's time limit
    from placer.placement import api, cpsat
    from placer.placement.edges import EdgeOutcome
    from placer.placement.formats import read_problem
    from placer.placement.greedy import GreedyOutcome
    from placer.placement.model import PlacementProblem
    from placer.progress import SolverCallback
    from placer.solver import SolveResult

    problem = read_problem(fixtures / "tiny_dump.json")
    seen: list[SolverParams] = []

    def fake_cpsat(problem: PlacementProblem, params: SolverParams,  # noqa: ARG001 - solve_cpsat's signature
                   hint: tuple[int | None, ...] | None = None,  # noqa: ARG001
                   progress: SolverCallback | None = None,  # noqa: ARG001
                   ) -> tuple[SolveResult, tuple[int, ...] | None]:
        seen.append(params)
        return SolveResult(Status.UNKNOWN, None, None, 0.0), None

    monkeypatch.setattr(api, "greedy_place", lambda p, **k: GreedyOutcome(None, "failed", 0, (None,) * p.n))
    monkeypatch.setattr(api, "infeasibility_proof", lambda _p: None)
    monkeypatch.setattr(api, "solve_general", lambda *a, **k: None)
    monkeypatch.setattr(api, "edge_search", lambda *a, **k: EdgeOutcome(None, 0, 0.0))
    monkeypatch.setattr(cpsat, "solve_cpsat", fake_cpsat)
    result = solve_placement(problem, SolverParams(time_limit=4, workers=1))
    assert result.status is Status.UNKNOWN
    assert len(seen) == 1
    assert seen[0].backstop is not None
    assert 0 < seen[0].backstop <= 4
