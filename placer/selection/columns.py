"""Phase configurations and the model that combines them: how a plan is chosen by its scheduled cycles.

A plan is one *configuration* per selection phase: which of the phase's groups are relayed, how, and on which
hosts (nothing else couples the phases: a phase's schedule depends on its own transfers only). Every
configuration placer considers is measured exactly before it is combined with others:
- its tables and fragments per tile, re-costed with the cost model (``select.phase_fixed``);
- its scheduled figures, the lower bound and the B1024 horizon of the rewritten phase (``timing``).

The configurations come from the searches (the production rule's plan, the schedule-true construction at several
targets, host orders, the estimate search when the table comes first); :func:`combine` then picks one per phase
with CP-SAT -- a multiple-choice model, tiny next to the searches -- so that the worst tile is the least the
measured configurations allow, under the cycle caps:
- ``x[p][c]``: phase p takes configuration c, exactly one per phase;
- every tile's program table (direct, plus each chosen configuration's change) under ``T`` and the budget, its
  fragments under the limit;
- Σ lower bounds and Σ B1024 horizons (times the Repeat iterations) under their caps;
- lexicographic stages: the worst tile ``T``, then the Σ lower bound, then the scratch, then the relays (the
  order the caller asks; stages after the first keep the earlier ones at their optimum).
The combination is optimal *over the measured configurations*; that is what its status says, not that no other
plan is better (docs/selection.md, "Scheduled cycles").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from placer.capture.model import Phase
from placer.cost.model import tile_counters
from placer.modes import PlanMode
from placer.progress import task
from placer.selection.cpsat import PhaseFixed
from placer.selection.plan import Plan, RelayChoice
from placer.selection.problem import SelectionProblem
from placer.selection.timing import (
    PhaseFigures,
    direct_timings,
    in_time,
    load_solvers,
    other_bounds,
    phase_figures,
)
from placer.solver import SolveResult, SolverParams, Status, clear_hints, run
from placer.threads import ordered_map


@dataclass(eq=False)
class Column:
    """One phase's configuration, measured."""

    relays: list[RelayChoice]
    fixed: PhaseFixed
    figures: PhaseFigures
    source: str  # the search that first found it


def relay_key(relays: list[RelayChoice]) -> tuple[Any, ...]:
    """What identifies a configuration: its relays' groups, variants, segment counts, hosts and buffers."""
    return tuple(sorted((r.group.index, r.variant, r.segmentation.count, tuple(r.hosts.tolist()),
                         tuple(r.buffers.tolist())) for r in relays))


def fixed_of(problem: SelectionProblem, phase: Phase, relays: list[RelayChoice]) -> PhaseFixed:
    """One phase's exact contribution with ``relays`` (all of that phase) applied."""
    machine = problem.machine
    tiles = problem.tiles
    part = Plan(PlanMode.CPSAT, machine, problem.table_budget, problem.fragment_limit, relays)
    main, extra = part.phase_rewrite(phase)
    pc = tile_counters(main, machine, tiles, problem.capture.allocations)
    table, frags, cycles = pc.table_bytes.copy(), pc.fragments.copy(), pc.cycles
    if extra is not None:
        ext = tile_counters(extra, machine, tiles, problem.capture.allocations)
        table += ext.table_bytes
        frags += ext.fragments
        packs = [r for r in relays if r.variant == "local-pack"]
        kernel = max(int(machine.local_pack.estimate(r.segmentation.segment_bytes()).max()) for r in packs)
        cycles += ext.cycles + kernel
    return PhaseFixed(table, frags, cycles * problem.capture.iterations(phase.phase),
                      sum(int(r.scratch_bytes.sum()) for r in relays), sum(r.segmentation.count for r in relays))


@dataclass(eq=False)
class Pool:
    """Every measured configuration of the phases ``ids`` (capture phase ids; column 0 of each: the direct
    phase). A plan's relays in other phases are not the pool's to measure: ``add`` refuses them."""

    problem: SelectionProblem
    ids: list[int]
    workers: int = 1
    until: float | None = None  # perf_counter time after which no measurement starts (OutOfTime)
    columns: list[list[Column]] = field(default_factory=list)
    # the choice of every plan added, in order: whole plans that were measured, which ``combine`` falls back on
    plans: list[list[int]] = field(default_factory=list)
    _index: list[dict[tuple[Any, ...], int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        problem = self.problem
        timings = direct_timings(problem, self.ids, self.workers, self.until)
        for pid in self.ids:
            fx = fixed_of(problem, problem.capture.phase_by_id(pid), [])
            self.columns.append([Column([], fx, timings[pid].figures, "direct")])
            self._index.append({(): 0})

    def iterations(self, k: int) -> int:
        return self.problem.capture.iterations(self.ids[k])

    def _by_phase(self, plan: Plan) -> dict[int, list[RelayChoice]]:
        position = {pid: k for k, pid in enumerate(self.ids)}
        by_phase: dict[int, list[RelayChoice]] = {}
        for r in plan.relays:
            if r.group.phase not in position:
                raise ValueError(f"the plan relays phase {r.group.phase}, which the pool does not measure")
            by_phase.setdefault(position[r.group.phase], []).append(r)
        return by_phase

    def unmeasured(self, plan: Plan) -> int:
        """How many of the plan's configurations ``add`` would have to measure."""
        known = self.problem.shared.get("columns", {})
        return sum(1 for k, relays in self._by_phase(plan).items()
                   if (key := relay_key(relays)) not in self._index[k] and (self.ids[k], key) not in known)

    def add(self, plan: Plan, source: str) -> list[int]:
        """Measure the plan's configurations not yet in the pool; return the plan's column per phase."""
        problem = self.problem
        by_phase = self._by_phase(plan)
        # what was measured for another budget of a sweep (a configuration's figures do not depend on it)
        known: dict[tuple[int, tuple[Any, ...]], Column] = problem.shared.setdefault("columns", {})
        todo: dict[tuple[int, tuple[Any, ...]], list[RelayChoice]] = {}
        for k, relays in sorted(by_phase.items()):
            key = relay_key(relays)
            if key in self._index[k]:
                continue
            hit = known.get((self.ids[k], key))
            if hit is not None:
                self._index[k][key] = len(self.columns[k])
                self.columns[k].append(Column(relays, hit.fixed, hit.figures, hit.source))
            else:
                todo[(k, key)] = relays
        machine = problem.machine

        def measure(item: tuple[tuple[int, tuple[Any, ...]], list[RelayChoice]]) -> Column:
            (k, _key), relays = item
            phase = problem.capture.phase_by_id(self.ids[k])
            part = Plan(plan.mode, machine, problem.table_budget, problem.fragment_limit, relays)
            main, extra = part.phase_rewrite(phase)
            f = phase_figures(main, machine, problem.tiles)
            if extra is not None:  # local-pack: its extra phase, one more sync and the packing kernel
                e = phase_figures(extra, machine, problem.tiles)
                kernel = max(int(machine.local_pack.estimate(r.segmentation.segment_bytes()).max())
                             for r in relays if r.variant == "local-pack")
                more = machine.exchange.sync_cycles + kernel
                f = PhaseFigures(f.bound + e.bound + more, f.kind, f.b1024 + e.b1024 + more)
            return Column(relays, fixed_of(problem, phase, relays), f, source)

        if todo:
            load_solvers()
            items = list(todo.items())
            with task(f"measure {len(items)} phase configuration(s) ({source})"):
                measured = list(ordered_map(in_time(measure, self.until), items, self.workers))
            for ((k, key), _relays), col in zip(items, measured, strict=True):
                self._index[k][key] = len(self.columns[k])
                self.columns[k].append(col)
                known[(self.ids[k], key)] = col
        choice = [0] * len(self.ids)
        for k, relays in by_phase.items():
            choice[k] = self._index[k][relay_key(relays)]
        if choice not in self.plans:
            self.plans.append(choice)
        return choice

    def plan(self, choice: list[int], mode: PlanMode = PlanMode.CPSAT) -> Plan:
        problem = self.problem
        relays = [r for k, c in enumerate(choice) for r in self.columns[k][c].relays]
        return Plan(mode, problem.machine, problem.table_budget, problem.fragment_limit, relays)

    def figures(self, choice: list[int]) -> tuple[int, int]:
        """Σ lower bound and Σ B1024 horizon of a choice over the pool's phases (times Repeat iterations)."""
        bound = b1024 = 0
        for k, c in enumerate(choice):
            f = self.columns[k][c].figures
            bound += f.bound * self.iterations(k)
            b1024 += f.b1024 * self.iterations(k)
        return bound, b1024

    def direct(self) -> list[int]:
        return [0] * len(self.ids)

    def tables(self, choice: list[int]) -> np.ndarray:
        """Per tile, the program table of a choice (the direct program's, plus each chosen configuration's
        change in its phase)."""
        return self._per_tile(choice, self.problem.direct.table_bytes, lambda fx: fx.table)

    def fragments(self, choice: list[int]) -> np.ndarray:
        """Per tile, the program's fragment count under a choice (as :meth:`tables` for the table)."""
        return self._per_tile(choice, self.problem.direct.fragments, lambda fx: fx.fragments)

    def _per_tile(self, choice: list[int], direct: np.ndarray, of: Callable[[PhaseFixed], np.ndarray]
                  ) -> np.ndarray:
        tiles = self.problem.tiles
        out = direct[:tiles].astype(np.int64).copy()
        for k, c in enumerate(choice):
            if c:
                out += of(self.columns[k][c].fixed)[:tiles] - of(self.columns[k][0].fixed)[:tiles]
        return out

    def scheduled(self, choice: list[int]) -> Scheduled:
        """A choice's scheduled figures over the whole program."""
        bound, b1024 = self.figures(choice)
        direct_bound, direct = self.figures(self.direct())
        other = other_bounds(self.problem, self.ids, self.workers, self.until)
        return Scheduled(other + bound, b1024 - direct, other + direct_bound,
                         {pid: self.columns[k][c].figures for k, (pid, c) in enumerate(zip(self.ids, choice,
                                                                                           strict=True))},
                         {pid: self.columns[k][0].figures for k, pid in enumerate(self.ids)})

    def size(self) -> int:
        return sum(len(c) for c in self.columns)


@dataclass(frozen=True)
class Scheduled:
    """A plan's scheduled figures (cycles, sync excluded, times Repeat iterations)."""

    bound: int  # Σ over every phase of the program of its lower bound
    b1024_change: int  # Σ over the measured phases of B1024 horizon (plan) − B1024 horizon (direct)
    direct_bound: int  # the all-direct program's Σ lower bound
    phases: dict[int, PhaseFigures]  # the measured phases: the plan's figures
    direct: dict[int, PhaseFigures]  # the same phases all direct

    def to_json(self) -> dict[str, Any]:
        return {"lower_bound": self.bound, "b1024_change": self.b1024_change, "direct_lower_bound": self.direct_bound,
                "phases": [{"phase": p, **f.to_json(), "direct": self.direct[p].to_json()}
                           for p, f in sorted(self.phases.items())]}


@dataclass(frozen=True)
class Caps:
    """The cycle caps of a combination (None: no cap)."""

    bound: int | None = None  # Σ lower bound
    b1024: int | None = None  # Σ B1024 horizon


@dataclass(frozen=True)
class CycleCaps:
    """The cycle caps a plan was chosen under, program-wide (what ``placer solve`` reports)."""

    lower_bound: int  # Σ lower bound over the program
    b1024_change: int  # Σ B1024 horizon change against the all-direct program
    slack: float  # the share of the direct program's Σ lower bound a plan could add
    held: bool  # the plan is within them (False: no measured plan within them fits the budget)

    def to_json(self) -> dict[str, Any]:
        return {"lower_bound": self.lower_bound, "b1024_change": self.b1024_change, "slack": self.slack,
                "held": self.held}


@dataclass(frozen=True)
class Combination:
    choice: list[int]
    table: SolveResult  # the worst tile's stage: its status, objective and bound (over the pool)
    fits: bool  # every tile within the budget
    capped: bool  # within the cycle caps (a plan that fits the budget comes first)
    backstop: bool = False  # the wall clock stopped one of its solves: the choice depends on the machine's speed


@dataclass
class _Model:
    """The combination's CP-SAT model: ``x[p][c]``, the objectives by name, and the two levels' literals."""

    m: Any
    x: list[list[Any]]
    objective: dict[str, Any]
    within: Any  # every tile within the budget and the fragment limit
    capped: Any  # within the cycle caps


# (fits the budget, within the cycle caps) of each level, tightest first
_LEVELS = ((True, True), (True, False), (False, False))


def combine(pool: Pool, caps: Caps, params: SolverParams, order: tuple[str, ...],
            start: list[int] | None = None, until: float | None = None) -> Combination | None:
    """The best choice of one measured configuration per phase (see the module docstring); None when no choice
    is proved to exist. ``start`` hints the first stage; every plan the pool measured whole is a fallback.
    ``until`` (perf_counter) is the wall-clock backstop of every CP-SAT run; a run it stops is reported."""
    model = _model(pool, caps)
    m, x, objective = model.m, model.x, model.objective
    # every whole plan measured, valued exactly as the model values it: the best at the first level it reaches is
    # the hint and, when CP-SAT cannot settle that level in its time (SigLIP b4: the host-aware plan that fits was
    # dropped for the rule's when the first level ended unknown), the answer
    known = [_valued(pool, c, caps) for c in ([start] if start is not None else []) + pool.plans]
    share = replace(params, time_limit=max(0.5, params.time_limit / (len(order) + 1)))
    # what must hold, most wanted first: the budget beats the cycle caps (a plan that fits beats one that does
    # not); a plan that fits but breaks the caps minimises its cycles before its table, and when nothing fits,
    # the least excess comes first (bytes and fragments over, summed over the tiles: what is left to remove),
    # then the worst tile, whatever its cycles
    cut = False
    for level, (fits, held) in enumerate(_LEVELS):
        m.clear_assumptions()
        m.add_assumptions([v for v, keep in ((model.within, fits), (model.capped, held)) if keep])
        stages = [n for n in order if n in objective]
        if not fits:
            stages = ["excess", "table", *(n for n in stages if n != "table")]
        elif not held and "cycles" in stages:
            stages = ["cycles", *(n for n in stages if n != "cycles")]
        here = sorted((v for v in known if v.level <= level), key=lambda v: [v.values[n] for n in stages])
        if here:
            here[0] = _descend(pool, here[0], caps, level, stages)
        clear_hints(m)
        hint = here[0].choice if here else start
        if hint is not None:
            _hint(m, x, hint)
        m.minimize(objective[stages[0]])
        solver, res = run(m, _backstopped(share, until))
        cut = cut or res.backstop
        if res.status in (Status.OPTIMAL, Status.FEASIBLE):
            break
        if here:  # CP-SAT has not settled this level, a measured plan reaches it
            best = here[0]
            # improved phase by phase, it may have reached a tighter level than this one: say which it is
            at = _LEVELS[best.level]
            return Combination(best.choice, SolveResult(Status.FEASIBLE, float(best.values["table"]), None,
                                                        res.runtime), at[0], at[1], cut)
        # infeasible, or unknown with no measured plan at this level: the next level, looser
    else:
        return None
    first: SolveResult | None = res if stages[0] == "table" else None
    m.add(objective[stages[0]] <= round(res.objective or 0))
    for name in stages[1:]:
        clear_hints(m)
        _hint(m, x, [next(c for c, v in enumerate(lits) if solver.value(v)) for lits in x])
        m.minimize(objective[name])
        nxt, r2 = run(m, _backstopped(share, until))
        cut = cut or r2.backstop
        if r2.status not in (Status.OPTIMAL, Status.FEASIBLE):
            break
        solver, res = nxt, r2
        if name == "table":
            first = res
        m.add(objective[name] <= round(res.objective or 0))
    assert solver is not None
    choice = [next(c for c, v in enumerate(lits) if solver.value(v)) for lits in x]
    if here and _rank(here[0], stages) < _rank(_valued(pool, choice, caps), stages):
        # CP-SAT stopped short of its hint (its work ran out): the hint stands
        choice = here[0].choice
    if first is None:
        first = SolveResult(Status.FEASIBLE, float(_valued(pool, choice, caps).values["table"]), None, 0.0)
    return Combination(choice, first, fits, held, cut)


def _backstopped(params: SolverParams, until: float | None) -> SolverParams:
    if until is None:
        return params
    return replace(params, backstop=max(0.01, until - time.perf_counter()))


def _model(pool: Pool, caps: Caps) -> _Model:
    from ortools.sat.python import cp_model

    problem = pool.problem
    tiles = problem.tiles
    m = cp_model.CpModel()
    x = [[m.new_bool_var(f"x{pi}_{c}") for c in range(len(cols))] for pi, cols in enumerate(pool.columns)]
    for lits in x:
        m.add_exactly_one(lits)
    direct = [cols[0].fixed for cols in pool.columns]
    base_table = problem.direct.table_bytes[:tiles].astype(np.int64)
    base_frag = problem.direct.fragments[:tiles].astype(np.int64)
    table_terms = np.zeros(tiles, bool)
    delta_t: list[list[np.ndarray]] = []
    delta_f: list[list[np.ndarray]] = []
    for pi, cols in enumerate(pool.columns):
        dt = [c.fixed.table[:tiles].astype(np.int64) - direct[pi].table[:tiles] for c in cols]
        df = [c.fixed.fragments[:tiles].astype(np.int64) - direct[pi].fragments[:tiles] for c in cols]
        delta_t.append(dt)
        delta_f.append(df)
        for d in dt:
            table_terms |= d != 0
    hi = int(base_table.max(initial=0)) + sum(int(max((d.max(initial=0) for d in dt), default=0)) for dt in delta_t)
    worst = m.new_int_var(0, max(hi, 0), "T")
    m.add(worst >= int(base_table[~table_terms].max(initial=0)))
    budget = problem.table_budget
    # Σ bytes over the budget and fragments over the limit, tile by tile (what ``Objectives.excess`` counts): the
    # first thing a plan that cannot fit minimises; a tile no choice changes adds a constant
    over: list[Any] = [int(np.maximum(base_table[~table_terms] - budget, 0).sum())]
    for t in np.flatnonzero(table_terms).tolist():
        expr = int(base_table[t]) + sum(int(d[t]) * x[pi][c] for pi, dt in enumerate(delta_t)
                                        for c, d in enumerate(dt) if d[t])
        m.add(worst >= expr)
        top = int(base_table[t]) + sum(max(0, int(max(d[t] for d in dt))) for dt in delta_t)
        if top > budget:
            o = m.new_int_var(0, top - budget, f"over{t}")
            m.add(o >= expr - budget)
            over.append(o)
    frag_terms = np.zeros(tiles, bool)
    for df in delta_f:
        for d in df:
            frag_terms |= d != 0
    within = m.new_bool_var("within the budget")
    m.add(worst <= budget).only_enforce_if(within)
    limit = problem.fragment_limit
    over.append(int(np.maximum(base_frag[~frag_terms] - limit, 0).sum()))
    for t in np.flatnonzero(frag_terms).tolist():
        expr = int(base_frag[t]) + sum(int(d[t]) * x[pi][c] for pi, df in enumerate(delta_f)
                                       for c, d in enumerate(df) if d[t])
        m.add(expr <= limit).only_enforce_if(within)
        top = int(base_frag[t]) + sum(max(0, int(max(d[t] for d in df))) for df in delta_f)
        if top > limit:
            o = m.new_int_var(0, top - limit, f"frag_over{t}")
            m.add(o >= expr - limit)
            over.append(o)
    its = [pool.iterations(k) for k in range(len(pool.ids))]
    chosen = [(pool.columns[k][c], its[k], v) for k, lits in enumerate(x) for c, v in enumerate(lits)]
    bound = sum(col.figures.bound * it * v for col, it, v in chosen)
    b1024 = sum(col.figures.b1024 * it * v for col, it, v in chosen)
    capped = m.new_bool_var("within the cycle caps")
    if caps.bound is not None:
        m.add(bound <= caps.bound).only_enforce_if(capped)
    if caps.b1024 is not None:
        m.add(b1024 <= caps.b1024).only_enforce_if(capped)
    scratch = sum(col.fixed.scratch * v for col, _it, v in chosen)
    relays = sum(col.fixed.relays * v for col, _it, v in chosen)
    objective: dict[str, Any] = {"table": worst, "cycles": bound, "scratch": scratch, "relays": relays,
                                 "excess": sum(over)}
    return _Model(m, x, objective, within, capped)


@dataclass(frozen=True)
class _Valued:
    choice: list[int]
    level: int  # the first level of ``combine`` it reaches: 0 fits and within the caps, 1 fits, 2 neither
    values: dict[str, int]  # what each of ``combine``'s objectives takes


def _valued(pool: Pool, choice: list[int], caps: Caps) -> _Valued:
    """A choice as :func:`combine`'s model values it."""
    problem = pool.problem
    table, frags = pool.tables(choice), pool.fragments(choice)
    fits = int(table.max(initial=0)) <= problem.table_budget and int(frags.max(initial=0)) <= problem.fragment_limit
    bound, b1024 = pool.figures(choice)
    held = (caps.bound is None or bound <= caps.bound) and (caps.b1024 is None or b1024 <= caps.b1024)
    cols = [pool.columns[k][c] for k, c in enumerate(choice)]
    excess = int(np.maximum(table - problem.table_budget, 0).sum() + np.maximum(frags - problem.fragment_limit,
                                                                                0).sum())
    values = {"table": int(table.max(initial=0)), "cycles": bound, "scratch": sum(c.fixed.scratch for c in cols),
              "relays": sum(c.fixed.relays for c in cols), "excess": excess}
    return _Valued(choice, 0 if fits and held else 1 if fits else 2, values)


def _rank(v: _Valued, stages: list[str]) -> list[int]:
    return [v.values[n] for n in stages]


def _descend(pool: Pool, start: _Valued, caps: Caps, level: int, stages: list[str]) -> _Valued:
    """``start`` improved one phase at a time: each phase's every measured configuration is tried in turn, and a
    change that keeps the level and improves the stages is taken at once, until a pass changes nothing
    (deterministic; numpy over the tiles, milliseconds). On SigLIP b4 at 80 KiB, 120 s, the plans that fit are
    whole constructions far from the best mix of their phases: hinted with the best of them, the combination
    ended at a Σ lower bound of 518,892 cycles; hinted with this, 462,185."""
    best = start
    better = True
    while better:
        better = False
        for k, cols in enumerate(pool.columns):
            for c in range(len(cols)):
                if c == best.choice[k]:
                    continue
                trial = _valued(pool, [*best.choice[:k], c, *best.choice[k + 1:]], caps)
                if trial.level <= level and _rank(trial, stages) < _rank(best, stages):
                    best, better = trial, True
    return best


def _hint(m: Any, x: list[list[Any]], choice: list[int]) -> None:
    for pi, c in enumerate(choice):
        for ci, v in enumerate(x[pi]):
            m.add_hint(v, ci == c)


__all__ = ["Caps", "Column", "Combination", "CycleCaps", "Pool", "Scheduled", "combine", "fixed_of", "relay_key"]
