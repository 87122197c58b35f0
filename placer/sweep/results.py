"""The sweep's result files and its combined table.

Layout under the output folder::

    jobs/<job id>/plan.json.gz      the plan (`placer validate CAPTURE plan.json.gz` re-checks it)
    jobs/<job id>/validation.json   the independent validator's report
    jobs/<job id>/summary.json      the job, the run configuration and the `placer solve --json` report
    jobs/<job id>/error.json        instead of the three above when the job failed
    sweep.csv, sweep.json           one row per job, in the sweep's job order

Every file is written atomically and ``summary.json`` last: a job is finished exactly when its summary exists and
names the same job, workload and run configuration, which is what a resumed sweep checks.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import orjson

from placer import fileio
from placer.errors import InputError
from placer.fileio import atomic_write_bytes, atomic_write_text, json_bytes
from placer.sweep.jobs import PLAN_FILE, JobOutput
from placer.sweep.spec import Job, JobConfig, SweepSpec, Workload

COLUMNS = ("job", "workload", "budget", "mode", "objective", "seed", "state", "fits", "table", "cycles", "fragments",
           "scratch", "relays", "excess", "greedy_fits", "greedy_table", "greedy_cycles", "solver_status",
           "plan_from", "stages", "valid", "validation_errors", "plan_sha256", "seconds", "error")
TIMING_COLUMNS = ("seconds",)  # the only columns that differ between two runs of the same sweep


def job_dir(out: Path, job: Job) -> Path:
    return out / "jobs" / job.id


def _dump(obj: Any) -> bytes:
    return json_bytes(obj, indent=True) + b"\n"


def record(out: Path, job: Job, workload: Workload, result: JobOutput) -> None:
    """Write a job's files; the summary (or the error) goes last, so a half-written job is never 'finished'."""
    d = job_dir(out, job)
    d.mkdir(parents=True, exist_ok=True)
    if result.error is not None:
        for name in ("summary.json", PLAN_FILE, "validation.json"):
            (d / name).unlink(missing_ok=True)
        atomic_write_bytes(d / "error.json", _dump({"job": job.to_json(), "id": job.id, "error": result.error,
                                                    "detail": result.detail, "seconds": round(result.seconds, 3)}))
        return
    assert result.plan is not None
    assert result.summary is not None
    atomic_write_bytes(d / PLAN_FILE, result.plan)  # gzipped by the name
    atomic_write_bytes(d / "validation.json", _dump(result.validation))
    atomic_write_bytes(d / "summary.json", _dump({**result.summary, "workload": workload.to_json()}))
    (d / "error.json").unlink(missing_ok=True)


def finished(out: Path, job: Job, workload: Workload, config: JobConfig) -> bool:
    """True when ``job`` has a summary written by a run with the same job, workload and configuration."""
    summary = _read(job_dir(out, job) / "summary.json")
    return summary is not None and summary.get("job") == job.to_json() and \
        summary.get("workload") == workload.to_json() and summary.get("config") == config.to_json()


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None  # a missing or damaged file means the job runs again
    return doc if isinstance(doc, dict) else None


def table_row(out: Path, job: Job) -> dict[str, Any]:
    """The combined table's row for ``job``, read back from its result files."""
    row: dict[str, Any] = dict.fromkeys(COLUMNS)
    row.update(job=job.id, workload=job.workload, budget=job.budget, mode=job.mode,
               objective=",".join(job.objective) if job.objective else None, seed=job.seed)
    d = job_dir(out, job)
    summary = _read(d / "summary.json")
    if summary is None or summary.get("job") != job.to_json():
        error = _read(d / "error.json")
        row.update(state="failed" if error else "missing", error=error.get("error") if error else None,
                   seconds=error.get("seconds") if error else None)
        return row
    rep = summary["report"]
    obj, greedy, solver = rep["objectives"], rep["production_rule"]["objectives"], rep["solver"]
    row.update(state="ok", fits=obj["fits"], table=obj["table"], cycles=obj["cycles"], fragments=obj["fragments"],
               scratch=obj["scratch"], relays=obj["relays"], excess=obj["excess"], greedy_fits=greedy["fits"],
               greedy_table=greedy["table"], greedy_cycles=greedy["cycles"], solver_status=solver["status"],
               plan_from=solver["plan_from"], stages=_stages(solver["stages"]),
               valid=summary["validation"]["valid"], validation_errors=summary["validation"]["errors"],
               plan_sha256=summary["plan_sha256"], seconds=summary.get("seconds"))
    return row


def _stages(stages: list[dict[str, Any]]) -> str:
    """CP-SAT's verdict per objective stage: status, objective and best bound (gap follows from the two)."""
    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f}" if float(x).is_integer() else f"{x:.3f}"

    return "; ".join(f"{s['stage']} {s['status']} {num(s['objective'])}/{num(s['bound'])}" for s in stages)


def write_table(out: Path, spec: SweepSpec, rows: list[dict[str, Any]]) -> None:
    """sweep.json and sweep.csv: one row per job in the sweep's job order, whatever order the jobs finished in."""
    doc = {"spec": spec.path, "config": spec.config.to_json(),
           "workloads": [w.to_json() for w in spec.workloads], "columns": list(COLUMNS), "jobs": rows}
    atomic_write_bytes(out / "sweep.json", _dump(doc))
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in r.items()} for r in rows)
    atomic_write_text(out / "sweep.csv", buf.getvalue())


def check_output_dir(out: Path) -> None:
    fileio.check_output_dir(out, "-o")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the results folder ({exc.strerror})", path=str(out)) from None
