"""The generated workloads against the reference compiler's direct figures (docs/reference.md §8).

Each :class:`Target` names a figure of the reference's batch-two capture (every group direct, one layer) and how to
measure the same figure on a generated capture: a phase (by its lowering key, so the id follows the phase list), a
part of it (the whole phase, or its activation transfers alone) and a metric. :func:`measure` returns one
:class:`Row` per target with the generated value and the ratio; docs/workloads.md and ``benchmarks/bench_workloads.py``
print the table, ``tests/workloads/test_calibration.py`` keeps the ratios inside :data:`TOLERANCE`.

Scheduled cycles are the B1024 horizon (``placer schedule --mode greedy``), sync excluded, as the reference's
figures are: under the reference's own rules by default (``placer.refschedule.reference``), or placer's chunk model
(``rules="model"``); rows are the cost model's worst-tile bytes (docs/reference.md §3) unless the metric says timed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.capture.model import Capture, Phase
from placer.cost.model import program_cost, tile_counters
from placer.machine import Machine
from placer.modes import OrderingRules, ScheduleMode
from placer.ordering.schedule import OrderingParams, PhaseSchedule, schedule_phase
from placer.workloads.lowering import phase_steps
from placer.workloads.spec import load_model

TOLERANCE = 0.10  # |generated / target - 1| allowed for every calibrated figure
MIB = 1 << 20

# metrics: "transfers", "payload_mib" (bytes summed over every receiver), "rows" (cost-model worst tile),
# "cycles" (scheduled horizon, B1024 mirror), "timed_rows" (the scheduled phase's worst-tile table bytes), and
# the whole-program "fragment_max", "row_sum" (Σ of phase maxima), "table_max" (per-tile worst over stored phases)
PHASE_METRICS = ("transfers", "payload_mib", "rows", "cycles", "timed_rows")
SCHEDULED = ("cycles", "timed_rows")
PROGRAM_METRICS = ("fragment_max", "row_sum", "table_max")


@dataclass(frozen=True)
class Target:
    model: str
    phase: str | None  # lowering key (e.g. "qkv.in"); None for a whole-program figure
    part: str  # "all" or "act" (the phase's activation transfers alone: weights dropped)
    metric: str
    value: float
    what: str  # the reference's label
    layers: int = 1  # the Repeat count of the program the figure is for (a full-depth figure: the model's depth)

    @property
    def slow(self) -> bool:
        return self.metric in SCHEDULED


_S, _P = "siglip-so400m", "pe-core-l14"

TARGETS: tuple[Target, ...] = (
    Target(_S, "qkv.in", "all", "transfers", 54_502, "16 QKV input + weights"),
    Target(_S, "qkv.in", "all", "payload_mib", 57.67 + 37.97, "16 QKV input + weights"),
    Target(_S, "qkv.in", "all", "rows", 12_056, "16 QKV input + weights (estimate)"),
    Target(_S, "qkv.in", "all", "timed_rows", 11_992, "16 QKV input + weights"),
    Target(_S, "qkv.in", "all", "cycles", 27_245, "16 QKV input + weights"),
    Target(_S, "qkv.in", "act", "transfers", 52_488, "16 activations alone"),
    Target(_S, "qkv.in", "act", "payload_mib", 57.67, "16 activations alone"),
    Target(_S, "qkv.in", "act", "timed_rows", 12_008, "16 activations alone"),
    Target(_S, "qkv.in", "act", "cycles", 11_426, "16 activations alone"),
    Target(_S, "qkv.out", "all", "payload_mib", 9.60, "18 QKV output → owners"),
    Target(_S, "mlp_up.in", "all", "transfers", 62_482, "50 MLP-up input + weights"),
    Target(_S, "mlp_up.in", "all", "payload_mib", 86.50 + 42.56, "50 MLP-up input + weights"),
    Target(_S, "mlp_up.in", "all", "rows", 17_908, "50 MLP-up input + weights (estimate)"),
    Target(_S, "mlp_up.in", "all", "timed_rows", 17_788, "50 MLP-up input + weights"),
    Target(_S, "mlp_up.in", "all", "cycles", 28_376, "50 MLP-up input + weights"),
    Target(_S, "mlp_up.in", "act", "transfers", 52_488, "50 activations alone"),
    Target(_S, "mlp_up.in", "act", "payload_mib", 86.50, "50 activations alone"),
    Target(_S, "mlp_up.in", "act", "timed_rows", 17_176, "50 activations alone"),
    Target(_S, "mlp_up.in", "act", "cycles", 16_894, "50 activations alone"),
    Target(_S, "mlp_up.red", "all", "payload_mib", 24.63, "51 MLP-up reduction"),
    Target(_S, "mlp_up.out", "all", "payload_mib", 11.96, "52 MLP-up output → owners"),
    Target(_S, "mlp_down.in", "all", "transfers", 196_830, "54 MLP-down input"),
    Target(_S, "mlp_down.in", "all", "payload_mib", 35.91, "54 MLP-down input"),
    Target(_S, "mlp_down.in", "all", "timed_rows", 9_684, "54 MLP-down input"),
    Target(_S, "mlp_down.in", "all", "cycles", 8_729, "54 MLP-down input"),
    Target(_S, "mlp_down.w", "all", "transfers", 2_160, "55 MLP-down weights"),
    Target(_S, "mlp_down.w", "all", "payload_mib", 94.92, "55 MLP-down weights"),
    Target(_S, "mlp_down.w", "all", "timed_rows", 236, "55 MLP-down weights"),
    Target(_S, "mlp_down.w", "all", "cycles", 22_673, "55 MLP-down weights"),
    Target(_S, "mlp_down.red", "all", "transfers", 17_040, "56 MLP-down reduction"),
    Target(_S, "mlp_down.red", "all", "payload_mib", 37.96, "56 MLP-down reduction"),
    Target(_S, "mlp_down.out", "all", "transfers", 104_892, "57 MLP-down output → owners"),
    Target(_S, "mlp_down.out", "all", "payload_mib", 3.20, "57 MLP-down output → owners"),
    Target(_S, "map_kv.in", "all", "transfers", 139_808, "MAP head: FP16 rows → heads"),
    Target(_S, "map_kv.in", "all", "rows", 8_524, "MAP head (estimate)"),
    Target(_S, "map_kv.in", "all", "cycles", 11_465, "MAP head"),
    Target(_S, None, "all", "fragment_max", 15_017, "program fragment maximum"),
    Target(_S, None, "all", "row_sum", 142_912, "program row estimate (Σ of phase maxima)"),
    Target(_S, None, "all", "table_max", 99_228, "program: per-tile maximum (encoded)"),
    Target(_P, "mlp_up.in", "all", "transfers", 45_375, "PE MLP-up input"),
    Target(_P, "mlp_up.in", "all", "rows", 8_408, "PE MLP-up input"),
    Target(_P, "mlp_up.in", "all", "cycles", 27_446, "PE MLP-up input"),
    Target(_P, "mlp_down.in", "all", "transfers", 147_712, "PE MLP-down input"),
    Target(_P, "mlp_down.in", "all", "rows", 16_776, "PE MLP-down input"),
    Target(_P, "mlp_down.in", "all", "cycles", 15_937, "PE MLP-down input"),
    Target(_P, "map_kv.in", "all", "transfers", 82_504, "PE MAP input"),
    Target(_P, "map_kv.in", "all", "rows", 6_008, "PE MAP input"),
    Target(_P, "map_kv.in", "all", "cycles", 9_256, "PE MAP input"),
    Target(_P, None, "all", "table_max", 74_628, "PE program, 24 layers: per-tile maximum (encoded)", layers=24),
)


@dataclass(frozen=True)
class Row:
    target: Target
    phase_id: int | None
    value: float

    @property
    def ratio(self) -> float:
        return self.value / self.target.value

    @property
    def within(self) -> bool:
        return abs(self.ratio - 1.0) <= TOLERANCE


def phase_ids(model: str) -> dict[str, int]:
    """Lowering key → phase id of a bundled or given model (the ids do not depend on batch or layers; a full-depth
    program whose MAP head runs in serial passes has more phases after the head's first reduction)."""
    steps, _, _ = phase_steps(load_model(model))
    return {key: i for i, (key, _) in enumerate(steps)}


def weight_transfers(capture: Capture, phase: Phase) -> np.ndarray:
    """Mask of the phase's transfers that read a parameter allocation (``weights.*``) on their source tile."""
    al = capture.allocations
    if phase.n == 0 or len(al) == 0:
        return np.zeros(phase.n, bool)
    live = (al.first <= phase.phase) & (al.last >= phase.phase)
    is_w = np.array([n.startswith("weights.") for n in al.name], bool) & live
    tile, start, end = al.tile[is_w].astype(np.int64), al.start[is_w], al.end[is_w]
    key = (tile << 40) | start
    order = np.argsort(key)
    key, end_s, tile_s = key[order], end[order], tile[order]
    src = phase.source.astype(np.int64)
    addr = phase.first_src_addr()
    pos = np.searchsorted(key, (src << 40) | addr, side="right") - 1
    ok = pos >= 0
    pos = np.maximum(pos, 0)
    return ok & (tile_s[pos] == src) & (addr < end_s[pos]) if key.shape[0] else np.zeros(phase.n, bool)


def _phase_value(capture: Capture, phase: Phase, metric: str, machine: Machine,
                 schedules: dict[tuple[int, int], PhaseSchedule], rules: OrderingRules) -> float:
    if metric == "transfers":
        return float(phase.n)
    if metric == "payload_mib":
        return float((phase.nbytes * phase.fanout).sum()) / MIB
    if metric == "rows":
        return float(tile_counters(phase, machine, capture.tile_count, capture.allocations).worst_table())
    key = (phase.phase, phase.n)
    if key not in schedules:
        schedules[key] = schedule_phase(phase, machine, ScheduleMode.GREEDY, ordering=OrderingParams(rules=rules),
                                        tiles=capture.tile_count)
    ps = schedules[key]
    return float(ps.horizon if metric == "cycles" else ps.table_worst)


def measure(capture: Capture, machine: Machine, targets: tuple[Target, ...] | list[Target],
            model: str | None = None, *, rules: OrderingRules = OrderingRules.REFERENCE) -> list[Row]:
    """The generated value of every target (of ``model``, default: the capture's) on ``capture``; each phase (or
    activation part) is scheduled at most once, under ``rules`` (``placer.ordering.schedule.RULES``)."""
    name = model or str(capture.extra.get("workload", {}).get("model", ""))
    ids = phase_ids(name)
    missing = sorted({t.phase for t in targets if t.model == name and t.phase and t.phase not in ids})
    if missing:
        raise ValueError(f"{name} has no phase(s) {missing}")
    layers = capture.repeat.iterations if capture.repeat is not None else 1
    deep = sorted({t.layers for t in targets if t.model == name and t.layers > 1 and t.layers != layers})
    if deep:
        raise ValueError(f"full-depth figures for {deep} layers measured on a capture of {layers}")
    rows: list[Row] = []
    cost = None
    schedules: dict[tuple[int, int], PhaseSchedule] = {}
    for t in targets:
        if t.model != name:
            continue
        if t.phase is None:
            cost = cost or program_cost(capture, machine)
            value = {"fragment_max": cost.worst_fragments(), "table_max": cost.worst_table(),
                     "row_sum": cost.row_estimate}[t.metric]
            rows.append(Row(t, None, float(value)))
            continue
        pid = ids[t.phase]
        phase = capture.phase_by_id(pid)
        if t.part == "act":
            phase = phase.take(np.flatnonzero(~weight_transfers(capture, phase)))
        rows.append(Row(t, pid, _phase_value(capture, phase, t.metric, machine, schedules, rules)))
    return rows


def render_rows(rows: list[Row], other: list[Row] | None = None, label: str = "model rules") -> str:
    """The calibration table as Markdown (docs/workloads.md and the benchmark print it); with ``other`` (the
    scheduled figures measured under other rules, named ``label``), two more columns for them."""
    extra = {(r.target, r.phase_id): r for r in other or []}
    head = "| model | phase | figure | part | target | generated | ratio |"
    rule = "|---|---:|---|---|---:|---:|---:|"
    if other is not None:
        head += f" {label} | ratio |"
        rule += "---:|---:|"
    out = [head, rule]
    for r in rows:
        t = r.target
        fmt = "{:,.2f}" if t.metric == "payload_mib" else "{:,.0f}"
        line = (f"| {t.model} | {'' if r.phase_id is None else r.phase_id} | {t.what}: {t.metric} | "
                f"{'activations' if t.part == 'act' else 'phase'} | {fmt.format(t.value)} | "
                f"{fmt.format(r.value)} | {r.ratio:.3f}{'' if r.within else ' **out**'} |")
        if other is not None:
            x = extra.get((t, r.phase_id))
            line += (" | |" if x is None else
                     f" {fmt.format(x.value)} | {x.ratio:.3f}{'' if x.within else ' **out**'} |")
        out.append(line)
    return "\n".join(out)
