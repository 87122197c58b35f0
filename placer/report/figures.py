"""The report's figures as Plotly specs (plain dicts: ``data`` traces and a ``layout``), built from
:class:`ReportData`. They are JSON-ready: the HTML page hands them to plotly.js unchanged, and each carries the
number of marks it should draw (``marks``), which the browser test checks against what was rendered.

Large figures stay light: the tile heatmap is one image per panel (23 × 64 cells), and the schedule is drawn with
WebGL (``scattergl``) as one polyline per port kind whose segments are the ports' busy runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from placer.capture.model import Phase
from placer.ordering import Schedule
from placer.progress import task
from placer.refschedule.reference import reference_bound, reference_schedule
from placer.report.data import RULE_KEY, PlanView, ReportData, is_rule, rule_decisions, tile_grid
from placer.units import format_size

COLORS = {"direct": "#8c8c8c", "production rule": "#e6861a", "CP-SAT": "#2c6fbb", "budget-greedy": "#7b4bb3"}
OVER = "#c0182a"
TOP_LEGEND: dict[str, Any] = {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom"}
RUN_PIXELS = 4000  # the schedule is merged at this many cells across its horizon: finer gaps are not visible


RELAY_COLORS = {"production rule": "#e6861a", "CP-SAT": "#d62728"}  # relay buffers stand out from allocations


def plan_color(name: str) -> str:
    return COLORS.get(name, "#3a9a5b")


def relay_color(name: str) -> str:
    return RELAY_COLORS.get(name, "#8c2d04")


@dataclass
class Figure:
    key: str
    data: list[dict[str, Any]]
    layout: dict[str, Any]
    marks: dict[str, int]  # what the browser should draw: "points" (SVG bars/markers), "images", "segments" (WebGL)

    def spec(self) -> dict[str, Any]:
        return {"data": self.data, "layout": self.layout, "marks": self.marks}


def _layout(title: str, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"title": {"text": title, "x": 0.01, "font": {"size": 15}},
                            "margin": {"l": 70, "r": 30, "t": 60, "b": 50}, "hovermode": "closest",
                            "paper_bgcolor": "white", "plot_bgcolor": "white", "font": {"size": 12}}
    base.update(extra)
    return base


# --- heatmap of table bytes per tile, by the machine's geometry


def heatmap_data(data: ReportData) -> dict[str, Any]:
    """What the page's phase and plan selectors need: the grid position of every tile and, per phase, the table
    bytes before and after each plan, plus the relay hosts per phase."""
    rows, cols, nrows, ncols = tile_grid(data.machine, data.tiles)
    physical = np.asarray(data.machine.physical(np.arange(data.tiles)), np.int64)
    return {
        "grid": {"rows": nrows, "cols": ncols, "row": rows.tolist(), "col": cols.tolist(),
                 "physical": physical.tolist()},
        "budget": data.budget,
        "budget_text": format_size(data.budget),
        "phases": data.phase_ids,
        "labels": data.labels,
        "before": data.before.tolist(),
        "primary": data.plans.index(primary) if (primary := data.primary()) is not None else 0,
        "plans": [{"name": p.name, "after": p.table.tolist(),
                   "hosts": {str(k): v for k, v in p.hosts.items()}} for p in data.plans],
    }


def _grid(values: np.ndarray, rows: np.ndarray, cols: np.ndarray, nrows: int, ncols: int) -> list[list[Any]]:
    z = np.full((nrows, ncols), np.nan)
    z[rows, cols] = values
    return [[None if np.isnan(v) else int(v) for v in row] for row in z]


def heatmap(data: ReportData, plan: PlanView | None, phase: int | None = None) -> Figure:
    """Before | after, one cell per tile at its physical place; the colour turns red above the budget (whole
    program only: the budget is not per phase); relay hosts circled on the after panel."""
    rows, cols, nrows, ncols = tile_grid(data.machine, data.tiles)
    if phase is None:
        before = data.before.sum(axis=0)
        after = plan.program_table if plan is not None else None
        hosts = sorted({t for hs in plan.hosts.values() for t in hs}) if plan is not None else []
        scope = "whole program"
    else:
        i = data.index(phase)
        before = data.before[i]
        after = plan.table[i] if plan is not None else None
        hosts = sorted(set(plan.hosts.get(phase, []))) if plan is not None else []
        scope = f"phase {phase}"
    top = int(max(before.max(initial=0), after.max(initial=0) if after is not None else 0, 1))
    budgeted = phase is None
    cmax = max(top, data.budget) if budgeted else top
    tiles = np.arange(data.tiles)
    physical = np.asarray(data.machine.physical(tiles), np.int64)
    custom = _grid(tiles, rows, cols, nrows, ncols)
    phys = _grid(physical, rows, cols, nrows, ncols)
    customdata = [[[c, p] for c, p in zip(cr, pr, strict=True)] for cr, pr in zip(custom, phys, strict=True)]
    panels = [("before (direct)", before)] + ([(f"after ({plan.name})", after)] if plan is not None else [])
    traces: list[dict[str, Any]] = []
    points = 0
    for k, (name, values) in enumerate(panels):
        axis = "" if k == 0 else str(k + 1)
        traces.append({
            "type": "heatmap", "name": name, "z": _grid(values, rows, cols, nrows, ncols), "customdata": customdata,
            "coloraxis": "coloraxis", "xaxis": f"x{axis}", "yaxis": f"y{axis}", "xgap": 1, "ygap": 1,
            "hovertemplate": f"tile %{{customdata[0]}} (physical %{{customdata[1]}}, row %{{y}}, column %{{x}})"
                             f"<br>{scope}, {name}<br>table bytes %{{z:,}}<extra></extra>",
        })
        if budgeted:
            over = np.flatnonzero(values > data.budget)
            if over.size:
                traces.append(_tile_marks(over, rows, cols, axis, f"over budget ({name})", "x-thin-open", OVER,
                                          values, "over the budget"))
                points += int(over.size)
    if plan is not None and hosts:
        host_arr = np.array(hosts, np.int64)
        traces.append(_tile_marks(host_arr, rows, cols, "2", "relay hosts", "circle-open", "#111111",
                                  after, "relay host"))
        points += len(hosts)
    scale = _budget_scale(data.budget / cmax) if budgeted else "Viridis"
    ticks = {"tickvals": [0, data.budget], "ticktext": ["0", f"budget {format_size(data.budget)}"]} if budgeted \
        else {}
    layout = _layout(f"Exchange-table bytes per tile, {scope} (tiles by physical position: row × column)",
                     height=430, coloraxis={"colorscale": scale, "cmin": 0, "cmax": cmax,
                                            "colorbar": {"title": {"text": "bytes"}, **ticks}},
                     showlegend=True, legend=TOP_LEGEND)
    width = 0.46 if plan is not None else 0.95
    for k, (name, _) in enumerate(panels):
        axis = "" if k == 0 else str(k + 1)
        start = 0.0 if k == 0 else 0.52
        layout[f"xaxis{axis}"] = {"domain": [start, start + width], "title": {"text": f"{name}: column"},
                                  "showgrid": False, "zeroline": False}
        layout[f"yaxis{axis}"] = {"title": {"text": "row"}, "autorange": "reversed", "showgrid": False,
                                  "zeroline": False, "anchor": f"x{axis}"}
    return Figure("heatmap", traces, layout, {"images": len(panels), "points": points})


def _budget_scale(f: float) -> list[list[Any]]:
    """Blues up to the budget, reds above it: a tile over budget stands out whatever its shade."""
    f = min(max(f, 1e-6), 1.0)
    scale = [[0.0, "#f4f8fc"], [f * 0.5, "#7fb0d8"], [f, "#0b3d78"]]
    if f < 1.0:
        scale += [[min(1.0, f + 1e-6), "#f6a38e"], [1.0, "#8e0c1c"]]
    return scale


def _tile_marks(tiles: np.ndarray, rows: np.ndarray, cols: np.ndarray, axis: str, name: str, symbol: str,
                color: str, values: np.ndarray | None, what: str) -> dict[str, Any]:
    return {
        "type": "scatter", "mode": "markers", "name": name, "x": cols[tiles].tolist(), "y": rows[tiles].tolist(),
        "xaxis": f"x{axis}", "yaxis": f"y{axis}",
        "marker": {"symbol": symbol, "size": 5 if symbol.startswith("x") else 8, "color": color,
                   "line": {"width": 1, "color": color}},
        "customdata": [[int(t), int(values[t]) if values is not None else 0] for t in tiles.tolist()],
        "hovertemplate": f"tile %{{customdata[0]}}: {what}<br>table bytes %{{customdata[1]:,}}<extra></extra>",
    }


# --- per phase: worst-tile table bytes and cycles, before and after each plan


def phase_bars(data: ReportData) -> Figure:
    """Per phase: worst-tile table bytes; on the phases a plan changes, the scheduled cycles (B1024 horizon as
    bars, the lower bound as a mark); every phase's estimate."""
    x = [str(p) for p in data.phase_ids]
    changed = sorted(data.scheduled.get("direct", {}))
    cx = [str(p) for p in changed]
    series = [("direct", data.before.max(axis=1), data.before_cycles)]
    series += [(p.name, p.table.max(axis=1), p.cycles) for p in data.plans]
    traces = []
    for name, table, cycles in series:
        custom = [[lab, int(t), int(c)] for lab, t, c in zip(data.labels, table.tolist(), cycles.tolist(),
                                                             strict=True)]
        hover = "phase %{x}: %{customdata[0]}<br>" + name + "<br>worst-tile table bytes %{customdata[1]:,}" \
                "<br>estimate %{customdata[2]:,} cycles<extra></extra>"
        traces.append({"type": "bar", "name": name, "x": x, "y": table.tolist(), "customdata": custom,
                       "marker": {"color": plan_color(name)}, "legendgroup": name, "hovertemplate": hover,
                       "xaxis": "x", "yaxis": "y"})
        fig = data.scheduled.get(name, {})
        b1024 = [fig[p][1] for p in changed]
        bound = [fig[p][0] for p in changed]
        traces.append({"type": "bar", "name": name, "x": cx, "y": b1024, "customdata": bound,
                       "marker": {"color": plan_color(name)}, "legendgroup": name, "showlegend": False,
                       "hovertemplate": "phase %{x}<br>" + name + "<br>B1024 horizon %{y:,} cycles<br>lower bound "
                                        "%{customdata:,}<extra></extra>", "xaxis": "x2", "yaxis": "y2",
                       "offsetgroup": name})
        traces.append({"type": "scatter", "mode": "markers", "name": name, "x": cx, "y": bound,
                       "marker": {"symbol": "line-ew-open", "size": 18, "color": "#222222"}, "legendgroup": name,
                       "showlegend": False, "hovertemplate": "lower bound %{y:,}<extra></extra>", "xaxis": "x2",
                       "yaxis": "y2", "offsetgroup": name})
        traces.append({"type": "bar", "name": name, "x": x, "y": cycles.tolist(), "customdata": custom,
                       "marker": {"color": plan_color(name)}, "legendgroup": name, "showlegend": False,
                       "hovertemplate": hover, "xaxis": "x3", "yaxis": "y3"})
    layout = _layout("Per phase: worst-tile table bytes (top); scheduled cycles on the phases the plans change, "
                     "B1024 horizon (bars) and lower bound (marks) (middle); the estimate of one execution "
                     "(bottom)", height=760, barmode="group", bargap=0.15,
                     xaxis={"type": "category", "anchor": "y", "showticklabels": False, "domain": [0, 1]},
                     yaxis={"title": {"text": "table bytes"}, "domain": [0.7, 1.0]},
                     xaxis2={"type": "category", "anchor": "y2", "title": {"text": "phase (changed)"}},
                     yaxis2={"title": {"text": "scheduled cycles"}, "domain": [0.38, 0.62]},
                     xaxis3={"type": "category", "anchor": "y3", "title": {"text": "phase"}, "tickangle": -90,
                             "matches": "x"},
                     yaxis3={"title": {"text": "estimate"}, "domain": [0.0, 0.28]},
                     legend=TOP_LEGEND)
    return Figure("phases", traces, layout, {"points": len(series) * (2 * len(x) + 2 * len(cx))})


def b1024_free(p: dict[str, Any]) -> bool:
    """The front's side point: a Σ lower bound cap kept, the B1024 cap dropped (``select.cycle_front``)."""
    return p["slack"] is not None and not p.get("b1024_capped", True)


def front_ladder(front: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The front's points under both caps, the Σ lower bound's loosening (the side point left out)."""
    return [p for p in front if not b1024_free(p)]


def front_points(front: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    """The ladder's distinct points (Σ lower bound, worst tile), each labelled by the smallest cap that gives it
    ("+0.50% and up")."""
    front = front_ladder(front)
    out: dict[tuple[int, int], str] = {}
    for p in front:
        key = (int(p["cycles"]), int(p["table"]))
        if key not in out:
            cap = "no cap" if p["slack"] is None else f"+{p['slack']:.2%}"
            out[key] = cap if p is front[-1] else f"{cap} and up"
    return [(c, t, label) for (c, t), label in out.items()]


def front_figure(entries: list[dict[str, Any]]) -> Figure:
    """The trade-off `placer compare` measured at its largest budget: the least worst tile per cycle cap, against
    the Σ scheduled lower bound, with the production rule's plan."""
    last = entries[-1]
    side = [p for p in last.get("front") or [] if b1024_free(p)]
    front = front_ladder(last.get("front") or [])
    labels = ["no cap" if p["slack"] is None else f"+{p['slack']:.2%}" for p in front]
    distinct = {(c, t): label for c, t, label in front_points(front)}
    shown = [distinct.pop((int(p["cycles"]), int(p["table"])), "") for p in front]
    traces: list[dict[str, Any]] = [{
        "type": "scatter", "mode": "lines+markers+text", "name": "placer (least worst tile per cap)",
        "x": [p["cycles"] for p in front], "y": [p["table"] for p in front], "text": shown,
        "textposition": "top right",
        "customdata": [[p["b1024_change"], p["relays"], lab] for p, lab in zip(front, labels, strict=True)],
        "line": {"color": plan_color("CP-SAT")},
        "hovertemplate": "Σ lower bound %{x:,}<br>worst tile %{y:,} B<br>B1024 Δ %{customdata[0]:+,}<br>relays "
                         "%{customdata[1]:,}<extra>%{customdata[2]}</extra>",
    }]
    if side:
        traces.append({"type": "scatter", "mode": "markers", "name": "B1024 not capped",
                       "x": [p["cycles"] for p in side], "y": [p["table"] for p in side],
                       "customdata": [[p["b1024_change"], p["relays"], f"+{p['slack']:.2%}"] for p in side],
                       "marker": {"size": 10, "symbol": "diamond-open", "color": plan_color("CP-SAT")},
                       "hovertemplate": "Σ lower bound within %{customdata[2]}, B1024 not capped<br>Σ lower bound "
                                        "%{x:,}<br>worst tile %{y:,} B<br>B1024 Δ %{customdata[0]:+,}<br>relays "
                                        "%{customdata[1]:,}<extra></extra>"})
    rule = last.get(RULE_KEY, {})
    if "cycles" in rule:
        traces.append({"type": "scatter", "mode": "markers", "name": "production rule", "x": [rule["cycles"]],
                       "y": [rule["table"]], "marker": {"size": 12, "color": plan_color("production rule")},
                       "hovertemplate": "production rule<br>Σ lower bound %{x:,}<br>worst tile %{y:,} B"
                                        "<extra></extra>"})
    layout = _layout(f"The front at {last['budget'] / 1024:g} KiB: worst tile against the Σ scheduled lower bound, "
                     "one point per cycle cap (B1024 no worse than the rule's but with no cap)", height=460,
                     xaxis={"title": {"text": "Σ lower bound (cycles)"}},
                     yaxis={"title": {"text": "worst-tile table bytes"}}, legend=TOP_LEGEND)
    return Figure("front", traces, layout, {"points": len(front) + len(side) + 1})


def phase_rows(data: ReportData) -> list[dict[str, Any]]:
    """The table under the bars: phases with replica groups, what each plan relayed and why the rest stayed."""
    out = []
    verdicts = rule_decisions(data.compare)
    for i, (pid, label) in enumerate(zip(data.phase_ids, data.labels, strict=True)):
        infos = [p.summary_phase(pid) for p in data.plans]
        groups = max((int(s.get("groups", 0)) for s in infos), default=0)
        if not groups and not any(p.relay_count(pid) for p in data.plans):
            continue
        found = [s["ineligible_reasons"] for s in infos if s.get("ineligible_reasons")]
        reasons: dict[str, int] = found[0] if found else {}
        plans = []
        for p, s in zip(data.plans, infos, strict=True):
            relayed = p.relayed_groups(pid)
            plans.append({
                "name": p.name, "relayed": relayed, "relays": p.relay_count(pid),
                "segments": sorted({len(r.segments) for r in p.parsed.relays if r.phase == pid}),
                "table_after": int(p.table[i].max(initial=0)), "cycles_after": int(p.cycles[i]),
                "why": _why(p, s, groups, relayed, verdicts.get(pid)),
            })
        out.append({"phase": pid, "label": label, "groups": groups,
                    "ineligible": int(sum(reasons.values())) if reasons else 0, "reasons": reasons,
                    "table_before": int(data.before[i].max(initial=0)), "cycles_before": int(data.before_cycles[i]),
                    "plans": plans})
    return out


def _why(plan: PlanView, info: dict[str, Any], groups: int, relayed: int, verdict: dict[str, Any] | None) -> str:
    """Why the plan left eligible groups direct: the production rule's own verdict when `placer compare --json`
    recorded it, else what the plan file says."""
    if is_rule(plan.mode) and verdict is not None:
        detail = verdict.get("detail") or ""
        return f"{verdict.get('reason', '')}" + (f": {detail}" if detail else "")
    for key in ("decision", "reason", "why"):
        value = info.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, dict) and value:
            return "; ".join(f"{k}: {v}" for k, v in value.items())
    kept = int(info.get("kept", max(0, groups - int(info.get("ineligible", 0)) - relayed)))
    if not kept:
        return "every eligible group relayed" if relayed else ""
    if is_rule(plan.mode):
        return (f"{kept} eligible group(s) kept direct: the production rule takes a phase's candidate only if its "
                "cycles do not rise and its worst tile shrinks")
    return f"{kept} eligible group(s) kept direct: relaying them does not improve the plan's objectives"


# --- compare: worst tile and relay count against the budget, CP-SAT vs the production rule


def compare_figure(entries: list[dict[str, Any]]) -> Figure:
    kib = [e["budget"] / 1024 for e in entries]
    traces: list[dict[str, Any]] = [{
        "type": "scatter", "mode": "lines", "name": "budget", "x": kib, "y": [e["budget"] for e in entries],
        "line": {"dash": "dash", "color": "#555555"}, "hovertemplate": "budget %{y:,} B<extra></extra>",
    }]
    points = 0
    for key, name in ((RULE_KEY, "production rule"), ("cpsat", "CP-SAT")):
        table = [e[key]["table"] for e in entries]
        fits = [bool(e[key]["fits"]) for e in entries]
        custom = [[e[key]["relays"], "fits" if f else "does not fit", e.get("status", "")]
                  for e, f in zip(entries, fits, strict=True)]
        traces.append({
            "type": "scatter", "mode": "lines+markers", "name": f"worst tile, {name}", "x": kib, "y": table,
            "customdata": custom, "line": {"color": plan_color(name)},
            "marker": {"size": 10, "color": plan_color(name), "symbol": ["circle" if f else "circle-open"
                                                                         for f in fits]},
            "hovertemplate": f"{name}, budget %{{x}} KiB<br>worst tile %{{y:,}} B (%{{customdata[1]}})"
                             "<br>relays %{customdata[0]:,}<extra></extra>",
        })
        traces.append({
            "type": "bar", "name": f"relays, {name}", "x": kib, "y": [e[key]["relays"] for e in entries],
            "marker": {"color": plan_color(name), "opacity": 0.55}, "xaxis": "x2", "yaxis": "y2",
            "hovertemplate": f"{name}, budget %{{x}} KiB<br>relays %{{y:,}}<extra></extra>",
        })
        points += 2 * len(entries)
    layout = _layout("How far the production rule is from the optimum: worst-tile table bytes (filled: fits) and "
                     "relays, by budget", height=520, barmode="group",
                     xaxis={"title": {"text": "budget (KiB)"}, "anchor": "y", "domain": [0, 0.55]},
                     yaxis={"title": {"text": "worst-tile table bytes"}},
                     xaxis2={"title": {"text": "budget (KiB)"}, "anchor": "y2", "domain": [0.65, 1.0],
                             "type": "category"},
                     yaxis2={"title": {"text": "relays"}, "anchor": "x2"},
                     legend={"orientation": "h", "y": -0.18})
    return Figure("compare", traces, layout, {"points": points})


# --- the schedule of one phase, per port


def phase_after(data: ReportData, plan: PlanView | None, phase: int) -> Phase:
    if plan is not None and phase in plan.phases:
        return plan.phases[phase]
    return data.capture.phases[data.index(phase)]


@dataclass
class PhaseOrder:
    """A phase's B1024 schedule and its best lower bound (what the Gantt chart draws)."""

    schedule: Schedule
    lower: int
    lower_kind: str

    @property
    def horizon(self) -> int:
        return self.schedule.horizon

    @property
    def gap(self) -> float:
        return 0.0 if self.horizon == 0 else (self.horizon - self.lower) / self.horizon


def schedule_of(data: ReportData, plan: PlanView | None, phase: int) -> PhaseOrder:
    """The production B1024 schedule of the phase under the reference's rules (placer.refschedule.reference), without
    the timed rows the chart does not need."""
    ph = phase_after(data, plan, phase)
    tiles = max(data.tiles, data.machine.tiles)
    with task(f"schedule phase {phase} ({ph.n:,} transfers)"):
        sched = reference_schedule(ph, data.machine, tiles=tiles)
        bound = reference_bound(ph, data.machine, tiles=tiles)
        return PhaseOrder(Schedule(sched.tx_start, sched.rx_start, sched.horizon), bound.best, bound.kind)


def busy_runs(port: np.ndarray, start: np.ndarray, length: np.ndarray, nbytes: np.ndarray,
              merge_gap: int) -> tuple[np.ndarray, ...]:
    """Merge each port's intervals into busy runs (gaps up to ``merge_gap`` cycles joined): (port, start, end,
    bytes, intervals) per run, sorted by port then start."""
    if port.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z, z, z
    order = np.lexsort((start, port))
    p, s = port[order], start[order]
    e = s + length[order]
    b = nbytes[order]
    # a running max of ends that never carries across ports: offset each port far beyond the previous one
    big = int(e.max(initial=0)) + merge_gap + 1
    reach = np.maximum.accumulate(p * big + e)
    new = np.r_[True, (p[1:] != p[:-1]) | (p[1:] * big + s[1:] > reach[:-1] + merge_gap)]
    run_end = reach - p * big
    heads = np.flatnonzero(new)
    tails = np.r_[heads[1:], p.size] - 1
    return (p[heads], s[heads], run_end[tails], np.add.reduceat(b, heads), np.diff(np.r_[heads, p.size]))


def gantt(data: ReportData, plan: PlanView | None, phase: int, ps: PhaseOrder) -> Figure:
    ph = phase_after(data, plan, phase)
    sch = ps.schedule
    horizon = max(1, sch.horizon)
    gap = max(1, horizon // RUN_PIXELS)
    words = ph.words.astype(np.int64)
    dst_t = ph.dst_transfer()
    tx = busy_runs(ph.source.astype(np.int64), sch.tx_start, words, words * 4, gap)
    rx = busy_runs(ph.dst_tile.astype(np.int64), sch.rx_start, words[dst_t], words[dst_t] * 4, gap)
    traces = []
    segments = 0
    for k, (name, runs, color) in enumerate((("transmit", tx, "#2c6fbb"), ("receive", rx, "#e6861a"))):
        port, start, end, nbytes, count = runs
        n = int(port.size)
        half = (end - start) / 2
        axis = "" if k == 0 else "2"
        # one point per busy run at its middle, drawn as a horizontal error bar of the run's length: exact hover,
        # and WebGL keeps 100k runs smooth
        traces.append({
            "type": "scattergl", "mode": "markers", "name": f"{name} ({n:,} busy runs)",
            "x": (start + half).tolist(), "y": port.tolist(),
            "customdata": np.stack([start, end, nbytes, count], axis=1).tolist() if n else [],
            "marker": {"size": 2, "color": color},
            "error_x": {"type": "data", "array": half.tolist(), "symmetric": True, "width": 0, "thickness": 2,
                        "color": color},
            "xaxis": f"x{axis}", "yaxis": f"y{axis}",
            "hovertemplate": f"tile %{{y}} {name}, phase {phase}<br>cycles %{{customdata[0]:,}}–%{{customdata[1]:,}}"
                             ": %{customdata[3]:,} transfer(s), %{customdata[2]:,} bytes<extra></extra>",
        })
        segments += n
    lower = ps.lower
    shapes, notes = [], []
    for value, label, dash in ((lower, f"lower bound {lower:,} ({ps.lower_kind})", "dash"),
                               (sch.horizon, f"horizon {sch.horizon:,}", "solid")):
        shapes.append({"type": "line", "xref": "x", "yref": "paper", "x0": value, "x1": value, "y0": 0, "y1": 1,
                       "line": {"color": OVER if dash == "dash" else "#111111", "dash": dash, "width": 1.5}})
        notes.append({"xref": "x", "yref": "paper", "x": value, "y": 1.02, "text": label, "showarrow": False,
                      "xanchor": "right" if dash == "dash" else "left", "font": {"size": 11}})
    after = f" after the {plan.name} plan" if plan is not None and phase in plan.phases else " (direct)"
    layout = _layout(f"Stream schedule of phase {phase}{after}: {ph.n:,} transfers, B1024 greedy; horizon "
                     f"{sch.horizon:,} cycles, gap to the lower bound {ps.gap:.1%}", height=640,
                     shapes=shapes, annotations=notes, showlegend=True,
                     legend={"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
                     xaxis={"title": {"text": ""}, "anchor": "y", "matches": "x2", "showticklabels": False},
                     yaxis={"title": {"text": "transmit lane (tile)"}, "domain": [0.53, 1.0]},
                     xaxis2={"title": {"text": "cycles from the start of the exchange (sync excluded)"},
                             "anchor": "y2"},
                     yaxis2={"title": {"text": "receive port (tile)"}, "domain": [0.0, 0.47]})
    return Figure("schedule", traces, layout, {"segments": segments})


# --- SRAM map of one tile: address × lifetime


def sram_items(data: ReportData, tile: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The tile's live allocations and each plan's relay buffers, as (phase position span, address span)."""
    ids = np.array(data.phase_ids, np.int64)
    order = np.argsort(ids)
    last_pos = len(ids) - 1

    def pos(pid: int, side: Literal["left", "right"]) -> int:
        k = int(np.searchsorted(ids[order], pid, side=side))
        k = min(max(k if side == "left" else k - 1, 0), last_pos)
        return int(order[k])

    al = data.capture.allocations
    mine = np.flatnonzero(al.tile == tile)
    allocations = []
    for a in mine.tolist():
        first, last = int(al.first[a]), int(al.last[a])
        if last < int(ids.min(initial=0)) or first > int(ids.max(initial=0)):
            continue
        allocations.append({"name": al.name[a] if a < len(al.name) and al.name[a] else f"allocation {a}",
                            "start": int(al.start[a]), "end": int(al.end[a]), "first": pos(first, "left"),
                            "last": pos(last, "right")})
    parent = {ins.phase: ins.after for p in data.plans for ins in p.parsed.inserted}
    buffers = []
    for p in data.plans:
        for r in p.parsed.relays:
            for k, s in enumerate(r.segments):
                if s.tile != tile:
                    continue
                at = data.phase_ids.index(parent.get(s.phase, s.phase))
                buffers.append({"plan": p.name, "phase": s.phase, "group": r.group, "segment": k,
                                "start": s.buffer, "end": s.buffer_end, "first": at, "last": at})
    return allocations, buffers


def sram_map(data: ReportData, tile: int) -> Figure:
    allocations, buffers = sram_items(data, tile)
    traces = []
    points = 0
    groups = [("live allocations", allocations, "#9db4cf")]
    for p in data.plans:
        groups.append((f"relay buffers ({p.name})", [b for b in buffers if b["plan"] == p.name], relay_color(p.name)))
    for name, items, color in groups:
        if not items:
            continue
        custom = [[it.get("name") or f"phase {it['phase']} group {it['group']} segment {it['segment']}",
                   f"{it['start']:#x}", f"{it['end']:#x}", it["end"] - it["start"],
                   data.phase_ids[it["first"]], data.phase_ids[it["last"]]] for it in items]
        traces.append({
            "type": "bar", "name": name, "x": [(it["first"] + it["last"] + 1) / 2 for it in items],
            "width": [it["last"] - it["first"] + 1 for it in items], "base": [it["start"] for it in items],
            "y": [it["end"] - it["start"] for it in items], "customdata": custom,
            # a relay buffer of a few KiB is a hairline on a 600 KiB axis: its outline in its own colour keeps it seen
            "marker": {"color": color, "line": {"color": "#333333" if name.startswith("live") else color,
                                                "width": 0.5 if name.startswith("live") else 2}}, "opacity": 0.9,
            "hovertemplate": f"tile {tile}: %{{customdata[0]}}<br>[%{{customdata[1]}}, %{{customdata[2]}}) "
                             "%{customdata[3]:,} bytes<br>live phases %{customdata[4]}–%{customdata[5]}"
                             "<extra></extra>",
        })
        points += len(items)
    region = data.machine.memory.region0_end
    layout = _layout(f"SRAM of tile {tile}: address × lifetime (phases in program order), live allocations and "
                     "relay buffers", height=560, barmode="overlay", bargap=0,
                     xaxis={"title": {"text": "phase"}, "tickmode": "array",
                            "tickvals": [i + 0.5 for i in range(len(data.phase_ids))],
                            "ticktext": [str(p) for p in data.phase_ids], "tickangle": -90,
                            "range": [0, len(data.phase_ids)]},
                     yaxis={"title": {"text": "address"}, "tickformat": "#x", "hoverformat": "#x"},
                     shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": region, "y1": region,
                              "line": {"dash": "dot", "color": "#555555"}}],
                     annotations=[{"xref": "paper", "x": 1, "y": region, "text": "region 1 (interleaved) above",
                                   "showarrow": False, "xanchor": "right", "yanchor": "bottom"}],
                     legend={"orientation": "h", "y": -0.2})
    return Figure("sram", traces, layout, {"points": points})
