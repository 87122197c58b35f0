from __future__ import annotations

import json
from pathlib import Path

import pytest

from placer.errors import InputError
from placer.placement import read_problem, solve_placement
from placer.placement.formats import minimalloc_csv, solution_json
from placer.placement.model import END_OF_PROGRAM, MemoryClass
from placer.solver import SolverParams


def test_reads_dump_fields(fixtures: Path) -> None:
    p = read_problem(fixtures / "tiny_dump.json")
    assert p.tile == 7
    assert p.n == 4
    assert p.ranges == ((507904, 524288), (524288, 589824))
    assert p.requests[0].klass is MemoryClass.INTERLEAVED
    assert p.requests[2].aliases == ((3, 0), (4, 4096), (5, 8192))
    assert p.requests[2].last == END_OF_PROGRAM
    assert p.conflict_pairs == ((0, 1),)


def test_reads_minimalloc_with_capacity_from_name_and_alignment(fixtures: Path) -> None:
    p = read_problem(fixtures / "aligned.16.csv")
    assert p.ranges == ((0, 16),)
    assert [r.alignment for r in p.requests] == [1, 4, 8]
    assert (p.requests[0].first, p.requests[0].last) == (0, 9)  # half-open [0, 10) is stored inclusive
    assert p.is_flat


def test_capacity_flag_overrides_and_is_required_without_name(fixtures: Path) -> None:
    assert read_problem(fixtures / "fixed_cap.csv", capacity=6).ranges == ((0, 6),)
    with pytest.raises(InputError, match="no capacity"):
        read_problem(fixtures / "fixed_cap.csv")


def test_reference_dumps_read(data: Path) -> None:
    for name in ("fragmented.json", "bank-branching.json"):
        p = read_problem(data / "ipu-placement-dumps" / name)
        assert p.n > 100
        assert not p.is_flat


def test_csv_writer_adds_offset_column(fixtures: Path) -> None:
    p = read_problem(fixtures / "aligned.16.csv")
    r = solve_placement(p, SolverParams(time_limit=5, workers=2))
    assert r.addresses is not None
    lines = minimalloc_csv(p, r.addresses).splitlines()
    assert lines[0] == "id,lower,upper,size,alignment,offset"
    assert lines[1].startswith("x,0,10,3,1,")


def test_json_writer_lists_aliases(fixtures: Path) -> None:
    p = read_problem(fixtures / "tiny_dump.json")
    r = solve_placement(p, SolverParams(time_limit=5, workers=2))
    out = solution_json(p, r)
    json.dumps(out)
    seq = out["placements"][2]
    assert [a - seq["address"] for _, a in seq["assignments"]] == [0, 4096, 8192]


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("bad_alignment.json", "requests[0].alignment: alignment must be a power of two, got 24"),
        ("bad_class.json", "requests[0].class: unknown memory class 'Ipu21Fast'"),
        ("bad_lifetime.json", "requests[0].lifetime: first 9 is after last 3"),
        ("bad_range.json", "ranges[0]: empty or reversed range [589824, 524288)"),
        ("bad_bytes.json", "requests[0].bytes: expected an integer, got '64'"),
        ("bad_size.64.csv", "line 3: size must be an integer, got 'four'"),
        ("bad_header.64.csv", "line 1: missing column(s) upper"),
        ("bad_lifetime.64.csv", "line 2 (id a): lifetime [lower, upper) must be non-empty, got [4, 4)"),
    ],
)
def test_malformed_inputs_give_one_line_naming_file_field_value(fixtures: Path, name: str, needle: str) -> None:
    with pytest.raises(InputError) as info:
        read_problem(fixtures / name)
    message = str(info.value)
    assert "\n" not in message
    assert name in message
    assert needle in message


def test_missing_file_is_an_input_error(fixtures: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read_problem(fixtures / "absent.json")
