"""``placer inspect``: what a capture costs, phase by phase, against the budgets (:func:`placer.api.inspect`)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import typer

from placer import api
from placer.cli import options
from placer.fileio import print_json
from placer.progress import install
from placer.report.inspect import describe_groups
from placer.report.table import render
from placer.units import format_size, size_option


def inspect(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    machine: str = options.machine(),
    budget: str = options.budget("Table budget per tile, e.g. 80KiB (default: the machine's)."),
    json: bool = options.json("the same summary"),
    quiet: bool = options.quiet(),
) -> None:
    """Per phase: transfers, words, multicast groups, worst-tile table bytes, fragments, cycles; then the program.

    Exit codes: 0 fits; 4 DOES NOT FIT (table budget or fragment limit).
    """
    install(quiet)
    table_budget = size_option(budget, "--budget") if budget is not None else None
    result = api.inspect(capture, machine, budget=table_budget)
    summary = result.to_json()
    if json:
        print_json(summary)
        if not result.fits:
            raise typer.Exit(result.exit_code)
        return
    rows = [
        [p["phase"], p["label"], p["transfers"], p["words"], p["payload_bytes"] / 2**20,
         describe_groups(Counter({int(k): v for k, v in p["multicast_groups"].items()})), p["worst_tile"],
         p["worst_table_bytes"], p["worst_fragments"], p["cycles"]]
        for p in summary["phases"]
    ]
    typer.echo(render(["phase", "label", "transfers", "words", "MiB", "groups (n×replicas)", "worst tile",
                       "table B", "frags", "cycles"], rows))
    prog = summary["program"]
    verdict = "fits" if prog["fits"] else "DOES NOT FIT"
    typer.echo(
        f"\nprogram: {prog['transfers']:,} transfers; worst tile {prog['worst_tile']}: "
        f"{prog['worst_table_bytes']:,} table bytes / {format_size(prog['table_budget'])} budget (per-tile worst, "
        f"what the budget is checked against; shared phase tables save {prog['shared_savings_bytes']:,} B there); "
        f"row estimate (Σ of phase maxima, no sharing) {prog['row_estimate_bytes']:,} B; "
        f"fragment maximum {prog['worst_fragments']:,} / {prog['fragment_limit']:,} "
        f"(tile {prog['worst_fragment_tile']}); {prog['cycles']:,} cycles ({prog['ms']:.3f} ms); "
        + (f"{prog['memory_line']}; " if "memory_line" in prog else "") + verdict
    )
    if not result.fits:
        raise typer.Exit(result.exit_code)
