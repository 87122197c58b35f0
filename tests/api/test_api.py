"""The public API: documented, re-exported from the package, loaded lazily, results that say how they ended."""

from __future__ import annotations

import inspect as pyinspect
import subprocess
import sys
from pathlib import Path

import pytest

import placer
from placer.errors import ExitCode, InputError
from placer.solver import RunConfig

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "examples" / "relay-demo.json"
ENTRY_POINTS = ("read_capture", "write_capture", "load_machine", "generate", "inspect", "solve", "compare",
                "validate", "place", "schedule")


def test_entry_points_are_documented_with_numpydoc_sections() -> None:
    for name in ENTRY_POINTS:
        doc = pyinspect.getdoc(getattr(placer, name)) or ""
        assert doc, name
        assert "Parameters\n" in doc or "Returns\n" in doc, name
    assert "Returns" in (pyinspect.getdoc(placer.solve) or "")


def test_help_shows_the_documented_solve() -> None:
    code = "import placer; help(placer.solve)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PAGER": "cat", "PATH": "/usr/bin:/bin"})
    assert "Choose relays so every tile fits" in out.stdout
    assert "SelectionResult" in out.stdout


def test_import_placer_loads_no_solver() -> None:
    code = "import sys, placer; print(','.join(m for m in ('ortools', 'numpy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_a_command_that_stops_on_its_arguments_loads_no_solver() -> None:
    # the model builders bind ortools lazily (``placer.solver.lazy_module``): a bad argument is reported without
    # paying for CP-SAT, the LP solver and pandas (0.65 s); a model built afterwards loads them
    code = ("import sys, placer.cli.solve, placer.cli.schedule, placer.cli.place\n"
            "print(','.join(m for m in ('ortools.sat.python.cp_model_helper', 'ortools.linear_solver.pywraplp', "
            "'pandas') if m in sys.modules and type(sys.modules[m]).__name__ == 'module'))\n"
            "from placer.selection.cpsat import variables\n"
            "print(type(variables.cp_model.CpModel()).__name__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["", "CpModel"]


def test_every_exported_name_resolves() -> None:
    for name in placer.__all__:
        assert getattr(placer, name) is not None, name
    with pytest.raises(AttributeError):
        _ = placer.no_such_name


def test_greedy_solve_then_validate_in_process() -> None:
    machine = placer.load_machine()
    capture = placer.read_capture(DEMO)
    result = placer.solve(capture, machine, budget="700", mode="greedy")
    assert result.mode is placer.SelectionMode.GREEDY
    assert result.plan_from == "production rule"
    assert not result.stages
    assert result.bounds == {}
    doc = result.to_json()
    assert doc["solver"]["status"] == "not-run"
    assert doc["summary"]["program"]["table_budget"] == 700
    assert result.exit_code is (ExitCode.OK if result.fits else ExitCode.OVER_BUDGET)
    check = placer.validate(capture, result, machine, budget=700)
    assert check.valid == result.fits
    assert check.exit_code in (ExitCode.OK, ExitCode.OVER_BUDGET)


def test_malformed_input_is_an_input_error() -> None:
    with pytest.raises(InputError, match="budget"):
        placer.solve(DEMO, budget="80KB")
    with pytest.raises(InputError, match="objective"):
        placer.objective_order("cycles,nope")


def test_run_configuration_sections(tmp_path: Path) -> None:
    bundled = RunConfig.load()
    assert (bundled.selection.time_limit, bundled.placement.time_limit, bundled.ordering.time_limit) == (60, 60, 10)
    f = tmp_path / "run.toml"
    f.write_text("workers = 1\n[ordering]\ntime_limit = 3\n")
    cfg = RunConfig.load(f)
    assert cfg.selection.workers == cfg.placement.workers == cfg.ordering.workers == 1
    assert cfg.ordering.time_limit == 3
    assert cfg.selection.time_limit == 30.0
    f.write_text("[placement]\nworkerz = 1\n")
    with pytest.raises(InputError, match=r"placement\.workerz: unknown solver parameter"):
        RunConfig.load(f)
