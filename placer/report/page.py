"""The ``placer report`` page: the figures of a capture and its plans, the header lines, the notes and the phase
table, rendered into one self-contained HTML page (and, on request, the same figures as PNG files).

Plotting libraries are imported by the modules this one loads (``figures``, ``html``, ``png``), never by ``placer``
itself, so the other commands start as fast without the ``[report]`` extra as with it.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from placer.capture.headroom import Buffers, headroom
from placer.errors import InputError
from placer.progress import task
from placer.report import figures as F
from placer.report.data import PlanView, ReportData, default_phase, default_tile
from placer.report.html import render_page
from placer.units import format_size


def need_extra() -> None:
    """Refuse to start without the plotting libraries (the ``[report]`` extra)."""
    missing = []
    for module in ("plotly", "matplotlib"):
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    if missing:
        raise InputError(f"placer report needs {', '.join(missing)}: pip install 'placer[report]'")


@dataclass(frozen=True, eq=False)
class Page:
    """The report page rendered, and what its figures show."""

    text: str  # the HTML
    figures: int
    plan: PlanView | None  # the plan the single-plan figures show
    phase: int  # of the schedule figure
    tile: int  # of the SRAM map
    schedule: F.PhaseOrder  # the schedule figure's phase, ordered


def build_page(data: ReportData, capture_name: str, phase: int | None = None, tile: int | None = None) -> Page:
    """Every figure of ``data`` in one page; ``phase`` and ``tile`` choose the schedule figure's phase and the SRAM
    map's tile (default: the relayed phase with the largest worst-tile table, the busiest relay host)."""
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
    text = render_page(
        f"placer report: {Path(capture_name).name}", _header(data, capture_name, chosen_phase, chosen_tile), figs,
        F.heatmap_data(data), {"phases": _phase_table(rows, [p.name for p in data.plans])},
        _notes(schedule, chosen_phase, chosen_tile),
        [("all", "whole program")] + [(str(i), f"{p}: {lab}" if lab else str(p))
                                      for i, (p, lab) in enumerate(zip(data.phase_ids, data.labels, strict=True))],
        [p.name for p in data.plans], data.plans.index(plan) if plan is not None else 0)
    return Page(text, len(figs), plan, chosen_phase, chosen_tile, schedule)


class ReportDoc(TypedDict):
    """A report written (``placer.api.report``'s result as JSON)."""

    page: str
    bytes: int
    figures: int
    seconds: float
    phase: int  # of the schedule figure
    tile: int  # of the SRAM map
    pngs: list[str]


def report_json(page: Path, size: int, figures: int, seconds: float, phase: int, tile: int,
                pngs: Sequence[Path]) -> ReportDoc:
    return {"page": str(page), "bytes": size, "figures": figures, "seconds": round(seconds, 3), "phase": phase,
            "tile": tile, "pngs": [str(p) for p in pngs]}


def _header(data: ReportData, capture: str, phase: int, tile: int) -> list[str]:
    before = data.before.sum(axis=0)
    lines = [f"capture {html.escape(capture)}: {len(data.phase_ids)} phases, {sum(data.transfers):,} transfers, "
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


def _memory(data: ReportData, plan: PlanView | None) -> str:
    """"; memory headroom …" for the capture alone (``plan`` None) or with a plan's relay buffers; "" when the
    capture has no allocations."""
    buffers = None
    if plan is not None:
        segs = [(s.tile, r.phase, s.buffer, s.buffer_end) for r in plan.parsed.relays for s in r.segments]
        cols = [np.array(c, np.int64) for c in zip(*segs, strict=True)] if segs else [np.zeros(0, np.int64)] * 4
        buffers = Buffers(*cols)
    room = headroom(data.capture, data.machine, buffers)
    return "" if room is None else f"; {html.escape(room.describe())}"


def _notes(schedule: F.PhaseOrder, phase: int, tile: int) -> dict[str, str]:
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


__all__ = ["Page", "ReportDoc", "build_page", "need_extra", "report_json"]
