from __future__ import annotations

import random
from pathlib import Path

from placer.placement import check_placement, read_problem, solve_placement
from placer.placement.formats import parse_dump, parse_minimalloc_csv
from placer.placement.generate import (
    CAPACITY,
    Piece,
    ipu_dump,
    minimalloc_csv,
    perfect_packing,
    twin,
    write_set,
)
from placer.placement.model import REGION_BOUNDARY
from placer.solver import SolverParams, Status


def _live(pieces: list[Piece], steps: int) -> list[int]:
    live = [0] * steps
    for p in pieces:
        for t in range(p.lower, p.upper):
            live[t] += p.size
    return live


def test_pieces_tile_the_rectangle_and_their_placement_is_legal() -> None:
    for seed in range(3):
        pieces = perfect_packing(80, seed=seed)
        assert len(pieces) == 80
        assert _live(pieces, 80) == [CAPACITY] * 80  # zero slack at every step
        problem = parse_minimalloc_csv(minimalloc_csv(pieces), f"pp.{CAPACITY}.csv")
        assert problem.is_flat
        assert check_placement(problem, [p.offset for p in pieces]) == []
        assert any(p.alignment > 1 for p in pieces)


def test_holes_keep_a_zero_slack_peak() -> None:
    pieces = perfect_packing(60, seed=4, holes=0.3)
    live = _live(pieces, max(p.upper for p in pieces))
    assert max(live) == CAPACITY
    assert min(live) < CAPACITY


def test_generator_is_deterministic() -> None:
    assert perfect_packing(50, seed=7) == perfect_packing(50, seed=7)
    assert perfect_packing(50, seed=7) != perfect_packing(50, seed=8)


def test_twin_is_proved_infeasible() -> None:
    for pieces in (perfect_packing(60, seed=1), perfect_packing(60, seed=1, holes=0.4)):
        _assert_infeasible_twin(pieces)


def _assert_infeasible_twin(pieces: list[Piece]) -> None:
    t = twin(pieces, seed=1)
    assert sum(p.size for p in t) == sum(p.size for p in pieces) + 32
    problem = parse_minimalloc_csv(minimalloc_csv(t), f"twin.{CAPACITY}.csv")
    r = solve_placement(problem, SolverParams(time_limit=5, workers=1))
    assert r.status is Status.INFEASIBLE
    assert r.reason


def test_ipu_dump_known_placement_respects_regions_conflicts_and_classes() -> None:
    cap = 256 * 1024
    base = REGION_BOUNDARY - cap // 2
    pieces = perfect_packing(70, capacity=cap, seed=2, first_cut=REGION_BOUNDARY - base)
    dump = ipu_dump(pieces, base, cap, seed=2, conflicts=12)
    problem = parse_dump(dump, "ipu.json")
    assert len(problem.conflict_pairs) == 12
    assert not problem.is_flat
    assert check_placement(problem, [base + p.offset for p in pieces]) == []
    # no piece straddles the region boundary
    assert all(base + p.offset >= REGION_BOUNDARY or base + p.offset + p.size <= REGION_BOUNDARY for p in pieces)


def test_write_set_round_trips(tmp_path: Path) -> None:
    paths = write_set(tmp_path, [50], [0])
    names = sorted(p.name for p in paths)
    assert names == ["ipu-50-s0-twin.json", "ipu-50-s0.json", "pp-50-s0-twin.1048576.csv", "pp-50-s0.1048576.csv"]
    for path in paths:
        assert read_problem(path).n == 50


def test_a_small_perfect_packing_is_placed_exactly() -> None:
    rng = random.Random(0)
    for _ in range(3):
        pieces = perfect_packing(24, seed=rng.randrange(1000), capacity=4096, max_alignment=1)
        problem = parse_minimalloc_csv(minimalloc_csv(pieces), "small.4096.csv")
        r = solve_placement(problem, SolverParams(time_limit=20, workers=1))
        assert r.placed
        assert check_placement(problem, r.addresses) == []
