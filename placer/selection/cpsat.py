"""CP-SAT relay selection over the whole program (see docs/selection.md for the formulation).

Decision variables
- ``x[g, o]``: group g takes option o (direct, direct-receive with k segments, local-pack with k segments);
  exactly one per group.
- ``z[p, c, t]``: tile t hosts one relay segment of host class c in phase p. A class gathers the segments of a
  phase with the same *signature* -- every number a host's cost depends on (rows, fragments, bytes, controls,
  buffer size, kernel cycles) and the tiles barred from it -- so segments of one class are interchangeable and the
  loads are exact. Tiles no option touches and that look alike are aggregated into tile classes (a count ``n``).
  Σ_t z[p, c, t] equals the number of class-c segments chosen, and Σ_c z[p, c, t] ≤ 1 (one segment per tile and
  phase). z exists only where the tile's largest free gap in the phase holds the class's buffer and the tile is
  not barred from the class; which segment goes where is an exact bipartite matching (``realise``), so the model
  never enumerates (segment, tile) pairs. Large programs use the coarse host model (see ``build_model``).

Constraints (hard): per tile, Σ over phases of its rounded table bytes ≤ budget (rounding to 8 modelled with an
integer ``q`` per affected tile and phase: 8·q ≥ raw); per tile, fragments ≤ the limit; per phase, the cycle
variable bounds every affected tile's ⌈tx/4⌉, ⌈rx/4⌉ and controls.

Objective: lexicographic, solved in stages (each stage fixes the previous optimum, or best value on time-out):
by default total cycles, then worst-tile table bytes, then relay scratch, then relay count.

The model is built by ``_Builder``, one method per constraint family: ``options`` (choice and each option's own
effect), ``exact_hosts`` / ``_coarse_hosts`` (who hosts), ``tables_and_cycles`` (per-tile rounding and the phase's
cycles), ``extra_phase`` (local-pack), ``budgets`` (the program-wide hard limits and the worst tile).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from placer.progress import SolverCallback, solver_detail, task
from placer.selection.options import Option
from placer.selection.problem import PhaseData, SelectionProblem
from placer.solver import SolveResult, SolverParams, Status, run
from placer.units import round_up

OBJECTIVES = ("cycles", "table", "scratch", "relays")


@dataclass(eq=False)
class Selection:
    """A choice of option per group (indices into each group's option list) and host tiles per class."""

    choice: list[list[int]]  # per selection phase, per group: option index
    hosts: list[dict[Signature, list[int]]] = field(default_factory=list)  # per phase: class -> named tiles
    counts: list[dict[tuple[Signature, int], int]] = field(default_factory=list)  # per phase: (class, tile class)


@dataclass(eq=False)
class ModelHandle:
    model: cp_model.CpModel
    x: list[list[list[cp_model.IntVar]]]
    z: list[dict[Signature, dict[int, cp_model.IntVar]]]
    n: list[dict[tuple[Signature, int], cp_model.IntVar]]
    objectives: dict[str, cp_model.LinearExprT]
    totals: dict[int, cp_model.LinearExprT] = field(default_factory=dict)  # per tile: program table (modelled)


Signature = tuple[int, ...]


def _class_loads(sig: Signature) -> dict[str, int]:
    kind, kernel, raw, frag, tx, rx, ctrl, buffer, e_raw, e_frag, e_tx, e_ctrl, _barred = sig
    return {"variant": kind, "kernel": kernel, "raw": raw, "frag": frag, "tx": tx, "rx": rx, "ctrl": ctrl,
            "buffer": buffer, "ext_raw": e_raw, "ext_frag": e_frag, "ext_tx": e_tx, "ext_ctrl": e_ctrl}


ANY: Signature = ()  # the single host class of the coarse host model
EXACT_HOST_LIMIT = 40_000  # above this many (class, tile) pairs the coarse host model is used


def exact_host_pairs(problem: SelectionProblem, active: set[int] | None = None) -> int:
    pairs = 0
    for pi, pd in enumerate(problem.phases):
        if active is not None and pi not in active:
            continue
        sigs = {sig for opts in pd.options for op in opts[1:] for sig in pd.classes(op)}
        pairs += len(sigs) * int(problem.explicit.sum())
    return pairs


@dataclass(frozen=True, eq=False)
class PhaseFixed:
    """What a selection phase contributes when it is held at the incumbent's choice (exact, re-costed)."""

    table: np.ndarray  # per tile, this phase (and its local-pack extra phase) rounded table bytes
    fragments: np.ndarray
    cycles: int  # times its executions, including any extra phase and kernel
    scratch: int
    relays: int


Terms = dict[int, list[cp_model.LinearExprT]]  # per tile: linear pieces added to a counter


@dataclass(eq=False)
class PhaseTerms:
    """What the chosen options add to each tile's counters in one phase (and its local-pack extra phase)."""

    raw: Terms = field(default_factory=dict)
    frag: Terms = field(default_factory=dict)
    tx: Terms = field(default_factory=dict)
    rx: Terms = field(default_factory=dict)
    ctrl: Terms = field(default_factory=dict)
    ext_raw: Terms = field(default_factory=dict)
    ext_frag: Terms = field(default_factory=dict)
    ext_rx: Terms = field(default_factory=dict)
    ext_tx: Terms = field(default_factory=dict)
    ext_ctrl: Terms = field(default_factory=dict)
    ext_members: dict[int, list[cp_model.IntVar]] = field(default_factory=dict)  # local-pack options per replica
    lp_vars: list[cp_model.IntVar] = field(default_factory=list)
    kernels: list[tuple[int, cp_model.IntVar]] = field(default_factory=list)  # (kernel cycles, option literal)
    # coarse host model: per tile its "hosts a segment" literal and the (variable) load it then carries
    host_cond: dict[int, tuple[cp_model.IntVar, dict[str, cp_model.LinearExprT]]] = field(default_factory=dict)
    # aggregated tile classes: (tx, rx, controls) a class host reaches, and the literal saying the class hosts
    class_cycles: list[tuple[cp_model.LinearExprT, cp_model.LinearExprT, cp_model.LinearExprT,
                             cp_model.IntVar]] = field(default_factory=list)
    extra_cycles: cp_model.IntVar | None = None

    @staticmethod
    def add(terms: Terms, tile: int, expr: cp_model.LinearExprT) -> None:
        terms.setdefault(tile, []).append(expr)


class _Builder:
    """Builds the selection model one constraint family at a time (see the module docstring)."""

    def __init__(self, problem: SelectionProblem, tighten: dict[int, int], coarse: bool) -> None:
        self.problem = problem
        self.m = cp_model.CpModel()
        self.tighten = tighten
        self.coarse = coarse
        self.cost = problem.machine.cost
        self.bpc = problem.machine.exchange.bytes_per_cycle
        self.sync = problem.machine.exchange.sync_cycles
        tiles = problem.tiles
        # per tile: program table / fragments = constant + terms
        self.table_const = problem.direct.table_bytes[:tiles].copy()
        self.frag_const = problem.direct.fragments[:tiles].copy()
        self.table_terms: list[list[cp_model.LinearExprT]] = [[] for _ in range(tiles)]
        self.frag_terms: list[list[cp_model.LinearExprT]] = [[] for _ in range(tiles)]
        self.class_table: list[list[cp_model.LinearExprT]] = [[] for _ in problem.tile_classes]
        self.class_frag: list[list[cp_model.LinearExprT]] = [[] for _ in problem.tile_classes]
        self.cycle_terms: list[cp_model.LinearExprT] = []
        self.scratch_terms: list[cp_model.LinearExprT] = []
        self.relay_terms: list[cp_model.LinearExprT] = []
        self.xs: list[list[list[cp_model.IntVar]]] = []
        self.zs: list[dict[Signature, dict[int, cp_model.IntVar]]] = []
        self.ns: list[dict[tuple[Signature, int], cp_model.IntVar]] = []
        self.direct_index = {p.phase: i for i, p in enumerate(problem.capture.phases)}

    # -- one phase ----------------------------------------------------------------------------------------------
    def held_phase(self, pi: int, pd: PhaseData, fixed: PhaseFixed) -> None:
        """A phase held at the incumbent: its exact contribution replaces the direct one."""
        tiles = self.problem.tiles
        dp = self.problem.direct.phases[self.direct_index[pd.phase.phase]]
        self.table_const += fixed.table[:tiles] - dp.table_bytes[:tiles]
        self.frag_const += fixed.fragments[:tiles] - dp.fragments[:tiles]
        self.cycle_terms.append(fixed.cycles)
        self.scratch_terms.append(fixed.scratch)
        self.relay_terms.append(fixed.relays)
        self.xs.append([])
        self.zs.append({})
        self.ns.append({})

    def free_phase(self, pi: int, pd: PhaseData) -> None:
        terms = PhaseTerms()
        classes = self.options(pd, terms)
        if self.coarse:
            pz, pn = _coarse_hosts(self.m, self.problem, pi, pd, self.xs[pi], self.class_table, self.class_frag,
                                   lambda: self.extra_cycles(pd, terms), terms.host_cond, terms.class_cycles)
        else:
            pz, pn = self.exact_hosts(pi, pd, classes, terms)
        self.zs.append(pz)
        self.ns.append(pn)
        self.tables_and_cycles(pd, terms)
        if terms.lp_vars:
            self.extra_phase(pd, terms)

    def options(self, pd: PhaseData, terms: PhaseTerms) -> dict[Signature, list[tuple[int, int, int]]]:
        """One literal per option, exactly one per group; each option's exact effect on its own tiles."""
        px: list[list[cp_model.IntVar]] = []
        classes: dict[Signature, list[tuple[int, int, int]]] = {}
        for gi, opts in enumerate(pd.options):
            gx = [self.m.new_bool_var(f"x_{pd.phase.phase}_{gi}_{op.name}") for op in opts]
            self.m.add_exactly_one(gx)
            for oi, (op, v) in enumerate(zip(opts, gx, strict=True)):
                if op.variant == "direct":
                    continue
                sigs = pd.classes(op)
                for sig in set(sigs):
                    classes.setdefault(sig, []).append((gi, oi, sigs.count(sig)))
                self.scratch_terms.append(op.scratch * v)
                self.relay_terms.append(op.count * v)
                self.option_effects(op, v, terms)
            px.append(gx)
        self.xs.append(px)
        return classes

    def option_effects(self, op: Option, v: cp_model.IntVar, terms: PhaseTerms) -> None:
        fields_ = (terms.raw, terms.frag, terms.tx, terms.rx, terms.ctrl)
        deltas = (op.delta.raw, op.delta.frag, op.delta.tx, op.delta.rx, op.delta.ctrl)
        for i, t in enumerate(op.tiles.tolist()):
            if t >= self.problem.tiles:
                continue
            terms.raw.setdefault(t, [])  # an affected tile even when its table does not move
            for target, delta in zip(fields_, deltas, strict=True):
                if delta[i]:
                    PhaseTerms.add(target, t, int(delta[i]) * v)
        if op.variant == "local-pack":
            assert op.ext is not None
            terms.lp_vars.append(v)
            terms.kernels.append((op.kernel_cycles, v))
            for i, t in enumerate(op.ext_tiles.tolist()):
                PhaseTerms.add(terms.ext_raw, t, int(op.ext.raw[i]) * v)
                PhaseTerms.add(terms.ext_frag, t, int(op.ext.frag[i]) * v)
                PhaseTerms.add(terms.ext_rx, t, int(op.ext.rx[i]) * v)
                PhaseTerms.add(terms.ext_ctrl, t, int(op.ext.ctrl[i]) * v)
                terms.ext_members.setdefault(t, []).append(v)

    def exact_hosts(self, pi: int, pd: PhaseData, classes: dict[Signature, list[tuple[int, int, int]]],
                    terms: PhaseTerms) -> tuple[dict[Signature, dict[int, cp_model.IntVar]],
                                                dict[tuple[Signature, int], cp_model.IntVar]]:
        """One literal per (host class, named tile), a count per (host class, tile class); hosted = chosen."""
        m, c, problem = self.m, self.cost, self.problem
        pz: dict[Signature, dict[int, cp_model.IntVar]] = {}
        pn: dict[tuple[Signature, int], cp_model.IntVar] = {}
        class_hosts: dict[int, list[cp_model.IntVar]] = {}
        class_loads: dict[int, list[tuple[int, int, cp_model.IntVar]]] = {}
        host_of_tile: dict[int, list[tuple[cp_model.IntVar, dict[str, int], str]]] = {}
        for ci, (key, members) in enumerate(classes.items()):
            loads = _class_loads(key)
            variant = "local-pack" if loads["variant"] else "direct-receive"
            ok = (pd.largest_gap >= loads["buffer"]) & problem.explicit
            barred = _barred_everywhere(pd, key, members)
            if len(barred):
                ok[barred] = False
            zc = {t: m.new_bool_var(f"z_{pd.phase.phase}_{ci}_{t}") for t in np.flatnonzero(ok).tolist()}
            pz[key] = zc
            counted = []
            for ei, tc in enumerate(problem.tile_classes):
                used, raw0, tx0, rx0, ctrl0, gap = tc.per_phase[pi]
                if gap < loads["buffer"]:
                    continue
                size = len(tc.tiles)
                nv = m.new_int_var(0, size, f"n_{pd.phase.phase}_{ci}_{ei}")
                yv = m.new_bool_var(f"y_{pd.phase.phase}_{ci}_{ei}")
                m.add(nv <= size * yv)
                m.add(nv >= yv)
                pn[(key, ei)] = nv
                class_hosts.setdefault(ei, []).append(nv)
                counted.append(nv)
                entry = 0 if used else c.phase_entry_bytes
                add = c.rounded(raw0 + entry + loads["raw"]) - c.rounded(raw0)
                if variant == "local-pack":
                    add += c.rounded(c.phase_entry_bytes + loads["ext_raw"])
                    ecyc = self.extra_cycles(pd, terms)
                    m.add(self.bpc * ecyc >= loads["ext_tx"] * yv)
                    m.add(ecyc >= loads["ext_ctrl"] * yv)
                class_loads.setdefault(ei, []).append((add, loads["frag"] + loads["ext_frag"], yv))
                terms.class_cycles.append((tx0 + loads["tx"], rx0 + loads["rx"], ctrl0 + loads["ctrl"], yv))
            need = sum(n * self.xs[pi][g][o] for g, o, n in members)
            m.add(sum(zc.values()) + sum(counted) == need)
            for t, v in zc.items():
                host_of_tile.setdefault(t, []).append((v, loads, variant))
        # a class tile hosts at most one segment per phase: charge it the heaviest class it may host in the phase
        for ei, lst in class_loads.items():
            mx = m.new_int_var(0, max(a for a, _, _ in lst), f"class_table_{pd.phase.phase}_{ei}")
            mf = m.new_int_var(0, max(f for _, f, _ in lst), f"class_frag_{pd.phase.phase}_{ei}")
            for a, f, yv in lst:
                m.add(mx >= a * yv)
                m.add(mf >= f * yv)
            self.class_table[ei].append(mx)
            self.class_frag[ei].append(mf)
        for ei, lst in class_hosts.items():
            m.add(sum(lst) <= len(problem.tile_classes[ei].tiles))
        for t, lst in host_of_tile.items():
            self.named_host_loads(pd, t, lst, terms)
        return pz, pn

    def named_host_loads(self, pd: PhaseData, t: int, lst: list[tuple[cp_model.IntVar, dict[str, int], str]],
                         terms: PhaseTerms) -> None:
        """A named tile hosts at most one segment per phase and carries exactly its class's load."""
        c = self.cost
        if len(lst) > 1:
            self.m.add_at_most_one(v for v, _, _ in lst)
        entry = 0 if pd.state.used()[t] else c.phase_entry_bytes
        for v, loads, variant in lst:
            PhaseTerms.add(terms.raw, t, (loads["raw"] + entry) * v)
            PhaseTerms.add(terms.frag, t, loads["frag"] * v)
            PhaseTerms.add(terms.tx, t, loads["tx"] * v)
            PhaseTerms.add(terms.rx, t, loads["rx"] * v)
            PhaseTerms.add(terms.ctrl, t, loads["ctrl"] * v)
            if variant == "local-pack":
                PhaseTerms.add(terms.ext_raw, t, (loads["ext_raw"] + c.phase_entry_bytes) * v)
                PhaseTerms.add(terms.ext_frag, t, loads["ext_frag"] * v)
                PhaseTerms.add(terms.ext_tx, t, loads["ext_tx"] * v)
                PhaseTerms.add(terms.ext_ctrl, t, loads["ext_ctrl"] * v)

    def tables_and_cycles(self, pd: PhaseData, terms: PhaseTerms) -> None:
        """Per affected tile: its rounded table (8·q ≥ raw) and its share of the phase's cycles."""
        m, st, bpc, rounding = self.m, pd.state, self.bpc, self.cost.table_rounding
        tiles = self.problem.tiles
        cyc_const = st.tile_cycles()[:tiles]
        affected = sorted(set(terms.raw) | set(terms.frag) | set(terms.tx) | set(terms.rx) | set(terms.ctrl)
                          | set(terms.host_cond))
        unaffected_max = int(np.delete(cyc_const, affected).max(initial=0)) if affected else int(cyc_const.max())
        horizon = int(max(st.tx.max(), st.rx.max()) // bpc + 4 * int(st.receives.max()) + 10**6)
        cyc = m.new_int_var(unaffected_max, horizon, f"cycles_{pd.phase.phase}")

        def total(t_: Terms, t: int) -> cp_model.LinearExprT:
            return sum(t_.get(t, []))

        for t in affected:
            raw0 = int(pd.raw[t])
            q = m.new_int_var(0, (raw0 + 10**6) // rounding + 1, f"q_{pd.phase.phase}_{t}")
            m.add(rounding * q >= raw0 + total(terms.raw, t))
            self.table_const[t] -= int(st.table()[t])
            self.table_terms[t].append(rounding * q)
            tx0, rx0, ctrl0 = int(st.tx[t]), int(st.rx[t]), int(st.controls()[t])
            m.add(bpc * cyc >= tx0 + total(terms.tx, t))
            m.add(bpc * cyc >= rx0 + total(terms.rx, t))
            m.add(cyc >= ctrl0 + total(terms.ctrl, t))
            if t in terms.host_cond:  # coarse model: the host's load applies only if it hosts
                z, load = terms.host_cond[t]
                m.add(rounding * q >= raw0 + total(terms.raw, t) + load["raw"]).only_enforce_if(z)
                fr = m.new_int_var(-(10**6), 10**6, f"f_{pd.phase.phase}_{t}")
                m.add(fr >= total(terms.frag, t))
                m.add(fr >= total(terms.frag, t) + load["frag"]).only_enforce_if(z)
                self.frag_terms[t].append(fr)
                m.add(bpc * cyc >= tx0 + total(terms.tx, t) + load["tx"]).only_enforce_if(z)
                m.add(bpc * cyc >= rx0 + total(terms.rx, t) + load["rx"]).only_enforce_if(z)
                m.add(cyc >= ctrl0 + total(terms.ctrl, t) + load["ctrl"]).only_enforce_if(z)
            elif t in terms.frag:
                self.frag_terms[t].append(total(terms.frag, t))
        for tx_b, rx_b, ctrl_b, yv in terms.class_cycles:  # aggregated hosts, when their class hosts
            m.add(bpc * cyc >= tx_b).only_enforce_if(yv)
            m.add(bpc * cyc >= rx_b).only_enforce_if(yv)
            m.add(cyc >= ctrl_b).only_enforce_if(yv)
        self.cycle_terms.append(pd.iterations * (cyc + self.sync))

    def extra_cycles(self, pd: PhaseData, terms: PhaseTerms) -> cp_model.IntVar:
        if terms.extra_cycles is None:
            terms.extra_cycles = self.m.new_int_var(0, 10**8, f"extra_cycles_{pd.phase.phase}")
        return terms.extra_cycles

    def extra_phase(self, pd: PhaseData, terms: PhaseTerms) -> None:
        """The local-pack extra phase, shared by every local-pack group of the phase: its tables and cycles."""
        m, c, bpc, rounding = self.m, self.cost, self.bpc, self.cost.table_rounding
        extra_on = m.new_bool_var(f"extra_{pd.phase.phase}")
        for v in terms.lp_vars:
            m.add_implication(v, extra_on)
        m.add(extra_on <= sum(terms.lp_vars))
        ecyc = self.extra_cycles(pd, terms)
        kern = m.new_int_var(0, 10**8, f"kernel_{pd.phase.phase}")
        for kc, v in terms.kernels:
            m.add(kern >= kc * v)
        coarse_hosts = {t for t, (_, load) in terms.host_cond.items() if "ext_raw" in load}
        for t in sorted(set(terms.ext_raw) | set(terms.ext_tx) | coarse_hosts):
            members = terms.ext_members.get(t, [])
            u = m.new_bool_var(f"ext_active_{pd.phase.phase}_{t}") if members else None
            for v in members:
                m.add_implication(v, u)
            base_entry = c.phase_entry_bytes * u if u is not None else 0
            q = m.new_int_var(0, 10**6, f"qe_{pd.phase.phase}_{t}")
            m.add(rounding * q >= base_entry + sum(terms.ext_raw.get(t, [])))
            self.table_terms[t].append(rounding * q)
            self.frag_terms[t].append(sum(terms.ext_frag.get(t, [])))
            m.add(bpc * ecyc >= sum(terms.ext_rx.get(t, [])))
            m.add(bpc * ecyc >= sum(terms.ext_tx.get(t, [])))
            m.add(ecyc >= sum(terms.ext_ctrl.get(t, [])))
            if t in coarse_hosts:
                z, load = terms.host_cond[t]
                m.add(rounding * q >= c.phase_entry_bytes + sum(terms.ext_raw.get(t, [])) + load["ext_raw"]
                      ).only_enforce_if(z)
                fe = m.new_int_var(0, 10**6, f"fe_{pd.phase.phase}_{t}")
                m.add(fe >= load["ext_frag"]).only_enforce_if(z)
                self.frag_terms[t].append(fe)
                m.add(bpc * ecyc >= sum(terms.ext_tx.get(t, [])) + load["ext_tx"]).only_enforce_if(z)
                m.add(ecyc >= sum(terms.ext_ctrl.get(t, [])) + load["ext_ctrl"]).only_enforce_if(z)
        self.cycle_terms.append(pd.iterations * (ecyc + kern + self.sync * extra_on))

    # -- the whole program ----------------------------------------------------------------------------------------
    def budgets(self) -> tuple[cp_model.IntVar, dict[int, cp_model.LinearExprT]]:
        """Per tile: table within the budget and fragments within the limit; the worst-tile variable."""
        m, problem = self.m, self.problem
        budget, limit = problem.table_budget, problem.fragment_limit
        table_const, frag_const = self.table_const, self.frag_const
        totals: dict[int, cp_model.LinearExprT] = {}
        worst = m.new_int_var(0, int(table_const.max(initial=0)) + 10**6, "worst_table")
        for t in range(problem.tiles):
            if not self.table_terms[t]:
                m.add(worst >= int(table_const[t]))
                continue
            total = int(table_const[t]) + sum(self.table_terms[t])
            totals[t] = total
            m.add(total <= budget - self.tighten.get(t, 0))
            m.add(worst >= total)
            if self.frag_terms[t]:
                m.add(int(frag_const[t]) + sum(self.frag_terms[t]) <= limit)
        for ei, tc in enumerate(problem.tile_classes):
            if not self.class_table[ei]:
                continue
            # upper bound: a class tile charged, in every phase, the heaviest segment its class hosts there; the
            # class's tiles may differ by what the incumbent put on them in phases held fixed: take the worst
            total = int(table_const[tc.tiles].max()) + sum(self.class_table[ei])
            m.add(total <= budget)
            m.add(int(frag_const[tc.tiles].max()) + sum(self.class_frag[ei]) <= limit)
            m.add(worst >= total)
        # a tile no option touches must already fit, or no plan exists (CP-SAT then proves infeasibility at once)
        if any(not self.table_terms[t] and (table_const[t] > budget or frag_const[t] > limit)
               for t in range(problem.tiles)):
            m.add_bool_or([])
        return worst, totals

    def objectives(self, worst: cp_model.IntVar) -> dict[str, cp_model.LinearExprT]:
        problem = self.problem
        selection_ids = {pd.phase.phase for pd in problem.phases}
        fixed_cycles = sum(pc.cycles * k for pc, k in zip(problem.direct.phases, problem.direct.iterations,
                                                           strict=True) if pc.phase not in selection_ids)
        return {
            "cycles": fixed_cycles + sum(self.cycle_terms),
            "table": worst,
            "scratch": sum(self.scratch_terms),
            "relays": sum(self.relay_terms),
        }


def _barred_everywhere(pd: PhaseData, key: Signature, members: list[tuple[int, int, int]]) -> np.ndarray:
    """Tiles barred from every segment of a host class (a replica of its group, or a sender of the segment)."""
    barred: np.ndarray | None = None
    for g, o, _ in members:
        op = pd.options[g][o]
        for s, sig in enumerate(pd.classes(op)):
            if sig == key:
                barred = op.banned[s] if barred is None else np.intersect1d(barred, op.banned[s])
    return np.zeros(0, np.int64) if barred is None else barred


def build_model(problem: SelectionProblem, *, tighten: dict[int, int] | None = None, coarse: bool | None = None,
                active: set[int] | None = None, fixed: list[PhaseFixed] | None = None) -> ModelHandle:
    """Build the CP-SAT model. ``tighten`` lowers a tile's table budget (lazy correction of seam effects; negative
    values raise it, for the relaxation that proves infeasibility).

    ``coarse`` (default: when the exact host model would exceed EXACT_HOST_LIMIT pairs) replaces host classes by
    one "hosts a segment" literal per tile and phase, each host charged the heaviest segment *chosen* in its phase:
    linear in the tiles instead of in tiles × classes, and conservative -- never optimistic -- about host loads.
    With ``active``, only those selection phases are free; the others are held at ``fixed``.
    """
    if coarse is None:
        coarse = exact_host_pairs(problem, active) > EXACT_HOST_LIMIT
    builder = _Builder(problem, tighten or {}, coarse)
    for pi, pd in enumerate(problem.phases):
        if active is not None and pi not in active:
            assert fixed is not None
            builder.held_phase(pi, pd, fixed[pi])
        else:
            builder.free_phase(pi, pd)
    worst, totals = builder.budgets()
    return ModelHandle(builder.m, builder.xs, builder.zs, builder.ns, builder.objectives(worst), totals)


_LOAD_FIELDS = ("raw", "frag", "tx", "rx", "ctrl", "buffer", "ext_raw", "ext_frag", "ext_tx", "ext_ctrl")


def _option_max(op: Option) -> dict[str, int]:
    """The heaviest segment of an option, field by field."""
    assert op.host is not None
    out = {f: int(getattr(op.host, f).max()) for f in ("raw", "frag", "tx", "rx", "ctrl")}
    out["buffer"] = int(op.buffer_bytes.max())
    for f in ("raw", "frag", "tx", "ctrl"):
        out["ext_" + f] = int(getattr(op.ext_host, f).max()) if op.ext_host is not None else 0
    return out


def _coarse_hosts(m: cp_model.CpModel, problem: SelectionProblem, pi: int, pd: PhaseData,
                  px: list[list[cp_model.IntVar]], class_table: list[list[cp_model.LinearExprT]],
                  class_frag: list[list[cp_model.LinearExprT]], ecyc_of: Callable[[], cp_model.IntVar],
                  host_cond: dict[int, tuple[cp_model.IntVar, dict[str, cp_model.LinearExprT]]],
                  cyc_out: list[tuple[cp_model.LinearExprT, cp_model.LinearExprT, cp_model.LinearExprT,
                                      cp_model.IntVar]]) -> tuple[dict[Signature, dict[int, cp_model.IntVar]],
                                                                  dict[tuple[Signature, int], cp_model.IntVar]]:
    """Coarse host model of one phase: a literal per tile, loads = the heaviest chosen segment of the phase."""
    c = problem.machine.cost
    bpc = problem.machine.exchange.bytes_per_cycle
    ph = pd.phase.phase
    relays = [(gi, oi, op) for gi, opts in enumerate(pd.options) for oi, op in enumerate(opts)
              if op.variant != "direct"]
    if not relays:
        return {ANY: {}}, {}
    maxima = [(_option_max(op), px[gi][oi], op) for gi, oi, op in relays]
    load: dict[str, cp_model.IntVar] = {}
    for f in _LOAD_FIELDS:
        top = max(mx[f] for mx, _, _ in maxima)
        load[f] = m.new_int_var(0, top, f"L{f}_{ph}")
        for mx, v, _ in maxima:
            if mx[f]:
                m.add(load[f] >= mx[f] * v)
    has_lp = any(op.variant == "local-pack" for _, _, op in relays)
    smallest = min(mx["buffer"] for mx, _, _ in maxima)
    st = pd.state
    zc: dict[int, cp_model.IntVar] = {}
    for t in np.flatnonzero(problem.explicit & (pd.largest_gap >= smallest)).tolist():
        z = m.new_bool_var(f"z_{ph}_{t}")
        zc[t] = z
        m.add(load["buffer"] <= int(pd.largest_gap[t])).only_enforce_if(z)
        entry = 0 if st.used()[t] else c.phase_entry_bytes
        cond: dict[str, cp_model.LinearExprT] = {"raw": load["raw"] + entry, "frag": load["frag"],
                                                 "tx": load["tx"], "rx": load["rx"], "ctrl": load["ctrl"]}
        if has_lp:
            cond.update({f: load[f] for f in ("ext_raw", "ext_frag", "ext_tx", "ext_ctrl")})
        host_cond[t] = (z, cond)
    counted: list[cp_model.IntVar] = []
    pn: dict[tuple[Signature, int], cp_model.IntVar] = {}
    rnd = c.table_rounding
    for ei, tc in enumerate(problem.tile_classes):
        used, raw0, tx0, rx0, ctrl0, gap = tc.per_phase[pi]
        if gap < smallest:
            continue
        size = len(tc.tiles)
        nv = m.new_int_var(0, size, f"n_{ph}_{ei}")
        yv = m.new_bool_var(f"y_{ph}_{ei}")
        m.add(nv <= size * yv)
        m.add(nv >= yv)
        m.add(load["buffer"] <= gap).only_enforce_if(yv)
        pn[(ANY, ei)] = nv
        counted.append(nv)
        entry = 0 if used else c.phase_entry_bytes
        base = round_up(raw0, rnd)
        qv = m.new_int_var(base // rnd, 10**6, f"qc_{ph}_{ei}")
        m.add(rnd * qv >= raw0 + entry + load["raw"]).only_enforce_if(yv)
        extra = rnd * qv - base
        fv = m.new_int_var(0, 10**6, f"fc_{ph}_{ei}")
        m.add(fv >= load["frag"] + load["ext_frag"]).only_enforce_if(yv)
        if has_lp:
            qe = m.new_int_var(0, 10**6, f"qce_{ph}_{ei}")
            m.add(rnd * qe >= c.phase_entry_bytes + load["ext_raw"]).only_enforce_if(yv)
            extra = extra + rnd * qe
            ecyc = ecyc_of()
            m.add(bpc * ecyc >= load["ext_tx"]).only_enforce_if(yv)
            m.add(ecyc >= load["ext_ctrl"]).only_enforce_if(yv)
        class_table[ei].append(extra)
        class_frag[ei].append(fv)
        cyc_out.append((tx0 + load["tx"], rx0 + load["rx"], ctrl0 + load["ctrl"], yv))
    need = sum(op.count * px[gi][oi] for gi, oi, op in relays)
    m.add(sum(zc.values()) + sum(counted) == need)
    # with classes, aggregated tiles host at most one segment per phase each
    return {ANY: zc}, pn


def hint(handle: ModelHandle, selection: Selection) -> None:
    for pi, gx in enumerate(handle.x):
        for gi, opts in enumerate(gx):
            for oi, v in enumerate(opts):
                handle.model.add_hint(v, 1 if selection.choice[pi][gi] == oi else 0)
    for pi, pz in enumerate(handle.z):
        chosen = selection.hosts[pi] if pi < len(selection.hosts) else {}
        for key, zc in pz.items():
            tiles = set(chosen.get(key, [])) if key != ANY else {t for lst in chosen.values() for t in lst}
            for t, v in zc.items():
                handle.model.add_hint(v, 1 if t in tiles else 0)
    for pi, pn in enumerate(handle.n):
        counts = selection.counts[pi] if pi < len(selection.counts) else {}
        for key, v in pn.items():
            if key[0] == ANY:
                handle.model.add_hint(v, sum(n for (_, e), n in counts.items() if e == key[1]))
            else:
                handle.model.add_hint(v, counts.get(key, 0))


@dataclass(eq=False)
class StagedResult:
    selection: Selection | None
    stages: list[tuple[str, SolveResult]]
    values: dict[str, float]

    @property
    def work(self) -> float:
        return sum(r.work for _, r in self.stages)

    @property
    def backstop(self) -> bool:
        return any(r.backstop for _, r in self.stages)

    @property
    def status(self) -> Status:
        if not self.stages:
            return Status.UNKNOWN
        first = self.stages[0][1].status
        if first in (Status.INFEASIBLE, Status.UNKNOWN):
            return first
        return Status.OPTIMAL if all(r.status is Status.OPTIMAL for _, r in self.stages) else Status.FEASIBLE


def solve_staged(problem: SelectionProblem, params: SolverParams, order: Sequence[str], *,
                 start: Selection | None = None, progress: SolverCallback | None = None,
                 tighten: dict[int, int] | None = None, active: set[int] | None = None,
                 fixed: list[PhaseFixed] | None = None, combine: bool = False,
                 lower: dict[str, int] | None = None, wall: Callable[[], float] | None = None,
                 tuning: dict[str, Any] | None = None) -> StagedResult:
    """Lexicographic optimisation: one CP-SAT solve per objective, each fixing the ones before it.

    ``params.time_limit`` is the work of the whole call (deterministic seconds in deterministic mode), shared by
    the stages in fixed proportions; ``wall`` (seconds left on the command's clock) is each solve's backstop.
    ``combine`` minimises the first two objectives in one solve (weighted so the order stays lexicographic), which
    saves a presolve where the model is rebuilt often (neighbourhoods). ``lower`` gives proved lower bounds per
    objective: added as constraints, they let CP-SAT stop as soon as a solution meets them.
    With ``active``, only those selection phases are free; the others are held at ``start`` (whose exact
    contributions are ``fixed``)."""
    handle = build_model(problem, tighten=tighten, active=active, fixed=fixed)
    for name, value in (lower or {}).items():
        if name in handle.objectives:
            handle.model.add(handle.objectives[name] >= int(value))
    if start is not None:
        hint(handle, start)
    stages: list[tuple[str, SolveResult]] = []
    values: dict[str, float] = {}
    selection = start
    names, exprs = _stages(problem, handle, list(order), combine, tighten)
    scope = "" if active is None else f"neighbourhood phase {_phase_names(problem, active)}, "
    # fixed shares of the work (not "what is left on the clock"), so deterministic runs stay deterministic
    shares = ([0.45, 0.35, 0.15, 0.05] if len(names) > 2 else [0.8, 0.2])[: len(names)]
    for i, name in enumerate(names):
        budget = params.time_limit * shares[i] / sum(shares)
        handle.model.minimize(exprs[name])
        left = wall() if wall is not None else None
        if left is not None and left <= 0.05:
            stages.append((name, SolveResult(Status.UNKNOWN, None, None, 0.0, backstop=True)))
            if i == 0:
                return StagedResult(None, stages, values)
            break
        # full probing costs seconds on this model's many tile constraints; level 0 trips a CP-SAT check (9.15)
        # with interleaved search
        with task(f"cp-sat {scope}stage {i + 1}/{len(names)} ({name})") as shown:
            solver, res = run(handle.model, replace(params, time_limit=max(0.05, budget), backstop=left),
                              progress=_both(shown.solver, progress),
                              tuning={"cp_model_probing_level": 1, **(tuning or {})})
            shown.update(f"{res.status.value}, {solver_detail(res.objective, res.bound)}")
        stages.append((name, res))
        if res.status in (Status.INFEASIBLE, Status.UNKNOWN):
            if i == 0:
                return StagedResult(None, stages, values)
            break
        selection = _read(handle, solver, start)
        for n in order:
            values[n] = round(solver.value(handle.objectives[n]))
        value = round(res.objective or 0)
        handle.model.add(exprs[name] <= value)
        # carry the solution into the next stage
        handle.model.clear_hints()
        hint(handle, selection)
    return StagedResult(selection, stages, values)


def _phase_names(problem: SelectionProblem, active: set[int]) -> str:
    return ",".join(str(problem.phases[pi].phase.phase) for pi in sorted(active))


def _both(shown: SolverCallback, extra: SolverCallback | None) -> SolverCallback:
    """The display's callback, and the caller's own if it gave one."""
    if extra is None:
        return shown

    def both(elapsed: float, objective: float | None, bound: float | None) -> None:
        shown(elapsed, objective, bound)
        extra(elapsed, objective, bound)

    return both


def _stages(problem: SelectionProblem, handle: ModelHandle, order: list[str], combine: bool,
            tighten: dict[int, int] | None) -> tuple[list[str], dict[str, cp_model.LinearExprT]]:
    """The solves of a lexicographic order: one per objective, or (``combine``) one per pair whose second member
    has a known upper bound U, minimising first·(U + 1) + second -- the same order, half the presolves."""
    upper: dict[str, int] = {
        "table": problem.table_budget + max([0, *(-v for v in (tighten or {}).values())]),
        "scratch": sum(max(op.scratch for op in opts) for pd in problem.phases for opts in pd.options),
        "relays": sum(max(op.count for op in opts) for pd in problem.phases for opts in pd.options),
    }
    obj = handle.objectives
    names: list[str] = []
    exprs: dict[str, cp_model.LinearExprT] = {}
    i = 0
    while i < len(order):
        first = order[i]
        second = order[i + 1] if i + 1 < len(order) else None
        if combine and second in upper:
            # the bound is a constraint, so the weight orders every feasible solution lexicographically
            handle.model.add(obj[second] <= upper[second])
            name = f"{first}+{second}"
            exprs[name] = obj[first] * (upper[second] + 1) + obj[second]
            i += 2
        else:
            name = first
            exprs[name] = obj[first]
            i += 1
        names.append(name)
    return names, exprs


def _read(handle: ModelHandle, solver: cp_model.CpSolver, start: Selection | None) -> Selection:
    """The solution; phases the model held fixed (no variables) keep ``start``'s choice."""
    choice, hosts, counts = [], [], []
    for pi, gx in enumerate(handle.x):
        if not gx and start is not None:
            choice.append(list(start.choice[pi]))
            hosts.append(dict(start.hosts[pi]) if pi < len(start.hosts) else {})
            counts.append(dict(start.counts[pi]) if pi < len(start.counts) else {})
            continue
        choice.append([int(np.argmax([solver.boolean_value(v) for v in opts])) for opts in gx])
        hosts.append({key: [t for t, v in zc.items() if solver.boolean_value(v)] for key, zc in handle.z[pi].items()})
        counts.append({key: int(solver.value(v)) for key, v in handle.n[pi].items() if solver.value(v)})
    return Selection(choice, hosts, counts)
