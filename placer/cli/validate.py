"""``placer validate CAPTURE PLAN``: exit 0 valid, 1 invalid, 4 valid but over the budget; malformed input, or a
plan made for another capture or machine, raises InputError (exit 2)."""

from __future__ import annotations

from pathlib import Path

import typer

from placer import api
from placer.cli import options
from placer.fileio import print_json
from placer.machine import load_machine
from placer.progress import install
from placer.units import count_option, size_option


def validate_command(
    capture: Path = typer.Argument(..., help="The original capture (.json or .json.gz)."),
    plan: Path = typer.Argument(..., help="The plan to check (.json or .json.gz)."),
    machine: str = options.machine(),
    budget: str = options.budget("Table budget per tile to check against (default: the machine's, not the "
                                 "budget the plan records)."),
    fragments: int = options.fragments(),
    order: Path = typer.Option(None, "--order", help="Also check an order file for the plan's program (placer "
                               "solve --schedule -o writes PLAN.order.json): every phase's order against the "
                               "dependencies and the reference's rules, and its recorded horizon."),
    json: bool = options.json("the report"),
    quiet: bool = options.quiet(),
) -> None:
    """Check a plan against the original capture and the machine, independently of the code that produced it.

    The budget checked is --budget/--fragments or the machine's; the plan's own record is not trusted. Exit codes:
    0 valid; 1 invalid; 2 malformed, or made for another capture or machine; 4 valid but over the budget.
    """
    install(quiet)
    mach = load_machine(machine)
    table = size_option(budget, "--budget") if budget is not None else mach.budget.table_bytes
    frag = count_option(fragments, "--fragments") if fragments is not None else mach.budget.fragments
    result = api.validate(capture, plan, mach, budget=table, fragments=frag, order=order)
    if json:
        print_json(result.to_json())
    else:
        for line in result.lines():
            typer.echo(line)
    if not result.valid:
        raise typer.Exit(result.exit_code)
