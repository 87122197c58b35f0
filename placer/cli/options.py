"""The options several commands share, declared once: the same flag, the same check, the same words in --help.

Each is a function returning a fresh ``typer.Option`` (typer binds an option object to one parameter), used as the
parameter's default: ``machine: str = options.machine()``. The solver flags default to ``None``: the run
configuration (``--params``, ``placer.solver.RunConfig``) supplies the value, the flag overrides it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from placer.solver import RunConfig, SolverParams


def machine() -> Any:
    return typer.Option("ipu21", "--machine", help="Bundled machine (ipu21, mk1) or a machine TOML file.")


def budget(help: str = "Exchange-table budget per tile, e.g. 80KiB (default: the machine's).") -> Any:
    return typer.Option(None, "--budget", help=help)


def fragments() -> Any:
    return typer.Option(None, "--fragments", help="Fragment limit per tile (default: the machine's).")


def params() -> Any:
    return typer.Option(None, "--params", help="Run configuration TOML: CP-SAT parameters per stage (see "
                        "placer/params/default.toml).")


def time_limit(what: str, stage: str) -> Any:
    default = getattr(RunConfig.load(), stage).time_limit  # the help says what the bundled configuration holds
    return typer.Option(None, "--time-limit", help=f"{what} (default {default:g}, from the run configuration).")


def workers() -> Any:
    return typer.Option(None, "--workers", help="CP-SAT worker threads (default 2, from the run configuration).")


def seed(help: str = "CP-SAT random seed (default 0).") -> Any:
    return typer.Option(None, "--seed", help=help)


def json(what: str = "the result") -> Any:
    return typer.Option(False, "--json", help=f"Print {what} as JSON (the API result, serialised).")


def quiet() -> Any:
    return typer.Option(False, "--quiet", "-q", help="No progress display.")


def ray() -> Any:
    return typer.Option(None, "--ray", help="Run the pieces as Ray tasks: auto (a local instance sized to this "
                        "machine, or RAY_ADDRESS) or a cluster address. Same results as without.")


def solver_params(stage: str, path: Path | None, time_limit: float | None, workers: int | None,
                  seed: int | None) -> SolverParams:
    """The stage's section of the run configuration (``--params``, or the bundled one) with the given flags on
    top; a flag out of range is an InputError naming it."""
    params: SolverParams = getattr(RunConfig.load(path), stage)
    return params.with_overrides(time_limit=time_limit, workers=workers, seed=seed)
