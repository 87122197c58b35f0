from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner, Result

from placer.cli.place import place
from placer.errors import InputError
from placer.placement import check_placement, read_problem

app = typer.Typer()
app.command("place")(place)


@app.callback()
def _root() -> None:
    """Stands in for the top-level app, which registers ``place`` the same way."""


def _run(*args: str) -> Result:
    return CliRunner().invoke(app, ["place", *args], catch_exceptions=True)


def test_placed_exit_0_and_csv_written(fixtures: Path, tmp_path: Path) -> None:
    out = tmp_path / "aligned.csv"
    res = _run(str(fixtures / "aligned.16.csv"), "--time-limit", "5", "--workers", "2", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert "status: placed" in res.output
    assert "verified" in res.output
    lines = out.read_text().splitlines()
    assert lines[0].endswith(",offset")
    assert len(lines) == 4


def test_json_output_and_file(fixtures: Path, tmp_path: Path) -> None:
    out = tmp_path / "tiny.json"
    res = _run(str(fixtures / "tiny_dump.json"), "--json", "-o", str(out))
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["verified"] is True
    written = json.loads(out.read_text())
    problem = read_problem(fixtures / "tiny_dump.json")
    assert check_placement(problem, [p["address"] for p in written["placements"]]) == []


def test_infeasible_exit_3_with_reason(fixtures: Path) -> None:
    res = _run(str(fixtures / "over_capacity.8.csv"))
    assert res.exit_code == 3
    assert "reason:" in res.output


def test_capacity_flag_and_bad_inputs(fixtures: Path) -> None:
    res = _run(str(fixtures / "fixed_cap.csv"), "--capacity", "8")
    assert res.exit_code == 0, res.output
    res = _run(str(fixtures / "fixed_cap.csv"), "--capacity", "8KB")
    assert isinstance(res.exception, InputError)
    assert "--capacity" in str(res.exception)
    res = _run(str(fixtures / "bad_alignment.json"))
    assert isinstance(res.exception, InputError)
    assert "bad_alignment.json" in str(res.exception)


@pytest.mark.parametrize("mode", ["greedy", "exact"])
def test_modes(fixtures: Path, mode: str) -> None:
    res = _run(str(fixtures / "aligned.16.csv"), "--mode", mode)
    assert res.exit_code == 0, res.output
