"""The report's figures as PNG files (matplotlib, no display needed): for papers, CI artefacts and READMEs.

They draw the same data as the HTML page (:mod:`placer.report.data`), without its interactivity: the heatmap shows
the whole program, the schedule the chosen phase, the SRAM map the chosen tile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from placer.fileio import atomic_write_bytes
from placer.report import figures as F
from placer.report.data import RULE_KEY, PlanView, ReportData, tile_grid
from placer.units import format_size

DPI = 110


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    _pyplot().close(fig)
    atomic_write_bytes(path, buf.getvalue())
    return path


def write_pngs(data: ReportData, plan: PlanView | None, phase: int, tile: int, schedule: F.PhaseOrder,
               directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = [_save(heatmap(data, plan), directory / "heatmap.png"),
             _save(phases(data), directory / "phases.png")]
    if data.compare:
        paths.append(_save(compare(data.compare), directory / "compare.png"))
        if data.compare[-1].get("front"):
            paths.append(_save(front(data.compare), directory / "front.png"))
    paths.append(_save(gantt(data, plan, phase, schedule), directory / "schedule.png"))
    paths.append(_save(sram(data, tile), directory / "sram.png"))
    return paths


def heatmap(data: ReportData, plan: PlanView | None) -> Any:
    from matplotlib.colors import LinearSegmentedColormap

    plt = _pyplot()
    rows, cols, nrows, ncols = tile_grid(data.machine, data.tiles)
    panels = [("before (direct)", data.before.sum(axis=0))]
    if plan is not None:
        panels.append((f"after ({plan.name})", plan.program_table))
    cmax = max(data.budget, *(int(v.max(initial=0)) for _, v in panels))
    f = data.budget / cmax
    stops = [(0.0, "#f4f8fc"), (f * 0.5, "#7fb0d8"), (f, "#0b3d78")]
    if f < 1:
        stops += [(min(1.0, f + 1e-6), "#f6a38e"), (1.0, "#8e0c1c")]
    cmap = LinearSegmentedColormap.from_list("budget", stops)
    fig, axes = plt.subplots(1, len(panels), figsize=(6.2 * len(panels), 3.2), squeeze=False)
    image = None
    for ax, (name, values) in zip(axes[0], panels, strict=True):
        z = np.full((nrows, ncols), np.nan)
        z[rows, cols] = values
        image = ax.imshow(z, cmap=cmap, vmin=0, vmax=cmax, aspect="auto", interpolation="nearest")
        over = np.flatnonzero(values > data.budget)
        ax.scatter(cols[over], rows[over], marker="x", s=10, c=F.OVER, linewidths=0.8, label="over budget")
        ax.set_title(f"{name}: worst {int(values.max(initial=0)):,} B", fontsize=10)
        ax.set_xlabel("column")
        ax.set_ylabel("row")
    if plan is not None:
        hosts = np.array(sorted({t for hs in plan.hosts.values() for t in hs}), np.int64)
        if hosts.size:
            axes[0][-1].scatter(cols[hosts], rows[hosts], marker="o", s=12, facecolors="none", edgecolors="#111111",
                                linewidths=0.6, label="relay host")
        axes[0][-1].legend(loc="upper right", fontsize=7, framealpha=0.8)
    bar = fig.colorbar(image, ax=axes[0].tolist(), shrink=0.9)
    bar.set_ticks([0, data.budget, cmax])
    bar.set_ticklabels(["0", f"budget {format_size(data.budget)}", f"{cmax:,}"])
    fig.suptitle("Exchange-table bytes per tile, whole program (tiles by physical position)", fontsize=11)
    return fig


def phases(data: ReportData) -> Any:
    plt = _pyplot()
    series = [("direct", data.before.max(axis=1), data.before_cycles)]
    series += [(p.name, p.table.max(axis=1), p.cycles) for p in data.plans]
    x = np.arange(len(data.phase_ids))
    width = 0.8 / len(series)
    changed = sorted(data.scheduled.get("direct", {}))
    cx = np.arange(len(changed))
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(13, 8.5), gridspec_kw={"height_ratios": [3, 2, 2]})
    for k, (name, table, cycles) in enumerate(series):
        top.bar(x + k * width, table, width, label=name, color=F.plan_color(name))
        bottom.bar(x + k * width, cycles, width, label=name, color=F.plan_color(name))
        fig_of = data.scheduled.get(name, {})
        middle.bar(cx + k * width, [fig_of[p][1] for p in changed], width, color=F.plan_color(name))
        middle.scatter(cx + k * width, [fig_of[p][0] for p in changed], marker="_", s=200, color="#222222",
                       zorder=3)
    top.set_ylabel("worst-tile table bytes")
    top.set_xticks(x + 0.4 - width / 2, [str(p) for p in data.phase_ids], rotation=90, fontsize=7)
    middle.set_ylabel("scheduled cycles")
    middle.set_xticks(cx + 0.4 - width / 2, [str(p) for p in changed], fontsize=8)
    middle.set_xlabel("the phases the plans change: B1024 horizon (bars), lower bound (marks)")
    bottom.set_ylabel("estimate (one execution)")
    bottom.set_xticks(x + 0.4 - width / 2, [str(p) for p in data.phase_ids], rotation=90, fontsize=7)
    bottom.set_xlabel("phase")
    top.legend(fontsize=8)
    fig.suptitle("Per phase, before and after", fontsize=11)
    fig.tight_layout()
    return fig


def front(entries: list[dict[str, Any]]) -> Any:
    plt = _pyplot()
    last = entries[-1]
    pts = F.front_ladder(last["front"])
    side = [p for p in last["front"] if F.b1024_free(p)]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs, ys = [p["cycles"] for p in pts], [p["table"] for p in pts]
    ax.plot(xs, ys, "-o", color=F.plan_color("CP-SAT"), label="placer: least worst tile per cycle cap")
    for p in F.front_points(pts):  # one label per distinct point: the smallest cap that gives it
        ax.annotate(p[2], (p[0], p[1]), textcoords="offset points", xytext=(4, 4), fontsize=7)
    if side:
        ax.scatter([p["cycles"] for p in side], [p["table"] for p in side], s=50, marker="D",
                   facecolors="white", edgecolors=F.plan_color("CP-SAT"),
                   label="Σ lower bound capped, B1024 not capped", zorder=3)
    rule = last.get(RULE_KEY, {})
    if "cycles" in rule:
        ax.scatter([rule["cycles"]], [rule["table"]], s=60, color=F.plan_color("production rule"),
                   label="production rule", zorder=3)
    ax.set_xlabel("Σ scheduled lower bound (cycles)")
    ax.set_ylabel("worst-tile table bytes")
    ax.legend(fontsize=8)
    fig.suptitle(f"The front at {last['budget'] / 1024:g} KiB", fontsize=11)
    return fig


def compare(entries: list[dict[str, Any]]) -> Any:
    plt = _pyplot()
    kib = np.array([e["budget"] / 1024 for e in entries])
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    left.plot(kib, [e["budget"] for e in entries], "--", color="#555555", label="budget")
    width = 0.38
    for k, (key, name) in enumerate(((RULE_KEY, "production rule"), ("cpsat", "CP-SAT"))):
        table = [e[key]["table"] for e in entries]
        fits = np.array([bool(e[key]["fits"]) for e in entries])
        color = F.plan_color(name)
        left.plot(kib, table, "-", color=color, label=f"worst tile, {name}")
        left.scatter(kib[fits], np.array(table)[fits], color=color, s=40)
        left.scatter(kib[~fits], np.array(table)[~fits], facecolors="white", edgecolors=color, s=40)
        right.bar(np.arange(len(entries)) + (k - 0.5) * width, [e[key]["relays"] for e in entries], width,
                  color=color, alpha=0.7, label=name)
    left.set_xlabel("budget (KiB)")
    left.set_ylabel("worst-tile table bytes (filled: fits)")
    left.legend(fontsize=8)
    right.set_xticks(np.arange(len(entries)), [f"{b:g}" for b in kib])
    right.set_xlabel("budget (KiB)")
    right.set_ylabel("relays")
    right.legend(fontsize=8)
    fig.suptitle("Production rule vs CP-SAT by budget", fontsize=11)
    return fig


def gantt(data: ReportData, plan: PlanView | None, phase: int, ps: F.PhaseOrder) -> Any:
    from matplotlib.collections import LineCollection

    plt = _pyplot()
    ph = F.phase_after(data, plan, phase)
    sch = ps.schedule
    gap = max(1, max(1, sch.horizon) // F.RUN_PIXELS)
    words = ph.words.astype(np.int64)
    dst_t = ph.dst_transfer()
    runs = {"transmit": F.busy_runs(ph.source.astype(np.int64), sch.tx_start, words, words * 4, gap),
            "receive": F.busy_runs(ph.dst_tile.astype(np.int64), sch.rx_start, words[dst_t], words[dst_t] * 4, gap)}
    fig, axes = plt.subplots(2, 1, figsize=(12, 7), sharex=True)
    for ax, (name, color) in zip(axes, (("transmit", "#2c6fbb"), ("receive", "#e6861a")), strict=True):
        port, start, end, _, _ = runs[name]
        segs = np.stack([np.stack([start, port], 1), np.stack([end, port], 1)], 1).astype(float)
        ax.add_collection(LineCollection(list(segs), colors=color, linewidths=1.0))
        ax.set_ylim(-1, data.tiles)
        ax.set_ylabel(f"{name} (tile)")
        ax.axvline(ps.lower, color=F.OVER, linestyle="--", linewidth=1, label=f"lower bound {ps.lower:,}")
        ax.axvline(sch.horizon, color="#111111", linewidth=1, label=f"horizon {sch.horizon:,}")
    axes[0].legend(fontsize=8, loc="upper right")
    axes[1].set_xlim(0, max(1, sch.horizon) * 1.02)
    axes[1].set_xlabel("cycles from the start of the exchange (sync excluded)")
    fig.suptitle(f"Stream schedule of phase {phase}: {ph.n:,} transfers, gap to the lower bound {ps.gap:.1%}",
                 fontsize=11)
    return fig


def sram(data: ReportData, tile: int) -> Any:
    from matplotlib.patches import Rectangle

    plt = _pyplot()
    allocations, buffers = F.sram_items(data, tile)
    fig, ax = plt.subplots(figsize=(12, 5))
    for items, color, label in [(allocations, "#9db4cf", "live allocations")] + [
            ([b for b in buffers if b["plan"] == p.name], F.relay_color(p.name), f"relay buffers ({p.name})")
            for p in data.plans]:
        for k, it in enumerate(items):
            ax.add_patch(Rectangle((it["first"], it["start"]), it["last"] - it["first"] + 1, it["end"] - it["start"],
                                   facecolor=color, edgecolor="#333333" if label.startswith("live") else color,
                                   linewidth=0.4 if label.startswith("live") else 1.5, alpha=0.9,
                                   label=label if k == 0 else None))
    tops = [it["end"] for it in allocations + buffers] or [data.machine.memory.end]
    lows = [it["start"] for it in allocations + buffers] or [data.machine.memory.base]
    ax.set_xlim(0, len(data.phase_ids))
    ax.set_ylim(min(lows), max(tops))
    ax.axhline(data.machine.memory.region0_end, color="#555555", linestyle=":", linewidth=1)
    ax.set_xticks(np.arange(len(data.phase_ids)) + 0.5, [str(p) for p in data.phase_ids], rotation=90, fontsize=7)
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{int(v):#x}")
    ax.set_xlabel("phase (program order)")
    ax.set_ylabel("address")
    ax.legend(fontsize=8, loc="upper right")
    ax.set_title(f"SRAM of tile {tile}: address × lifetime", fontsize=11)
    return fig
