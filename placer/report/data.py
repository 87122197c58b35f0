"""The numbers behind ``placer report``: the program before and after each plan, per tile and phase, gathered once
so that the HTML and the PNG figures draw the same data.

A plan file is applied as ``placer validate`` reads it (its delta and inserted phases), not through the code that
produced it, so the report shows what the file says. A local-pack plan's inserted phase is folded into the phase it
follows: "phase p after" means everything the plan runs for phase p.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from placer.arrays import setdiff1d
from placer.capture.model import Capture, Phase
from placer.cost.model import program_cost, tile_counters
from placer.errors import InputError
from placer.fileio import read_json
from placer.machine import Machine
from placer.progress import task, track
from placer.selection.timing import phase_figures
from placer.validation.plan import Plan as PlanFile
from placer.validation.plan import bind_plan, parse_plan

# a `placer solve` plan keeps the incumbent it could not beat: its mode says which ("budget-greedy"), but it is
# still the CP-SAT run's answer
RULE_KEY = "production_rule"  # its key in `placer compare --json`
MODE_NAMES = {"greedy": "production rule", "production-rule": "production rule", "cpsat": "CP-SAT",
              "budget-greedy": "CP-SAT"}


def is_rule(mode: str) -> bool:
    """A plan of the production rule (older plan files say "greedy")."""
    return MODE_NAMES.get(mode) == "production rule"


@dataclass(eq=False)
class PlanView:
    """One plan applied to the capture."""

    name: str  # how figures label it: "CP-SAT", "production rule", or the file name
    path: str
    mode: str
    budget: int
    doc: dict[str, Any] = field(repr=False)
    parsed: PlanFile = field(repr=False)
    table: np.ndarray  # (phases, tiles): table bytes per original phase after the plan (inserted phases folded in)
    cycles: np.ndarray  # (phases,): modelled cycles per original phase after the plan, one execution
    phases: dict[int, Phase] = field(repr=False)  # original phase id -> rewritten main phase (relayed ones only)
    hosts: dict[int, list[int]] = field(default_factory=dict)  # original phase id -> relay host tiles

    @property
    def program_table(self) -> np.ndarray:
        table: np.ndarray = self.table.sum(axis=0)
        return table

    def relayed_groups(self, phase: int) -> int:
        return sum(1 for r in self.parsed.relays if r.phase == phase)

    def relay_count(self, phase: int | None = None) -> int:
        return sum(len(r.segments) for r in self.parsed.relays if phase is None or r.phase == phase)

    def summary_phase(self, phase: int) -> dict[str, Any]:
        for p in self.doc.get("summary", {}).get("phases", []):
            if p.get("phase") == phase:
                return dict(p)
        return {}


@dataclass(eq=False)
class ReportData:
    capture: Capture = field(repr=False)
    machine: Machine
    budget: int
    phase_ids: list[int]
    labels: list[str]
    iterations: list[int]
    transfers: list[int]
    before: np.ndarray  # (phases, tiles) table bytes, direct
    before_cycles: np.ndarray  # (phases,)
    plans: list[PlanView]
    compare: list[dict[str, Any]] | None = None
    # the phases some plan changes, scheduled under the reference's rules: "direct" and each plan's name ->
    # phase id -> (lower bound, B1024 horizon), cycles without sync
    scheduled: dict[str, dict[int, tuple[int, int]]] = field(default_factory=dict)

    @property
    def tiles(self) -> int:
        return int(self.before.shape[1])

    def index(self, phase: int) -> int:
        try:
            return self.phase_ids.index(phase)
        except ValueError:
            raise InputError(f"no phase {phase} in the capture (phases: {_ids(self.phase_ids)})",
                             where="--phase") from None

    def primary(self) -> PlanView | None:
        """The plan the single-plan figures show: CP-SAT's when given, else the first."""
        for p in self.plans:
            if not is_rule(p.mode):
                return p
        return self.plans[0] if self.plans else None


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids[:20])) + (" ..." if len(ids) > 20 else "")


def load_plan_view(capture: Capture, machine: Machine, path: Path, before: np.ndarray,
                   before_cycles: np.ndarray) -> PlanView:
    """Apply a plan file; phases it does not touch keep their direct costs (``before``, ``before_cycles``)."""
    doc = read_json(path)
    parsed = parse_plan(doc, str(path))
    bind_plan(parsed, capture, str(path))
    tiles = capture.tile_count
    index = {p.phase: i for i, p in enumerate(capture.phases)}
    table = before.copy()
    cycles = before_cycles.copy()
    delta = {d.phase: d for d in parsed.delta}
    inserted: dict[int, list[Phase]] = {}
    for ins in parsed.inserted:
        assert ins.transfers is not None
        inserted.setdefault(ins.after, []).append(ins.transfers)
    rewritten: dict[int, Phase] = {}
    for orig in track(capture.phases, f"apply {path.name}", unit="phases"):
        d = delta.get(orig.phase)
        if d is None and orig.phase not in inserted:
            continue
        main = orig
        if d is not None:
            assert d.append is not None
            kept = setdiff1d(np.arange(orig.n, dtype=np.int64), d.remove)
            main = Phase.concat(orig.phase, [orig.take(kept), d.append], extra=orig.extra)
            rewritten[orig.phase] = main
        i = index[orig.phase]
        pc = tile_counters(main, machine, tiles, capture.allocations)
        table[i] = pc.table_bytes[:tiles]
        cycles[i] = pc.cycles
        for extra in inserted.get(orig.phase, []):
            ec = tile_counters(extra, machine, tiles, capture.allocations)
            table[i] += ec.table_bytes[:tiles]
            cycles[i] += ec.cycles
    hosts: dict[int, list[int]] = {}
    for r in parsed.relays:
        hosts.setdefault(r.phase, []).extend(s.tile for s in r.segments)
    mode = str(doc.get("mode", ""))
    budget = int(doc.get("budget", {}).get("table_bytes", machine.budget.table_bytes))
    return PlanView(MODE_NAMES.get(mode, path.name), str(path), mode, budget, doc, parsed, table, cycles, rewritten,
                    hosts)


def load_compare(path: Path) -> list[dict[str, Any]]:
    """``placer compare --json`` output: a list of one entry per budget."""
    doc = read_json(path)
    if not isinstance(doc, list) or not doc:
        raise InputError("expected the non-empty list that `placer compare --json` prints", path=str(path))
    for i, entry in enumerate(doc):
        if isinstance(entry, dict) and "greedy" in entry and RULE_KEY not in entry:
            entry[RULE_KEY] = entry["greedy"]  # written before the production rule had its own name
        for key in ("budget", RULE_KEY, "cpsat"):
            if not isinstance(entry, dict) or key not in entry:
                raise InputError(f"entry {i} has no {key!r}", path=str(path), where=f"[{i}]")
    return sorted(doc, key=lambda e: e["budget"])


def rule_decisions(compare: list[dict[str, Any]] | None) -> dict[int, dict[str, Any]]:
    """The production rule's verdict per phase, as `placer compare --json` records it (the rule ignores the
    budget, so any entry will do)."""
    for entry in compare or []:
        found = entry.get("production_rule_decisions")
        if found:
            return {int(d["phase"]): d for d in found}
    return {}


def gather(capture: Capture, machine: Machine, plan_paths: list[Path], budget: int | None,
           compare: Path | None) -> ReportData:
    if len(plan_paths) > 2:
        raise InputError(f"at most two plans (production rule and CP-SAT), got {len(plan_paths)}", where="PLAN")
    with task("cost model, direct program"):
        cost = program_cost(capture, machine)
    tiles = capture.tile_count
    before = np.stack([pc.table_bytes[:tiles] for pc in cost.phases]) if cost.phases else np.zeros((0, tiles),
                                                                                                   np.int64)
    before_cycles = np.array([pc.cycles for pc in cost.phases], np.int64)
    plans = [load_plan_view(capture, machine, p, before, before_cycles) for p in plan_paths]
    if len(plans) == 2 and plans[0].name == plans[1].name:
        for p in plans:
            p.name = f"{p.name} ({Path(p.path).name})"
    if budget is None:
        budget = plans[0].budget if plans else machine.budget.table_bytes
    changed = sorted({pid for p in plans for pid in p.phases})
    scheduled: dict[str, dict[int, tuple[int, int]]] = {"direct": {}, **{p.name: {} for p in plans}}
    for pid in track(changed, "schedule the phases the plans change", unit="phases"):
        f = phase_figures(capture.phases[capture.phase_ids().index(pid)], machine, tiles)
        scheduled["direct"][pid] = (f.bound, f.b1024)
        for p in plans:
            if pid in p.phases:
                g = phase_figures(p.phases[pid], machine, tiles)
                scheduled[p.name][pid] = (g.bound, g.b1024)
            else:
                scheduled[p.name][pid] = (f.bound, f.b1024)
    return ReportData(
        capture=capture,
        machine=machine,
        budget=budget,
        phase_ids=capture.phase_ids(),
        labels=[capture.label(p) for p in capture.phase_ids()],
        iterations=list(cost.iterations),
        transfers=[p.n for p in capture.phases],
        before=before,
        before_cycles=before_cycles,
        plans=plans,
        scheduled=scheduled,
        compare=load_compare(compare) if compare is not None else None,
    )


def tile_grid(machine: Machine, tiles: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Where each logical tile sits on the die: (grid row, grid column) by its physical id (docs/reference.md §1), and
    the grid's shape. Physical id = row_stride · row + column, so rows are the geometric rows."""
    logical = np.arange(tiles)
    physical = np.asarray(machine.physical(logical), np.int64)
    stride = machine.geometry.row_stride
    rows = physical // stride
    cols = physical % stride
    return rows, cols, int(rows.max(initial=0)) + 1, int(cols.max(initial=0)) + 1


def default_phase(data: ReportData) -> int:
    """The phase the schedule figure shows unless told: the one with the largest worst-tile table before the plan
    among phases a plan relays (else among all)."""
    worst = data.before.max(axis=1) if data.tiles else np.zeros(len(data.phase_ids), np.int64)
    relayed = {p for plan in data.plans for p in plan.hosts}
    candidates = [i for i, p in enumerate(data.phase_ids) if p in relayed] or list(range(len(data.phase_ids)))
    return data.phase_ids[max(candidates, key=lambda i: (int(worst[i]), -i))]


def default_tile(data: ReportData) -> int:
    """The tile the SRAM map shows unless told: the relay host holding the most relay buffers in the primary
    plan, else the program's worst tile."""
    plan = data.primary()
    if plan is not None and plan.hosts:
        counts = np.bincount([t for hs in plan.hosts.values() for t in hs], minlength=data.tiles)
        return int(np.argmax(counts))
    return int(np.argmax(data.before.sum(axis=0))) if data.tiles else 0
