"""One self-contained HTML page over a sweep (`placer sweep ... --report`): per workload, objective order and seed,
the production rule's worst tile and relays against CP-SAT's at every budget (the figure `placer report` draws from
`placer compare --json`), then every job's row.

Needs the ``[report]`` extra (plotly); imported only when a report is asked for.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from placer.fileio import json_bytes
from placer.sweep.spec import SweepSpec

_TABLE_COLUMNS = ("workload", "budget", "mode", "objective", "seed", "state", "fits", "table", "cycles", "relays",
                  "solver_status", "stages", "valid", "seconds", "error")


def comparison_entries(rows: list[dict[str, Any]]) -> dict[tuple[str, str, int], list[dict[str, Any]]]:
    """Per (workload, objective, seed) of the CP-SAT jobs: one entry per budget where both the production rule's job
    and the CP-SAT job finished, in the shape `placer compare --json` gives (budget, production_rule, cpsat)."""
    from placer.report.data import RULE_KEY

    greedy = {(r["workload"], r["budget"]): r for r in rows if r["mode"] == "greedy" and r["state"] == "ok"}
    groups: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for r in rows:
        g = greedy.get((r["workload"], r["budget"]))
        if r["mode"] != "cpsat" or r["state"] != "ok" or g is None:
            continue
        groups.setdefault((r["workload"], r["objective"], r["seed"]), []).append({
            "budget": r["budget"], "status": r["solver_status"],
            RULE_KEY: {k: g[k] for k in ("table", "fits", "relays", "cycles")},
            "cpsat": {k: r[k] for k in ("table", "fits", "relays", "cycles")},
        })
    return {k: sorted(v, key=lambda e: e["budget"]) for k, v in groups.items()}


def write_report(spec: SweepSpec, rows: list[dict[str, Any]], path: Path) -> int:
    """Write the page atomically; returns its size in bytes."""
    from plotly.offline import get_plotlyjs

    from placer.report.figures import compare_figure
    from placer.report.html import STYLE, write_page

    figures, sections = {}, []
    for i, ((workload, objective, seed), entries) in enumerate(comparison_entries(rows).items()):
        fig = compare_figure(entries)
        figures[str(i)] = {"data": fig.data, "layout": fig.layout}
        sections.append(f'<section><h2>{html.escape(workload)}: objective {html.escape(objective)}, seed {seed}'
                        f'</h2><div class="placer-figure" id="fig-{i}"></div></section>')
    ok = sum(r["state"] == "ok" for r in rows)
    header = [f"sweep file {html.escape(spec.path)}: {len(rows)} jobs, {ok} finished, {len(rows) - ok} failed or "
              f"missing; CP-SAT {spec.config.workers} worker(s) and {spec.config.time_limit:g} s per job; machine "
              f"{html.escape(spec.config.machine)}",
              "Each figure: for every budget, the worst tile of the production rule's plan and of CP-SAT's (filled "
              "marker: the plan fits) against the budget line, and the relays each uses. The table lists every "
              "job; 'valid' is the independent validator's verdict on the plan file."]
    table = ['<table class="rows"><tr>' + "".join(f"<th>{c}</th>" for c in _TABLE_COLUMNS) + "</tr>"]
    for r in rows:
        table.append("<tr>" + "".join(f"<td>{html.escape(_cell(r[c]))}</td>" for c in _TABLE_COLUMNS) + "</tr>")
    table.append("</table>")
    script = ("const d = JSON.parse(document.getElementById('placer-data').textContent);"
              "for (const [k, f] of Object.entries(d.figures)) "
              "Plotly.newPlot('fig-' + k, f.data, f.layout, {responsive: true, displaylogo: false});")
    # inside <script>, "</" would end the element early
    data = json_bytes({"figures": figures}).decode().replace("</", "<\\/")
    page = ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>placer sweep: {html.escape(Path(spec.path).name)}</title><style>{STYLE}</style>"
            f"<script>{get_plotlyjs()}</script></head><body><header><h1>placer sweep: "
            f"{html.escape(Path(spec.path).name)}</h1>{''.join(f'<p>{h}</p>' for h in header)}</header>"
            f"{''.join(sections)}<section><h2>Every job</h2>{''.join(table)}</section>"
            f'<script id="placer-data" type="application/json">{data}</script>'
            f"<script>{script}</script></body></html>\n")
    return write_page(path, page)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
