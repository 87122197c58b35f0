"""The per-phase summary of a relay plan: what changed, before → after, and the program against its budgets."""

from __future__ import annotations

from collections import Counter
from typing import Any, NotRequired, TypedDict

from placer.alternatives.groups import GroupScan
from placer.capture.headroom import Headroom, headroom
from placer.capture.model import Capture
from placer.cost.model import ProgramCost, program_cost
from placer.report.table import render
from placer.selection.columns import Scheduled
from placer.selection.plan import Plan
from placer.units import format_size


class PlanPhaseDoc(TypedDict):
    """One phase of a plan summary, all direct → the plan."""

    phase: int
    label: str
    groups: int
    ineligible: int
    ineligible_reasons: dict[str, int]
    relayed: int
    kept: int
    relays: int
    segments: list[int]
    variants: list[str]
    largest_buffer: int
    table_before: int
    table_after: int
    estimate_before: int
    estimate_after: int
    # the phases the selection measured: scheduled cycles, sync excluded
    bound_before: NotRequired[int]
    bound_after: NotRequired[int]
    b1024_before: NotRequired[int]
    b1024_after: NotRequired[int]


class PlanProgramDoc(TypedDict):
    """The program of a plan summary, against its budgets."""

    table_budget: int
    fragment_limit: int
    worst_tile_before: int
    worst_table_before: int
    worst_tile_after: int
    worst_table_after: int
    row_estimate_before: int
    row_estimate_after: int
    worst_fragments_before: int
    worst_fragments_after: int
    estimate_before: int
    estimate_after: int
    cycles_after: NotRequired[int]  # with scheduled figures: the Σ lower bound
    b1024_change: NotRequired[int]
    relayed_groups: int
    relays: int
    scratch_bytes: int
    fits_before: bool
    fits: bool
    memory: NotRequired[dict[str, int | None]]  # when the capture has allocations (``Headroom.to_json``)
    memory_line: NotRequired[str]


class PlanSummaryDoc(TypedDict):
    """A plan's summary (``placer solve --json``'s ``summary``, the plan file's ``summary``)."""

    mode: str
    machine: str
    phases: list[PlanPhaseDoc]
    program: PlanProgramDoc


def plan_summary(capture: Capture, scans: list[GroupScan], plan: Plan,
                 before: ProgramCost | None = None, scheduled: Scheduled | None = None) -> PlanSummaryDoc:
    """Per phase, before → after: groups, relays, tables, the estimate's cycles and (``scheduled``, for the
    phases the selection measured) the scheduled lower bound and B1024 horizon; the program against its budgets."""
    machine = plan.machine
    before = before or program_cost(capture, machine)
    rewritten = plan.rewritten(capture)
    after = program_cost(rewritten, machine)
    after_by_id = {pc.phase: pc for pc in after.phases}
    extra_of = {r.group.phase: r.extra_phase for r in plan.relays if r.extra_phase is not None}
    phases: list[PlanPhaseDoc] = []
    for p, scan, pb in zip(capture.phases, scans, before.phases, strict=True):
        chosen = [r for r in plan.relays if r.group.phase == p.phase]
        # the production rule also relays groups the optimiser's scan prunes (nothing to gain): count them too
        groups = len({g.index for g in scan.groups} | {r.group.index for r in chosen})
        pa = after_by_id[p.phase]
        cycles_after = pa.cycles
        if p.phase in extra_of:
            cycles_after += after_by_id[extra_of[p.phase]].cycles
        row: PlanPhaseDoc = {
            "phase": p.phase,
            "label": capture.label(p.phase),
            "groups": groups,
            "ineligible": len(scan.rejected),
            "ineligible_reasons": dict(Counter(r.reason for r in scan.rejected)),
            "relayed": len(chosen),
            "kept": groups - len(chosen),
            "relays": sum(r.segmentation.count for r in chosen),
            "segments": sorted({r.segmentation.count for r in chosen}),
            "variants": sorted({r.variant for r in chosen}),
            "largest_buffer": max((int(r.scratch_bytes.max()) for r in chosen), default=0),
            "table_before": pb.worst_table(),
            "table_after": max(pa.worst_table(), after_by_id[extra_of[p.phase]].worst_table()
                               if p.phase in extra_of else 0),
            "estimate_before": pb.cycles,
            "estimate_after": cycles_after,
        }
        if scheduled is not None and p.phase in scheduled.phases:
            # a measured phase's scheduled figures, direct → plan (cycles, sync excluded)
            d, a = scheduled.direct[p.phase], scheduled.phases[p.phase]
            row["bound_before"], row["bound_after"] = d.bound, a.bound
            row["b1024_before"], row["b1024_after"] = d.b1024, a.b1024
        phases.append(row)
    scratch = sum(int(r.scratch_bytes.sum()) for r in plan.relays)
    room = headroom(capture, machine, plan.buffers())
    program: PlanProgramDoc = {
        "table_budget": plan.table_budget,
        "fragment_limit": plan.fragment_limit,
        "worst_tile_before": before.worst_tile(),
        "worst_table_before": before.worst_table(),
        "worst_tile_after": after.worst_tile(),
        "worst_table_after": after.worst_table(),
        "row_estimate_before": before.row_estimate,
        "row_estimate_after": after.row_estimate,
        "worst_fragments_before": before.worst_fragments(),
        "worst_fragments_after": after.worst_fragments(),
        "estimate_before": before.cycles,
        "estimate_after": after.cycles,
        **_scheduled_totals(scheduled),
        "relayed_groups": len(plan.relays),
        "relays": sum(r.segmentation.count for r in plan.relays),
        "scratch_bytes": scratch,
        "fits_before": before.fits(plan.table_budget, plan.fragment_limit),
        "fits": after.fits(plan.table_budget, plan.fragment_limit),
        **memory_json(room),
    }
    return {"mode": plan.mode, "machine": machine.name, "phases": phases, "program": program}


class MemoryDoc(TypedDict, total=False):
    """Memory headroom, when the capture has allocations: ``Headroom.to_json`` and its line."""

    memory: dict[str, int | None]
    memory_line: str


def memory_json(room: Headroom | None) -> MemoryDoc:
    """``memory`` and ``memory_line`` of a headroom (nothing without one)."""
    return {} if room is None else {"memory": room.to_json(), "memory_line": room.describe()}


class _ScheduledTotals(TypedDict, total=False):
    cycles_after: int
    b1024_change: int


def _scheduled_totals(scheduled: Scheduled | None) -> _ScheduledTotals:
    """The program's scheduled figures, when the selection measured them."""
    if scheduled is None:
        return {}
    return {"cycles_after": scheduled.bound, "b1024_change": scheduled.b1024_change}


def render_decisions(decisions: list[dict[str, Any]], labels: dict[int, str]) -> str:
    """The production rule's decision for every phase with a multicast: the candidate, its figures, the verdict."""
    def arrow(a: int, b: int | None) -> str:
        return f"{a:,} → {b:,}" if b is not None else f"{a:,}"

    rows = [[d["phase"], labels.get(d["phase"], ""), "relay" if d["accepted"] else "direct", d["reason"],
             len(d["groups"]), d["direct_groups"], d["relays"], arrow(d["cycles_before"], d["cycles_after"]),
             arrow(d["rows_before"], d["rows_after"]), "" if d["table_after"] is None else d["table_after"],
             d["scratch_bytes"]]
            for d in decisions if d["reason"] != "no multicast"]
    text = render(["phase", "label", "decision", "reason", "groups", "direct groups", "relays", "est. cycles",
                   "max rows (+scratch)", "rows alone", "scratch B"], rows,
                  title="production rule (docs/reference.md §5), per phase; phases with no multicast are not listed:")
    notes = [f"  phase {d['phase']}: {d['detail']}" for d in decisions if d["detail"]]
    notes += [f"  phase {d['phase']}: {d['direct_groups']:,} groups stay direct, e.g. {d['direct_reasons'][0]}"
              for d in decisions if d["direct_groups"]]
    return text + ("\n" + "\n".join(notes) if notes else "")


def render_summary(summary: PlanSummaryDoc, *, all_phases: bool = False, phase_table: bool = True) -> str:
    rows = []
    for p in summary["phases"]:
        if not all_phases and not p["groups"]:
            continue
        measured = "bound_before" in p
        rows.append([
            p["phase"], p["label"], f"{p['relayed']}/{p['groups']}", p["relays"],
            ",".join(map(str, p["segments"])) or "-", p["largest_buffer"],
            f"{p['table_before']:,} → {p['table_after']:,}",
            f"{p['bound_before']:,} → {p['bound_after']:,}" if measured else "-",
            f"{p['b1024_before']:,} → {p['b1024_after']:,}" if measured else "-",
            f"{p['estimate_before']:,} → {p['estimate_after']:,}",
        ])
    text = render(["phase", "label", "relayed/groups", "relays", "segs", "max buffer B", "worst table B",
                   "lower bound", "B1024", "estimate"], rows,
                  title="per phase, all direct → this plan (cycles without sync; the estimate with it):") + "\n\n" \
        if phase_table else ""
    g = summary["program"]
    verdict = "fits" if g["fits"] else "DOES NOT FIT"
    text += (
        f"program ({summary['mode']}): worst tile table {g['worst_table_before']:,} (tile "
        f"{g['worst_tile_before']}) → {g['worst_table_after']:,} (tile {g['worst_tile_after']}) / budget "
        f"{format_size(g['table_budget'])}; row estimate (Σ of phase maxima) {g['row_estimate_before']:,} → "
        f"{g['row_estimate_after']:,}; fragment maximum {g['worst_fragments_before']:,} → "
        f"{g['worst_fragments_after']:,} / {g['fragment_limit']:,}; "
        + (f"scheduled: Σ lower bound {g['cycles_after']:,} cycles, B1024 horizon {g['b1024_change']:+,} against "
           "all direct; " if "cycles_after" in g else "")
        + f"estimate {g['estimate_before']:,} → {g['estimate_after']:,} cycles; {g['relayed_groups']} groups "
        f"relayed over {g['relays']} relays, scratch {format_size(g['scratch_bytes'])}; "
        + (f"{g['memory_line']}; " if "memory_line" in g else "") + verdict
    )
    return text
