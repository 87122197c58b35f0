"""One self-contained HTML page: plotly.js embedded once, the figures' specs and the per-phase data as JSON, and a
little JavaScript for the phase and plan selectors. Opening it needs no network.

A section can be shown alone with ``#only=ID`` in the address (heatmap, phases, compare, schedule, sram): handy to
link one figure, and how the documentation's screenshots are taken.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from placer.fileio import atomic_output, json_bytes
from placer.report.figures import Figure
from placer.units import format_size

SECTIONS = (
    ("heatmap", "Table bytes per tile"),
    ("phases", "Per phase"),
    ("compare", "Against the budget"),
    ("schedule", "Stream schedule"),
    ("sram", "SRAM map"),
)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1b1b1b; background: #fafafa; }
header { background: #0b3d78; color: white; padding: 14px 24px; }
header h1 { margin: 0 0 6px 0; font-size: 20px; }
header p { margin: 2px 0; font-size: 13px; opacity: 0.92; }
nav { position: sticky; top: 0; background: white; border-bottom: 1px solid #ddd; padding: 8px 24px; z-index: 10; }
nav a { margin-right: 18px; color: #0b3d78; text-decoration: none; font-size: 14px; }
section { background: white; margin: 16px 24px; padding: 12px 18px; border: 1px solid #e2e2e2; border-radius: 6px; }
section h2 { font-size: 17px; margin: 4px 0 8px 0; }
section p.note { font-size: 13px; color: #444; max-width: 1100px; }
.controls { font-size: 13px; margin: 4px 0 8px 0; }
.controls select { font-size: 13px; margin-right: 16px; }
table.rows { border-collapse: collapse; font-size: 12px; margin-top: 10px; }
table.rows th, table.rows td { border-bottom: 1px solid #eee; padding: 3px 8px; text-align: right;
  vertical-align: top; }
table.rows th { background: #f2f5f9; position: sticky; top: 38px; }
table.rows td.text { text-align: left; max-width: 420px; }
.fits { color: #1d7a35; font-weight: 600; }
.over { color: #c0182a; font-weight: 600; }
"""

SCRIPT = r"""
(function () {
  const D = JSON.parse(document.getElementById('placer-data').textContent);
  const config = {displaylogo: false, responsive: true};
  const ready = [];
  function draw(key) {
    const el = document.getElementById('fig-' + key);
    const spec = D.figures[key];
    if (!el || !spec) return;
    ready.push(Plotly.newPlot(el, spec.data, spec.layout, config));
  }
  Object.keys(D.figures).forEach(draw);

  // heatmap: the phase and plan selectors recompute the two panels from the per-phase arrays
  const H = D.heatmap;
  function grid(values) {
    const z = [];
    for (let r = 0; r < H.grid.rows; r++) z.push(new Array(H.grid.cols).fill(null));
    for (let t = 0; t < values.length; t++) z[H.grid.row[t]][H.grid.col[t]] = values[t];
    return z;
  }
  function total(rows) {
    const out = new Array(rows[0].length).fill(0);
    for (const row of rows) for (let t = 0; t < row.length; t++) out[t] += row[t];
    return out;
  }
  function budgetScale(f) {
    f = Math.min(Math.max(f, 1e-6), 1);
    const s = [[0, '#f4f8fc'], [f * 0.5, '#7fb0d8'], [f, '#0b3d78']];
    if (f < 1) { s.push([Math.min(1, f + 1e-6), '#f6a38e']); s.push([1, '#8e0c1c']); }
    return s;
  }
  function marks(tiles, values, axis, name, symbol, color, what) {
    return {type: 'scatter', mode: 'markers', name: name, xaxis: 'x' + axis, yaxis: 'y' + axis,
            x: tiles.map(t => H.grid.col[t]), y: tiles.map(t => H.grid.row[t]),
            customdata: tiles.map(t => [t, values[t]]),
            marker: {symbol: symbol, size: symbol.startsWith('x') ? 5 : 8, color: color,
                     line: {width: 1, color: color}},
            hovertemplate: 'tile %{customdata[0]}: ' + what + '<br>table bytes %{customdata[1]:,}<extra></extra>'};
  }
  function showHeatmap() {
    const el = document.getElementById('fig-heatmap');
    if (!el || !H) return;
    const sel = document.getElementById('phase-select').value;
    const planSel = document.getElementById('plan-select');
    const plan = H.plans.length ? H.plans[planSel ? Number(planSel.value) : H.primary] : null;
    const whole = sel === 'all';
    const i = whole ? -1 : Number(sel);
    const before = whole ? total(H.before) : H.before[i];
    const after = plan ? (whole ? total(plan.after) : plan.after[i]) : null;
    const scope = whole ? 'whole program' : 'phase ' + H.phases[i] + ' (' + H.labels[i] + ')';
    const top = Math.max(1, ...before, ...(after || [0]));
    const cmax = whole ? Math.max(top, H.budget) : top;
    const base = D.figures.heatmap.data;
    const panels = [['before (direct)', before]];
    if (plan) panels.push(['after (' + plan.name + ')', after]);
    const traces = [];
    panels.forEach(([name, values], k) => {
      const axis = k === 0 ? '' : '2';
      const t = Object.assign({}, base[k], {z: grid(values), name: name,
        hovertemplate: 'tile %{customdata[0]} (physical %{customdata[1]}, row %{y}, column %{x})<br>' + scope +
                       ', ' + name + '<br>table bytes %{z:,}<extra></extra>'});
      traces.push(t);
      if (whole) {
        const over = [];
        values.forEach((v, tile) => { if (v > H.budget) over.push(tile); });
        if (over.length) traces.push(marks(over, values, axis, 'over budget (' + name + ')', 'x-thin-open',
                                           '#c0182a', 'over the budget'));
      }
    });
    if (plan) {
      const hs = new Set();
      Object.entries(plan.hosts).forEach(([pid, tiles]) => {
        if (whole || Number(pid) === H.phases[i]) tiles.forEach(t => hs.add(t));
      });
      const hosts = Array.from(hs).sort((a, b) => a - b);
      if (hosts.length) traces.push(marks(hosts, after, '2', 'relay hosts', 'circle-open', '#111111', 'relay host'));
    }
    const layout = Object.assign({}, D.figures.heatmap.layout);
    layout.title = Object.assign({}, layout.title, {text: 'Exchange-table bytes per tile, ' + scope +
                                  ' (tiles by physical position: row × column)'});
    layout.coloraxis = Object.assign({}, layout.coloraxis, {
      cmax: cmax, colorscale: whole ? budgetScale(H.budget / cmax) : 'Viridis',
      colorbar: whole ? {title: {text: 'bytes'}, tickvals: [0, H.budget], ticktext: ['0', 'budget ' + H.budget_text]}
                      : {title: {text: 'bytes'}}});
    ready.push(Plotly.react(el, traces, layout, config));
  }
  const phaseSel = document.getElementById('phase-select');
  if (phaseSel) phaseSel.addEventListener('change', showHeatmap);
  const planSel = document.getElementById('plan-select');
  if (planSel) planSel.addEventListener('change', showHeatmap);
  const bars = document.getElementById('fig-phases');
  if (bars && phaseSel) bars.on('plotly_click', ev => {
    const pid = Number(ev.points[0].x);
    const i = H.phases.indexOf(pid);
    if (i >= 0) { phaseSel.value = String(i); showHeatmap();
                  document.getElementById('heatmap').scrollIntoView({behavior: 'smooth'}); }
  });

  // #only=ID shows one section alone (links to one figure, screenshots)
  const m = /only=([a-z]+)/.exec(location.hash);
  if (m) {
    document.querySelectorAll('section, nav').forEach(s => { if (s.id !== m[1]) s.style.display = 'none'; });
    window.dispatchEvent(new Event('resize'));
  }
  window.placerReady = Promise.all(ready);
})();
"""


def _json_script(obj: Any) -> str:
    # inside <script>, "</" would end the element early
    return json_bytes(obj).decode().replace("</", "<\\/")


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    js: str = get_plotlyjs()
    return js


def render_page(title: str, header: list[str], figures: list[Figure], heatmap: dict[str, Any],
                tables: dict[str, str], notes: dict[str, str], phase_choices: list[tuple[str, str]],
                plan_names: list[str], primary: int = 0) -> str:
    present = {f.key for f in figures}
    nav = "".join(f'<a href="#{key}">{html.escape(name)}</a>' for key, name in SECTIONS if key in present)
    body = []
    for key, name in SECTIONS:
        if key not in present:
            continue
        fig = next(f for f in figures if f.key == key)
        controls = ""
        if key == "heatmap":
            opts = "".join(f'<option value="{v}">{html.escape(t)}</option>' for v, t in phase_choices)
            controls = f'<div class="controls">phase <select id="phase-select">{opts}</select>'
            if len(plan_names) > 1:
                popts = "".join(f'<option value="{i}"{" selected" if i == primary else ""}>'
                                f'{html.escape(n)}</option>' for i, n in enumerate(plan_names))
                controls += f'after <select id="plan-select">{popts}</select>'
            controls += "</div>"
        marks = html.escape(json_bytes(fig.marks).decode())
        body.append(f'<section id="{key}"><h2>{html.escape(name)}</h2>{controls}'
                    f'<div class="placer-figure" id="fig-{key}" data-marks="{marks}"></div>'
                    f'<p class="note">{notes.get(key, "")}</p>{tables.get(key, "")}</section>')
    data = {"figures": {f.key: {"data": f.data, "layout": f.layout} for f in figures}, "heatmap": heatmap}
    head = "".join(f"<p>{line}</p>" for line in header)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style>"
        f"<script>{_plotly_js()}</script></head><body>"
        f"<header><h1>{html.escape(title)}</h1>{head}</header><nav>{nav}</nav>{''.join(body)}"
        f'<script id="placer-data" type="application/json">{_json_script(data)}</script>'
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def write_page(path: Path, text: str) -> int:
    with atomic_output(path) as sink:
        sink.write(text.encode())
    return path.stat().st_size


def verdict(fits: bool) -> str:
    return '<span class="fits">fits</span>' if fits else '<span class="over">does not fit</span>'


def size_text(nbytes: int) -> str:
    return format_size(nbytes)
