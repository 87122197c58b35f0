"""``placer report CAPTURE [PLAN]... -o report.html``: the pictures of a capture and its plans (docs/report.md).

Plotting libraries are imported only here and in the modules this command loads, never by ``placer`` itself, so
the other commands start as fast without the ``[report]`` extra as with it.
"""

from __future__ import annotations

import html
import time
from pathlib import Path
from typing import Any

import numpy as np
import typer

from placer.capture import read_capture
from placer.capture.headroom import Buffers, headroom
from placer.cli import options
from placer.errors import InputError
from placer.fileio import check_output, check_output_dir
from placer.machine import load_machine
from placer.progress import install, task
from placer.units import format_size, size_option


def _need_extra() -> None:
    missing = []
    for module in ("plotly", "matplotlib"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise InputError(f"placer report needs {', '.join(missing)}: pip install 'placer[report]'")


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
    install(quiet)
    _need_extra()
    from placer.report import figures as F
    from placer.report.data import default_phase, default_tile, gather
    from placer.report.html import render_page, write_page

    started = time.perf_counter()
    output = check_output(output, "-o", inputs=(capture, *(plans or []), compare))
    if png is not None:
        check_output_dir(png, "--png")  # before the page is written, not after
    mach = load_machine(machine)
    table_budget = size_option(budget, "--budget") if budget is not None else None
    cap = read_capture(capture)
    data = gather(cap, mach, list(plans or []), table_budget, compare)
    if tile is not None and not 0 <= tile < data.tiles:
        raise InputError(f"tile {tile} is outside 0..{data.tiles - 1}", where="--tile")
    chosen_phase = default_phase(data) if phase is None else data.phase_ids[data.index(phase)]
    chosen_tile = default_tile(data) if tile is None else tile
    plan = data.primary()
    with task("figures"):
        figs = [F.heatmap(data, plan), F.phase_bars(data)]
        if data.compare:
            figs.append(F.compare_figure(data.compare))
            if data.compare[-1].get("front"):
                figs.append(F.front_figure(data.compare))
        schedule = F.schedule_of(data, plan, chosen_phase)
        figs.append(F.gantt(data, plan, chosen_phase, schedule))
        figs.append(F.sram_map(data, chosen_tile))
    rows = F.phase_rows(data)
    page = render_page(
        f"placer report: {capture.name}", _header(data, capture, chosen_phase, chosen_tile), figs,
        F.heatmap_data(data), {"phases": _phase_table(rows, [p.name for p in data.plans])},
        _notes(data, schedule, chosen_phase, chosen_tile),
        [("all", "whole program")] + [(str(i), f"{p}: {lab}" if lab else str(p))
                                      for i, (p, lab) in enumerate(zip(data.phase_ids, data.labels, strict=True))],
        [p.name for p in data.plans], data.plans.index(plan) if plan is not None else 0)
    size = write_page(output, page)
    typer.echo(f"{output}: {format_size(size)}, {len(figs)} figures, written in {time.perf_counter() - started:.1f} s")
    if png is not None:
        from placer.report.png import write_pngs

        with task(f"PNG figures into {png}"):
            paths = write_pngs(data, plan, chosen_phase, chosen_tile, schedule, png)
        typer.echo(f"{png}: {', '.join(p.name for p in paths)}")


def _header(data: Any, capture: Path, phase: int, tile: int) -> list[str]:
    before = data.before.sum(axis=0)
    lines = [f"capture {html.escape(str(capture))}: {len(data.phase_ids)} phases, {sum(data.transfers):,} transfers, "
             f"{data.tiles:,} tiles (machine {html.escape(data.machine.name)}); budget "
             f"{format_size(data.budget)} per tile; direct worst tile {int(before.max(initial=0)):,} B (tile "
             f"{int(np.argmax(before))})" + _memory(data, None)]
    for p in data.plans:
        after = p.program_table
        fits = int(after.max(initial=0)) <= data.budget
        lines.append(f"{html.escape(p.name)} plan ({html.escape(p.path)}, plan from {html.escape(p.mode)}): "
                     f"worst tile {int(after.max(initial=0)):,} B (tile {int(np.argmax(after))}) — "
                     f"{'fits' if fits else 'does not fit'}; "
                     f"{len(p.parsed.relays)} groups relayed over {p.relay_count():,} relays in "
                     f"{len(p.hosts)} phases; cycles {int(data.before_cycles @ np.array(data.iterations)):,} → "
                     f"{int(p.cycles @ np.array(data.iterations)):,}" + _memory(data, p))
    lines.append(f"schedule figure: phase {phase}; SRAM map: tile {tile} (choose with --phase, --tile)")
    return lines


def _memory(data: Any, plan: Any) -> str:
    """"; memory headroom …" for the capture alone (``plan`` None) or with a plan's relay buffers; "" when the
    capture has no allocations."""
    buffers = None
    if plan is not None:
        segs = [(s.tile, r.phase, s.buffer, s.buffer_end) for r in plan.parsed.relays for s in r.segments]
        cols = [np.array(c, np.int64) for c in zip(*segs, strict=True)] if segs else [np.zeros(0, np.int64)] * 4
        buffers = Buffers(*cols)
    room = headroom(data.capture, data.machine, buffers)
    return "" if room is None else f"; {html.escape(room.describe())}"


def _notes(data: Any, schedule: Any, phase: int, tile: int) -> dict[str, str]:
    return {
        "heatmap": "Each cell is one tile, placed by its physical id (row = physical // 64; docs/reference.md §1). "
                   "Whole program: the table bytes summed over stored phases, which the budget bounds; the colour "
                   "turns red above the budget and such tiles carry a cross. Choose a phase to see that phase alone "
                   "(its own colour scale), or click a bar in the next figure. Circles: relay hosts of the plan.",
        "phases": "Worst-tile table bytes and modelled cycles (cost model, one execution) of each phase, direct "
                  "and after each plan; click a bar to show that phase in the heatmap. The table lists the phases with "
                  "replica groups: which groups each plan "
                  "relayed, and why the others stayed direct.",
        "compare": "From <code>placer compare --json</code>: for each budget, the worst tile of the production "
                   "rule's plan and of CP-SAT's (filled marker: the plan fits), against the budget line, and how "
                   "many relays each uses.",
        "schedule": f"Phase {phase} ordered by the production B1024 scheduler (placer.ordering): each line is a "
                    f"port's busy run (intervals closer than 1/{4000} of the horizon merged). Lower bound "
                    f"{schedule.lower:,} cycles ({html.escape(schedule.lower_kind)}), horizon "
                    f"{schedule.horizon:,}.",
        "sram": f"Tile {tile}: each bar spans the phases an allocation is live (x) and its address range (y); "
                "relay buffers are live in their relay's phase only. The dotted line is the region 0/1 boundary.",
    }


def _phase_table(rows: list[dict[str, Any]], plans: list[str]) -> str:
    head = ["phase", "label", "groups", "ineligible (why)", "table direct", "cycles direct"]
    for name in plans:
        head += [f"{name}: relayed / relays", "table after", "cycles after", "kept direct because"]
    out = ['<table class="rows"><tr>' + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        why = ", ".join(f"{n} {html.escape(k)}" for k, n in sorted(r["reasons"].items(), key=lambda kv: -kv[1]))
        cells = [str(r["phase"]), f'<td class="text">{html.escape(r["label"])}</td>', f"{r['groups']:,}",
                 f'<td class="text">{r["ineligible"]:,}{": " + why if why else ""}</td>',
                 f"{r['table_before']:,}", f"{r['cycles_before']:,}"]
        for p in r["plans"]:
            segs = ", ".join(map(str, p["segments"]))
            cells += [f"{p['relayed']} / {p['relays']:,}" + (f" (segments {segs})" if segs else ""),
                      f"{p['table_after']:,}", f"{p['cycles_after']:,}",
                      f'<td class="text">{html.escape(p["why"])}</td>']
        out.append("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    return "".join(out)
