"""The sweep file: validation (one line naming file, field, value), the job list, serial runs, resume, failures.

Nothing here starts Ray; the Ray path is in test_sweep_ray.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from placer.errors import InputError
from placer.modes import SelectionMode
from placer.selection.select import OBJECTIVES
from placer.sweep import spec as sweep_spec
from placer.sweep.results import COLUMNS, finished, job_dir
from placer.sweep.runner import run_sweep
from placer.sweep.spec import Job, load_spec

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "examples" / "relay-demo.json"
BAD = ROOT / "tests" / "fixtures" / "captures" / "bad_syntax.json"


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "sweep.toml"
    p.write_text(text)
    return p


GREEDY_SPEC = f"""
budgets = [600, 640]
modes = ["greedy"]

[[workloads]]
name = "demo"
capture = "{DEMO}"

[[workloads]]
name = "broken"
capture = "{BAD}"
"""


def test_objectives_mirror_the_solver() -> None:
    assert sweep_spec.OBJECTIVES == OBJECTIVES


def test_job_list_order_and_ids(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, f"""
budgets = ["64KiB", 700]
modes = ["greedy", "cpsat"]
objectives = ["table", "cycles,table"]
seeds = [0, 3]
[solver]
time_limit = 2
workers = 1
[[workloads]]
name = "demo"
capture = "{DEMO}"
[[workloads]]
name = "gen"
model = "siglip-so400m"
batch = 1
budgets = ["80KiB"]
"""))
    jobs = spec.jobs()
    # greedy once per (workload, budget); cp-sat per objective and seed
    assert len(jobs) == 2 * (1 + 2 * 2) + 1 * (1 + 2 * 2)
    assert [j.id for j in jobs[:3]] == ["demo__65536B__greedy",
                                        "demo__65536B__cpsat__table-cycles-scratch-relays__seed0",
                                        "demo__65536B__cpsat__table-cycles-scratch-relays__seed3"]
    assert jobs[-1].id == "gen__81920B__cpsat__cycles-table-scratch-relays__seed3"
    assert len({j.id for j in jobs}) == len(jobs)
    assert spec.config.workers == 1
    assert spec.config.time_limit == 2.0
    assert spec.workload("demo").capture == str(DEMO.resolve())


@pytest.mark.parametrize(("text", "needle"), [
    ("budgets = [700]\n[[workloads]]\nname = 'x'\n", "workloads[0]: give exactly one of model"),
    ("budgets = ['80KB']\n[[workloads]]\nname='x'\nmodel='siglip-so400m'\n", "budgets[0]: size '80KB' is ambiguous"),
    ("budgets = [700]\nmodes = ['fast']\n[[workloads]]\nname='x'\nmodel='m'\n", "modes[0]: must be one of greedy"),
    ("budgets = [700]\nobjectives = ['speed']\n[[workloads]]\nname='x'\nmodel='m'\n", "objectives[0]"),
    ("budgets = [700]\nseeds = [-1]\n[[workloads]]\nname='x'\nmodel='m'\n", "seeds[0]: must be an integer in 0.."),
    # the numbers the CLI refuses are refused here too, before any job starts (hardening round two)
    ("budgets = [700]\nseeds = [9223372036854775807]\n[[workloads]]\nname='x'\nmodel='m'\n", "seeds[0]"),
    ("budgets = [9223372036854775807]\n[[workloads]]\nname='x'\nmodel='m'\n", "budgets[0]: must be at most"),
    ("budgets = [0]\n[[workloads]]\nname='x'\nmodel='m'\n", "budgets[0]: must be at least"),
    ("budgets = [700]\n[solver]\ntime_limit = nan\n[[workloads]]\nname='x'\nmodel='m'\n", "solver.time_limit"),
    ("budgets = [700]\n[solver]\ntime_limit = inf\n[[workloads]]\nname='x'\nmodel='m'\n", "solver.time_limit"),
    ("budgets = [700]\n[solver]\nrelative_gap = nan\n[[workloads]]\nname='x'\nmodel='m'\n",
     "solver.relative_gap"),
    ("budgets = [700]\n[solver]\nworkers = 100000\n[[workloads]]\nname='x'\nmodel='m'\n", "solver.workers"),
    ("budgets = [700]\n[[workloads]]\nname='x'\nmodel='m'\nbatch=9223372036854775807\n", "workloads[0].batch"),
    ("budgets = [700, 700]\n[[workloads]]\nname='x'\nmodel='m'\n", "budgets: listed twice: 700"),
    ("budgets = [700]\n[solver]\nworkers = 0\n[[workloads]]\nname='x'\nmodel='m'\n", "solver.workers"),
    ("budgets = [700]\n[solver]\nthreads = 2\n[[workloads]]\nname='x'\nmodel='m'\n", "solver.threads: unknown key"),
    ("budgets = [700]\nbudget = 3\n[[workloads]]\nname='x'\nmodel='m'\n", "budget: unknown key"),
    ("budgets = [700]\n[[workloads]]\nname='a b'\nmodel='m'\n", "workloads[0].name"),
    ("budgets = [700]\n[[workloads]]\nname='x'\ncapture='nope.json'\n", "workloads[0].capture: no such file"),
    ("budgets = [700]\n[[workloads]]\nname='x'\nmodel='m'\nbatch=0\n", "workloads[0].batch"),
    ("budgets = [700]\n[[workloads]]\nname='x'\nmodel='m'\n[[workloads]]\nname='x'\nmodel='m'\n",
     "workloads.name: listed twice"),
    ("[[workloads]]\nname='x'\nmodel='m'\n", "budgets: must be a non-empty list"),
    ("budgets = [700\n", "invalid TOML"),
])
def test_bad_sweep_file_names_file_field_value(tmp_path: Path, text: str, needle: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_spec(path)
    assert str(path) in str(info.value), str(info.value)
    assert needle in str(info.value), str(info.value)


def test_cli_bad_sweep_file_is_one_line_exit_2(tmp_path: Path) -> None:
    path = write(tmp_path, "budgets = [700]\nmodes = ['fast']\n[[workloads]]\nname='x'\nmodel='m'\n")
    res = subprocess.run([sys.executable, "-m", "placer.cli", "sweep", str(path), "-o", str(tmp_path / "r"),
                          "--serial"], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0
    assert "modes[0]" in res.stderr
    assert "Traceback" not in res.stderr


def test_serial_resume_and_failed_workload(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, GREEDY_SPEC))
    out = tmp_path / "results"
    first = run_sweep(spec, out, use_ray=False)
    assert len(first.ran) == 2
    assert not first.skipped
    # a workload that cannot be read fails its own jobs, with the error, and nothing else
    assert [j for j, _ in first.failed] == ["broken__600B__greedy", "broken__640B__greedy"]
    assert all(str(BAD) in e and "invalid JSON" in e for _, e in first.failed)
    rows = {r["job"]: r for r in first.rows}
    assert [r["job"] for r in first.rows] == [j.id for j in spec.jobs()]
    assert rows["broken__600B__greedy"]["state"] == "failed"
    assert "invalid JSON" in rows["broken__600B__greedy"]["error"]
    # the greedy breaks 640 B on the demo: the independent validator rejects its plan, the table says so
    assert rows["demo__640B__greedy"]["fits"] is False
    assert rows["demo__640B__greedy"]["valid"] is False
    assert list(orjson.loads((out / "sweep.json").read_bytes())["columns"]) == list(COLUMNS)
    csv_lines = (out / "sweep.csv").read_text().splitlines()
    assert csv_lines[0] == ",".join(COLUMNS)
    assert len(csv_lines) == 5
    check = subprocess.run([sys.executable, "-m", "placer.cli", "validate", str(DEMO),
                            str(job_dir(out, spec.jobs()[1]) / "plan.json.gz"), "--budget", "640"],
                           capture_output=True, text=True, timeout=120, check=False)
    # the written file re-checks the same way (exit 4: valid, but over the budget given)
    assert check.returncode == 4
    assert "budget" in check.stdout

    # resume: finished jobs are skipped by their result files; failed and missing ones run again
    (job_dir(out, spec.jobs()[0]) / "summary.json").unlink()
    again = run_sweep(spec, out, use_ray=False)
    assert again.skipped == ["demo__640B__greedy"]
    assert again.ran == ["demo__600B__greedy"]
    assert [_stable(r) for r in again.rows] == [_stable(r) for r in first.rows]

    # a result written by a different run configuration does not count as finished
    other = load_spec(write(tmp_path, GREEDY_SPEC.replace('modes = ["greedy"]', 'modes = ["greedy"]\nfragments = 9')))
    assert not finished(out, other.jobs()[0], other.workload("demo"), other.config)
    assert finished(out, spec.jobs()[0], spec.workload("demo"), spec.config)


def test_cli_serial_reports_failed_job_and_exit_1(tmp_path: Path) -> None:
    path = write(tmp_path, GREEDY_SPEC)
    res = subprocess.run([sys.executable, "-m", "placer.cli", "sweep", str(path), "-o", str(tmp_path / "r"),
                          "--serial"], capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "job broken__600B__greedy failed" in res.stderr
    assert "invalid JSON" in res.stderr
    assert "2 ran, 0 already finished, 2 failed" in res.stdout
    assert "Traceback" not in res.stderr
    # an interrupted or repeated sweep only adds what is missing
    shutil.rmtree(tmp_path / "r" / "jobs" / "demo__600B__greedy")
    res = subprocess.run([sys.executable, "-m", "placer.cli", "sweep", str(path), "-o", str(tmp_path / "r"),
                          "--serial", "--json"], capture_output=True, text=True, timeout=300, check=False)
    rows = orjson.loads(res.stdout)
    assert [r["state"] for r in rows] == ["ok", "ok", "failed", "failed"]


def _stable(row: dict[str, object]) -> dict[str, object]:
    return {k: v for k, v in row.items() if k != "seconds"}


def test_job_is_hashable_value() -> None:
    a = Job("w", 700, SelectionMode.CPSAT, ("table", "cycles", "scratch", "relays"), 1)
    assert a == Job("w", 700, SelectionMode.CPSAT, ("table", "cycles", "scratch", "relays"), 1)
    assert a.id.endswith("__seed1")


def test_interrupted_sweep_keeps_finished_jobs(tmp_path: Path) -> None:
    import signal
    import time

    path = write(tmp_path, f"""
modes = ["greedy", "cpsat"]
[solver]
time_limit = 5
workers = 1
[[workloads]]
name = "demo"
capture = "{DEMO}"
budgets = [600, 610, 620, 630, 640, 650, 660, 670, 680, 690, 700, 710]
""")
    out = tmp_path / "r"
    # SIGINT back to its default: a process started in the background inherits it ignored
    proc = subprocess.Popen([sys.executable, "-m", "placer.cli", "sweep", str(path), "-o", str(out), "--serial"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    first = out / "jobs" / "demo__600B__greedy" / "summary.json"
    deadline = time.monotonic() + 120
    while not first.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    # during one of the 23 jobs that follow (a demo job can end within milliseconds: with one job left, the sweep
    # sometimes finished before the signal came)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    spec = load_spec(path)
    done = [j.id for j in spec.jobs() if finished(out, j, spec.workload(j.workload), spec.config)]
    assert done[:1] == ["demo__600B__greedy"]
    assert len(done) < len(spec.jobs())
    assert not list(out.rglob("*.tmp"))  # nothing half-written


def test_example_sweep_files_parse() -> None:
    assert len(load_spec(ROOT / "examples" / "sweep-demo.toml").jobs()) == 4
    b2 = load_spec(ROOT / "examples" / "sweep-b2.toml")
    assert len(b2.jobs()) == 16
    assert b2.budgets == (64 * 1024, 72 * 1024, 80 * 1024, 96 * 1024)


def test_job_count_is_counted_without_listing_and_large_sweeps_need_yes(tmp_path: Path) -> None:
    from placer.sweep.spec import HARD_MAX_JOBS, MAX_JOBS, check_job_count

    seeds = ", ".join(str(s) for s in range(600))
    path = write(tmp_path, f"budgets = [700, 800]\nseeds = [{seeds}]\n[[workloads]]\nname='x'\nmodel='m'\n")
    spec = load_spec(path)
    assert spec.job_count() == len(spec.jobs()) == 2 * (1 + 600) > MAX_JOBS
    with pytest.raises(InputError, match="pass --yes"):
        check_job_count(spec)
    assert check_job_count(spec, confirmed=True) == spec.job_count()
    budgets = ", ".join(str(700 + b) for b in range(200))
    path = write(tmp_path, f"budgets = [{budgets}]\nseeds = [{seeds}]\n[[workloads]]\nname='x'\nmodel='m'\n")
    big = load_spec(path)
    assert big.job_count() > HARD_MAX_JOBS
    with pytest.raises(InputError, match="split the sweep file"):
        check_job_count(big, confirmed=True)
    res = subprocess.run([sys.executable, "-m", "placer.cli", "sweep", str(path), "-o", str(tmp_path / "r"),
                          "--serial", "--yes"], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 2
    assert "split the sweep file" in res.stderr
    assert not (tmp_path / "r").exists()
