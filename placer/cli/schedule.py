"""``placer schedule``: order the exchange streams of a capture's phases and report how good the order is."""

from __future__ import annotations

from pathlib import Path

import typer

from placer import api
from placer.cli import options
from placer.errors import InputError
from placer.fileio import check_output, print_json, write_json
from placer.machine import load_machine
from placer.modes import ScheduleMode
from placer.ordering.schedule import RULES, PhaseSchedule
from placer.progress import install
from placer.report.table import render


def schedule(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    phase: int | None = typer.Option(None, "--phase", help="Only this phase id (default: every phase)."),
    mode: ScheduleMode = typer.Option(ScheduleMode.GREEDY, "--mode",
                                      help="greedy: the production B1024 rule; cpsat: improve it with CP-SAT."),
    time_limit: float | None = options.time_limit("CP-SAT seconds per phase, cpsat mode", "ordering"),
    workers: int | None = options.workers(),
    seed: int | None = options.seed("Random seed (CP-SAT and neighbourhood choice; default 0)."),
    params: Path | None = options.params(),
    wave_words: int = typer.Option(1024, "--wave-words", help="Largest chunk of a stream per wave, in words."),
    rules: str = typer.Option("reference", "--rules", help="reference: the reference compiler's own order and "
                              "timing, transfer by transfer (its B1024 figures); model: placer's chunk model of the "
                              "exchange (faster; the model CP-SAT improves in)."),
    machine: str = options.machine(),
    json: bool = options.json("the schedules"),
    check: bool = typer.Option(True, "--check/--no-check", help="Verify every schedule with the independent "
                                                               "checker (exit 1 if one is invalid)."),
    quiet: bool = options.quiet(),
    ray: str | None = options.ray(),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write each scheduled phase's order (the best "
                                       "found; B1024's in greedy mode) as an order file (docs/plan.md); reference "
                                       "rules only."),
    replay: Path | None = typer.Option(None, "--replay", help="Replay an order file instead of scheduling: time "
                                       "each phase's order by the reference's rules, check it, and compare its "
                                       "horizon with the one recorded (exit 1 if any differs or breaks a rule)."),
) -> None:
    """Schedule each phase's streams; print transfers, chunks, horizons, lower bound, gap and time per phase.

    Horizons and bounds are exchange cycles without the phase's sync. The estimate is the cost model's
    analytical cycles (also without sync); table bytes are the worst tile's, timed (delay rows included) vs
    estimated.
    """
    install(quiet)
    if replay is not None:
        _replay(capture, replay, machine, json)
        return
    if output is not None:
        if rules != "reference":
            raise InputError("-o writes an order for the reference's rules only: drop --rules model",
                             where="--output")
        output = check_output(output, "-o", inputs=(capture, params, machine))
    if wave_words < 1:
        raise InputError(f"--wave-words must be at least 1, got {wave_words}")
    if rules not in RULES:
        raise InputError(f"--rules must be one of {', '.join(RULES)}, got {rules!r}")
    solver_params = options.solver_params("ordering", params, time_limit, workers, seed)
    mach = load_machine(machine)
    result = api.schedule(capture, mach, phases=[phase] if phase is not None else None, mode=mode,
                          params=solver_params, wave_words=wave_words, rules=rules, check=check, ray=ray)
    if json:
        print_json(result.to_json())
    else:
        typer.echo(render(_headers(mode), [_row(ps, mode) for ps in result.phases],
                          title=f"stream schedule ({mode.value}, {rules} rules, machine {mach.name}; cycles "
                                "without sync)"))
        if mode == ScheduleMode.CPSAT:
            for ps in result.phases:
                if ps.cpsat is not None:
                    typer.echo(f"phase {ps.phase}: {ps.method}: {ps.cpsat.describe()}")
    for pid, problems in result.invalid.items():
        for line in problems:
            typer.echo(f"phase {pid}: INVALID: {line}", err=True)
    if output is not None:
        write_json(output, result.order_json())
        if not json:
            typer.echo(f"order written to {output}")
    if not result.valid:
        raise typer.Exit(result.exit_code)


def _replay(capture: Path, order: Path, machine: str, json: bool) -> None:
    """``--replay``: each phase's order timed by the reference's rules and checked."""
    result = api.replay(capture, order, load_machine(machine))
    if json:
        print_json(result.to_json())
    else:
        typer.echo(render(["phase", "horizon", "recorded", "checked"],
                          [[r.phase, r.horizon, r.recorded, "ok" if r.valid else "INVALID"] for r in result.phases],
                          title=f"order {order} replayed by the reference's rules (cycles without sync):"))
        typer.echo(f"Σ horizon {sum(r.horizon for r in result.phases):,} cycles")
    for line in result.problems:
        typer.echo(f"INVALID: {line}", err=True)
    if not result.valid:
        raise typer.Exit(result.exit_code)


def _headers(mode: str) -> list[str]:
    h = ["phase", "transfers", "chunks", "greedy"]
    if mode == ScheduleMode.CPSAT:
        h.append("cp-sat")
    return [*h, "lower bound", "bound kind", "gap", "estimate", "table (timed)", "table (model)", "time s"]


def _row(ps: PhaseSchedule, mode: str) -> list[object]:
    row: list[object] = [ps.phase, ps.transfers, ps.chunks, ps.greedy_horizon]
    if mode == ScheduleMode.CPSAT:
        row.append(ps.horizon)
    return [*row, ps.lower, ps.lower_kind, f"{ps.gap:.1%}", ps.estimate_cycles, ps.table_worst,
            ps.estimate_table_worst, round(ps.seconds, 2)]
