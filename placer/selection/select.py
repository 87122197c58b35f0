"""The selection driver: greedy incumbent, CP-SAT improvement, exact re-costing, never worse than the greedy."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placer.alternatives.groups import GroupScan, scan_capture
from placer.capture.model import Capture
from placer.machine import Machine
from placer.problem.cost import program_cost
from placer.selection.cpsat import OBJECTIVES, Selection, StagedResult, solve_staged
from placer.selection.greedy import Decision, greedy_plan
from placer.selection.plan import Plan
from placer.selection.problem import SelectionProblem, build_problem
from placer.selection.realise import realise
from placer.solver import Progress, SolverParams, Status


@dataclass(frozen=True)
class Objectives:
    """A plan's exact figures, recomputed with the cost model on the rewritten program."""

    fits: bool
    cycles: int
    table: int
    fragments: int
    scratch: int
    relays: int
    worst_tile: int

    def key(self, order: tuple[str, ...]) -> tuple[int, ...]:
        return (0 if self.fits else 1, *(getattr(self, name) for name in order))

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def plan_objectives(capture: Capture, plan: Plan) -> Objectives:
    rewritten = plan.rewritten(capture)
    cost = program_cost(rewritten, plan.machine)
    kernel = 0
    per_phase: dict[int, int] = {}
    for r in plan.relays:
        if r.variant == "local-pack":
            k = int(plan.machine.local_pack.estimate(r.segmentation.segment_bytes()).max())
            per_phase[r.group.phase] = max(per_phase.get(r.group.phase, 0), k)
    for phase_id, k in per_phase.items():
        kernel += k * capture.iterations(phase_id)
    return Objectives(
        fits=cost.fits(plan.table_budget, plan.fragment_limit),
        cycles=cost.cycles + kernel,
        table=cost.worst_table(),
        fragments=cost.worst_fragments(),
        scratch=sum(int(r.scratch_bytes.sum()) for r in plan.relays),
        relays=sum(r.segmentation.count for r in plan.relays),
        worst_tile=cost.worst_tile(),
    )


def selection_from_plan(problem: SelectionProblem, plan: Plan) -> Selection:
    """Express a plan (e.g. the greedy's) in the model's variables, to hint CP-SAT with it."""
    by_key = {(r.group.phase, r.group.index): r for r in plan.relays}
    class_of = {int(t): ei for ei, tc in enumerate(problem.tile_classes) for t in tc.tiles.tolist()}
    choice, hosts, counts = [], [], []
    for pd in problem.phases:
        row = []
        ph_hosts: dict[tuple[int, ...], list[int]] = {}
        ph_counts: dict[tuple[tuple[int, ...], int], int] = {}
        for opts in pd.options:
            g = opts[0].group
            r = by_key.get((g.phase, g.index))
            idx = 0
            if r is not None:
                for i, op in enumerate(opts):
                    if op.variant == r.variant and op.count == r.segmentation.count:
                        idx = i
                        for sig, t in zip(op.signatures(), r.hosts.tolist(), strict=True):
                            if t in class_of:
                                ph_counts[(sig, class_of[t])] = ph_counts.get((sig, class_of[t]), 0) + 1
                            else:
                                ph_hosts.setdefault(sig, []).append(int(t))
                        break
            row.append(idx)
        choice.append(row)
        hosts.append(ph_hosts)
        counts.append(ph_counts)
    return Selection(choice, hosts, counts)


@dataclass(eq=False)
class Outcome:
    plan: Plan
    objectives: Objectives
    greedy: Plan
    greedy_objectives: Objectives
    decisions: list[Decision]
    status: Status  # the CP-SAT status of the selection model (greedy mode: no solve, UNKNOWN)
    staged: StagedResult | None
    source: str  # "cp-sat" or "greedy" (the incumbent kept)
    note: str = ""
    rounds: int = 0
    runtime: float = 0.0
    problem: SelectionProblem | None = field(default=None, repr=False)
    scans: list[GroupScan] = field(default_factory=list, repr=False)
    irreducible: list[tuple[int, int]] = field(default_factory=list)  # (tile, bytes over) when proved infeasible


def select(capture: Capture, machine: Machine, table_budget: int, fragment_limit: int, *, mode: str = "cpsat",
           params: SolverParams | None = None, order: tuple[str, ...] = OBJECTIVES, local_pack: bool = True,
           progress: Progress | None = None, max_rounds: int = 3) -> Outcome:
    start = time.perf_counter()
    params = params or SolverParams()
    scans = scan_capture(capture)
    greedy, decisions = greedy_plan(capture, scans, machine, table_budget, fragment_limit)
    g_obj = plan_objectives(capture, greedy)
    if mode == "greedy":
        return Outcome(greedy, g_obj, greedy, g_obj, decisions, Status.UNKNOWN, None, "greedy",
                       runtime=time.perf_counter() - start, scans=scans)
    problem = build_problem(capture, machine, table_budget, fragment_limit, scans=scans, local_pack=local_pack)

    incumbent = selection_from_plan(problem, greedy)
    best_plan, best_obj, source = greedy, g_obj, "greedy"
    staged: StagedResult | None = None
    tighten: dict[int, int] = {}
    note = ""
    rounds = 0
    for rounds in range(1, max_rounds + 1):  # noqa: B007 -- rounds is reported
        # a further round only follows a realised plan that broke the budget (seam effects, rare)
        staged = solve_staged(problem, params, order, start=incumbent, progress=progress, tighten=tighten)
        if staged.selection is None:
            break
        plan, _ = realise(problem, staged.selection, "cpsat")
        obj = plan_objectives(capture, plan)
        if obj.key(order) < best_obj.key(order):
            best_plan, best_obj, source = plan, obj, "cp-sat"
        if obj.fits:
            break
        # the realised plan broke a budget the model kept (seam effects between groups): tighten those tiles
        cost = program_cost(plan.rewritten(capture), machine)
        over = np.flatnonzero(cost.table_bytes > table_budget)
        for t in over.tolist():
            tighten[t] = tighten.get(t, 0) + int(cost.table_bytes[t] - table_budget)
        incumbent = staged.selection
        note = f"tightened {len(over)} tiles after exact re-costing"
    status = staged.status if staged is not None else Status.UNKNOWN
    irreducible = []
    if status is Status.INFEASIBLE:
        irreducible = irreducible_tiles(problem)
    if source == "greedy" and staged is not None and staged.selection is not None and not note:
        note = "CP-SAT found nothing better than the greedy incumbent"
    if staged is not None and staged.selection is None and status is Status.UNKNOWN:
        note = "CP-SAT found no solution in time; the greedy plan is kept"
    return Outcome(best_plan, best_obj, greedy, g_obj, decisions, status, staged, source, note, rounds,
                   time.perf_counter() - start, problem, scans, irreducible)


def irreducible_tiles(problem: SelectionProblem) -> list[tuple[int, int]]:
    """Tiles whose table stays over budget even if every group touching them took its best option for them."""
    best = problem.direct.table_bytes[: problem.tiles].astype(np.int64).copy()
    for pd in problem.phases:
        gain = np.zeros(problem.tiles, np.int64)
        for opts in pd.options:
            per_tile: dict[int, int] = {}
            for op in opts[1:]:
                for t, d in zip(op.tiles.tolist(), op.delta.raw.tolist(), strict=True):
                    if t < problem.tiles:
                        per_tile[t] = min(per_tile.get(t, 0), d)
            for t, d in per_tile.items():
                gain[t] += d
        best += gain
    over = np.flatnonzero(best > problem.table_budget)
    return [(int(t), int(best[t] - problem.table_budget)) for t in over[np.argsort(-best[over])][:20]]
