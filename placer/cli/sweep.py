"""``placer sweep SPEC.toml -o results/``: every (workload × budget × mode × objective × seed) job, as Ray tasks or
serially, each plan checked by the independent validator, one combined table.

Only typer and the standard library are imported at start-up; the solver stack and Ray load when a sweep runs.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import typer

from placer.errors import ExitCode
from placer.progress import TIMESTAMP, install


def sweep(
    spec: Path = typer.Argument(..., help="Sweep file (TOML): workloads, budgets, modes, objectives, seeds "
                                          "and the solver table. See docs/sweep.md."),
    output: Path = typer.Option(..., "-o", "--output", help="Results folder: jobs/JOB/plan.json.gz, validation.json, "
                                "summary.json; sweep.csv, sweep.json. Finished jobs found there are not run again."),
    address: str = typer.Option(None, "--address", help="Join this Ray cluster (HOST:PORT or ray://HOST:PORT). "
                                "Default: RAY_ADDRESS if set, else a local Ray instance sized to this machine."),
    serial: bool = typer.Option(False, "--serial", help="Run every job in this process, without Ray (same "
                                "results)."),
    json: bool = typer.Option(False, "--json", help="Print the combined table as JSON (sweep.json's rows)."),
    report: bool = typer.Option(False, "--report", help="Also write results/report.html: per workload, the "
                                "production rule against CP-SAT at every budget, and every job (needs the report "
                                "extra)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No line per finished job."),
    yes: bool = typer.Option(False, "--yes", help="Run a sweep of more than 1,000 jobs (never more than 100,000)."),
) -> None:
    """Run a sweep of relay-selection jobs (on Ray, or --serial) and write one combined table.

    Exit codes: 0 every job ran and the validator agrees with every plan's fit; 1 a job failed or a plan's
    verdict disagrees; 2 a malformed sweep file, or more than 1,000 jobs without --yes.
    """
    from placer.sweep.runner import run_sweep
    from placer.sweep.spec import check_job_count, load_spec

    if serial and address is not None:
        from placer.errors import InputError

        raise InputError("--serial runs without Ray; drop --address (or --serial)")
    parsed = load_spec(spec)
    count = check_job_count(parsed, confirmed=yes)
    from placer.sweep.results import check_output_dir

    check_output_dir(output)  # before any line is printed or any job runs
    if report:
        _need_report_extra()
    show = not quiet and not json
    install(not show)  # serial jobs show their own steps (load, CP-SAT stages) as every command does
    stamp = not sys.stderr.isatty()

    def say(line: str) -> None:
        # one line per finished job, timestamped in logs like every other progress line
        if show:
            typer.echo(f"{time.strftime(TIMESTAMP)} {line}" if stamp else line, err=True)

    say(f"{spec}: {count} jobs over {len(parsed.workloads)} workload(s), modes "
        f"{', '.join(parsed.modes)}; CP-SAT {parsed.config.workers} worker(s) and {parsed.config.time_limit:g} s "
        f"per job, {'serial' if serial else 'on Ray'}")
    run = run_sweep(parsed, output, use_ray=not serial, address=address, report=say)
    disagree = [r["job"] for r in run.rows if r["state"] == "ok" and bool(r["fits"]) != bool(r["valid"])]
    if report:
        from placer.sweep.report import write_report

        size = write_report(parsed, run.rows, output / "report.html")
        say(f"{output / 'report.html'}: {size / 1e6:.1f} MB")
    if json:
        from placer.fileio import print_json

        print_json(run.rows)
    else:
        typer.echo(render_rows(run.rows))
        typer.echo(f"{len(run.ran)} ran, {len(run.skipped)} already finished, {len(run.failed)} failed in "
                   f"{run.seconds:.1f} s; table in {output / 'sweep.csv'} and {output / 'sweep.json'}")
    for job_id, error in run.failed:
        typer.echo(f"job {job_id} failed: {error}", err=True)
    for job_id in disagree:
        typer.echo(f"job {job_id}: the validator's verdict disagrees with the solver's (see its validation.json)",
                   err=True)
    if run.failed or disagree:
        raise typer.Exit(ExitCode.INVALID)  # a job failed, or the validator disagrees with the solver


def _need_report_extra() -> None:
    from placer.errors import InputError

    try:
        import plotly  # noqa: F401
    except ImportError:
        raise InputError("--report needs plotly: pip install -e '.[report]'") from None


def render_rows(rows: list[dict[str, Any]]) -> str:
    from placer.report.table import render
    from placer.units import format_size

    body = []
    for r in rows:
        if r["state"] != "ok":
            body.append([r["workload"], format_size(r["budget"]), r["mode"], r["objective"] or "", r["seed"],
                         r["state"].upper(), "", "", "", "", "", r["seconds"]])
            continue
        body.append([r["workload"], format_size(r["budget"]), r["mode"], r["objective"] or "", r["seed"],
                     "fits" if r["fits"] else "over", r["table"], r["cycles"], r["greedy_table"],
                     r["solver_status"], "yes" if r["valid"] else "NO", r["seconds"]])
    return render(["workload", "budget", "mode", "objective", "seed", "result", "worst tile B", "cycles",
                   "greedy worst B", "cp-sat", "valid", "s"], body)
