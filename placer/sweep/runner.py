"""Running a sweep: skip finished jobs, load each needed workload once, run the rest serially or as Ray tasks,
write each job's files as it finishes, then the combined table.

Both paths call the same :func:`placer.sweep.jobs.execute_job` with the same inputs, so they produce the same rows
(timing aside). In the Ray path every capture is put in the object store once and each task receives it by
reference; a CP-SAT task reserves ``workers`` CPUs, a greedy task one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from placer.capture.model import Capture
from placer.machine import Machine, load_machine
from placer.modes import SelectionMode
from placer.sweep.jobs import JobOutput, execute_job, failure_line, load_workload
from placer.sweep.results import check_output_dir, finished, record, table_row, write_table
from placer.sweep.spec import Job, SweepSpec, check_job_count
from placer.workloads.generate import check_memory

Report = Callable[[str], None]


@dataclass
class SweepRun:
    """What a run did: jobs skipped as already finished, run now, failed; the combined table's rows."""

    skipped: list[str] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)  # (job id, error line)
    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0


def run_sweep(spec: SweepSpec, out: Path, *, use_ray: bool = True, address: str | None = None,
              report: Report | None = None) -> SweepRun:
    started = time.perf_counter()
    check_output_dir(out)
    say = report or (lambda _line: None)
    check_job_count(spec, confirmed=True)  # the library caller has chosen the sweep; only the hard ceiling holds
    machine = load_machine(spec.config.machine)
    run = SweepRun()
    pending: list[Job] = []
    for job in spec.jobs():
        if finished(out, job, spec.workload(job.workload), spec.config):
            run.skipped.append(job.id)
        else:
            pending.append(job)
    if run.skipped:
        say(f"{len(run.skipped)} of {len(run.skipped) + len(pending)} jobs already finished (kept)")
    # the generated workloads go through generate's memory guard before any job starts (a batch that cannot
    # fit used to fail job after job, after the smaller ones had run)
    for name in sorted({job.workload for job in pending}):
        w = spec.workload(name)
        if w.model is not None:
            check_memory(w.model, w.batch, where=f"workload {name}")
    if pending:
        done = _Progress(spec, out, run, say, len(pending))
        if use_ray:
            _run_ray(spec, pending, machine, address, done)
        else:
            _run_serial(spec, pending, machine, done)
    run.rows = [table_row(out, job) for job in spec.jobs()]
    write_table(out, spec, run.rows)
    run.seconds = time.perf_counter() - started
    return run


class _Progress:
    """Records each finished job at once (so an interrupted sweep keeps it) and reports one line per job."""

    def __init__(self, spec: SweepSpec, out: Path, run: SweepRun, say: Report, total: int) -> None:
        self.spec, self.out, self.run, self.say, self.total = spec, out, run, say, total
        self.count = 0

    def __call__(self, job: Job, result: JobOutput) -> None:
        record(self.out, job, self.spec.workload(job.workload), result)
        self.count += 1
        if result.error is not None:
            self.run.failed.append((job.id, result.error))
            self.say(f"[{self.count}/{self.total}] {job.describe()}: FAILED: {result.error}")
            return
        self.run.ran.append(job.id)
        assert result.summary is not None
        obj = result.summary["report"]["objectives"]
        verdict = "valid" if result.summary["validation"]["valid"] else "INVALID"
        self.say(f"[{self.count}/{self.total}] {job.describe()}: {'fits' if obj['fits'] else 'does not fit'}, "
                 f"worst tile {obj['table']:,} B, {obj['cycles']:,} cycles, plan {verdict} ({result.seconds:.1f} s)")


def _load(spec: SweepSpec, names: list[str], machine: Machine) -> tuple[dict[str, Capture], dict[str, str]]:
    """Each needed workload generated or read once; a workload that cannot be loaded fails its jobs only."""
    captures: dict[str, Capture] = {}
    errors: dict[str, str] = {}
    for name in names:
        try:
            captures[name] = load_workload(spec.workload(name), machine)
        except Exception as exc:  # reported on each of its jobs; the other workloads go on
            errors[name] = f"workload {name}: {failure_line(exc)}"
    return captures, errors


def _needed(pending: list[Job]) -> list[str]:
    return list(dict.fromkeys(j.workload for j in pending))


def _run_serial(spec: SweepSpec, pending: list[Job], machine: Machine, done: _Progress) -> None:
    captures, errors = _load(spec, _needed(pending), machine)
    for job in pending:
        if job.workload in errors:
            done(job, JobOutput(error=errors[job.workload]))
        else:
            done(job, execute_job(job, captures[job.workload], machine, spec.config))


def _run_ray(spec: SweepSpec, pending: list[Job], machine: Machine, address: str | None, done: _Progress) -> None:
    from placer.sweep.cluster import check_task_cpus, ray_session

    with ray_session(address) as ray:
        check_task_cpus(ray, spec.config.workers, "solver.workers")
        captures, errors = _load(spec, _needed(pending), machine)
        refs = {name: ray.put(cap) for name, cap in captures.items()}
        captures.clear()  # the object store holds them now
        machine_ref = ray.put(machine)
        task = ray.remote(execute_job)
        futures: dict[Any, Job] = {}
        # CP-SAT jobs first: the long tasks start early and the short greedy ones fill the gaps at the end
        for job in sorted(pending, key=lambda j: j.mode != SelectionMode.CPSAT):
            if job.workload in errors:
                done(job, JobOutput(error=errors[job.workload]))
                continue
            cpus = spec.config.workers if job.mode == SelectionMode.CPSAT else 1
            # one retry when the worker died (killed, out of memory); an exception in the job is never retried
            ref = task.options(num_cpus=cpus, max_retries=1).remote(job, refs[job.workload], machine_ref, spec.config)
            futures[ref] = job
        while futures:
            ready, _ = ray.wait(list(futures), num_returns=1)
            job = futures.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except ray.exceptions.RayError as exc:  # the worker died (killed, out of memory): that job fails
                result = JobOutput(error=f"Ray: {failure_line(exc)}", detail=str(exc))
            done(job, result)
