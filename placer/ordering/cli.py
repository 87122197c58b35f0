"""``placer schedule``: order the exchange streams of a capture's phases and report how good the order is."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

import orjson
import typer

from placer.capture.io import read_capture
from placer.errors import InputError
from placer.machine import load_machine
from placer.ordering.check import check_schedule
from placer.ordering.schedule import OrderingParams, PhaseSchedule, schedule_capture
from placer.progress import install, task, track
from placer.report.table import render
from placer.solver import SolverParams


class ScheduleMode(StrEnum):
    greedy = "greedy"
    cpsat = "cpsat"


def schedule(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    phase: int | None = typer.Option(None, "--phase", help="Only this phase id (default: every phase)."),
    mode: ScheduleMode = typer.Option(ScheduleMode.greedy, "--mode",
                                      help="greedy: the production B1024 rule; cpsat: improve it with CP-SAT."),
    time_limit: float = typer.Option(10.0, "--time-limit", help="CP-SAT seconds per phase (cpsat mode)."),
    workers: int = typer.Option(2, "--workers", help="CP-SAT worker threads."),
    seed: int = typer.Option(0, "--seed", help="Random seed (CP-SAT and neighbourhood choice)."),
    wave_words: int = typer.Option(1024, "--wave-words", help="Largest chunk of a stream per wave, in words."),
    machine: str = typer.Option("ipu21", "--machine", help="Bundled machine name or a machine TOML file."),
    json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    check: bool = typer.Option(True, "--check/--no-check", help="Verify every schedule with the independent "
                                                               "checker (exit 1 if one is invalid)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
    ray: str = typer.Option(None, "--ray", help="Schedule the phases as Ray tasks: auto (a local instance sized to "
                            "this machine, or RAY_ADDRESS) or a cluster address. Same results as without."),
) -> None:
    """Schedule each phase's streams; print transfers, chunks, horizons, lower bound, gap and time per phase.

    Horizons and bounds are exchange cycles without the phase's sync. The estimate is the cost model's
    analytical cycles (also without sync); table bytes are the worst tile's, timed (delay rows included) vs
    estimated.
    """
    install(quiet)
    if wave_words < 1:
        raise InputError(f"--wave-words must be at least 1, got {wave_words}")
    params = SolverParams(time_limit=10.0, workers=2).with_overrides(time_limit=time_limit, workers=workers,
                                                                       seed=seed)
    mach = load_machine(machine)
    cap = read_capture(capture)
    if phase is not None and phase not in cap.phase_ids():
        raise InputError(f"no phase {phase} (phases: {_ids(cap.phase_ids())})", path=str(capture))
    results: list[PhaseSchedule] = []
    phases = [phase] if phase is not None else cap.phase_ids()
    if ray is not None:
        from placer.sweep.fanout import schedule_phases

        with task(f"schedule {len(phases)} phase(s) as Ray tasks"):
            results = schedule_phases(cap, mach, mode.value, params, phases, OrderingParams(wave_words=wave_words),
                                      ray)
    for k, pid in enumerate(phases if ray is None else []):
        with task(f"schedule phase {pid} ({k + 1}/{len(phases)}, {cap.phase_by_id(pid).n:,} transfers)") as shown:
            results += schedule_capture(cap, mach, mode.value, params, phases=[pid],
                                        ordering=OrderingParams(wave_words=wave_words),
                                        progress=lambda _pid, elapsed, obj, bound, t=shown: t.solver(elapsed, obj,
                                                                                                     bound))

    invalid: dict[int, list[str]] = {}
    if check:
        for ps in track(results, "check schedules", unit="phases"):
            p = cap.phase_by_id(ps.phase)
            problems = check_schedule(p, ps.schedule.tx_start, ps.schedule.rx_start, ps.schedule.horizon, mach)
            if problems:
                invalid[ps.phase] = problems

    if json:
        doc = {"capture": str(capture), "machine": mach.name, "mode": mode.value,
               "phases": [dict(ps.to_json(), valid=(ps.phase not in invalid) if check else None)
                          for ps in results]}
        sys.stdout.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        typer.echo(render(_headers(mode.value), [_row(ps, mode.value) for ps in results],
                          title=f"stream schedule ({mode.value}, machine {mach.name}; cycles without sync)"))
        if mode.value == "cpsat":
            for ps in results:
                if ps.cpsat is not None:
                    typer.echo(f"phase {ps.phase}: {ps.method}: {ps.cpsat.describe()}")
    for pid, problems in invalid.items():
        for line in problems:
            typer.echo(f"phase {pid}: INVALID: {line}", err=True)
    if invalid:
        raise typer.Exit(1)


def _headers(mode: str) -> list[str]:
    h = ["phase", "transfers", "chunks", "greedy"]
    if mode == "cpsat":
        h.append("cp-sat")
    return [*h, "lower bound", "bound kind", "gap", "estimate", "table (timed)", "table (model)", "time s"]


def _row(ps: PhaseSchedule, mode: str) -> list[object]:
    row: list[object] = [ps.phase, ps.transfers, ps.chunks, ps.greedy_horizon]
    if mode == "cpsat":
        row.append(ps.horizon)
    return [*row, ps.lower, ps.lower_kind, f"{ps.gap:.1%}", ps.estimate_cycles, ps.table_worst,
            ps.estimate_table_worst, round(ps.seconds, 2)]


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")
