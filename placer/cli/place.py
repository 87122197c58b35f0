"""``placer place FILE``: place one tile's buffers (reference dump or MiniMalloc CSV), or prove it impossible.

Exit codes: 0 placed (and verified), 3 proved infeasible, 4 unknown (time limit without placement or proof);
malformed input raises :class:`InputError`, which the top-level CLI turns into one line and exit code 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import typer

from placer import api
from placer.cli import options
from placer.clock import command_start
from placer.errors import InputError
from placer.fileio import check_output, print_json
from placer.modes import PlacementMode
from placer.progress import install
from placer.solver import SolverParams
from placer.units import MAX_ADDRESS, size_option

OUTPUT_SHARE = 0.97  # of --time-limit, when the engines stop: the rest is the checker and the output


def place(
    file: Path = typer.Argument(..., help="A placement dump (.json, 'version 1') or a MiniMalloc CSV."),
    more: list[Path] | None = typer.Argument(None, help="More files, each one tile's buffers, placed independently "
                                             "(one line or JSON object per file)."),
    capacity: str | None = typer.Option(None, "--capacity", help="MiniMalloc capacity (default: from the file "
                                        "name, e.g. A.1048576.csv); bytes or KiB/MiB."),
    time_limit: float | None = options.time_limit("Seconds for the exact engines", "placement"),
    workers: int | None = options.workers(),
    seed: int | None = options.seed(),
    params: Path | None = options.params(),
    mode: PlacementMode = typer.Option(PlacementMode.EXACT, "--mode", help="greedy (production allocator only) or "
                                       "exact."),
    json: bool = options.json(),
    ray: str | None = options.ray(),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the placement: .json, or .csv "
                                       "(MiniMalloc's columns plus offset)."),
    quiet: bool = options.quiet(),
) -> None:
    """Place one tile's buffers, or prove that they cannot be placed."""
    install(quiet)
    if output is not None:
        output = check_output(output, "-o", inputs=(file, params))
    cap = size_option(capacity, "--capacity", maximum=MAX_ADDRESS) if capacity is not None else None
    solver_params = options.solver_params("placement", params, time_limit, workers, seed)
    if more or ray is not None:
        if output is not None:
            raise InputError("-o takes one input file; with several (or --ray) use --json", where="--output")
        raise typer.Exit(place_many([file, *(more or [])], cap, solver_params, mode, json, ray))
    # the limit bounds the whole command: reading, the engines, the production allocator's report line
    deadline = command_start() + solver_params.time_limit * OUTPUT_SHARE
    # the production allocator's line is printed, not part of --json: run it (if the engines skipped it) for text
    placed = api.place(file, capacity=cap, mode=mode, params=solver_params, deadline=deadline, allocator=not json)
    problem, result = placed.problem, placed.result
    if output is not None and result.placed:  # no placement, no file (exit 3 or 4 says why)
        placed.write(output)
    if json:
        print_json(placed.to_json(placements=output is None))
    else:
        typer.echo(f"{file}: {problem.n} requests, {len(problem.ranges)} free range(s), capacity "
                   f"{problem.capacity:,} bytes")
        typer.echo(f"status: {'placed' if result.placed else result.status.value}  (engine {result.engine}, "
                   f"{result.runtime:.3f} s)")
        if result.placed:
            typer.echo(f"peak address: {result.objective:#x} ({result.objective:,}); verified by the checker")
        if result.reason:
            typer.echo(f"reason: {result.reason}")
        if placed.allocator:
            typer.echo(f"production allocator: {placed.allocator}")
        if output is not None and result.placed:
            typer.echo(f"wrote {output}")
        elif output is not None:
            typer.echo(f"nothing written to {output}: no placement")
    raise typer.Exit(placed.exit_code)


def place_many(files: Sequence[Path], capacity: int | None, params: SolverParams, mode: PlacementMode, json: bool,
               ray: str | None) -> int:
    """`placer place` over several files (each one tile's buffers), in turn or (``ray`` given) as Ray tasks
    (:func:`placer.api.place_many`): one line (or one JSON object) per file. Returns the command's exit code: 0
    when every file was placed, else 4 if any is unknown, else 3."""
    placed = api.place_many(files, capacity=capacity, mode=mode, params=params, ray=ray)
    if json:
        print_json(placed.to_json())
    else:
        for line in placed.lines():
            typer.echo(line)
    return placed.exit_code
