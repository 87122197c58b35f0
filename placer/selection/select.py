"""The selection driver: greedy incumbent, CP-SAT improvement, exact re-costing, never worse than the greedy."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from placer.alternatives.groups import GroupScan, scan_capture
from placer.capture.model import Capture
from placer.cost.model import ProgramCost, program_cost, program_tiles
from placer.machine import Machine
from placer.modes import PlanMode, SelectionMode
from placer.progress import SolverCallback, task, track
from placer.selection import capacity
from placer.selection.bounds import hosted_mass_at, hosted_mass_bound, table_lp_bound
from placer.selection.columns import Caps, CycleCaps, Pool, Scheduled, combine, fixed_of
from placer.selection.cpsat import (
    EXACT_HOST_LIMIT,
    HostKey,
    PhaseFixed,
    Selection,
    StagedResult,
    exact_host_pairs,
    solve_staged,
)
from placer.selection.floors import Certificate, certificate, mass_floor, model_slack, tile_floors
from placer.selection.forced import ForcedPacking, forced_packing
from placer.selection.greedy import Decision, budget_plan, greedy_plan
from placer.selection.patterns import hosted_patterns_bound
from placer.selection.plan import Plan
from placer.selection.problem import SelectionProblem, bucket_hosts, build_problem, selection_scans
from placer.selection.realise import realise
from placer.selection.timing import OutOfTime, direct_timings, other_bounds, relay_free_bound, schedule_caps
from placer.solver import Cutoff, Deadline, SolveResult, SolverParams, Status
from placer.units import ceil_div, format_size

OBJECTIVES = ("cycles", "table", "scratch", "relays")  # the default lexicographic order (see ``select``)


def estimate_order(order: tuple[str, ...]) -> tuple[str, ...]:
    """The order the estimate's searches rank by: the estimate's cycles in place of scheduled ones."""
    return tuple("estimate" if n == "cycles" else n for n in order)


@dataclass(frozen=True)
class Objectives:
    """A plan's exact figures: its tables recomputed with the cost model on the rewritten program, its scheduled
    cycles measured on its rewritten phases (``placer.selection.columns``; 0 until measured)."""

    fits: bool
    cycles: int  # Σ over the program's phases of the scheduled lower bound (times Repeat iterations)
    b1024: int  # Σ over the selection phases of the reference's B1024 horizon (times Repeat iterations)
    estimate: int  # the estimate's cycles of the whole program (docs/cost.md): what the production rule judges by
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
        cycles=0, b1024=0, estimate=cost.cycles + kernel,
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
        ph_hosts: dict[HostKey, list[int]] = {}
        ph_counts: dict[tuple[HostKey, int], int] = {}
        for opts in pd.options:
            g = opts[0].group
            r = by_key.get((g.phase, g.index))
            idx = 0
            if r is not None:
                for i, op in enumerate(opts):
                    if op.variant == r.variant and op.count == r.segmentation.count:
                        idx = i
                        for sig, t in zip(pd.classes(op), r.hosts.tolist(), strict=True):
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


@dataclass(eq=False, kw_only=True)
class Outcome:
    """Everything one selection found: the plan kept and its exact figures, the production rule's, the search's
    stages and status, and how much of its work allowance it spent (built by keyword: it has many fields)."""

    plan: Plan
    objectives: Objectives
    greedy: Plan
    greedy_objectives: Objectives
    decisions: list[Decision]
    status: Status  # the CP-SAT status of the selection model (greedy mode: no solve, UNKNOWN)
    staged: StagedResult | None
    source: str  # "cp-sat" or which incumbent was kept ("greedy", "budget-greedy", "smaller budget")
    note: str = ""
    rounds: int = 0
    runtime: float = 0.0
    problem: SelectionProblem | None = field(default=None, repr=False)
    scans: list[GroupScan] = field(default_factory=list, repr=False)
    # why no plan fits, when a check that needs no search proves it (None for a CP-SAT proof over the whole program)
    certificate: Certificate | None = None
    work: float = 0.0  # CP-SAT deterministic seconds spent
    work_budget: float = 0.0  # what the search was granted
    backstop: bool = False  # the wall clock cut the search: this run is not reproducible
    scheduled: Scheduled | None = None  # the plan's scheduled figures
    greedy_scheduled: Scheduled | None = None  # the production rule plan's
    caps: CycleCaps | None = None  # the cycle caps the plan was chosen under (cycles first)
    pool: Pool | None = field(default=None, repr=False)  # the measured configurations (``cycle_front``)
    greedy_choice: list[int] = field(default_factory=list, repr=False)  # the rule's plan in the pool


@dataclass(eq=False)
class Prepared:
    """What does not depend on the budget: the group scans and every option's effect, computed once per capture and
    shared by every budget of a sweep."""

    scans: list[GroupScan]  # what the optimiser may relay
    problem: SelectionProblem
    full: list[GroupScan] | None = None  # every eligible group (the production rule's view)
    rule: tuple[Plan, list[Decision]] | None = None  # the production rule's plan and decisions, for every budget

    def for_budget(self, table_budget: int) -> SelectionProblem:
        return replace(self.problem, table_budget=table_budget)


def prepare(capture: Capture, machine: Machine, table_budget: int, fragment_limit: int, *,
            local_pack: bool = True, workers: int = 1) -> Prepared:
    direct = program_cost(capture, machine, workers)
    full = scan_capture(capture, gainful_only=False, workers=workers)
    scans = selection_scans(capture, direct, full)
    return Prepared(scans, build_problem(capture, machine, table_budget, fragment_limit, scans=scans,
                                         local_pack=local_pack, direct=direct, workers=workers), full)


ESTIMATE_SHARE = 0.5  # of a large program's search time left when the estimate's searches start: theirs
CYCLE_SLACK = 0.01  # share of the direct program's Σ lower bound a plan may add (cycles first; --cycle-slack)
TIGHTER_TARGETS = (0.8, 0.7)  # large programs: the budget-aware construction also aimed at these shares
SEARCH_END = 0.85  # share of the command's limit by which the search stops: the rest is re-costing and output
FRONT_END = 0.95  # compare: share of the limit by which the front stops (the rest writes the output)


@dataclass(frozen=True)
class SelectionSettings:
    """What ``select`` optimises and how, the same for every budget of a sweep: the mode, the CP-SAT parameters,
    the lexicographic order of the objectives, whether local-pack relays are offered, the rounds of the estimate's
    neighbourhood search, and (cycles first) the share of the direct program's Σ lower bound a plan may add."""

    mode: SelectionMode | str = SelectionMode.CPSAT
    params: SolverParams = field(default_factory=SolverParams)
    order: tuple[str, ...] = OBJECTIVES
    local_pack: bool = True
    max_rounds: int = 3
    cycle_slack: float = CYCLE_SLACK


@dataclass(frozen=True, eq=False)
class SelectionContext:
    """The circumstances of one ``select`` call: the progress display, the command's clock (``deadline``, started
    before loading; default: one started now, of ``params.time_limit``), what a sweep computed once for every
    budget (``prepared``), the deterministic work granted to CP-SAT (``work``; default: params.work_per_second ×
    params.time_limit), the seconds on that clock by which the search stops whatever work is left (``search_end``;
    default: ``SEARCH_END`` of the limit), and the plans found for other budgets of a sweep (``hints``: any that
    fits is a candidate incumbent)."""

    progress: SolverCallback | None = None
    deadline: Deadline | None = None
    prepared: Prepared | None = None
    work: float | None = None
    search_end: float | None = None
    hints: Sequence[Plan] = ()


@dataclass(eq=False)
class SearchClock:
    """The search's allowance: deterministic work (reproducible) and the command's wall clock (a backstop)."""

    deadline: Deadline
    work: float  # deterministic seconds
    end: float  # the search stops at this many seconds after the command started, whatever work is left
    spent: float = 0.0
    backstop: bool = False

    def wall_left(self) -> float:
        return self.end - self.deadline.elapsed()

    def charge(self, staged: StagedResult) -> None:
        self.spent += staged.work
        self.backstop |= staged.backstop


@dataclass(frozen=True)
class Incumbent:
    """The best plan so far, its exact figures, and where it came from (``Outcome.source``)."""

    plan: Plan
    objectives: Objectives
    source: str


@dataclass(frozen=True, eq=False)
class Search:
    """What every stage of one budget's search shares, so the stages agree on it by construction: the model, the
    CP-SAT parameters, the production rule's plan (every outcome is reported against it), the progress display,
    and the allowance. The clock is the one mutable part: each stage charges the work it spent to it."""

    capture: Capture
    problem: SelectionProblem
    params: SolverParams
    greedy: Plan  # the production rule's plan
    greedy_objectives: Objectives
    decisions: list[Decision]
    progress: SolverCallback | None
    start: float  # when ``select`` was called (perf_counter): every outcome's runtime counts from here
    scans: list[GroupScan]
    clock: SearchClock
    local_pack: bool = True  # local-pack options are offered


@dataclass(frozen=True, eq=False)
class _Rule:
    """What ``select`` needs whichever path it takes: the direct program, what may be relayed, and the production
    rule's plan with its figures."""

    direct: ProgramCost
    scans: list[GroupScan]
    plan: Plan
    objectives: Objectives
    decisions: list[Decision]
    costing: float  # wall seconds costing the rule's plan took: the constructions stop early enough to cost theirs


def select(capture: Capture, machine: Machine, table_budget: int, fragment_limit: int,
           settings: SelectionSettings = SelectionSettings(), context: SelectionContext = SelectionContext()
           ) -> Outcome:
    """Choose relays for one budget: ``settings`` say what to optimise and how, ``context`` the circumstances of
    this call (the command's clock, the work granted, when the search stops, a sweep's shared work and plans).

    With cycles first (the default order), the plan's scheduled cycles are capped: its Σ B1024 horizon no more
    than the production rule plan's, its Σ lower bound no more than the larger of the rule plan's and the direct
    program's plus ``settings.cycle_slack`` of the direct program's; the worst tile is minimised under the caps
    (then the cycles, the scratch, the relays). With the table first, nothing is capped."""
    start = time.perf_counter()
    params, order, prepared, hints = settings.params, settings.order, context.prepared, context.hints
    deadline = context.deadline or Deadline(params.time_limit, start)
    rule = _production_rule(capture, machine, table_budget, fragment_limit, params, prepared)
    t = deadline.mark("production rule", start)
    end = SEARCH_END * deadline.seconds if context.search_end is None else context.search_end
    # no measurement starts after the search's end: what is unmeasured then is reported so (UNMEASURED)
    until = deadline.start + end
    if settings.mode == SelectionMode.GREEDY:
        return _rule_only(_light_problem(capture, rule, prepared), rule, params.workers, until, start)
    est = estimate_order(order)
    if deadline.elapsed() >= end:
        return _out_of_time(_light_problem(capture, rule, prepared), rule, hints, est, params.workers, until, start)
    if prepared is not None:
        problem = prepared.for_budget(table_budget)
    else:
        problem = build_problem(capture, machine, table_budget, fragment_limit, scans=rule.scans,
                                local_pack=settings.local_pack, direct=rule.direct, workers=params.workers)
    t = deadline.mark("options", t)
    large = not monolithic(problem)
    work = params.work_per_second * params.time_limit if context.work is None else context.work
    # on a large program the estimate's searches run with the table first only, without local-pack options (with
    # them they found nothing the measured constructions do not: ``LNS_MIN_WORK``), and only when their share of
    # the work buys the neighbourhoods (``estimate_work``): with less, they took the measurements' time for nothing
    # (SigLIP b4 at 80 KiB and 60 s, the table first: 23 s of the constructive search at the estimate's bound, no
    # configuration measured, 77,968 B where cycles first ends at 74,592 B)
    estimating = not large or (order[0] != "cycles" and not settings.local_pack
                               and estimate_work(work) >= LNS_MIN_WORK)
    best, candidates, cutoff = _incumbents(problem, rule, order, large, hints, deadline, end, estimating)
    t = deadline.mark("incumbent", t)
    # the hosted mass is one LP: solved only when no incumbent fits (if one does, nothing can prove that none does)
    proof = certificate(problem) or (None if best.objectives.fits else hosted_certificate(problem))
    if proof is not None:
        return _proved_infeasible(problem, rule, best, proof, params.workers, until, start)
    # a construction the wall clock skipped or stopped is reported like a search the backstop cut
    clock = SearchClock(deadline, work, end, backstop=cutoff.fired)
    search = Search(capture, problem, params, rule.plan, rule.objectives, rule.decisions, context.progress, start,
                    rule.scans, clock, settings.local_pack)
    searched: Outcome | None = None
    if estimating:
        # the estimate's searches (table first, or a program small enough for the exact model): their plan is one
        # more source of configurations. On a large program with cycles first their time goes to measuring
        # instead: SigLIP b4 at 80 KiB, 33 s of neighbourhoods, none improving, left the plan unmeasured; SigLIP
        # b2 at 64 KiB, they left the schedule-true construction that fits at 50,640 B unmeasured, and the plan
        # was 61,784 B; SigLIP b4 at 72 KiB, where no incumbent fits, 20 s for nothing better left 21 or 8
        # configurations measured (the rule's plan kept, exit 4), where without them 31-42 are
        searched = _estimate_search(search, est, best, large, settings.max_rounds, settings.local_pack)
        best = Incumbent(searched.plan, searched.objectives, searched.source)
    plans = [(best.plan, best.source)] + [(p, n) for p, n in candidates if p is not best.plan]
    out = _scheduled(search, order, settings.cycle_slack, plans, searched)
    deadline.mark("search", t)
    return out


def _production_rule(capture: Capture, machine: Machine, table_budget: int, fragment_limit: int,
                     params: SolverParams, prepared: Prepared | None) -> _Rule:
    if prepared is not None:
        direct, full, scans = prepared.problem.direct, prepared.full, prepared.scans
    else:
        direct = program_cost(capture, machine, params.workers)
        full = scan_capture(capture, gainful_only=False, workers=params.workers)
        scans = selection_scans(capture, direct, full)
    ruled = prepared.rule if prepared is not None else None
    if ruled is None:
        # the rule does not look at the budget (docs/reference.md §5): a sweep computes it once, each budget reads it
        ruled = greedy_plan(capture, full, machine, table_budget, fragment_limit, direct, params.workers)
        if prepared is not None:
            prepared.rule = ruled
    greedy = Plan(ruled[0].mode, machine, table_budget, fragment_limit, list(ruled[0].relays))
    costed = time.perf_counter()
    g_obj = plan_objectives(capture, greedy)
    return _Rule(direct, scans, greedy, g_obj, ruled[1], time.perf_counter() - costed)


def _light_problem(capture: Capture, rule: _Rule, prepared: Prepared | None) -> SelectionProblem:
    """A problem without relay options, enough to measure plans when there is no search."""
    if prepared is not None:
        return prepared.problem
    g = rule.plan
    return SelectionProblem(capture, g.machine, program_tiles(capture, g.machine), g.table_budget, g.fragment_limit,
                            rule.scans, rule.direct)


def _rule_only(light: SelectionProblem, rule: _Rule, workers: int, until: float, start: float) -> Outcome:
    """Greedy mode: the production rule's plan, measured if the clock allows."""
    greedy, g_obj = rule.plan, rule.objectives
    scheduled: Scheduled | None = None
    with contextlib.suppress(OutOfTime):
        [(g_obj, scheduled)] = measure_plans(light, rule.decisions, [(greedy, "production rule")], workers, until)
    return Outcome(plan=greedy, objectives=g_obj, greedy=greedy, greedy_objectives=g_obj, decisions=rule.decisions,
                   status=Status.UNKNOWN, staged=None, source="greedy", runtime=time.perf_counter() - start,
                   scans=rule.scans, scheduled=scheduled, greedy_scheduled=scheduled,
                   note="" if scheduled is not None else UNMEASURED)


def _out_of_time(light: SelectionProblem, rule: _Rule, hints: Sequence[Plan], order: tuple[str, ...],
                 workers: int, until: float, start: float) -> Outcome:
    """No time is left to search; a sweep's smaller budgets may have found a better plan that fits this one too (the
    last is the best of them: each budget starts from the plans before it), and costing it is cheap."""
    greedy, g_obj = rule.plan, rule.objectives
    kept, k_obj, source = greedy, g_obj, "greedy"
    if hints:
        hinted = Plan(PlanMode.CPSAT, greedy.machine, greedy.table_budget, greedy.fragment_limit,
                      list(hints[-1].relays))
        h_obj = plan_objectives(light.capture, hinted)
        if h_obj.key(order) < k_obj.key(order):
            kept, k_obj, source = hinted, h_obj, "other budget"
    what = "the production rule's plan" if source == "greedy" else "the plan of a smaller budget"
    k_sched = g_sched = None
    with contextlib.suppress(OutOfTime):
        (k_obj, k_sched), (g_obj, g_sched) = measure_plans(light, rule.decisions, [(kept, source), (greedy, "rule")],
                                                           workers, until)
    return Outcome(plan=kept, objectives=k_obj, greedy=greedy, greedy_objectives=g_obj, decisions=rule.decisions,
                   status=Status.UNKNOWN, staged=StagedResult(None, [], {}), source=source,
                   note=f"the time limit was reached before the search could start: {what} is kept"
                   + ("" if k_sched is not None else f"; {UNMEASURED}"),
                   runtime=time.perf_counter() - start, scans=rule.scans, backstop=True, scheduled=k_sched,
                   greedy_scheduled=g_sched)


def _incumbents(problem: SelectionProblem, rule: _Rule, order: tuple[str, ...], large: bool, hints: Sequence[Plan],
                deadline: Deadline, end: float, estimating: bool) -> tuple[Incumbent, list[tuple[Plan, str]], Cutoff]:
    """The incumbent: the production rule's plan, placer's budget-aware constructions, or a plan of another budget
    (the best by the estimate's order), with every candidate (each is measured later) and the constructions'
    cutoff (``fired`` when the wall clock stopped or skipped one). ``estimating``: the estimate's searches follow
    (on a large program, the constructive search at the estimate's bound and the tighter targets are theirs)."""
    capture, greedy = problem.capture, rule.plan
    machine, table_budget, fragment_limit = greedy.machine, greedy.table_budget, greedy.fragment_limit
    est = estimate_order(order)
    best = Incumbent(greedy, rule.objectives, "greedy")
    candidates: list[tuple[Plan, str]] = []
    # the constructions stop where the search would, less the costing of what they built by then (a valid plan)
    costing = rule.costing
    cutoff = Cutoff(deadline.start + end - costing)
    scheduled_first = order[0] == "cycles"
    targets = [1.0] if not rule.objectives.fits or (large and not scheduled_first) else []
    if large and not scheduled_first and estimating:
        # the constructive search at the estimate's cycles bound (budget-independent: computed once per capture);
        # when it fits there, the estimate's cycles are settled and the budget-aware constructions have nothing
        # to add
        at_bound = _capacity_plan(problem, cutoff)
        costed = time.perf_counter()
        a_obj = plan_objectives(capture, at_bound)
        # costing a plan with relays takes longer than the rule's: the next construction stops early enough for
        # its own plan and the incumbent's selection to be costed before the search's end
        costing = max(costing, time.perf_counter() - costed)
        cutoff.at = deadline.start + end - 2 * costing
        if a_obj.key(est) < best.objectives.key(est):
            best = Incumbent(at_bound, a_obj, "capacity search")
        if a_obj.fits and a_obj.estimate <= lower_bounds(problem)["estimate"]:
            targets = []
        else:
            # the construction aimed below the budget: it relays more, which often lowers the worst tile at the
            # same cycles; fixed targets, so the choice is deterministic
            targets += TIGHTER_TARGETS
    last = 0.0  # wall seconds the previous construction took: the next one is not started if it would overrun
    for share in targets:
        if deadline.elapsed() + last >= end:
            cutoff.fired = True
            break
        target = int(share * table_budget)
        began = time.perf_counter()
        plan = budget_plan(capture, rule.scans, machine, target, fragment_limit, cutoff=cutoff)
        last = time.perf_counter() - began
        candidates.append((Plan(plan.mode, machine, table_budget, fragment_limit, plan.relays),
                           "budget-greedy" if share == 1.0 else f"budget-greedy aimed at {target:,} B"))
    for h in hints:
        candidates.append((Plan(PlanMode.CPSAT, machine, table_budget, fragment_limit, list(h.relays)), "other budget"))
    for plan, name in track(candidates, "cost incumbent candidates", unit="plans"):
        obj = plan_objectives(capture, plan)
        if obj.key(est) < best.objectives.key(est):
            best = Incumbent(plan, obj, name)
    if not best.objectives.fits or not scheduled_first:
        # nothing fits yet (or the table comes first): the host-aware construction, which cuts heavy operands so
        # that no host takes one whole (docs/selection.md). Only then: its configurations cost measuring time the
        # schedule-true constructions would otherwise get
        for plans in (_host_aware_plans, _fewer_cuts_plans):
            if plans is _fewer_cuts_plans and scheduled_first and best.objectives.fits:
                break  # a fallback for the table: with the cycles first its time goes to the search
            for plan, name in plans(problem, cutoff):
                candidates.append((plan, name))
                obj = plan_objectives(capture, plan)
                if obj.key(est) < best.objectives.key(est):
                    best = Incumbent(plan, obj, name)
    return best, candidates, cutoff


def _proved_infeasible(problem: SelectionProblem, rule: _Rule, best: Incumbent, proof: Certificate,
                       workers: int, until: float, start: float) -> Outcome:
    """No plan fits, proved without search (``proof`` says why)."""
    greedy = rule.plan
    why = ("a tile's floor (every group touching it at its most favourable option, nothing hosted)" if proof.tiles
           else "the least total table mass, spread over every tile" if proof.mass is not None
           else "the least total table mass with every segment hosted where it fits under the budget")
    best_obj, g_obj = best.objectives, rule.objectives
    b_sched = g_sched = None
    with contextlib.suppress(OutOfTime):
        (best_obj, b_sched), (g_obj, g_sched) = measure_plans(problem, rule.decisions, [(best.plan, best.source),
                                                                                        (greedy, "rule")],
                                                              workers, until)
    return Outcome(plan=best.plan, objectives=best_obj, greedy=greedy, greedy_objectives=g_obj,
                   decisions=rule.decisions, status=Status.INFEASIBLE, staged=None, source=best.source,
                   note=f"proved infeasible without search: {why} is over the budget", rounds=0,
                   runtime=time.perf_counter() - start, problem=problem,
                   scans=rule.scans, certificate=proof, scheduled=b_sched, greedy_scheduled=g_sched)


def hosted_certificate(problem: SelectionProblem) -> Certificate | None:
    """No plan fits when the hosted mass at the budget is over it (docs/selection.md, "Bounds", (f)): one linear
    program, about a tenth of a second on a one-layer program (its size grows with the options'). It is solved only
    where the direct tables' mean, less the slack, is over the budget: the LP's least change is never above zero
    (every group may stay direct), so elsewhere its mean cannot be over."""
    mass = mass_floor(problem)
    if not problem.tiles or -(-(mass.direct - mass.slack) // problem.tiles) <= problem.table_budget:
        return None
    at = hosted_mass_at(problem, problem.table_budget)
    return Certificate((), None, at) if at is not None and at.floor > problem.table_budget else None


def _estimate_search(search: Search, order: tuple[str, ...], best: Incumbent, large: bool, max_rounds: int,
                     local_pack: bool) -> Outcome:
    """CP-SAT by the estimate's cycles (``order``). On a large program it leaves part of the search's time to
    measuring what it and the schedule-true constructions find (each measured phase is scheduled)."""
    clock = search.clock
    end, work = clock.end, clock.work
    if large:
        # half of what is left of the wall, and the same share of the work: a fixed share, so that the work does
        # not depend on the clock (with all of it, every 60 s table-first solve of the one-layer programs was cut
        # by the wall clock, with no neighbourhood improving)
        clock.end = clock.deadline.elapsed() + ESTIMATE_SHARE * (end - clock.deadline.elapsed())
        clock.work = estimate_work(work)
        # the estimate at its bound, then the table: the estimate's best plans when the table comes first
        searched = _at_cycles_bound(search, ("estimate", *(n for n in order if n != "estimate")), best)
        if searched is None:
            searched = _lns(search, order, best)
    else:
        searched = _monolithic(search, order, best, max_rounds, local_pack)
    clock.end, clock.work = end, work
    return searched


def _skipped(search: Search) -> str:
    """Why a large program's table-first search did without the estimate's searches."""
    if search.local_pack:
        return ("large program with local-pack options: the estimate's searches do not run (there they found nothing "
                "the measured constructions do not; docs/selection.md): the measured constructions were combined")
    share = estimate_work(search.clock.work)
    limit = LNS_MIN_WORK / estimate_work(search.params.work_per_second)
    return (f"the estimate's neighbourhood search needs {LNS_MIN_WORK:g} deterministic s of work, its share of "
            f"this run's is {share:g} (--time-limit {limit:g} or more): the measured constructions were combined")


def estimate_work(work: float) -> float:
    """The deterministic work the estimate's searches get on a large program: ``ESTIMATE_SHARE`` of the search's."""
    return ESTIMATE_SHARE * work


SLACKS = (0.0, 0.02, 0.05, 0.1)  # the schedule-true construction's targets: each phase's bound + this share
# improving moves of each schedule-true construction: the release condition makes most swaps fail, and on SigLIP b2
# 3,000 rounds took 18 s of the search for no better combination than this many
SCHEDULED_ROUNDS = 200
COMBINE_SECONDS = 5.0  # the combination's deterministic work (a multiple-choice model: about a second)
COMBINE_END = 0.92  # share of the command's limit by which the combination's wall-clock backstop stops it
UNMEASURED = ("the time limit was reached before the plan's scheduled cycles were measured: its cycles are the "
              "estimate's only (a longer --time-limit measures them)")



def rule_phases(decisions: list[Decision]) -> list[int]:
    return sorted(d.phase for d in decisions if d.accepted)


def measure_plans(problem: SelectionProblem, decisions: list[Decision], plans: list[tuple[Plan, str]],
                  workers: int, until: float | None = None) -> list[tuple[Objectives, Scheduled]]:
    """Each plan's exact objectives, scheduled cycles included (measured over the phases any of them relays and
    the rule's); :class:`OutOfTime` when the clock passes ``until`` first."""
    ids = sorted(set(rule_phases(decisions)) | {r.group.phase for plan, _ in plans for r in plan.relays})
    pool = Pool(problem, ids, workers, until)
    return [measure(pool, pool.add(plan, name)) for plan, name in plans]


def measure(pool: Pool, choice: list[int]) -> tuple[Objectives, Scheduled]:
    """A choice's exact objectives, scheduled cycles included."""
    plan = pool.plan(choice)
    sched = pool.scheduled(choice)
    obj = plan_objectives(pool.problem.capture, plan)
    return replace(obj, cycles=sched.bound, b1024=sched.b1024_change), sched


def _scheduled(search: Search, order: tuple[str, ...], cycle_slack: float, plans: list[tuple[Plan, str]],
               searched: Outcome | None) -> Outcome:
    """Choose by scheduled cycles (docs/selection.md, "Scheduled cycles"): measure the configurations of the
    production rule, the incumbents, the estimate's search (when it ran) and the schedule-true construction at
    each of ``SLACKS``, then combine them (``columns.combine``) under the cycle caps when cycles come first."""
    capture, problem, params, clock, greedy = search.capture, search.problem, search.params, search.clock, search.greedy
    workers = params.workers
    ids = sorted({pd.phase.phase for pd in problem.phases} | set(rule_phases(search.decisions)))
    until = clock.deadline.start + clock.end
    try:
        # what every choice needs: the direct phases, the rule's configurations, the unchanged phases' bounds
        pool = Pool(problem, ids, workers, until)
        rule_choice = pool.add(greedy, "production rule")
        other = other_bounds(problem, ids, workers, until)
    except OutOfTime:
        return _unmeasured(search, order, plans, searched)
    cut = False
    try:
        for plan, name in plans:
            pool.add(plan, name)
    except OutOfTime:
        cut = True
    last = 0.0  # wall seconds the previous construction and its measurement took: the next one's measuring is
    # skipped if it would run past the search's end (less the combination's share)
    # when the rule's plan does not fit, a plan that does may need more relays than the caps allow (SigLIP b4: no
    # plan within them fits), and the loosest targets' constructions are what it is made of (SigLIP b4 with 120 s,
    # every construction measured: the plans at 72 and 80 KiB both use +10 % and +5 %, hosts in the rule's
    # order): they are built first, so a clock that stops the list early has them
    loosest_first = not search.greedy_objectives.fits
    for name, build in scheduled_constructions(problem, clock, loosest_first):
        if cut or clock.wall_left() <= 0:
            cut = True
            break
        began = time.perf_counter()
        plan, fired = build()  # a second or less, stopped at the search's end: built before the clock is asked
        cut |= fired
        built = Plan(plan.mode, problem.machine, problem.table_budget, problem.fragment_limit, plan.relays)
        if not pool.unmeasured(built):
            # nothing new to measure: nothing the clock could have cut (SigLIP b4's last uniform construction,
            # skipped at 45 s of 60 before it was built, made the run depend on the machine's speed for nothing)
            pool.add(built, name)
            continue
        if clock.wall_left() - COMBINE_SECONDS <= last:
            cut = True
            break
        try:
            pool.add(built, name)
        except OutOfTime:
            cut = True
        last = time.perf_counter() - began
    direct_bound, direct_b = pool.figures(pool.direct())
    rule_bound, rule_b = pool.figures(rule_choice)
    if order[0] == "cycles":
        cap = Caps(bound=max(rule_bound, direct_bound) + int(cycle_slack * (other + direct_bound)), b1024=rule_b)
        stages = (order[1], "cycles", *order[2:]) if len(order) > 1 else ("table", "cycles")
    else:
        cap = Caps()
        stages = order
    # deterministic, the combination's work is its COMBINE_SECONDS whatever the clock says, so that its answer
    # does not depend on the machine's speed; the wall clock only backstops it: at the search's end, or when that
    # is the command's (one budget), at COMBINE_END of its limit (SigLIP b4 measured every construction by 47-50 s
    # of 60, and the combination then had less than its share). Not deterministic, its seconds are what is left.
    deadline = clock.deadline
    if params.deterministic:
        alone = clock.end >= SEARCH_END * deadline.seconds
        seconds = COMBINE_SECONDS
        backstop = deadline.start + (max(clock.end, COMBINE_END * deadline.seconds) if alone else clock.end)
    else:
        seconds, backstop = max(0.2, min(COMBINE_SECONDS, clock.wall_left())), None
    with task(f"combine {pool.size()} measured phase configurations"):
        comb = combine(pool, cap, replace(params, time_limit=seconds), stages, start=rule_choice, until=backstop)
    choice = comb.choice if comb is not None else rule_choice
    cut = cut or (comb is not None and comb.backstop)
    plan = pool.plan(choice)
    obj, sched = measure(pool, choice)
    g_obj, g_sched = measure(pool, rule_choice)
    source = "production rule"
    if choice != rule_choice:
        used = sorted({pool.columns[k][c].source for k, c in enumerate(choice) if c})
        source = "combined: " + "; ".join(used) if used else "all direct"
    if obj.key(_capped(order)) > g_obj.key(_capped(order)) and obj.fits <= g_obj.fits:
        plan, obj, sched, choice, source = greedy, g_obj, g_sched, rule_choice, "production rule"
    if order[0] == "table" and "hosted_mass" not in problem.shared and _bound_wall(clock) > HOSTED_MIN_WALL:
        with task("hosted mass bound"):  # budget-independent; below any plan, so this one bounds its search
            problem.shared["hosted_mass"] = hosted_mass_bound(problem, obj.table)
    if order[0] == "table" and "hosted_mass" in problem.shared and "hosted_patterns" not in problem.shared \
            and _bound_wall(clock) > PATTERNS_MIN_WALL:
        with task("hosted patterns bound"):  # as the hosted mass: budget-independent, below any plan
            problem.shared["hosted_patterns"] = hosted_patterns_bound(
                problem, lower_bounds(problem)["table"], obj.table,
                until=time.perf_counter() + _bound_wall(clock))
    packs: list[ForcedPacking] = []
    if order[0] == "table":
        forced: dict[int, list[ForcedPacking]] = problem.shared.setdefault("forced_packing", {})
        if obj.table not in forced and _bound_wall(clock) > FORCED_MIN_WALL:
            with task("local-pack relays the table forces"):  # for this worst tile, whatever the budget
                forced[obj.table] = forced_packing(
                    problem, obj.table, until=time.perf_counter() + min(_bound_wall(clock), FORCED_MAX_WALL))
        packs = forced.get(obj.table, [])
    runtime = time.perf_counter() - search.start
    bounds = lower_bounds(problem)
    cycles_bound = other + sum(relay_free_bound(problem, pid) * capture.iterations(pid) for pid in ids) \
        + sum(f.cycles * capture.iterations(f.phase) for f in packs)
    table_bound = bounds["table"]  # the estimate searches' bounds hold at the estimate's cycles only
    stages_out = [
        ("cycles", SolveResult(Status.OPTIMAL if obj.cycles <= cycles_bound else Status.FEASIBLE, float(obj.cycles),
                               float(cycles_bound), runtime, solver="measured (scheduled lower bound)")),
        ("table", SolveResult(Status.OPTIMAL if obj.table <= table_bound else Status.FEASIBLE, float(obj.table),
                              float(table_bound), runtime, solver="cp-sat over measured configurations",
                              work=clock.spent, backstop=clock.backstop or cut)),
    ]
    status = Status.OPTIMAL if all(r.status is Status.OPTIMAL for _, r in stages_out) and obj.fits else \
        Status.FEASIBLE if obj.fits else Status.UNKNOWN
    held = None
    if cap.bound is not None and cap.b1024 is not None:
        held = CycleCaps(other + cap.bound, cap.b1024 - direct_b, cycle_slack, comb is None or comb.capped)
    note = (f"scheduled cycles: {pool.size()} phase configurations measured, combined "
            + (f"under the caps Σ lower bound ≤ {held.lower_bound:,} and Σ B1024 change ≤ {held.b1024_change:+,}"
               if held is not None else "without cycle caps")
            + (f"; combination over them {comb.table.status.value}" if comb is not None else "")
            + ("; the table bound holds for every plan, capped or not: the caps are not in it (`placer compare` "
               "prices them)" if held is not None and held.held else "")
            + ("; no measured plan within the caps fits the budget: the caps were relaxed (the budget first)"
               if comb is not None and cap.bound is not None and not comb.capped else "")
            + ("; the cycles bound counts the local-pack relays the table forces (phase, kernel cycles: "
               + ", ".join(f"{f.phase}: {f.kernel:,}" for f in packs) + ")" if packs else "")
            + (f"; {searched.note}" if searched is not None and searched.note else "")
            + (f"; {_skipped(search)}" if searched is None and order[0] != "cycles" else ""))
    proof: Certificate | None = None
    if searched is not None and searched.status is Status.INFEASIBLE and not obj.fits:
        # the estimate's search proved that no plan fits the budget, whatever its cycles
        status, proof = Status.INFEASIBLE, searched.certificate
    staged = StagedResult(None, stages_out, {n: getattr(obj, n) for n in order})
    return Outcome(plan=plan, objectives=obj, greedy=greedy, greedy_objectives=g_obj, decisions=search.decisions,
                   status=status, staged=staged, source=source, note=note, rounds=pool.size(), runtime=runtime,
                   problem=problem, scans=search.scans, certificate=proof, work=clock.spent,
                   work_budget=clock.work,
                   backstop=clock.backstop or cut, scheduled=sched, greedy_scheduled=g_sched, caps=held, pool=pool,
                   greedy_choice=rule_choice)


def _bound_wall(clock: SearchClock) -> float:
    """Wall seconds left for the table bounds computed after the search (the table first): to the search's end,
    or, when that end is the command's (one budget), to the command's limit less ``OUTPUT_SHARE`` of it for the
    re-costing and the output. Only what is reported as the bound depends on it, never the plan."""
    deadline = clock.deadline
    if clock.end >= SEARCH_END * deadline.seconds:
        return deadline.remaining() - OUTPUT_SHARE * deadline.seconds
    return clock.wall_left()


def _unmeasured(search: Search, order: tuple[str, ...], plans: list[tuple[Plan, str]], searched: Outcome | None
                ) -> Outcome:
    """The time limit passed before even the production rule's plan was measured: with cycles first the rule's
    plan is kept when it fits (its schedule is the rule's by definition), otherwise the estimate's best plan; the
    cycles are reported unmeasured (0, no schedule)."""
    greedy, g_obj, clock = search.greedy, search.greedy_objectives, search.clock
    best_plan, source = plans[0]
    if order[0] == "cycles" and g_obj.fits:
        plan, obj, source = greedy, g_obj, "production rule"
    else:
        plan, obj = best_plan, plan_objectives(search.capture, best_plan)
        if obj.key(estimate_order(order)) > g_obj.key(estimate_order(order)):
            plan, obj, source = greedy, g_obj, "production rule"
    return Outcome(plan=plan, objectives=obj, greedy=greedy, greedy_objectives=g_obj, decisions=search.decisions,
                   status=Status.UNKNOWN, staged=searched.staged if searched is not None else None, source=source,
                   note=UNMEASURED, rounds=0, runtime=time.perf_counter() - search.start, problem=search.problem,
                   scans=search.scans, work=clock.spent, work_budget=clock.work, backstop=True)


def scheduled_constructions(problem: SelectionProblem, clock: SearchClock, loosest_first: bool = False
                            ) -> list[tuple[str, Callable[[], tuple[Plan, bool]]]]:
    """The schedule-true constructions, in the order they are tried, each as (name, build): the capacity
    construction under each of ``SLACKS``'s targets, tightest first or (``loosest_first``) loosest first (its
    hosts as it placed them, then in the production rule's order), then every group of a phase relayed alike at
    each of its relay options, hosts in the rule's order, under the loosest targets (on SigLIP b2's QKV input, 36
    segments per group: B1024 18,394 cycles, the rule's 18,870). They do not depend on the budget: a sweep's
    budgets share what was built (``problem.shared``); a construction the search's end cut short is not kept.
    ``build`` returns the plan and whether it was cut."""
    cache: dict[str, Plan] = problem.shared.setdefault("scheduled_plans", {})
    timings = direct_timings(problem, [pd.phase.phase for pd in problem.phases])

    def caps_at(eps: float) -> list[capacity.PhaseCaps]:
        return schedule_caps(problem, timings, [timings[pd.phase.phase].figures.bound
                                                + int(eps * timings[pd.phase.phase].figures.bound)
                                                for pd in problem.phases])

    def cached(name: str, make: Callable[[Cutoff], Plan]) -> tuple[str, Callable[[], tuple[Plan, bool]]]:
        def build() -> tuple[Plan, bool]:
            hit = cache.get(name)
            if hit is not None:
                return hit, False
            cutoff = Cutoff(clock.deadline.start + clock.end)
            with task(f"schedule-true {name}"):
                plan = make(cutoff)
            if not cutoff.fired:
                cache[name] = plan
            return plan, cutoff.fired
        return name, build

    def greedy_at(eps: float, highest: bool) -> Callable[[Cutoff], Plan]:
        def make(cutoff: Cutoff) -> Plan:
            caps = caps_at(eps)
            base = cache.get(f"construction at +{eps:.0%}")
            if base is None:
                base = capacity.relay_greedy(problem, caps, cutoff=cutoff, rounds=SCHEDULED_ROUNDS)
            if not highest:
                return base
            return capacity.place_segments(problem, capacity.plan_choice(problem, base), caps, prefer="highest")
        return make

    def uniform(rank: int) -> Callable[[Cutoff], Plan]:
        def make(_cutoff: Cutoff) -> Plan:
            loose = caps_at(SLACKS[-1])
            return capacity.place_segments(problem, capacity.uniform_choice(problem, loose, rank), loose,
                                           prefer="highest")
        return make

    out = []
    for eps in sorted(SLACKS, reverse=loosest_first):
        out.append(cached(f"construction at +{eps:.0%}", greedy_at(eps, False)))
        out.append(cached(f"construction at +{eps:.0%}, hosts in the rule's order", greedy_at(eps, True)))
    ranks = max((len(opts) for pd in problem.phases for opts in pd.options), default=1)
    out += [cached(f"every group at its relay option {rank}, hosts in the rule's order", uniform(rank))
            for rank in range(1, ranks)]
    return out


FRONT_SLACKS: tuple[float | None, ...] = (0.0, 0.0025, 0.005, 0.01, 0.02, 0.05, None)  # None: no cap at all


@dataclass(frozen=True)
class FrontPoint:
    """The least worst tile the measured configurations allow under one cycle cap (``cycle_front``)."""

    slack: float | None  # Σ lower bound within this share of the direct program's; None: no cycle cap at all
    fits: bool
    table: int
    cycles: int  # Σ lower bound, program
    b1024_change: int
    relays: int
    b1024_capped: bool = True  # Σ B1024 horizon no more than the rule plan's (False with a slack: that cap's price)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Front:
    """``cycle_front``'s points, and whether the command's clock cut them short (points missing, or a solve
    stopped by the wall clock: then the front depends on the machine's speed)."""

    points: list[FrontPoint]
    cut: bool = False


def cycle_front(outcome: Outcome, params: SolverParams, deadline: Deadline | None = None) -> Front:
    """The trade-off between the worst tile and the scheduled cycles (``placer compare``): for each of
    ``FRONT_SLACKS``, the combination of the outcome's measured configurations with the least worst tile whose
    Σ lower bound is within the slack (and whose Σ B1024 horizon is no more than the production rule plan's;
    without a slack, nothing is capped). Each point is optimal over the measured configurations only.

    One more point, at the outcome's own slack, drops the B1024 cap and keeps the Σ lower bound's: what keeping
    the reference's scheduler as fast as under the rule's plan costs in table bytes. That cap, not the lower
    bound's, is what holds the default's worst tile up on the bundled programs (docs/selection.md, "What the
    gap is made of"), and no bound placer knows reaches through it.

    With a ``deadline`` the front stops at ``FRONT_END`` of its limit: each solve's wall clock is cut there, and
    the points not started by then are left out (``Front.cut``)."""
    pool = outcome.pool
    if pool is None:
        return Front([])
    problem = pool.problem
    direct_bound, direct_b = pool.figures(pool.direct())
    rule_bound, rule_b = pool.figures(outcome.greedy_choice)
    other = other_bounds(problem, pool.ids, params.workers)
    own = outcome.caps.slack if outcome.caps is not None else CYCLE_SLACK

    end = None if deadline is None else FRONT_END * deadline.seconds
    cut = False

    def point(slack: float | None, caps: Caps, start: list[int]) -> tuple[FrontPoint, list[int]] | None:
        nonlocal cut
        given = params
        if end is not None and deadline is not None:
            left = end - deadline.elapsed()
            if left <= 0:
                cut = True
                return None
            given = replace(params, backstop=left)
        comb = combine(pool, caps, given, ("table", "cycles"), start=start)
        cut = cut or (comb is not None and comb.backstop)
        if comb is None or (slack is not None and not comb.capped):
            return None
        bound, b1024 = pool.figures(comb.choice)
        table = int(pool.tables(comb.choice).max(initial=0))
        relays = sum(pool.columns[k][c].fixed.relays for k, c in enumerate(comb.choice))
        return FrontPoint(slack, table <= problem.table_budget, table, other + bound, b1024 - direct_b, relays,
                          caps.b1024 is not None), comb.choice

    def cap_at(slack: float) -> int:
        return max(rule_bound, direct_bound) + int(slack * (other + direct_bound))

    # each cap admits every plan of the one before: hinted with that point, a point is never worse. The points
    # are solved by what they tell (the ladder up to the outcome's own slack, the side point, no cap, then the
    # looser ladder, which seldom moves), so a front the clock cuts short loses the least; listed in ladder order
    ladder = sorted({*(s for s in FRONT_SLACKS if s is not None), own})
    got: dict[tuple[float | None, bool], FrontPoint] = {}
    start = outcome.greedy_choice
    for slack in [s for s in ladder if s <= own]:
        found = point(slack, Caps(cap_at(slack), rule_b), start)
        if found is not None:
            got[slack, True], start = found
    at_own, side_start = start, start
    side = point(own, Caps(cap_at(own), None), start)  # the same Σ lower bound, the B1024 horizon free
    if side is not None:
        got[own, False], side_start = side
    found = point(None, Caps(), side_start)
    if found is not None:
        got[None, False] = found[0]
    start = at_own
    for slack in [s for s in ladder if s > own]:
        found = point(slack, Caps(cap_at(slack), rule_b), start)
        if found is not None:
            got[slack, True], start = found
    keys = [k for s in ladder for k in ((s, True), (s, False))] + [(None, False)]
    out = [got[k] for k in keys if k in got]
    return Front(out, cut)


def _capped(order: tuple[str, ...]) -> tuple[str, ...]:
    """How two measured plans compare once the caps hold: the table before the cycles."""
    return (order[1], "cycles", *order[2:]) if order[0] == "cycles" and len(order) > 1 else order


def _monolithic(search: Search, order: tuple[str, ...], best: Incumbent, max_rounds: int, local_pack: bool
                ) -> Outcome:
    """CP-SAT on the whole selection model from ``best``, re-costing what it finds exactly; a realised plan that
    breaks the budget tightens the tiles it broke for another round."""
    capture, problem, params, clock = search.capture, search.problem, search.params, search.clock
    machine, table_budget, fragment_limit = problem.machine, problem.table_budget, problem.fragment_limit
    incumbent = selection_from_plan(problem, best.plan)
    staged: StagedResult | None = None
    tighten: dict[int, int] = {}
    note = ""
    rounds = 0
    bounds = lower_bounds(problem)
    if _small(problem):
        # a model this small is proved faster by one worker than by two interleaved ones (the demo: 1.4 instead
        # of 4.8 deterministic s); still deterministic, and the same for every worker count asked for
        params = replace(params, workers=1)
    for rounds in range(1, max_rounds + 1):
        # a further round only follows a realised plan that broke the budget (seam effects, rare); it gets half
        # the work of the one before (fixed shares: deterministic)
        share = clock.work / (2 ** (rounds - 1)) / (2 - 2 ** (1 - max_rounds))
        staged = solve_staged(problem, replace(params, time_limit=share), order, start=incumbent,
                              progress=search.progress, tighten=tighten, lower=bounds if not tighten else None,
                              wall=clock.wall_left)
        clock.charge(staged)
        if staged.selection is None:
            break
        try:
            plan = realise(problem, staged.selection, PlanMode.CPSAT)
        except RuntimeError as e:
            # the model's hosting counts could not be matched to tiles (aggregated tile classes): the incumbent
            # stays, and the measured configurations decide
            note = f"CP-SAT's plan could not be realised ({e}); the {best.source} plan is kept"
            break
        obj = plan_objectives(capture, plan)
        if obj.key(order) < best.objectives.key(order):
            best = Incumbent(plan, obj, "cp-sat")
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
        explicit = build_problem(capture, machine, table_budget, fragment_limit, scans=search.scans,
                                 local_pack=local_pack, aggregate=False, workers=params.workers)
        if exact_host_pairs(explicit) <= EXACT_HOST_LIMIT:
            relaxed = {t: -s for t, s in model_slack(explicit).items()}
            proof = solve_staged(explicit, replace(params, time_limit=clock.work), order[:1], tighten=relaxed,
                                 wall=clock.wall_left)
            clock.charge(proof)
            status = proof.status if proof.status is Status.INFEASIBLE else Status.UNKNOWN
            problem = explicit
        else:
            status = Status.UNKNOWN
        if status is not Status.INFEASIBLE:
            note = "CP-SAT found no plan within the budget, but could not prove that none exists"
    if best.source == "cp-sat" and staged is not None and status is Status.OPTIMAL:
        model_values = staged.values
        if any(model_values.get(n) is not None and model_values[n] != getattr(best.objectives, n) for n in order):
            # the realised plan differs from the model's optimum (matching or seam effects): say so
            status = Status.FEASIBLE
            note = "the realised plan's exact figures differ from the model's optimum (host matching or seams)"
    # CP-SAT's proof holds for the whole model; a certificate says why when one needs no search
    why = certificate(problem) if status is Status.INFEASIBLE else None
    if best.source != "cp-sat" and staged is not None and staged.selection is not None and not note:
        note = f"CP-SAT found nothing better than the {best.source} incumbent"
    if staged is not None and staged.selection is None and status is Status.UNKNOWN:
        note = f"CP-SAT found no solution in time; the {best.source} plan is kept"
    return Outcome(plan=best.plan, objectives=best.objectives, greedy=search.greedy,
                   greedy_objectives=search.greedy_objectives, decisions=search.decisions, status=status,
                   staged=staged, source=best.source, note=note, rounds=rounds,
                   runtime=time.perf_counter() - search.start, problem=problem, scans=search.scans,
                   certificate=why, work=clock.spent, work_budget=clock.work, backstop=clock.backstop)


MONOLITHIC_OPTIONS = 1_500  # above this many relay options, CP-SAT works on one phase at a time (LNS)


SMALL_OPTIONS = 200  # at most this many relay options: the monolithic model is solved with one worker


def _small(problem: SelectionProblem) -> bool:
    return sum(len(opts) - 1 for pd in problem.phases for opts in pd.options) <= SMALL_OPTIONS


def monolithic(problem: SelectionProblem) -> bool:
    options = sum(len(opts) - 1 for pd in problem.phases for opts in pd.options)
    return options <= MONOLITHIC_OPTIONS and exact_host_pairs(problem) <= EXACT_HOST_LIMIT


def phase_fixed(problem: SelectionProblem, plan: Plan, only: set[int] | None = None,
                previous: list[PhaseFixed] | None = None) -> list[PhaseFixed]:
    """Each selection phase's exact contribution under ``plan`` (recosting just the phases in ``only``)."""
    out = []
    for pi, pd in enumerate(problem.phases):
        if only is not None and pi not in only and previous is not None:
            out.append(previous[pi])
            continue
        out.append(fixed_of(problem, pd.phase, [r for r in plan.relays if r.group.phase == pd.phase.phase]))
    return out


def program_tables(problem: SelectionProblem, fixed: list[PhaseFixed]) -> tuple[np.ndarray, np.ndarray, int]:
    """Per tile, the program's table bytes and fragments, and the program's cycles, from per-phase contributions."""
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
    return table, frags, int(cycles)


def objectives_from_fixed(problem: SelectionProblem, fixed: list[PhaseFixed]) -> Objectives:
    """The exact objectives of a plan from its per-phase contributions (equal to plan_objectives)."""
    table, frags, cycles = program_tables(problem, fixed)
    return Objectives(
        fits=bool((table <= problem.table_budget).all() and (frags <= problem.fragment_limit).all()),
        cycles=0, b1024=0, estimate=cycles, table=int(table.max(initial=0)), fragments=int(frags.max(initial=0)),
        scratch=sum(fx.scratch for fx in fixed), relays=sum(fx.relays for fx in fixed),
        worst_tile=int(np.argmax(table)),
        excess=_excess(table, frags, problem.table_budget, problem.fragment_limit),
    )


def lower_bounds(problem: SelectionProblem) -> dict[str, int]:
    """Valid lower bounds on the first two objectives, cheap enough for any program size.

    Estimate: no relay lowers a tile's transmit or receive bytes over a phase and its local-pack extra phase together
    (a direct-receive forward carries the bytes the multicast did; local-pack moves them into the extra phase, run
    after), so each selection phase costs at least its sync plus max over tiles of ⌈max(tx, rx)/4⌉.
    Table: the worst tile is at least (a) any tile's direct table plus, for each group touching it, the most
    favourable option's change, less its model slack (``floors.tile_floors``), (b) the average over tiles of the
    least total table mass any choice leaves, less every tile's model slack (``floors.mass_floor``), (c) the
    linear relaxation of ``bounds.table_lp_bound``, (f) the hosted mass of ``bounds.hosted_mass_bound`` and (g) the
    hosted patterns of ``patterns.hosted_patterns_bound``, each once it has been computed.
    """
    machine = problem.machine
    bpc = machine.exchange.bytes_per_cycle
    selection_ids = {pd.phase.phase for pd in problem.phases}
    cycles = sum(pc.cycles * k for pc, k in zip(problem.direct.phases, problem.direct.iterations, strict=True)
                 if pc.phase not in selection_ids)
    for pd in problem.phases:
        st = pd.state
        per_tile = np.maximum(ceil_div(st.tx[: problem.tiles], bpc), ceil_div(st.rx[: problem.tiles], bpc))
        cycles += pd.iterations * (int(per_tile.max(initial=0)) + machine.exchange.sync_cycles)
    best = tile_floors(problem)
    table = max(int(best.max(initial=0)), mass_floor(problem).floor, problem.shared.get("table_lp", 0),
                problem.shared.get("hosted_mass", 0), problem.shared.get("hosted_patterns", 0))
    return {"estimate": cycles, "table": table}


# CP-SAT's presolve of a neighbourhood model (20k variables) spends its whole work budget before the search starts;
# without it the hint is a solution at once and the search has the budget
WINDOW_TUNING = {"cp_model_presolve": False}
MIN_WINDOWS = 6  # the search's work is split into at least this many neighbourhood solves
# deterministic s of their share below which large programs do without the estimate's searches: a neighbourhood of
# two heavy phases costs CP-SAT about 7 deterministic s (its search does not stop sooner), so less buys one window
# at most and the wall-clock backstop would decide
LNS_MIN_WORK = 20.0
# With local-pack options offered (the default), a large program does without them whatever its share: on every real
# program tried (2026-12-07, table first at 80 KiB: SigLIP b2, PE b1 and PE b4 at 120 s, SigLIP b4 at 120-400 s,
# SigLIP b2 27 layers and PE b2 24 layers at 300 s) the plan was the same bytes with and without them, no
# neighbourhood improved the combined plan, and with them the command took 1.5-4.2 times the wall, enough for the
# clock to cut the measurements (SigLIP b4 at every limit to 400 s, SigLIP b2 and PE b4 at 120 s). Without
# local-pack they pay: PE b2 at 24 layers, 300 s, the same 20,488 B at 3,837,199 cycles, 4,009,063 without them
# (docs/selection.md, "The estimate's searches")
LP_MIN_WALL = 3.0  # seconds the clock must still allow for the table relaxation to be tried
# seconds the search's clock must still allow for the hosted mass bound (SigLIP b4: 2.5 s, a one-layer batch-two
# program about 1.5 s). It is computed with the table first only: with cycles first the caps hold the plans far
# above every table bound (docs/selection.md, "What the gap is made of"), and it raised SigLIP b2's by 117 B (0.3 %)
# for about 10 % of the solve's time
HOSTED_MIN_WALL = 4.0
# and for the hosted patterns after it (a bisection of column-generation programs: SigLIP b2 2.0 s, SigLIP b4 1.7 s);
# the bisection starts no probe past the time it is given, and keeps what it proved by then
PATTERNS_MIN_WALL = 3.0
# and for the local-pack relays the table forces (``forced.forced_packing``, the cycles stage's bound with the table
# first: bisections of table-bound proofs, the cheapest bounds first); no proof starts past the time it is given, and
# what was proved by then stands. At most FORCED_MAX_WALL: the cheapest bounds find all that SigLIP b2 and PE-core
# b2 are forced to in under a second, and given all the time left the costlier ones found nothing more in 7-8 s
# while the table-first solves took 4-10 s longer (with 3 s, SigLIP b2's ended at 53.5-54.4 s of 60 and two of four
# budgets had no time for it)
FORCED_MIN_WALL = 1.0
FORCED_MAX_WALL = 1.5
# share of the command's limit the bounds after the search leave for the re-costing and the output (the search
# itself stops at SEARCH_END): SigLIP b2's output takes under a second
OUTPUT_SHARE = 0.1
WINDOW_PHASES = 2  # at most this many phases are free in one neighbourhood


def _windows(problem: SelectionProblem, fixed: list[PhaseFixed]) -> list[tuple[int, ...]]:
    """Neighbourhoods worth solving next for this incumbent, best first (deterministic: a function of ``fixed``).

    1. The phases whose cycles the incumbent's relays raised (the first objective), together.
    2. The phases that carry most of the worst tiles' tables (ties at the top count: the worst tile only falls if
       all of them fall), three, then two together, then one at a time.
    3. Every phase alone, the heaviest first.
    """
    index = {p.phase: i for i, p in enumerate(problem.capture.phases)}
    out: list[tuple[int, ...]] = []
    raised = []
    for pi, (pd, fx) in enumerate(zip(problem.phases, fixed, strict=True)):
        base = problem.direct.phases[index[pd.phase.phase]].cycles * pd.iterations
        if fx.cycles > base:  # PhaseFixed.cycles: the estimate's
            raised.append((fx.cycles - base, pi))
    raised.sort(key=lambda r: (-r[0], r[1]))
    if raised:
        out.append(tuple(sorted(pi for _, pi in raised[:WINDOW_PHASES])))
    table, _, _ = program_tables(problem, fixed)
    top = int(table.max(initial=0))
    worst = np.flatnonzero(table >= top - problem.machine.cost.table_rounding)
    share = np.array([int(fx.table[worst].max(initial=0)) for fx in fixed])
    heavy = [pi for pi in np.argsort(-share, kind="stable").tolist() if share[pi] > 0]
    for size in range(min(WINDOW_PHASES, len(heavy)), 1, -1):
        out.append(tuple(sorted(heavy[:size])))
    out += [(pi,) for pi in heavy]
    load = [int(pd.state.table()[: problem.tiles].max(initial=0)) for pd in problem.phases]
    out += [(pi,) for pi in sorted(range(len(problem.phases)), key=lambda pi: (-load[pi], pi))]
    seen: set[tuple[int, ...]] = set()
    return [w for w in out if not (w in seen or seen.add(w))]  # type: ignore[func-returns-value]


def _at_cycles_bound(search: Search, order: tuple[str, ...], best: Incumbent) -> Outcome | None:
    """The table stage of a large program whose cycles are at their lower bound (``placer.selection.capacity``):
    the constructive search, then CP-SAT on the capacity model for a better plan and the stage's bound. None when
    the objectives are not cycles then table, or no plan reaches the cycles bound (the caller searches
    neighbourhoods instead)."""
    if tuple(order[:2]) != ("estimate", "table"):
        return None
    problem, clock = search.problem, search.clock
    bounds = lower_bounds(problem)
    caps = capacity.phase_caps(problem)
    if not best.objectives.fits or best.objectives.estimate > bounds["estimate"]:
        return None
    slack = model_slack(problem)
    notes = []
    # A bound on the table at the cycles bound holds for every budget the best plan fits: the budget only cuts
    # off plans above it, and the optimum is below it. So a sweep's budgets share their bounds (and the LP).
    shared = problem.shared
    table_bound = max(bounds["table"], shared.get("table_bound_at_cycles", 0))
    lp = shared.get("capacity_lp")
    if lp is None:
        lp = capacity_lp_bound(problem, slack, caps, clock.wall_left())
        if lp is not None:
            shared["capacity_lp"] = lp
    if lp is not None:
        table_bound = max(table_bound, lp)
    result = None
    if clock.work - clock.spent > 0.05 and clock.wall_left() > 1.0 and best.objectives.table > table_bound:
        result = capacity.solve(problem, replace(search.params, time_limit=clock.work - clock.spent), slack, caps,
                                start=best.plan,
                                progress=search.progress, wall=clock.wall_left)
        clock.spent += result.work
        clock.backstop |= result.backstop
        if result.table.bound is not None:
            table_bound = max(table_bound, math.ceil(result.table.bound))
        if result.choice is not None:
            placed = capacity.place_segments(problem, result.choice, caps)
            relieved = capacity.relieve_hosts(problem, caps, placed)  # ``placed`` itself if nothing moved
            for found in dict.fromkeys([placed, relieved]):
                f_obj = plan_objectives(search.capture, found)
                if f_obj.key(order) < best.objectives.key(order):
                    best = Incumbent(found, f_obj, "cp-sat")
            notes.append(f"capacity model {result.table.status.value}, objective "
                         f"{result.table.objective:,.0f}, realised {f_obj.table:,} B")
    shared["table_bound_at_cycles"] = table_bound
    runtime = time.perf_counter() - search.start
    best_obj = best.objectives
    stages = [("estimate", SolveResult(Status.OPTIMAL, float(best_obj.estimate), float(bounds["estimate"]),
                                       runtime, solver="lower bound")),
              ("table", SolveResult(Status.OPTIMAL if best_obj.table <= table_bound else Status.FEASIBLE,
                                    float(best_obj.table), float(table_bound), runtime, solver="cp-sat capacity",
                                    work=clock.spent, backstop=clock.backstop))]
    status = Status.OPTIMAL if best_obj.table <= table_bound else Status.FEASIBLE
    staged = StagedResult(None, stages, {n: getattr(best_obj, n) for n in order})
    note = ("large program at the cycles bound: the constructive search and CP-SAT on the capacity model "
            "(docs/selection.md); the table bound holds for every plan at the cycles bound"
            + (f"; {'; '.join(notes)}" if notes else ""))
    return Outcome(plan=best.plan, objectives=best_obj, greedy=search.greedy,
                   greedy_objectives=search.greedy_objectives, decisions=search.decisions, status=status,
                   staged=staged, source=best.source, note=note, rounds=1, runtime=runtime, problem=problem,
                   scans=search.scans, work=clock.spent, work_budget=clock.work,
                   backstop=clock.backstop)


def share_table_bounds(outcomes: list[tuple[int, Outcome]]) -> None:
    """Raise each budget's table bound to the best one proved at a larger budget with the same optimal cycles
    (``placer compare``; in place).

    Why it holds: with cycles first, the table stage bounds the table over the plans at the optimal cycles that fit
    the budget; a smaller budget with the same optimal cycles admits a subset of those plans, so every bound proved
    at the larger budget holds at the smaller one too. Budgets are solved smallest first and the budget-independent
    work (the capacity LP, the scarce sets) falls in the first budget's share, so without this the smallest budget
    reports the weakest bound (SigLIP b2 at 64 KiB: 34,016 B where 72 KiB proved 49,233 B)."""
    seen: dict[float, tuple[float, int]] = {}  # optimal cycles -> (best table bound, the budget that proved it)
    for budget, out in sorted(outcomes, key=lambda bo: -bo[0]):
        staged = out.staged
        if staged is None or [name for name, _ in staged.stages[:2]] != ["cycles", "table"]:  # scheduled stages
            continue
        cycles, table = staged.stages[0][1], staged.stages[1][1]
        if cycles.status is not Status.OPTIMAL or cycles.objective is None or table.bound is None:
            continue
        prior = seen.get(cycles.objective)
        if prior is not None and prior[0] > table.bound:
            status = Status.OPTIMAL if table.objective is not None and table.objective <= prior[0] else table.status
            source = f"the {format_size(prior[1])} budget"
            staged.stages[1] = ("table", replace(table, bound=prior[0], status=status,
                                                 solver=f"{table.solver}; bound from {source}"))
            out.note += f"; table bound from {source}'s (it holds for every smaller budget)"
            if all(r.status is Status.OPTIMAL for _, r in staged.stages) and out.objectives.fits:
                out.status = Status.OPTIMAL
        bound = staged.stages[1][1].bound
        if bound is not None and (prior is None or bound > prior[0]):
            seen[cycles.objective] = (bound, budget)


def _capacity_plan(problem: SelectionProblem, cutoff: Cutoff | None = None) -> Plan:
    """The constructive search's plan at the cycles bound, once per prepared capture (it ignores the budget; one
    that ``cutoff`` stopped is not kept for the other budgets)."""
    cached = problem.shared.get("capacity_plan")
    if cached is None:
        cutoff = cutoff or Cutoff()
        with task("constructive search at the cycles bound"):
            cached = capacity.relay_greedy(problem, capacity.phase_caps(problem), cutoff=cutoff)
        if not cutoff.fired:
            problem.shared["capacity_plan"] = cached
    plan: Plan = cached
    return Plan(plan.mode, problem.machine, problem.table_budget, problem.fragment_limit, list(plan.relays))


HOST_AWARE = "host-aware construction"
HOST_AWARE_OTHER = "host-aware construction, its other close"
HOST_AWARE_PACKED = "host-aware construction with local-pack"
HOST_AWARE_PACKED_OTHER = "host-aware construction with local-pack, its other close"
HOST_AWARE_PACKED_FEWER = "host-aware construction with local-pack, four cuts per group"
HOST_AWARE_PACKED_FEWER_OTHER = "host-aware construction with local-pack, four cuts per group, its other close"
FEWER_CUTS = 4  # the segment counts per group the construction with local-pack is run again with


def _host_aware_plans(problem: SelectionProblem, cutoff: Cutoff) -> list[tuple[Plan, str]]:
    """The host-aware construction's plan and, where its two closes differ, the one it did not keep: the
    combination mixes their phases, and the one with the higher worst tile can be the faster (the closes judge
    the table only). Where the problem offers local-pack options, the same construction again with them: a
    local-pack sender sends one transfer per source run, not per fragment, so its table falls too (PE-core b2,
    table first: 20,488 B with direct-receive relays alone, 19,144 B with local-pack ones). Once per prepared
    capture (the construction ignores the budget; plans that ``cutoff`` stopped are not kept for the other
    budgets)."""
    runs = [(partial(capacity.memory_caps, problem), (HOST_AWARE, HOST_AWARE_OTHER))]
    if _packs(problem):
        runs.append((partial(capacity.memory_caps, problem, True), (HOST_AWARE_PACKED, HOST_AWARE_PACKED_OTHER)))
    return _constructions(problem, cutoff, "host_aware_plans", runs)


def _fewer_cuts_plans(problem: SelectionProblem, cutoff: Cutoff) -> list[tuple[Plan, str]]:
    """The local-pack construction once more with each group's cuts limited to ``FEWER_CUTS`` of its counts (none
    where no group offers more, or the problem offers no local-pack option): the construction is greedy, and where
    tile memory binds a cut between 2 and the native count can lead it to hosts it cannot relieve later (SigLIP
    b2, 27 layers: 36,632 B with every cut offered, 34,992 B with four). Cached as ``_host_aware_plans``."""
    if not _packs(problem) or ("fewer_cuts_plans" not in problem.shared and cutoff.reached()):
        return []
    return _constructions(problem, cutoff, "fewer_cuts_plans", [
        (lambda: capacity.fewer_cuts(problem, capacity.memory_caps(problem, True), FEWER_CUTS),
         (HOST_AWARE_PACKED_FEWER, HOST_AWARE_PACKED_FEWER_OTHER))])


def _packs(problem: SelectionProblem) -> bool:
    return any(op.variant == "local-pack" for pd in problem.phases for opts in pd.options for op in opts)


def _constructions(problem: SelectionProblem, cutoff: Cutoff, key: str,
                   runs: Sequence[tuple[Callable[[], list[capacity.PhaseCaps] | None], tuple[str, str]]]
                   ) -> list[tuple[Plan, str]]:
    """The host-aware construction under each run's caps (skipped where they are None, and after the first run
    once ``cutoff`` is reached), each kept plan named by the run's first name and the other close by its second;
    cached in ``problem.shared[key]`` unless ``cutoff`` stopped one."""
    cached = problem.shared.get(key)
    if cached is None:
        cached = []
        for i, (make_caps, names) in enumerate(runs):
            if i > 0 and cutoff.reached():
                break
            caps = make_caps()
            if caps is None:
                continue
            other: list[Plan] = []
            with task(names[0]):
                kept = capacity.relay_greedy(problem, caps, cutoff=cutoff, by_hosts=True, other=other)
            cached += [(kept, names[0])] + [(p, names[1]) for p in other]
        if not cutoff.fired:
            problem.shared[key] = cached
    return [(Plan(p.mode, problem.machine, problem.table_budget, problem.fragment_limit, list(p.relays)), name)
            for p, name in cached]


def capacity_lp_bound(problem: SelectionProblem, slack: dict[int, int], caps: list[capacity.PhaseCaps],
                      wall_left: float) -> int | None:
    """The linear relaxation restricted to plans at the cycles bound (``bounds.table_lp_bound`` with the caps)."""
    if wall_left < LP_MIN_WALL:
        return None
    return table_lp_bound(problem, slack, time_limit=max(0.5, min(10.0, wall_left / 4)),
                          caps={pi: (pc.rx_cap, pc.tx_cap) for pi, pc in enumerate(caps)})


def _lns(search: Search, order: tuple[str, ...], best: Incumbent) -> Outcome:
    """CP-SAT over neighbourhoods of a few phases each, the rest held at the incumbent, never losing it.

    Each neighbourhood minimises (cycles, worst table) in one weighted solve with a fixed share of the work; the
    next neighbourhood is chosen from the current incumbent (``_windows``), so the sequence is a function of the
    solves' results only. The search ends when the work is spent, no untried neighbourhood is left, or the wall
    clock's backstop fires (reported: such a run is not reproducible).
    """
    problem, params, clock = search.problem, search.params, search.clock
    if any(pd.buckets is None for pd in problem.phases):
        bucket_hosts(problem)
    incumbent = selection_from_plan(problem, best.plan)
    fixed = phase_fixed(problem, best.plan)
    bounds = lower_bounds(problem)
    step = clock.work / MIN_WINDOWS
    tried: set[tuple[int, ...]] = set()
    solved = improved = 0
    log: list[str] = []
    while clock.spent < clock.work - 1e-6:
        window = next((w for w in _windows(problem, fixed) if w not in tried), None)
        if window is None:
            break
        if clock.wall_left() <= 0.5:
            clock.backstop = True
            break
        tried.add(window)
        staged = solve_staged(problem, replace(params, time_limit=min(step, clock.work - clock.spent)),
                              order[:2], start=incumbent, progress=search.progress, active=set(window), fixed=fixed,
                              combine=True, lower=bounds, wall=clock.wall_left, tuning=WINDOW_TUNING)
        clock.charge(staged)
        solved += 1
        if staged.selection is None:
            continue
        try:
            plan = realise(problem, staged.selection, PlanMode.CPSAT, only=set(window), keep=best.plan)
        except RuntimeError:
            continue
        new_fixed = phase_fixed(problem, plan, only=set(window), previous=fixed)
        obj = objectives_from_fixed(problem, new_fixed)
        if obj.key(order) < best.objectives.key(order):
            best = Incumbent(plan, obj, "cp-sat")
            incumbent = staged.selection
            fixed = new_fixed
            improved += 1
            log.append(f"{'+'.join(str(problem.phases[pi].phase.phase) for pi in window)}")
            tried.clear()  # a new incumbent: every neighbourhood is worth another look
    if "table_lp" not in problem.shared and clock.wall_left() > LP_MIN_WALL:
        # the relaxation's bound (budget-independent, computed once per capture) if the clock allows: it changes
        # the reported bound only, never the plan
        lp = table_lp_bound(problem, model_slack(problem), time_limit=clock.wall_left() - 1.0)
        if lp is not None:
            problem.shared["table_lp"] = lp
        bounds = lower_bounds(problem)
    runtime = time.perf_counter() - search.start
    best_obj = best.objectives
    stages = []
    for name in order[:2]:
        value = getattr(best_obj, name)
        bound = bounds.get(name)
        status = Status.OPTIMAL if bound is not None and value <= bound else Status.FEASIBLE
        stages.append((name, SolveResult(status, float(value), float(bound) if bound is not None else None, runtime,
                                         solver="cp-sat lns", work=clock.spent, backstop=clock.backstop)))
    status = Status.OPTIMAL if all(r.status is Status.OPTIMAL for _, r in stages) else Status.FEASIBLE
    if not best_obj.fits:
        status = Status.UNKNOWN
    staged_all = StagedResult(incumbent, stages, {n: getattr(best_obj, n) for n in order})
    note = (f"large program: CP-SAT over {solved} neighbourhoods ({len(problem.phases)} phases have groups), "
            f"{improved} improved the incumbent" + (f" (phases {', '.join(log)})" if log else "")
            + "; bounds are valid lower bounds, not CP-SAT's")
    return Outcome(plan=best.plan, objectives=best_obj, greedy=search.greedy,
                   greedy_objectives=search.greedy_objectives, decisions=search.decisions, status=status,
                   staged=staged_all, source=best.source, note=note, rounds=solved, runtime=runtime,
                   problem=problem, scans=search.scans, work=clock.spent, work_budget=clock.work,
                   backstop=clock.backstop)
