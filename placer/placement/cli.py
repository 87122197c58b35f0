"""``placer place FILE``: place one tile's buffers (reference dump or MiniMalloc CSV), or prove it impossible.

Exit codes: 0 placed (and verified), 3 proved infeasible, 4 unknown (time limit without placement or proof);
malformed input raises :class:`InputError`, which the top-level CLI turns into one line and exit code 2.
"""

from __future__ import annotations

import json as jsonlib
import sys
from pathlib import Path

import typer

from placer.errors import InputError
from placer.fileio import check_output
from placer.placement.api import solve_placement
from placer.placement.checker import check_placement
from placer.placement.formats import read_problem, solution_json, write_solution
from placer.solver import SolverParams, Status
from placer.units import size_option

MAX_ADDRESS = 2**32 - 1  # a tile address is 32 bits

EXIT_PLACED = 0
EXIT_INFEASIBLE = 3
EXIT_UNKNOWN = 4


def _progress(enabled: bool):  # type: ignore[no-untyped-def]
    if not enabled:
        return None
    state = {"last": -1.0}

    def show(engine: str, elapsed: float, status: str) -> None:
        if elapsed - state["last"] < 0.5:
            return
        state["last"] = elapsed
        sys.stderr.write(f"\r  {engine} {elapsed:6.1f}s  {status}        ")
        sys.stderr.flush()

    return show


def place(
    file: Path = typer.Argument(..., help="A placement dump (.json, 'version 1') or a MiniMalloc CSV."),
    capacity: str | None = typer.Option(None, "--capacity", help="MiniMalloc capacity (default: from the file "
                                        "name, e.g. A.1048576.csv); bytes or KiB/MiB."),
    time_limit: float = typer.Option(60.0, "--time-limit", help="Seconds for the exact engines."),
    workers: int = typer.Option(2, "--workers", help="CP-SAT worker threads."),
    seed: int = typer.Option(0, "--seed", help="CP-SAT random seed."),
    mode: str = typer.Option("exact", "--mode", help="greedy (production allocator only) or exact."),
    json: bool = typer.Option(False, "--json", help="Print the result as JSON on stdout (no progress)."),
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the placement: .json, or .csv "
                                       "(MiniMalloc's columns plus offset)."),
) -> None:
    """Place one tile's buffers, or prove that they cannot be placed."""
    if mode not in ("greedy", "exact"):
        raise InputError(f"--mode must be greedy or exact, got {mode!r}")
    if output is not None:
        output = check_output(output, "-o", inputs=(file,))
    cap = size_option(capacity, "--capacity", maximum=MAX_ADDRESS) if capacity is not None else None
    params = SolverParams().with_overrides(time_limit=time_limit, workers=workers, seed=seed)
    problem = read_problem(file, capacity=cap)
    show = _progress(not json)
    result = solve_placement(problem, params, mode=mode, progress=show)  # type: ignore[arg-type]
    if show is not None:
        sys.stderr.write("\r" + " " * 60 + "\r")
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
        if result.greedy:
            typer.echo(f"production allocator: {result.greedy}")
        if output is not None and result.placed:
            typer.echo(f"wrote {output}")
        elif output is not None:
            typer.echo(f"nothing written to {output}: no placement")
    if result.placed:
        raise typer.Exit(EXIT_PLACED)
    raise typer.Exit(EXIT_INFEASIBLE if result.status is Status.INFEASIBLE else EXIT_UNKNOWN)
