"""One sweep job, run the same way in this process (``--serial``) and in a Ray task: solve, write the plan as bytes,
check it with the independent validator, summarise.

The job never touches the file system: it returns its plan bytes and JSON documents, and the driver writes them.
That keeps a job runnable on any node of a cluster, with or without a shared file system.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from placer.capture.model import Capture
from placer.fileio import json_bytes
from placer.machine import Machine
from placer.sweep.spec import JobConfig, Workload

if TYPE_CHECKING:
    from placer.validation.validator import ValidationReportDoc

PLAN_FILE = "plan.json.gz"  # a program-sized plan is ~10 MB of JSON; gzip level 1 makes it ~10x smaller, fast


@dataclass
class JobOutput:
    """What a job hands back to the driver. ``error`` set means the job failed (no plan, no summary)."""

    plan: bytes | None = None
    validation: ValidationReportDoc | None = None
    summary: dict[str, Any] | None = None
    error: str | None = None  # one line: exception type and message
    detail: str | None = None  # the traceback, kept in the job's error file for whoever debugs it
    seconds: float = 0.0


def load_workload(workload: Workload, machine: Machine) -> Capture:
    """Generate or read the workload's capture (done once per workload, in the driver)."""
    if workload.capture is not None:
        from placer.capture import read_capture

        return read_capture(workload.capture)
    from placer.workloads.generate import generate

    assert workload.model is not None
    return generate(workload.model, batch=workload.batch, layers=workload.layers, machine=machine,
                    seed=workload.seed)


def execute_job(job: Any, capture: Capture, machine: Machine, config: JobConfig) -> JobOutput:
    """Run ``job`` (a :class:`placer.sweep.spec.Job`); any exception becomes a failed :class:`JobOutput`."""
    start = time.perf_counter()
    try:
        out = _solve_and_check(job, capture, machine, config)
    except Exception as exc:  # a failed job is reported, never allowed to stop the others
        return JobOutput(error=failure_line(exc), detail=traceback.format_exc(),
                         seconds=time.perf_counter() - start)
    out.seconds = time.perf_counter() - start
    assert out.summary is not None
    out.summary["seconds"] = round(out.seconds, 3)
    return out


def failure_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


def _solve_and_check(job: Any, capture: Capture, machine: Machine, config: JobConfig) -> JobOutput:
    from placer.report.selection import outcome_json
    from placer.selection.select import SelectionSettings, select
    from placer.solver import SolverParams
    from placer.sweep.spec import OBJECTIVES
    from placer.validation.plan import bind_plan, parse_plan
    from placer.validation.validator import validate

    params = SolverParams(time_limit=config.time_limit, workers=config.workers, seed=job.seed or 0,
                          relative_gap=config.relative_gap, deterministic=config.deterministic)
    fragments = config.fragments if config.fragments is not None else machine.budget.fragments
    outcome = select(capture, machine, job.budget, fragments,
                     SelectionSettings(mode=job.mode, params=params, order=job.objective or OBJECTIVES,
                                       local_pack=config.local_pack))
    report = outcome_json(capture, outcome)
    plan = json_bytes(outcome.plan.to_json(capture, report["summary"], rendered=True))
    # the validator reads the very bytes the driver will write, as `placer validate` would read the file
    name = f"{job.id}/{PLAN_FILE}"
    parsed = parse_plan(orjson.loads(plan), name)
    bind_plan(parsed, capture, name)
    verdict = validate(capture, parsed, machine)
    validation = verdict.to_json()
    summary = {
        "job": job.to_json(),
        "id": job.id,
        "config": config.to_json(),
        "report": report,
        "validation": {"valid": verdict.valid, "errors": len(verdict.errors), "first_error":
                       verdict.errors[0] if verdict.errors else None},
        "plan_sha256": hashlib.sha256(plan).hexdigest(),
    }
    return JobOutput(plan=plan, validation=validation, summary=summary)
