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
                          cwd=cwd, timeout=600, check=False)


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
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.startswith("valid"), check.stdout + check.stderr


def test_greedy_breaks_budget_exit_4_and_validator_rejects(tmp_path: Path) -> None:
    plan = tmp_path / "greedy.json"
    res = placer("solve", DEMO, "--budget", "640", "--mode", "greedy", "-o", plan)
    assert res.returncode == 4, res.stdout + res.stderr
    assert "DOES NOT FIT" in res.stdout
    check = placer("validate", DEMO, plan, "--budget", "640")  # validate checks --budget, or the machine's
    assert check.returncode == 4, check.stdout + check.stderr
    assert "budget" in check.stdout, check.stdout + check.stderr


def test_proved_infeasible_exit_3() -> None:
    res = placer("solve", DEMO, "--budget", "48", "--time-limit", "10")
    assert res.returncode == 3, res.stdout + res.stderr
    assert "infeasible" in res.stdout
    assert "no plan fits: these tiles stay over the budget" in res.stdout
    assert "B direct −" in res.stdout  # the certificate's sum, tile by tile
    doc = json.loads(placer("solve", DEMO, "--budget", "48", "--time-limit", "10", "--json").stdout)
    cert = doc["certificate"]["tiles"][0]
    assert cert["budget"] == 48
    assert cert["floor"] == sum(p["floor"] for p in cert["phases"]) == 48 + cert["bytes_over"]


def test_ambiguous_budget_unit_refused() -> None:
    res = placer("solve", DEMO, "--budget", "80KB")
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0
    assert "ambiguous" in res.stderr
    assert "Traceback" not in res.stderr


def test_bad_capture_one_line_exit_2_and_no_output(tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    bad = ROOT / "tests" / "fixtures" / "captures" / "bad_words_too_many.json"
    res = placer("solve", bad, "-o", out)
    assert res.returncode == 2
    line = res.stderr.strip()
    assert "\n" not in line
    assert "bad_words_too_many.json" in line
    assert "words" in line
    assert "4149" in line
    assert not out.exists()
    assert not list(tmp_path.iterdir())


def test_inspect_json() -> None:
    res = placer("inspect", TINY, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert doc["phases"][0]["transfers"] == 2
    assert doc["phases"][0]["multicast_groups"] == {"2": 1}
    assert doc["program"]["fits"] is True


def test_compare_sweep_json() -> None:
    res = placer("compare", DEMO, "--budget", "700,1KiB", "--json", "--time-limit", "60")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert [d["budget"] for d in doc] == [700, 1024]
    for entry in doc:
        placer_, rule = entry["cpsat"], entry["production_rule"]
        assert placer_["fits"]
        assert placer_["table"] <= rule["table"]
        # cycles first: no more B1024 than the rule's plan, a lower bound within the cap
        assert placer_["b1024"] <= rule["b1024"]
    front = doc[-1]["front"]  # at the largest budget: each cap admits the plans of the one before
    assert front
    assert front[-1]["slack"] is None
    assert not doc[0]["front"]
    ladder = [p for p in front if p["slack"] is None or p["b1024_capped"]]
    assert [p["table"] for p in ladder] == sorted((p["table"] for p in ladder), reverse=True)
    assert front[-1]["table"] <= doc[-1]["cpsat"]["table"]
    # the side point: the default Σ lower bound cap without the B1024 cap admits the capped point's plan
    (side,) = [p for p in front if p["slack"] is not None and not p["b1024_capped"]]
    (same,) = [p for p in ladder if p["slack"] == side["slack"]]
    assert side["slack"] == 0.01
    assert side["table"] <= same["table"]


def test_compare_summary_lists_every_budget() -> None:
    """The summary comes first, one row per budget, then the front; the per-phase detail only with --detail."""
    res = placer("compare", DEMO, "--budget", "600,640,1KiB", "--time-limit", "60")
    assert res.returncode == 0, res.stderr
    summary = res.stdout.split("\n\n")[0].splitlines()
    assert summary[0].startswith("production rule against placer, per budget")
    rows = [line.split()[:2] for line in summary[3:]]
    assert rows == [["600", "B"], ["640", "B"], ["1", "KiB"]]
    assert "the front at 1 KiB" in res.stdout
    assert "per phase" not in res.stdout
    detail = placer("compare", DEMO, "--budget", "600,640,1KiB", "--time-limit", "60", "--detail")
    assert detail.stdout.count("per phase ('rule' is the production rule") == 3


def test_exported_order_replays_to_the_same_horizon_and_validates(tmp_path: Path) -> None:
    """solve --schedule -o writes the plan's order next to it; validate --order and schedule --replay time it by
    the reference's rules to the horizons solve reported; an order that breaks a dependency is refused."""
    plan, rewritten = tmp_path / "plan.json", tmp_path / "rewritten.json"
    res = placer("solve", DEMO, "--budget", "640", "--schedule", "--order-time", "2", "-o", plan,
                 "--write-capture", rewritten, "--json")
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    order = tmp_path / "plan.order.json"
    written = json.loads(order.read_text())
    best = {p["phase"]: p["best"] for p in doc["schedule"]["phases"]}
    assert {p["phase"]: p["horizon"] for p in written["phases"]} == best
    check = placer("validate", DEMO, plan, "--order", order, "--json")
    assert check.returncode == 0, check.stdout + check.stderr
    replayed = json.loads(check.stdout)["order"]
    assert replayed["valid"]
    assert {p["phase"]: p["horizon"] for p in replayed["phases"]} == best
    again = placer("schedule", rewritten, "--replay", order, "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["valid"], again.stderr
    # an order of the direct capture's phases is not this program's
    other = placer("schedule", DEMO, "--replay", order)
    assert other.returncode == 2
    assert "another program" in other.stderr
    # a forward (the plan appends them last) moved before the gathers it forwards breaks a dependency
    relayed = written["phases"][0]
    forward = relayed["transfers"] - 1
    relayed["order"].remove(forward)
    relayed["order"].insert(0, forward)
    order.write_text(json.dumps(written))
    bad = placer("validate", DEMO, plan, "--order", order)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "comes before transfer" in bad.stdout, bad.stdout + bad.stderr


@pytest.mark.parametrize("args", [["solve", "missing.json"], ["inspect", "missing.json"],
                                  ["validate", "missing.json", "missing.json"]])
def test_missing_files(args: list[str], tmp_path: Path) -> None:
    res = placer(*args, cwd=tmp_path)
    assert res.returncode == 2
    assert "no such file" in res.stderr
    assert "Traceback" not in res.stderr
