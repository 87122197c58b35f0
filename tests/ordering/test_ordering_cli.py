"""The ``schedule`` command function and ``schedule_capture``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from placer.capture.model import Capture
from placer.capture.writer import write_capture
from placer.cli.schedule import schedule
from placer.errors import InputError
from placer.machine import load_machine
from placer.ordering import schedule_capture
from placer.solver import SolverParams
from tests.ordering.synthetic import relay_phase, replica_phase

app = typer.Typer()
app.command()(schedule)


@pytest.fixture(scope="module")
def capture_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    phases = [relay_phase(phase=3, groups=2, replicas=4, fragments=24),
              replica_phase(phase=7, groups=3, replicas=5, fragments=60, sources=6, weight_words=700, tiles=64)]
    path = tmp_path_factory.mktemp("ordering") / "cap.json"
    write_capture(Capture(tile_count=1472, phases=phases), path)
    return path


def test_table_output_greedy(capture_file: Path) -> None:
    res = CliRunner().invoke(app, [str(capture_file)])
    assert res.exit_code == 0, res.output
    assert "lower bound" in res.stdout
    assert "greedy" in res.stdout
    assert "cp-sat" not in res.stdout.splitlines()[1]


def test_json_cpsat_one_phase(capture_file: Path) -> None:
    res = CliRunner().invoke(app, [str(capture_file), "--phase", "3", "--mode", "cpsat", "--time-limit", "2",
                                   "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (p,) = doc["phases"]
    assert p["phase"] == 3
    assert p["valid"] is True
    assert p["horizon"] <= p["greedy_horizon"]
    assert p["lower_bound"] <= p["horizon"]
    assert p["cpsat"]["status"] in ("optimal", "feasible")
    assert p["dependencies"] > 0


def test_unknown_phase_is_an_input_error(capture_file: Path) -> None:
    res = CliRunner().invoke(app, [str(capture_file), "--phase", "99"])
    assert isinstance(res.exception, InputError)


def test_schedule_capture_library(capture_file: Path) -> None:
    from placer.capture.io import read_capture

    cap = read_capture(capture_file)
    seen = []
    out = schedule_capture(cap, load_machine(), "cpsat", SolverParams(time_limit=2, workers=2),
                           progress=lambda pid, *_: seen.append(pid))
    assert [ps.phase for ps in out] == [3, 7]
    assert all(ps.lower <= ps.horizon <= ps.greedy_horizon for ps in out)


def test_reference_rules_greedy_and_cpsat(capture_file: Path) -> None:
    # the reference's own rules: every schedule checked by their checker, CP-SAT's order never kept when worse
    for mode in ("greedy", "cpsat"):
        res = CliRunner().invoke(app, [str(capture_file), "--rules", "reference", "--mode", mode, "--time-limit",
                                       "2", "--json"])
        assert res.exit_code == 0, res.output
        for p in json.loads(res.stdout)["phases"]:
            assert p["rules"] == "reference"
            assert p["valid"] is True
            assert p["lower_bound"] <= p["horizon"] <= p["greedy_horizon"]
            assert p["table_worst_bytes"] > 0


def test_unknown_rules_are_refused_before_loading(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, [str(tmp_path / "missing.json"), "--rules", "exact"])
    assert res.exit_code != 0
    assert isinstance(res.exception, InputError)
    assert "--rules" in str(res.exception)
