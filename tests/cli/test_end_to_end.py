"""The command line end to end: exit codes, one-line errors, JSON, no half-written outputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "examples" / "relay-demo.json"
TINY = ROOT / "tests" / "fixtures" / "captures" / "tiny.json"


def placer(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "placer.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_version_and_help() -> None:
    assert placer("--version").stdout.startswith("placer ")
    out = placer("--help").stdout
    for command in ("generate", "inspect", "solve", "compare", "validate", "place", "schedule"):
        assert command in out


def test_solve_then_validate(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    res = placer("solve", DEMO, "--budget", "640", "-o", plan, "--json", "--time-limit", "60")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["summary"]["program"]["fits"] is True
    assert report["solver"]["status"] in ("optimal", "feasible")
    for stage in report["solver"]["stages"]:
        assert {"status", "objective", "bound", "runtime_s"} <= set(stage)
    assert report["objectives"]["table"] <= 640 < report["production_rule"]["objectives"]["table"]
    check = placer("validate", DEMO, plan)
    assert check.returncode == 0 and check.stdout.startswith("valid"), check.stdout + check.stderr


def test_greedy_breaks_budget_exit_4_and_validator_rejects(tmp_path: Path) -> None:
    plan = tmp_path / "greedy.json"
    res = placer("solve", DEMO, "--budget", "640", "--mode", "greedy", "-o", plan)
    assert res.returncode == 4, res.stdout + res.stderr
    assert "DOES NOT FIT" in res.stdout
    check = placer("validate", DEMO, plan, "--budget", "640")  # validate checks --budget, or the machine's
    assert check.returncode == 4 and "budget" in check.stdout, check.stdout + check.stderr


def test_proved_infeasible_exit_3() -> None:
    res = placer("solve", DEMO, "--budget", "48", "--time-limit", "10")
    assert res.returncode == 3, res.stdout + res.stderr
    assert "infeasible" in res.stdout and "cannot fit" in res.stdout


def test_ambiguous_budget_unit_refused() -> None:
    res = placer("solve", DEMO, "--budget", "80KB")
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and "ambiguous" in res.stderr and "Traceback" not in res.stderr


def test_bad_capture_one_line_exit_2_and_no_output(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    bad = ROOT / "tests" / "fixtures" / "captures" / "bad_words_too_many.json"
    res = placer("solve", bad, "-o", out)
    assert res.returncode == 2
    line = res.stderr.strip()
    assert "\n" not in line and "bad_words_too_many.json" in line and "words" in line and "4149" in line
    assert not out.exists() and not list(tmp_path.iterdir())


def test_inspect_json() -> None:
    res = placer("inspect", TINY, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["phases"][0]["transfers"] == 2 and doc["phases"][0]["multicast_groups"] == {"2": 1}
    assert doc["program"]["fits"] is True


def test_compare_sweep_json() -> None:
    res = placer("compare", DEMO, "--budget", "700,1KiB", "--json", "--time-limit", "60")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [d["budget"] for d in doc] == [700, 1024]
    for entry in doc:
        assert entry["cpsat"]["fits"]
        assert (not entry["cpsat"]["fits"], entry["cpsat"]["cycles"], entry["cpsat"]["table"]) <= (
            not entry["production_rule"]["fits"], entry["production_rule"]["cycles"], entry["production_rule"]["table"])


@pytest.mark.parametrize("args", [["solve", "missing.json"], ["inspect", "missing.json"],
                                  ["validate", "missing.json", "missing.json"]])
def test_missing_files(args: list[str], tmp_path: Path) -> None:
    res = placer(*args, cwd=tmp_path)
    assert res.returncode == 2 and "no such file" in res.stderr and "Traceback" not in res.stderr
