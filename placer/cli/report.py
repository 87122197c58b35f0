"""``placer report CAPTURE [PLAN]... -o report.html``: the pictures of a capture and its plans (docs/report.md),
through :func:`placer.api.report`.

Plotting libraries are imported only by the modules that command loads, never by ``placer`` itself, so the other
commands start as fast without the ``[report]`` extra as with it.
"""

from __future__ import annotations

from pathlib import Path

import typer

from placer import api
from placer.cli import options
from placer.fileio import check_output, check_output_dir
from placer.progress import install
from placer.units import size_option


def report(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    plans: list[Path] = typer.Argument(None, help="Plan file(s) from `placer solve -o` (up to two: the production "
                                                  "rule's and CP-SAT's are drawn side by side)."),
    output: Path = typer.Option(..., "-o", "--output", help="The HTML page to write (self-contained)."),
    compare: Path = typer.Option(None, "--compare", help="`placer compare --json` output: adds the budget figure."),
    phase: int = typer.Option(None, "--phase", help="Phase of the schedule figure (default: the relayed phase "
                                                    "with the largest worst-tile table)."),
    tile: int = typer.Option(None, "--tile", help="Tile of the SRAM map (default: the busiest relay host)."),
    png: Path = typer.Option(None, "--png", help="Also write every figure as a PNG into this directory."),
    budget: str = options.budget("Budget to mark (default: the plan's, else the machine's)."),
    machine: str = options.machine(),
    quiet: bool = options.quiet(),
) -> None:
    """Write an interactive, self-contained HTML report: tile heatmap before/after, per-phase bytes and cycles,
    budget comparison, one phase's stream schedule per port, one tile's SRAM map. --png writes the same figures
    as PNG files."""
    from placer.report.page import need_extra

    install(quiet)
    need_extra()  # before any other check: without the extra, nothing else matters
    output = check_output(output, "-o", inputs=(capture, *(plans or []), compare))
    if png is not None:
        check_output_dir(png, "--png")  # before the page is written, not after
    mach = api.load_machine(machine)
    table_budget = size_option(budget, "--budget") if budget is not None else None
    result = api.report(capture, list(plans or []), output=output, compare=compare, phase=phase, tile=tile,
                        png=png, budget=table_budget, machine=mach)
    for line in result.lines():
        typer.echo(line)
