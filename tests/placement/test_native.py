"""The compiled canonical search against the Python one (``CanonicalSearch.solve_python``, its test oracle): both
are complete, so they must agree on every answer."""

from __future__ import annotations

import os
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from placer.placement import check_placement
from placer.placement.canonical import _build
from placer.placement.formats import parse_minimalloc_csv
from placer.placement.generate import minimalloc_csv, perfect_packing
from placer.placement.model import PlacementProblem

EXAMPLES = int(os.environ.get("PLACER_HYPOTHESIS_EXAMPLES", "150"))


def _problem(rows: list[tuple[int, int, int, int]], capacity: int) -> PlacementProblem:
    text = "id,lower,upper,size,alignment\n" + "".join(f"{k},{lo},{hi},{size},{align}\n"
                                                    for k, (lo, hi, size, align) in enumerate(rows))
    return parse_minimalloc_csv(text, f"r.{capacity}.csv")


def _random_problem(rng: random.Random, n: int, capacity: int) -> PlacementProblem:
    rows = []
    for _ in range(n):
        lo = rng.randrange(0, 12)
        rows.append((lo, lo + rng.randrange(1, 6), rng.randrange(1, capacity // 2), rng.choice([1, 1, 2, 4])))
    return _problem(rows, capacity)


@st.composite
def problems(draw: st.DrawFn) -> PlacementProblem:
    """Few buffers with short, overlapping lifetimes, sizes up to half the capacity and small alignments: tight
    enough that both answers come up."""
    capacity = draw(st.sampled_from([8, 12, 16, 24]))
    rows = []
    for _ in range(draw(st.integers(1, 8))):
        lo = draw(st.integers(0, 11))
        rows.append((lo, lo + draw(st.integers(1, 5)), draw(st.integers(1, capacity // 2 - 1)),
                     draw(st.sampled_from([1, 1, 2, 4]))))
    return _problem(rows, capacity)


def _agree(problem: PlacementProblem) -> str:
    compiled, python = _build(problem).solve(20), _build(problem).solve_python(20)
    assert compiled.status == python.status, problem.name
    for out in (compiled, python):
        if out.status == "placed":
            assert out.offsets is not None
            assert check_placement(problem, list(out.offsets)) == []
    return compiled.status


@settings(max_examples=EXAMPLES, deadline=None)
@given(problems())
def test_the_compiled_and_python_searches_agree_on_random_instances(problem: PlacementProblem) -> None:
    _agree(problem)


def test_both_answers_come_up_on_a_fixed_set() -> None:
    rng = random.Random(3)
    seen = set()
    for _ in range(150):
        problem = _random_problem(rng, rng.randrange(3, 9), rng.choice([8, 12, 16, 24]))
        if problem.requests and max(r.bytes for r in problem.requests) <= problem.capacity:
            seen.add(_agree(problem))
    assert seen == {"placed", "infeasible"}  # both answers were exercised


def test_the_compiled_search_places_perfect_packings_and_is_deterministic() -> None:
    pieces = perfect_packing(60, seed=5, capacity=1 << 16, max_alignment=1)
    problem = parse_minimalloc_csv(minimalloc_csv(pieces), "pp.65536.csv")
    a = _build(problem).solve(20)
    b = _build(problem).solve(20)
    assert a.status == "placed"
    assert a.offsets == b.offsets
    assert a.nodes == b.nodes
    assert a.offsets is not None
    assert check_placement(problem, list(a.offsets)) == []


def test_the_compiled_search_reports_progress_and_respects_the_time_limit() -> None:
    calls = []
    pieces = perfect_packing(300, seed=0)
    problem = parse_minimalloc_csv(minimalloc_csv(pieces), "pp.1048576.csv")
    limit = 1.2
    out = _build(problem).solve(limit, lambda elapsed, nodes: calls.append((elapsed, nodes)))
    if out.status == "unknown":  # pp-300-s0: nothing in 60 s (test_stacking.py), so it stops at its limit
        assert calls
        assert calls[-1][1] > 0
        assert out.nodes >= calls[-1][1]
        # the search reads the clock between nodes and stops within milliseconds of its limit; the slack is for
        # a busy machine. Without the limit it would search for minutes
        assert out.runtime < limit + 5.0, out.runtime


def test_an_exception_of_the_progress_callback_stops_every_search_and_is_raised() -> None:
    class Stop(Exception):
        pass

    def progress(_elapsed: float, nodes: int) -> None:
        raise Stop(nodes)

    problem = parse_minimalloc_csv(minimalloc_csv(perfect_packing(300, seed=0)), "pp.1048576.csv")
    search = _build(problem)
    try:
        out = search.solve_shares((("TWA", "RZ"), ("TAW", "LZ")), 5.0, progress)
    except Stop:
        return
    assert out.status != "unknown"  # answered before the first report (half a second): nothing to raise
