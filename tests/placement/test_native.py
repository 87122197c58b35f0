"""The compiled canonical search against the Python one: both are complete, so they must agree on every answer."""

from __future__ import annotations

import random

import pytest

from placer.placement import check_placement
from placer.placement.canonical import _build, _native
from placer.placement.formats import parse_minimalloc_csv
from placer.placement.generate import minimalloc_csv, perfect_packing

pytestmark = pytest.mark.skipif(_native is None, reason="the compiled canonical search is not built")


def _random_problem(rng: random.Random, n: int, capacity: int):
    rows = ["id,lower,upper,size,alignment"]
    for k in range(n):
        lo = rng.randrange(0, 12)
        rows.append(f"{k},{lo},{lo + rng.randrange(1, 6)},{rng.randrange(1, capacity // 2)},{rng.choice([1, 1, 2, 4])}")
    return parse_minimalloc_csv("\n".join(rows) + "\n", f"r.{capacity}.csv")


def _agree(problem) -> str:
    outs = [_build(problem).solve(20, native=native) for native in (True, False)]
    assert outs[0].status == outs[1].status, problem.name
    for out in outs:
        if out.status == "placed":
            assert check_placement(problem, list(out.offsets)) == []
    return outs[0].status


def test_native_and_python_searches_agree_on_random_instances():
    rng = random.Random(3)
    seen = set()
    for _ in range(150):
        problem = _random_problem(rng, rng.randrange(3, 9), rng.choice([8, 12, 16, 24]))
        if problem.requests and max(r.bytes for r in problem.requests) <= problem.capacity:
            seen.add(_agree(problem))
    assert seen == {"placed", "infeasible"}  # both answers were exercised


def test_native_places_perfect_packings_and_is_deterministic():
    pieces = perfect_packing(60, seed=5, capacity=1 << 16, max_alignment=1)
    problem = parse_minimalloc_csv(minimalloc_csv(pieces), "pp.65536.csv")
    a = _build(problem).solve(20, native=True)
    b = _build(problem).solve(20, native=True)
    assert a.status == "placed" and a.offsets == b.offsets and a.nodes == b.nodes
    assert check_placement(problem, list(a.offsets)) == []


def test_native_reports_progress_and_respects_the_time_limit():
    calls = []
    pieces = perfect_packing(300, seed=0)
    problem = parse_minimalloc_csv(minimalloc_csv(pieces), "pp.1048576.csv")
    limit = 1.2
    out = _build(problem).solve(limit, lambda elapsed, nodes: calls.append((elapsed, nodes)), native=True)
    if out.status == "unknown":  # pp-300-s0: nothing in 60 s (test_stacking.py), so it stops at its limit
        assert calls and calls[-1][1] > 0 and out.nodes >= calls[-1][1]
        # the search reads the clock between nodes and stops within milliseconds of its limit; the slack is for
        # a busy machine. Without the limit it would search for minutes
        assert out.runtime < limit + 5.0, out.runtime
