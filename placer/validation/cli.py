"""``placer validate CAPTURE PLAN``: exit 0 valid, 1 invalid; malformed input raises InputError (exit 2)."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer

from placer.capture.io import read_capture
from placer.fileio import read_json
from placer.machine import load_machine
from placer.progress import install
from placer.validation.plan import bind_plan, parse_plan
from placer.validation.validator import validate


def validate_command(
    capture: Path = typer.Argument(..., help="The original capture (.json or .json.gz)."),
    plan: Path = typer.Argument(..., help="The plan to check (.json or .json.gz)."),
    machine: str = typer.Option("ipu21", "--machine", help="Bundled machine name or a machine TOML file."),
    json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Check a plan against the original capture, independently of the code that produced it."""
    install(quiet)
    mach = load_machine(machine)
    cap = read_capture(capture)
    # parsed here rather than in validate() so that every InputError names the plan file
    parsed = parse_plan(read_json(plan), str(plan))
    bind_plan(parsed, cap, str(plan))
    report = validate(cap, parsed, mach)
    if json:
        typer.echo(orjson.dumps(report.to_json(), option=orjson.OPT_INDENT_2).decode())
    else:
        for line in report.lines():
            typer.echo(line)
    if not report.valid:
        raise typer.Exit(1)
