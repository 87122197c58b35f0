"""``placer place FILE``: place one tile's buffers (reference dump or MiniMalloc CSV), or prove it impossible.

Exit codes: 0 placed (and verified), 3 proved infeasible, 4 unknown (time limit without placement or proof);
malformed input raises :class:`InputError`, which the top-level CLI turns into one line and exit code 2.
"""

from __future__ import annotations

import json as jsonlib
from pathlib import Path

import typer

from placer.errors import InputError
from placer.fileio import check_output
from placer.placement.api import solve_placement
from placer.placement.checker import check_placement
from placer.placement.formats import read_problem, solution_json, write_solution
from placer.progress import install, task
from placer.solver import SolverParams, Status
from placer.units import size_option

MAX_ADDRESS = 2**32 - 1  # a tile address is 32 bits

EXIT_PLACED = 0
EXIT_INFEASIBLE = 3
EXIT_UNKNOWN = 4


def place(
    file: Path = typer.Argument(..., help="A placement dump (.json, 'version 1') or a MiniMalloc CSV."),
    more: list[Path] | None = typer.Argument(None, help="More files, each one tile's buffers, placed independently "
                                             "(one line or JSON object per file)."),
    capacity: str | None = typer.Option(None, "--capacity", help="MiniMalloc capacity (default: from the file "
                                        "name, e.g. A.1048576.csv); bytes or KiB/MiB."),
    time_limit: float = typer.Option(60.0, "--time-limit", help="Seconds for the exact engines."),
    workers: int = typer.Option(2, "--workers", help="CP-SAT worker threads."),
    seed: int = typer.Option(0, "--seed", help="CP-SAT random seed."),
    mode: str = typer.Option("exact", "--mode", help="greedy (production allocator only) or exact."),
    json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout (no progress)."),
    ray: str | None = typer.Option(None, "--ray", help="Place the files as Ray tasks: auto (a local instance sized "
                                   "to this machine, or RAY_ADDRESS) or a cluster address. Same results as without."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the placement: .json, or .csv "
                                       "(MiniMalloc's columns plus offset)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Place one tile's buffers, or prove that they cannot be placed."""
    install(quiet)
    if mode not in ("greedy", "exact"):
        raise InputError(f"--mode must be greedy or exact, got {mode!r}")
    if output is not None:
        output = check_output(output, "-o", inputs=(file,))
    cap = size_option(capacity, "--capacity", maximum=MAX_ADDRESS) if capacity is not None else None
    params = SolverParams().with_overrides(time_limit=time_limit, workers=workers, seed=seed)
    if more or ray is not None:
        if output is not None:
            raise InputError("-o takes one input file; with several (or --ray) use --json", where="--output")
        from placer.sweep.fanout import place_many

        raise typer.Exit(place_many([file, *(more or [])], cap, params, mode, json, ray))
    problem = read_problem(file, capacity=cap)
    with task(f"place {problem.n:,} buffers ({mode})") as shown:
        result = solve_placement(problem, params, mode=mode,
                                 progress=lambda engine, elapsed, status: shown.advance(0, f"{engine}: {status}"))
    verified = None
    if result.addresses is not None:
        errors = check_placement(problem, result.addresses)
        if errors:  # never print or write a placement the independent checker rejects
            raise RuntimeError(f"internal error: placement failed the checker: {errors[0]}")
        verified = True
    if output is not None and result.placed:  # no placement, no file (exit 3 or 4 says why)
        write_solution(output, problem, result)
    if json:
        payload = solution_json(problem, result) if output is None else {"problem": problem.name, **result.to_json()}
        payload["verified"] = verified
        typer.echo(jsonlib.dumps(payload, indent=2))
    else:
        typer.echo(f"{file}: {problem.n} requests, {len(problem.ranges)} free range(s), capacity "
                   f"{problem.capacity:,} bytes")
        typer.echo(f"status: {'placed' if result.placed else result.status.value}  (engine {result.engine}, "
                   f"{result.runtime:.3f} s)")
        if result.placed:
            typer.echo(f"peak address: {result.objective:#x} ({result.objective:,}); verified by the checker")
        if result.reason:
            typer.echo(f"reason: {result.reason}")
        greedy = result.greedy
        if greedy is None and mode == "exact" and problem.n:  # large flat problems skip the mirror: report it here
            from placer.placement.greedy import greedy_place

            greedy = greedy_place(problem).describe()
        if greedy:
            typer.echo(f"production allocator: {greedy}")
        if output is not None and result.placed:
            typer.echo(f"wrote {output}")
        elif output is not None:
            typer.echo(f"nothing written to {output}: no placement")
    if result.placed:
        raise typer.Exit(EXIT_PLACED)
    raise typer.Exit(EXIT_INFEASIBLE if result.status is Status.INFEASIBLE else EXIT_UNKNOWN)
