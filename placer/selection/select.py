"""The selection driver: greedy incumbent, CP-SAT improvement, exact re-costing, never worse than the greedy."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placer.alternatives.groups import GroupScan, scan_capture
from placer.capture.model import Capture
from placer.machine import Machine
from placer.problem.cost import program_cost, tile_counters
from placer.progress import task
from placer.selection.cpsat import (
    EXACT_HOST_LIMIT,
    OBJECTIVES,
    PhaseFixed,
    Selection,
    StagedResult,
    exact_host_pairs,
    solve_staged,
)
from placer.selection.greedy import Decision, budget_plan, greedy_plan
from placer.selection.plan import Plan
from placer.selection.problem import SelectionProblem, build_problem
from placer.selection.realise import realise
from placer.solver import SolveResult, SolverParams, Status


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
    excess: int  # bytes over budget summed over tiles (table and fragments alike); 0 when it fits

    def key(self, order: tuple[str, ...]) -> tuple[int, ...]:
        """Compare plans: a plan that fits beats one that does not, a smaller violation beats a larger one."""
        return (0 if self.fits else 1, self.excess, *(getattr(self, name) for name in order))

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
        excess=_excess(cost.table_bytes, cost.fragments, plan.table_budget, plan.fragment_limit),
    )


def _excess(table: np.ndarray, frags: np.ndarray, budget: int, limit: int) -> int:
    return int(np.maximum(table - budget, 0).sum() + np.maximum(frags - limit, 0).sum())


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
           max_rounds: int = 3) -> Outcome:
    start = time.perf_counter()
    params = params or SolverParams()
    scans = scan_capture(capture)
    greedy, decisions = greedy_plan(capture, scans, machine, table_budget, fragment_limit)
    g_obj = plan_objectives(capture, greedy)
    if mode == "greedy":
        return Outcome(greedy, g_obj, greedy, g_obj, decisions, Status.UNKNOWN, None, "greedy",
                       runtime=time.perf_counter() - start, scans=scans)
    problem = build_problem(capture, machine, table_budget, fragment_limit, scans=scans, local_pack=local_pack)

    # the incumbent: the production greedy, or placer's budget-aware construction when that one does better
    best_plan, best_obj, source = greedy, g_obj, "greedy"
    if not g_obj.fits:
        with task("budget-greedy construction"):
            constructed = budget_plan(capture, scans, machine, table_budget, fragment_limit)
        c_obj = plan_objectives(capture, constructed)
        if c_obj.key(order) < g_obj.key(order):
            best_plan, best_obj, source = constructed, c_obj, "budget-greedy"
    incumbent = selection_from_plan(problem, best_plan)
    proof = irreducible_tiles(problem)
    if proof:
        # some tile stays over budget whatever is chosen: proved without search
        return Outcome(best_plan, best_obj, greedy, g_obj, decisions, Status.INFEASIBLE, None, source,
                       "proved infeasible by a per-tile lower bound (every group touching the tile at its best "
                       "option, no relay hosted)", 0, time.perf_counter() - start, problem, scans, proof)
    if not monolithic(problem):
        return _lns(capture, problem, params, order, best_plan, best_obj, source, greedy, g_obj, decisions,
                    start, scans)
    staged: StagedResult | None = None
    tighten: dict[int, int] = {}
    note = ""
    rounds = 0
    for rounds in range(1, max_rounds + 1):  # noqa: B007 -- rounds is reported
        # a further round only follows a realised plan that broke the budget (seam effects, rare)
        staged = solve_staged(problem, params, order, start=incumbent, tighten=tighten)
        if staged.selection is None:
            break
        plan = realise(problem, staged.selection, "cpsat")
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
    if status is Status.INFEASIBLE:
        # The model may be a little pessimistic (aggregated tile classes, seams between groups, a local-pack
        # replica's entry, lazy tightening): re-prove on a relaxation -- every tile named, every such slack given
        # back to the budget -- and claim infeasibility only if that fails too.
        explicit = build_problem(capture, machine, table_budget, fragment_limit, scans=scans,
                                 local_pack=local_pack, aggregate=False)
        if exact_host_pairs(explicit) <= EXACT_HOST_LIMIT:
            relaxed = {t: -s for t, s in model_slack(explicit).items()}
            proof = solve_staged(explicit, params, order[:1], tighten=relaxed)
            status = proof.status if proof.status is Status.INFEASIBLE else Status.UNKNOWN
            problem = explicit
        else:
            status = Status.UNKNOWN
        if status is not Status.INFEASIBLE:
            note = "CP-SAT found no plan within the budget, but could not prove that none exists"
    if source == "cp-sat" and staged is not None and status is Status.OPTIMAL:
        model_values = staged.values
        if any(model_values.get(n) is not None and model_values[n] != getattr(best_obj, n) for n in order):
            # the realised plan differs from the model's optimum (matching or seam effects): say so
            status = Status.FEASIBLE
            note = "the realised plan's exact figures differ from the model's optimum (host matching or seams)"
    irreducible = []
    if status is Status.INFEASIBLE:
        irreducible = irreducible_tiles(problem)
    if source != "cp-sat" and staged is not None and staged.selection is not None and not note:
        note = f"CP-SAT found nothing better than the {source} incumbent"
    if staged is not None and staged.selection is None and status is Status.UNKNOWN:
        note = f"CP-SAT found no solution in time; the {source} plan is kept"
    return Outcome(best_plan, best_obj, greedy, g_obj, decisions, status, staged, source, note, rounds,
                   time.perf_counter() - start, problem, scans, irreducible)


MONOLITHIC_OPTIONS = 1_500  # above this many relay options, CP-SAT works on one phase at a time (LNS)


def exact_model(problem: SelectionProblem) -> bool:
    """True when the model charges every host exactly (named tiles, exact host classes)."""
    return not problem.tile_classes and exact_host_pairs(problem) <= EXACT_HOST_LIMIT


def monolithic(problem: SelectionProblem) -> bool:
    options = sum(len(opts) - 1 for pd in problem.phases for opts in pd.options)
    return options <= MONOLITHIC_OPTIONS and exact_host_pairs(problem) <= EXACT_HOST_LIMIT


def phase_fixed(problem: SelectionProblem, plan: Plan, only: set[int] | None = None,
                previous: list[PhaseFixed] | None = None) -> list[PhaseFixed]:
    """Each selection phase's exact contribution under ``plan`` (recosting just the phases in ``only``)."""
    machine = plan.machine
    tiles = problem.tiles
    out = []
    for pi, pd in enumerate(problem.phases):
        if only is not None and pi not in only and previous is not None:
            out.append(previous[pi])
            continue
        pid = pd.phase.phase
        mine = [r for r in plan.relays if r.group.phase == pid]
        main, extra = plan.phase_rewrite(pd.phase)
        pc = tile_counters(main, machine, tiles)
        table, frags, cycles = pc.table_bytes.copy(), pc.fragments.copy(), pc.cycles
        if extra is not None:
            ext = tile_counters(extra, machine, tiles)
            table += ext.table_bytes
            frags += ext.fragments
            packs = [r for r in mine if r.variant == "local-pack"]
            kernel = max(int(machine.local_pack.estimate(r.segmentation.segment_bytes()).max()) for r in packs)
            cycles += ext.cycles + kernel
        out.append(PhaseFixed(table, frags, cycles * pd.iterations, sum(int(r.scratch_bytes.sum()) for r in mine),
                              sum(r.segmentation.count for r in mine)))
    return out


def objectives_from_fixed(problem: SelectionProblem, fixed: list[PhaseFixed]) -> Objectives:
    """The exact objectives of a plan from its per-phase contributions (equal to plan_objectives)."""
    tiles = problem.tiles
    index = {p.phase: i for i, p in enumerate(problem.capture.phases)}
    table = problem.direct.table_bytes[:tiles].copy()
    frags = problem.direct.fragments[:tiles].copy()
    selection_ids = {pd.phase.phase for pd in problem.phases}
    cycles = sum(pc.cycles * k for pc, k in zip(problem.direct.phases, problem.direct.iterations, strict=True)
                 if pc.phase not in selection_ids)
    for pd, fx in zip(problem.phases, fixed, strict=True):
        dp = problem.direct.phases[index[pd.phase.phase]]
        table += fx.table[:tiles] - dp.table_bytes[:tiles]
        frags += fx.fragments[:tiles] - dp.fragments[:tiles]
        cycles += fx.cycles
    return Objectives(
        fits=bool((table <= problem.table_budget).all() and (frags <= problem.fragment_limit).all()),
        cycles=int(cycles), table=int(table.max(initial=0)), fragments=int(frags.max(initial=0)),
        scratch=sum(fx.scratch for fx in fixed), relays=sum(fx.relays for fx in fixed),
        worst_tile=int(np.argmax(table)),
        excess=_excess(table, frags, problem.table_budget, problem.fragment_limit),
    )


def lower_bounds(problem: SelectionProblem) -> dict[str, int]:
    """Valid lower bounds on the first two objectives, cheap enough for any program size.

    Cycles: no relay lowers a tile's transmit or receive bytes over a phase and its local-pack extra phase together
    (a direct-receive forward carries the bytes the multicast did; local-pack moves them into the extra phase, run
    after), so each selection phase costs at least its sync plus max over tiles of ⌈max(tx, rx)/4⌉.
    Table: the worst tile is at least (a) any tile's direct table plus, for each group touching it, the most
    favourable option's change, and (b) the average over tiles of the least total table mass any choice leaves
    (rounding only adds).
    """
    machine = problem.machine
    bpc = machine.exchange.bytes_per_cycle
    selection_ids = {pd.phase.phase for pd in problem.phases}
    cycles = sum(pc.cycles * k for pc, k in zip(problem.direct.phases, problem.direct.iterations, strict=True)
                 if pc.phase not in selection_ids)
    mass = int(problem.direct.table_bytes[: problem.tiles].sum())
    for pd in problem.phases:
        st = pd.state
        per_tile = np.maximum(-(-st.tx[: problem.tiles] // bpc), -(-st.rx[: problem.tiles] // bpc))
        cycles += pd.iterations * (int(per_tile.max(initial=0)) + machine.exchange.sync_cycles)
        for opts in pd.options:
            mass += min(0, *(int(op.delta.raw.sum()) + (int(op.host.raw.sum()) if op.host is not None else 0)
                             + (int(op.ext.raw.sum()) if op.ext is not None else 0) for op in opts[1:]))
    best = _best_tables(problem)
    return {"cycles": cycles, "table": max(int(best.max(initial=0)), -(-mass // problem.tiles))}


def model_slack(problem: SelectionProblem) -> dict[int, int]:
    """Per tile, the most the model can overstate its table: per group touching it a pointer reset at a seam and a
    phase entry, per phase the rounding."""
    c = problem.machine.cost
    slack: dict[int, int] = {}
    for pd in problem.phases:
        touched: dict[int, int] = {}
        for opts in pd.options:
            for t in {t for op in opts[1:] for t in op.tiles.tolist() if t < problem.tiles}:
                touched[t] = touched.get(t, 0) + 1
        for t, groups in touched.items():
            slack[t] = slack.get(t, 0) + groups * (c.pointer_reset_extra_bytes + c.phase_entry_bytes) \
                + c.table_rounding - 1
    return slack


def _best_tables(problem: SelectionProblem) -> np.ndarray:
    """Per tile, a lower bound on its program table under any plan: every group touching it at its most favourable
    option, nothing hosted, and every slack the model's deltas leave taken in the tile's favour -- a seam between
    two relayed groups saving a pointer reset, a local-pack replica losing its phase entry, and the rounding of the
    phase's total to a multiple of 8."""
    best = problem.direct.table_bytes[: problem.tiles].astype(np.int64).copy()
    for pd in problem.phases:
        for opts in pd.options:
            per_tile: dict[int, int] = {}
            for op in opts[1:]:
                for t, d in zip(op.tiles.tolist(), op.delta.raw.tolist(), strict=True):
                    if t < problem.tiles:
                        per_tile[t] = min(per_tile.get(t, 0), d)
            for t, d in per_tile.items():
                best[t] += d
    for t, s in model_slack(problem).items():
        best[t] -= s
    return best


def _lns(capture: Capture, problem: SelectionProblem, params: SolverParams, order: tuple[str, ...],
         best_plan: Plan, best_obj: Objectives, source: str, greedy: Plan, g_obj: Objectives,
         decisions: list[Decision], start: float, scans: list[GroupScan]) -> Outcome:
    """CP-SAT over neighbourhoods of one phase each, the rest held at the incumbent, never losing it.

    The neighbourhoods are the phases whose worst tile carries at least 2 % of the budget (at least three), the
    heaviest first: the others cannot move a tile's table by more than that. Each neighbourhood optimises the first
    two objectives; scratch and relay count are compared only between whole plans.
    """
    heavy = sorted(range(len(problem.phases)),
                   key=lambda pi: -int(problem.phases[pi].state.table()[: problem.tiles].max()))
    windows = [pi for i, pi in enumerate(heavy)
               if i < 3 or problem.phases[pi].state.table()[: problem.tiles].max() >= problem.table_budget // 50]
    share = params.time_limit / max(1, len(windows))
    incumbent = selection_from_plan(problem, best_plan)
    fixed = phase_fixed(problem, best_plan)
    solved = improved = 0
    for pi in windows:
        staged = solve_staged(problem, params.with_overrides(time_limit=max(0.5, share)), order[:2],
                              start=incumbent, active={pi}, fixed=fixed)
        solved += 1
        if staged.selection is None:
            continue
        try:
            plan = realise(problem, staged.selection, "cpsat", only={pi}, keep=best_plan)
        except RuntimeError:
            continue
        new_fixed = phase_fixed(problem, plan, only={pi}, previous=fixed)
        obj = objectives_from_fixed(problem, new_fixed)
        if obj.key(order) < best_obj.key(order):
            best_plan, best_obj, source = plan, obj, "cp-sat"
            incumbent = staged.selection
            fixed = new_fixed
            improved += 1
    bounds = lower_bounds(problem)
    runtime = time.perf_counter() - start
    stages = []
    for name in order[:2]:
        value = getattr(best_obj, name)
        bound = bounds.get(name)
        status = Status.OPTIMAL if bound is not None and value <= bound else Status.FEASIBLE
        stages.append((name, SolveResult(status, float(value), float(bound) if bound is not None else None, runtime,
                                         solver="cp-sat lns")))
    status = Status.OPTIMAL if all(r.status is Status.OPTIMAL for _, r in stages) else Status.FEASIBLE
    if not best_obj.fits:
        status = Status.UNKNOWN
    staged_all = StagedResult(incumbent, stages, {n: getattr(best_obj, n) for n in order})
    note = (f"large program: CP-SAT over {solved} one-phase neighbourhoods ({len(problem.phases)} phases have "
            f"groups), {improved} improved the incumbent; bounds are valid lower bounds, not CP-SAT's")
    return Outcome(best_plan, best_obj, greedy, g_obj, decisions, status, staged_all, source, note, solved,
                   runtime, problem, scans, [])


def irreducible_tiles(problem: SelectionProblem) -> list[tuple[int, int]]:
    """Tiles whose table stays over budget even if every group touching them took its best option for them."""
    best = _best_tables(problem)
    over = np.flatnonzero(best > problem.table_budget)
    return [(int(t), int(best[t] - problem.table_budget)) for t in over[np.argsort(-best[over])][:20]]
