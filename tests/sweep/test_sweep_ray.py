"""The Ray path on a local instance (started once for this module): a small sweep equals the serial one job by job,
each capture is loaded once and shared through the object store, a failing job is reported and the others finish."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from placer.capture import read_capture
from placer.sweep import runner
from placer.sweep.jobs import load_workload
from placer.sweep.results import job_dir
from placer.sweep.runner import run_sweep
from placer.sweep.spec import load_spec

# slow: a local Ray instance takes 10-20 s of two cores to start, run its workers and stop (the serial path and
# the sweep specification are tested in test_sweep_spec.py, in the default run)
pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "examples" / "relay-demo.json"
TINY_MODEL = Path(__file__).parent / "tiny-vit.toml"


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    pytest.importorskip("ray", reason="Ray is an optional extra: pip install -e '.[ray]'")
    from placer.sweep.cluster import ray_session

    with ray_session(None) as ray:  # every run_sweep / ray_map below reuses this instance
        yield ray


@pytest.fixture(scope="module")
def sweep_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sweep")
    # a capture the ipu21 machine cannot run (more tiles than it has): it loads, and every job of it then fails
    # inside its task with the selection's own error
    wide = orjson.loads(DEMO.read_bytes())
    wide["tile_count"] = 2000
    (folder / "too-wide.json").write_bytes(orjson.dumps(wide))
    path = folder / "sweep.toml"
    # the time limit bounds the whole solve, preparation included: 1 s made a job's path depend on the machine's
    # load (budget-greedy construction or the infeasibility proof finished in time, or not); 10 s leaves the
    # deterministic parts room on a busy machine
    path.write_text(f"""
modes = ["greedy", "cpsat"]
[solver]
time_limit = 10
workers = 1
[[workloads]]
name = "demo"
capture = "{DEMO}"
budgets = [600, 700]
[[workloads]]
name = "tiny"
model = "{TINY_MODEL}"
batch = 1
budgets = [6000, 7000]
[[workloads]]
name = "too-wide"
capture = "too-wide.json"
budgets = [700]
""")
    return path


def _stable(row: dict[str, Any]) -> dict[str, Any]:
    # every column but the wall time, the plan file's sha256 included: same bytes on Ray as in this process
    return {k: v for k, v in row.items() if k != "seconds"}


@pytest.fixture(scope="module")
def swept(ray_local: Any, sweep_file: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: ARG001
    """The sweep run once on Ray and once serially, counting how often each workload is loaded."""
    spec = load_spec(sweep_file)
    out = tmp_path_factory.mktemp("swept")
    loads: list[str] = []
    real_load = load_workload

    def counting(workload: Any, machine: Any) -> Any:
        loads.append(workload.name)
        return real_load(workload, machine)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "load_workload", counting)
        on_ray = run_sweep(spec, out / "ray", use_ray=True)
        ray_loads = list(loads)
        loads.clear()
        serial = run_sweep(spec, out / "serial", use_ray=False)
    return {"spec": spec, "out": out, "ray": on_ray, "serial": serial, "ray_loads": ray_loads, "serial_loads": loads}


def test_ray_sweep_equals_serial_job_by_job(swept: dict[str, Any]) -> None:
    spec, on_ray, serial = swept["spec"], swept["ray"], swept["serial"]
    # 10 jobs, 3 workloads: each capture generated or read once, in the driver, then shared by reference
    assert len(spec.jobs()) == 10
    assert swept["ray_loads"] == swept["serial_loads"] == ["demo", "tiny", "too-wide"]
    assert [r["job"] for r in on_ray.rows] == [j.id for j in spec.jobs()]
    for a, b in zip(on_ray.rows, serial.rows, strict=True):
        assert _stable(a) == _stable(b), a["job"]
    # a failing job is reported with its error; the others finished
    failed = {j: e for j, e in on_ray.failed}
    assert set(failed) == {"too-wide__700B__greedy", "too-wide__700B__cpsat__cycles-table-scratch-relays__seed0"}
    assert all("2000 tiles" in e for e in failed.values()), failed
    assert (job_dir(swept["out"] / "ray", spec.jobs()[-1]) / "error.json").is_file()
    ok = [r for r in on_ray.rows if r["state"] == "ok"]
    assert len(ok) == 8
    # every plan went through the independent validator, whose verdict agrees with the solver's fit
    assert all(r["valid"] == r["fits"] for r in ok)
    assert any(r["mode"] == "cpsat" and r["fits"] and not r["greedy_fits"] for r in ok)
    assert (swept["out"] / "ray" / "sweep.csv").read_text().count("\n") == 11


def test_resume_on_ray_runs_only_what_is_missing(swept: dict[str, Any]) -> None:
    # nothing left to do except the failed jobs, which run (and fail) again
    again = run_sweep(swept["spec"], swept["out"] / "ray", use_ray=True)
    assert len(again.skipped) == 8
    assert not again.ran
    assert len(again.failed) == 2
    assert [_stable(r) for r in again.rows] == [_stable(r) for r in swept["ray"].rows]


def test_sweep_report_pairs_rule_and_cpsat_per_budget(swept: dict[str, Any], tmp_path: Path) -> None:
    pytest.importorskip("plotly", reason="the report extra: pip install -e '.[report]'")
    from placer.sweep.report import comparison_entries, write_report

    rows = swept["ray"].rows
    groups = comparison_entries(rows)
    assert list(groups) == [("demo", "cycles,table,scratch,relays", 0), ("tiny", "cycles,table,scratch,relays", 0)]
    demo = groups[("demo", "cycles,table,scratch,relays", 0)]
    assert [e["budget"] for e in demo] == [600, 700]
    by_job = {r["job"]: r for r in rows}
    assert demo[0]["production_rule"]["table"] == by_job["demo__600B__greedy"]["table"]
    assert demo[0]["cpsat"]["table"] == by_job["demo__600B__cpsat__cycles-table-scratch-relays__seed0"]["table"]
    size = write_report(swept["spec"], rows, tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert size == len(page.encode())
    assert page.count('class="placer-figure"') == 2
    assert page.count("<tr>") == 1 + len(rows)
    assert "2000 tiles" in page


def test_capture_crosses_the_object_store_intact(ray_local: Any) -> None:
    cap = read_capture(DEMO)
    back = ray_local.get(ray_local.put(cap))
    assert back.equals(cap)


# ------------------------------------------------------------------------------------------- per-phase / per-tile
def _cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from placer.cli import app

    return CliRunner().invoke(app, list(args))  # in this process: the module's Ray instance is reused


def _phases(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in p.items() if "seconds" not in k and k != "cpsat"} | {"cpsat": _solve(p["cpsat"])}
            for p in doc["phases"]]


def _solve(res: dict[str, Any] | None) -> Any:
    return None if res is None else {k: v for k, v in res.items() if k != "runtime_s"}


@pytest.mark.usefixtures("ray_local")
@pytest.mark.parametrize(("capture", "mode"), [("tiny", "greedy"), ("demo", "cpsat")])
def test_schedule_every_phase_on_ray_equals_serial(tmp_path: Path, capture: str, mode: str) -> None:
    if capture == "tiny":
        from placer.capture import write_capture
        from placer.workloads.generate import generate

        path = tmp_path / "tiny.json"
        write_capture(generate(str(TINY_MODEL), batch=1), path)
    else:
        path = DEMO
    args = ["schedule", str(path), "--json", "--mode", mode, "--time-limit", "2", "--workers", "1"]
    serial = _cli(*args)
    on_ray = _cli(*args, "--ray", "auto")
    assert serial.exit_code == 0, on_ray.output
    assert on_ray.exit_code == 0, on_ray.output
    a, b = orjson.loads(serial.stdout), orjson.loads(on_ray.stdout)
    assert len(a["phases"]) == len(read_capture(path).phases) > 1
    assert _phases(a) == _phases(b)
    assert all(p["valid"] for p in b["phases"])


@pytest.mark.usefixtures("ray_local")
def test_schedule_phases_returns_identical_times() -> None:
    from placer.machine import load_machine
    from placer.modes import ScheduleMode
    from placer.ordering.schedule import OrderingParams, schedule_capture
    from placer.solver import SolverParams
    from placer.sweep.fanout import schedule_phases

    cap, machine = read_capture(DEMO), load_machine()
    params = SolverParams(time_limit=2.0, workers=1)
    serial = schedule_capture(cap, machine, "greedy", params, ordering=OrderingParams())
    on_ray = schedule_phases(cap, machine, ScheduleMode.GREEDY, params, cap.phase_ids(), OrderingParams(), None)
    for s, r in zip(serial, on_ray, strict=True):
        assert s.phase == r.phase
        assert s.horizon == r.horizon
        assert (s.schedule.tx_start == r.schedule.tx_start).all()
        assert (s.schedule.rx_start == r.schedule.rx_start).all()


@pytest.mark.usefixtures("ray_local")
def test_place_every_file_on_ray_equals_serial() -> None:
    data = ROOT / ".." / "shared" / "data"
    files = [ROOT / "tests" / "fixtures" / "placement" / n for n in ("tiny_dump.json", "aligned.16.csv",
                                                                     "over_capacity.8.csv")]
    if data.is_dir():
        files += [data / "ipu-placement-dumps" / "fragmented.json", data / "minimalloc" / "input.12.csv"]
    args = ["place", *map(str, files), "--json", "--time-limit", "10", "--workers", "1"]
    serial = _cli(*args)
    on_ray = _cli(*args, "--ray", "auto")
    assert serial.exit_code == on_ray.exit_code == 3, on_ray.output  # over_capacity is proved infeasible
    a, b = orjson.loads(serial.stdout), orjson.loads(on_ray.stdout)
    keep = ("file", "status", "placed", "engine", "reason", "peak_address", "bound", "addresses", "verified")
    assert [{k: d[k] for k in keep} for d in a] == [{k: d[k] for k in keep} for d in b]
    assert [d["placed"] for d in b] == [True, True, False, *([True, True] if data.is_dir() else [])]


@pytest.mark.usefixtures("ray_local")
def test_more_workers_than_any_node_is_refused(tmp_path: Path) -> None:
    from placer.errors import InputError

    path = tmp_path / "big.toml"
    path.write_text(f'budgets = [700]\nmodes = ["cpsat"]\n[solver]\nworkers = 200\n'
                    f'[[workloads]]\nname = "demo"\ncapture = "{DEMO}"\n')
    with pytest.raises(InputError, match=r"solver\.workers = 200 CPUs per task"):
        run_sweep(load_spec(path), tmp_path / "r", use_ray=True)
