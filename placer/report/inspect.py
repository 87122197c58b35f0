"""``placer inspect``: what a capture costs, phase by phase, against the budgets."""

from __future__ import annotations

import json as jsonlib
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import typer

from placer.capture import read_capture
from placer.capture.model import Capture, Phase
from placer.cost.model import program_cost
from placer.errors import EXIT_OVER_BUDGET
from placer.machine import load_machine
from placer.progress import install, task, track
from placer.report.table import render
from placer.units import format_size, size_option


def multicast_groups(phase: Phase) -> Counter[int]:
    """Replica count -> number of distinct destination sets with at least two tiles."""
    if phase.n == 0:
        return Counter()
    ids = phase.dst_set_ids()
    first = np.unique(ids, return_index=True)[1]
    fan = phase.fanout[first]
    return Counter(int(f) for f in fan[fan >= 2])


def describe_groups(groups: Counter[int]) -> str:
    return ", ".join(f"{n}×{r}" for r, n in sorted(groups.items(), key=lambda kv: -kv[1] * kv[0])[:3]) + (
        " …" if len(groups) > 3 else ""
    )


def inspect_summary(capture: Capture, machine_name: str, budget: int | None) -> dict[str, Any]:
    machine = load_machine(machine_name)
    with task("cost model"):
        cost = program_cost(capture, machine)
    table_budget = machine.budget.table_bytes if budget is None else budget
    phases = []
    shared = cost.sharing.first_use >= 0 if cost.sharing is not None else None
    for pi, (phase, pc, iters) in enumerate(track(zip(capture.phases, cost.phases, cost.iterations, strict=True),
                                                  "multicast groups", len(capture.phases), "phases")):
        groups = multicast_groups(phase)
        phases.append({
            "phase": phase.phase,
            "label": capture.label(phase.phase),
            "transfers": phase.n,
            "words": int(phase.words.sum()),
            "payload_bytes": phase.payload_bytes(),
            "multicast_groups": {str(r): n for r, n in sorted(groups.items())},
            "worst_tile": pc.worst_tile(),
            "worst_table_bytes": pc.worst_table(),
            "worst_fragments": int(pc.fragments.max(initial=0)),
            "cycles": pc.cycles,
            "iterations": iters,
            # tiles whose row in this phase reuses an earlier phase's table (BRIEF §3, shared phase tables)
            "shared_tiles": int(shared[pi].sum()) if shared is not None else 0,
        })
    worst = cost.worst_tile()
    return {
        "tile_count": capture.tile_count,
        "machine": machine.name,
        "phases": phases,
        "program": {
            "transfers": capture.transfer_count(),
            "worst_tile": worst,
            "worst_table_bytes": cost.worst_table(),
            "shared_savings_bytes": cost.shared_savings(),
            "row_estimate_bytes": cost.row_estimate,
            "table_budget": table_budget,
            "worst_fragment_tile": int(np.argmax(cost.fragments)),
            "worst_fragments": cost.worst_fragments(),
            "fragment_limit": machine.budget.fragments,
            "fits": cost.fits(table_budget),
            "cycles": cost.cycles,
            "ms": machine.cycles_to_ms(cost.cycles),
        },
    }


def inspect(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    machine: str = typer.Option("ipu21", help="Bundled machine name (ipu21, mk1) or a machine TOML file."),
    budget: str = typer.Option(None, help="Table budget per tile, e.g. 80KiB (default: the machine's)."),
    json: bool = typer.Option(False, "--json", help="Print the same summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Per phase: transfers, words, multicast groups, worst-tile table bytes, fragments, cycles; then the program.

    Exit codes: 0 fits; 4 DOES NOT FIT (table budget or fragment limit).
    """
    install(quiet)
    table_budget = size_option(budget, "--budget") if budget is not None else None
    summary = inspect_summary(read_capture(capture), machine, table_budget)
    if json:
        typer.echo(jsonlib.dumps(summary, indent=2))
        if not summary["program"]["fits"]:
            raise typer.Exit(EXIT_OVER_BUDGET)
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
        f"(tile {prog['worst_fragment_tile']}); {prog['cycles']:,} cycles ({prog['ms']:.3f} ms); {verdict}"
    )
    if not prog["fits"]:
        raise typer.Exit(EXIT_OVER_BUDGET)
