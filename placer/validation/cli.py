"""``placer validate CAPTURE PLAN``: exit 0 valid, 1 invalid, 4 valid but over the budget; malformed input, or a
plan made for another capture or machine, raises InputError (exit 2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import typer

from placer.capture.io import capture_digest, read_capture
from placer.capture.model import Capture
from placer.errors import EXIT_INVALID, EXIT_OVER_BUDGET, InputError
from placer.fileio import read_json
from placer.machine import Machine, load_machine
from placer.progress import install
from placer.units import count_option, size_option
from placer.validation.plan import bind_plan, parse_plan
from placer.validation.validator import validate


def check_provenance(doc: Any, capture: Capture, capture_path: Path, machine: Machine, plan_path: Path) -> list[str]:
    """Refuse a plan recorded for another capture or machine; return notes for what the plan does not record."""
    notes = []
    rec = doc.get("capture") if isinstance(doc, dict) else None
    if isinstance(rec, dict) and "sha256" in rec:
        digest = capture_digest(capture)
        if rec["sha256"] != digest:
            raise InputError(f"the plan was made for another capture (sha256 {str(rec['sha256'])[:16]}…, "
                             f"{rec.get('transfers', '?')} transfers); {capture_path} has sha256 {digest[:16]}… "
                             f"({capture.transfer_count()} transfers)", path=str(plan_path), where="capture.sha256")
    else:
        notes.append("note: the plan records no capture digest; it is checked against this capture as given")
    recorded = doc.get("machine_sha256") if isinstance(doc, dict) else None
    if recorded is not None:
        if recorded != machine.digest():
            raise InputError(f"the plan was made for machine {doc.get('machine')!r} (sha256 {str(recorded)[:16]}…); "
                             f"--machine {machine.name!r} has sha256 {machine.digest()[:16]}…: pass the machine "
                             "the plan was made for", path=str(plan_path), where="machine_sha256")
    else:
        notes.append("note: the plan records no machine digest; it is checked against --machine as given")
    return notes


def validate_command(
    capture: Path = typer.Argument(..., help="The original capture (.json or .json.gz)."),
    plan: Path = typer.Argument(..., help="The plan to check (.json or .json.gz)."),
    machine: str = typer.Option("ipu21", "--machine", help="Bundled machine name or a machine TOML file."),
    budget: str = typer.Option(None, "--budget", help="Table budget per tile to check against (default: the "
                                                      "machine's, not the budget the plan records)."),
    fragments: int = typer.Option(None, "--fragments", help="Fragment limit per tile (default: the machine's)."),
    json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Check a plan against the original capture and the machine, independently of the code that produced it.

    The budget checked is --budget/--fragments or the machine's; the plan's own record is not trusted. Exit codes:
    0 valid; 1 invalid; 2 malformed, or made for another capture or machine; 4 valid but over the budget.
    """
    install(quiet)
    mach = load_machine(machine)
    table = size_option(budget, "--budget") if budget is not None else mach.budget.table_bytes
    frag = count_option(fragments, "--fragments") if fragments is not None else mach.budget.fragments
    cap = read_capture(capture)
    doc = read_json(plan)
    # parsed here rather than in validate() so that every InputError names the plan file
    parsed = parse_plan(doc, str(plan))
    notes = check_provenance(doc, cap, capture, mach, plan)  # before binding: a foreign plan fails here, named
    bind_plan(parsed, cap, str(plan))
    recorded = (parsed.table_bytes, parsed.fragments)
    parsed.table_bytes, parsed.fragments = table, frag
    report = validate(cap, parsed, mach)
    if recorded != (table, frag):
        notes.append(f"note: the plan records budget {recorded[0]:,} bytes / {recorded[1]:,} fragments; checked "
                     f"against {table:,} / {frag:,}")
    if json:
        out = report.to_json()
        out["notes"] = notes
        typer.echo(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
    else:
        for line in [*report.lines(), *notes]:
            typer.echo(line)
    if not report.valid:
        only_budget = all(e.startswith("budget:") for e in report.errors)
        raise typer.Exit(EXIT_OVER_BUDGET if only_budget else EXIT_INVALID)
