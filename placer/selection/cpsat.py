"""CP-SAT relay selection over the whole program (see docs/selection.md for the formulation).

Decision variables
- ``x[g, o]``: group g takes option o (direct, direct-receive with k segments, local-pack with k segments);
  exactly one per group.
- ``z[p, c, t]``: tile t hosts one relay segment of host class c in phase p. A class gathers the segments of a
  phase with the same *signature* -- every number a host's cost depends on (rows, fragments, bytes, controls,
  buffer size, kernel cycles) -- so segments of one class are interchangeable and the loads are exact.
  Σ_t z[p, c, t] equals the number of class-c segments chosen, and Σ_c z[p, c, t] ≤ 1 (one segment per tile and
  phase). z exists only where the tile's largest free gap in the phase holds the class's buffer and the tile is
  not a replica of every group of the class; which segment goes where is an exact bipartite matching
  (``realise``), so the model never enumerates (segment, tile) pairs.

Constraints (hard): per tile, Σ over phases of its rounded table bytes ≤ budget (rounding to 8 modelled with an
integer ``q`` per affected tile and phase: 8·q ≥ raw); per tile, fragments ≤ the limit; per phase, the cycle
variable bounds every affected tile's ⌈tx/4⌉, ⌈rx/4⌉ and controls.

Objective: lexicographic, solved in stages (each stage fixes the previous optimum, or best value on time-out):
by default total cycles, then worst-tile table bytes, then relay scratch, then relay count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from placer.selection.problem import SelectionProblem
from placer.solver import Progress, SolveResult, SolverParams, Status, run

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
    classes: list[dict[Signature, list[tuple[int, int, int]]]]


Signature = tuple[int, ...]


def _class_loads(sig: Signature) -> dict[str, int]:
    kind, kernel, raw, frag, tx, rx, ctrl, buffer, *ext = sig
    e_raw, e_frag, e_tx, e_ctrl = ext if ext else (0, 0, 0, 0)
    return {"variant": kind, "kernel": kernel, "raw": raw, "frag": frag, "tx": tx, "rx": rx, "ctrl": ctrl,
            "buffer": buffer, "ext_raw": e_raw, "ext_frag": e_frag, "ext_tx": e_tx, "ext_ctrl": e_ctrl}


def build_model(problem: SelectionProblem, *, forbid: Sequence[tuple[int, int, int]] = (),
                tighten: dict[int, int] | None = None) -> ModelHandle:
    """Build the CP-SAT model. ``tighten`` lowers a tile's table budget (lazy correction of seam effects)."""
    m = cp_model.CpModel()
    mach = problem.machine
    c = mach.cost
    tiles = problem.tiles
    tighten = tighten or {}
    sync = mach.exchange.sync_cycles
    bpc = mach.exchange.bytes_per_cycle

    # per tile: program table / fragments as constant + terms
    table_terms: list[list[cp_model.LinearExprT]] = [[] for _ in range(tiles)]
    frag_terms: list[list[cp_model.LinearExprT]] = [[] for _ in range(tiles)]
    table_const = problem.direct.table_bytes[:tiles].copy()
    frag_const = problem.direct.fragments[:tiles].copy()
    cycle_terms: list[cp_model.LinearExprT] = []
    scratch_terms: list[cp_model.LinearExprT] = []
    relay_terms: list[cp_model.LinearExprT] = []
    xs: list[list[list[cp_model.IntVar]]] = []
    zs: list[dict[Signature, dict[int, cp_model.IntVar]]] = []
    ns: list[dict[tuple[Signature, int], cp_model.IntVar]] = []
    # aggregated tile classes: program-wide table/fragment terms (upper bounds, see docs/selection.md)
    class_table: list[list[cp_model.LinearExprT]] = [[] for _ in problem.tile_classes]
    class_frag: list[list[cp_model.LinearExprT]] = [[] for _ in problem.tile_classes]
    classes_all = []
    forbidden = set(forbid)

    for pi, pd in enumerate(problem.phases):
        st = pd.state
        px: list[list[cp_model.IntVar]] = []
        classes: dict[Signature, list[tuple[int, int, int]]] = {}
        # per tile linear pieces for this phase
        raw_e: dict[int, list[cp_model.LinearExprT]] = {}
        frag_e: dict[int, list[cp_model.LinearExprT]] = {}
        tx_e: dict[int, list[cp_model.LinearExprT]] = {}
        rx_e: dict[int, list[cp_model.LinearExprT]] = {}
        ctrl_e: dict[int, list[cp_model.LinearExprT]] = {}
        ext_raw: dict[int, list[cp_model.LinearExprT]] = {}
        ext_frag: dict[int, list[cp_model.LinearExprT]] = {}
        ext_rx: dict[int, list[cp_model.LinearExprT]] = {}
        ext_tx: dict[int, list[cp_model.LinearExprT]] = {}
        ext_ctrl: dict[int, list[cp_model.LinearExprT]] = {}
        ext_members: dict[int, list[cp_model.IntVar]] = {}
        lp_vars: list[cp_model.IntVar] = []
        ecyc_box: list[cp_model.IntVar] = []

        def ecyc_of(_pi: int, box: list[cp_model.IntVar] = ecyc_box, ph: int = pd.phase.phase) -> cp_model.IntVar:
            if not box:
                box.append(m.new_int_var(0, 10**8, f"extra_cycles_{ph}"))
            return box[0]

        kernel_terms: list[tuple[int, cp_model.IntVar]] = []
        for gi, opts in enumerate(pd.options):
            gx = [m.new_bool_var(f"x_{pd.phase.phase}_{gi}_{op.name}") for op in opts]
            m.add_exactly_one(gx)
            for oi, (op, v) in enumerate(zip(opts, gx, strict=True)):
                if (pi, gi, oi) in forbidden:
                    m.add(v == 0)
                if op.variant == "direct":
                    continue
                sigs = op.signatures()
                for sig in set(sigs):
                    classes.setdefault(sig, []).append((gi, oi, sigs.count(sig)))
                scratch_terms.append(op.scratch * v)
                relay_terms.append(op.count * v)
                for t, dr, df, dtx, drx, dct in zip(op.tiles.tolist(), op.delta.raw.tolist(), op.delta.frag.tolist(),
                                                    op.delta.tx.tolist(), op.delta.rx.tolist(),
                                                    op.delta.ctrl.tolist(), strict=True):
                    if t >= tiles:
                        continue
                    if dr:
                        raw_e.setdefault(t, []).append(dr * v)
                    if df:
                        frag_e.setdefault(t, []).append(df * v)
                    if dtx:
                        tx_e.setdefault(t, []).append(dtx * v)
                    if drx:
                        rx_e.setdefault(t, []).append(drx * v)
                    if dct:
                        ctrl_e.setdefault(t, []).append(dct * v)
                    raw_e.setdefault(t, [])
                if op.variant == "local-pack":
                    lp_vars.append(v)
                    kernel_terms.append((op.kernel_cycles, v))
                    assert op.ext is not None
                    for i, t in enumerate(op.ext_tiles.tolist()):
                        ext_raw.setdefault(t, []).append(int(op.ext.raw[i]) * v)
                        ext_frag.setdefault(t, []).append(int(op.ext.frag[i]) * v)
                        ext_rx.setdefault(t, []).append(int(op.ext.rx[i]) * v)
                        ext_ctrl.setdefault(t, []).append(int(op.ext.ctrl[i]) * v)
                        ext_members.setdefault(t, []).append(v)
            px.append(gx)
        xs.append(px)
        classes_all.append(classes)

        # hosts
        pz: dict[Signature, dict[int, cp_model.IntVar]] = {}
        pn: dict[tuple[Signature, int], cp_model.IntVar] = {}
        class_hosts: dict[int, list[cp_model.IntVar]] = {}
        class_cyc: list[tuple[int, int, int, cp_model.IntVar]] = []
        host_of_tile: dict[int, list[tuple[cp_model.IntVar, dict[str, int], str]]] = {}
        for ci, (key, members) in enumerate(classes.items()):
            loads = _class_loads(key)
            banned_everywhere = None
            for g, o, _ in members:
                op = pd.options[g][o]
                common = op.group.replicas.astype(np.int64)
                banned_everywhere = common if banned_everywhere is None else np.intersect1d(banned_everywhere, common)
            ok = pd.largest_gap >= loads["buffer"]
            if banned_everywhere is not None and len(banned_everywhere):
                ok[banned_everywhere] = False
            cand = np.flatnonzero(ok & problem.explicit).tolist()
            zc = {t: m.new_bool_var(f"z_{pd.phase.phase}_{ci}_{t}") for t in cand}
            pz[key] = zc
            variant = "local-pack" if loads["variant"] else "direct-receive"
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
                rnd = c.table_rounding
                add = -(-(raw0 + entry + loads["raw"]) // rnd) * rnd - (-(-raw0 // rnd) * rnd)
                if variant == "local-pack":
                    add += -(-(c.phase_entry_bytes + loads["ext_raw"]) // rnd) * rnd
                    m.add(bpc * ecyc_of(pi) >= loads["ext_tx"] * yv)
                    m.add(ecyc_of(pi) >= loads["ext_ctrl"] * yv)
                class_table[ei].append(add * yv)
                class_frag[ei].append((loads["frag"] + loads["ext_frag"]) * yv)
                class_cyc.append((tx0 + loads["tx"], rx0 + loads["rx"], ctrl0 + loads["ctrl"], yv))
            need = sum(n * xs[pi][g][o] for g, o, n in members)
            m.add(sum(zc.values()) + sum(counted) == need)
            for t, v in zc.items():
                host_of_tile.setdefault(t, []).append((v, loads, variant))
        zs.append(pz)
        ns.append(pn)
        for ei, lst in class_hosts.items():
            m.add(sum(lst) <= len(problem.tile_classes[ei].tiles))
        for t, lst in host_of_tile.items():
            if len(lst) > 1:
                m.add_at_most_one(v for v, _, _ in lst)
            entry = 0 if st.used()[t] else c.phase_entry_bytes
            for v, loads, variant in lst:
                raw_e.setdefault(t, []).append((loads["raw"] + entry) * v)
                frag_e.setdefault(t, []).append(loads["frag"] * v)
                tx_e.setdefault(t, []).append(loads["tx"] * v)
                rx_e.setdefault(t, []).append(loads["rx"] * v)
                ctrl_e.setdefault(t, []).append(loads["ctrl"] * v)
                if variant == "local-pack":
                    ext_raw.setdefault(t, []).append((loads["ext_raw"] + c.phase_entry_bytes) * v)
                    ext_frag.setdefault(t, []).append(loads["ext_frag"] * v)
                    ext_tx.setdefault(t, []).append(loads["ext_tx"] * v)
                    ext_ctrl.setdefault(t, []).append(loads["ext_ctrl"] * v)

        # this phase's rounded table per affected tile, and its cycles
        rounding = c.table_rounding
        cyc_const = st.tile_cycles()[:tiles]
        affected = sorted(set(raw_e) | set(frag_e) | set(tx_e) | set(rx_e) | set(ctrl_e))
        unaffected_max = int(np.delete(cyc_const, affected).max(initial=0)) if affected else int(cyc_const.max())
        horizon = int(max(st.tx.max(), st.rx.max()) // bpc + 4 * int(st.receives.max()) + 10**6)
        cyc = m.new_int_var(unaffected_max, horizon, f"cycles_{pd.phase.phase}")
        for t in affected:
            raw0 = int(pd.raw[t])
            q = m.new_int_var(0, (raw0 + 10**6) // rounding + 1, f"q_{pd.phase.phase}_{t}")
            m.add(rounding * q >= raw0 + sum(raw_e.get(t, [])))
            table_const[t] -= int(st.table()[t])
            table_terms[t].append(rounding * q)
            if t in frag_e:
                frag_terms[t].append(sum(frag_e[t]))
            m.add(bpc * cyc >= int(st.tx[t]) + sum(tx_e.get(t, [])))
            m.add(bpc * cyc >= int(st.rx[t]) + sum(rx_e.get(t, [])))
            ctrl0 = int(c.send_control_cycles * st.sends[t] + c.receive_control_cycles * st.receives[t]
                        + c.pointer_reset_cycles * st.resets[t])
            m.add(cyc >= ctrl0 + sum(ctrl_e.get(t, [])))
        for tx_b, rx_b, ctrl_b, yv in class_cyc:
            m.add(bpc * cyc >= tx_b * yv)
            m.add(bpc * cyc >= rx_b * yv)
            m.add(cyc >= ctrl_b * yv)
        cycle_terms.append(pd.iterations * (cyc + sync))

        # the local-pack extra phase, shared by every local-pack group of this phase
        if lp_vars:
            active = m.new_bool_var(f"extra_{pd.phase.phase}")
            for v in lp_vars:
                m.add_implication(v, active)
            m.add(active <= sum(lp_vars))
            ecyc = ecyc_of(pi)
            kern = m.new_int_var(0, 10**8, f"kernel_{pd.phase.phase}")
            for kc, v in kernel_terms:
                m.add(kern >= kc * v)
            for t in sorted(set(ext_raw) | set(ext_tx)):
                members = ext_members.get(t, [])
                u = m.new_bool_var(f"ext_active_{pd.phase.phase}_{t}") if members else None
                if u is not None:
                    for v in members:
                        m.add_implication(v, u)
                base_entry = c.phase_entry_bytes * u if u is not None else 0
                q = m.new_int_var(0, 10**6, f"qe_{pd.phase.phase}_{t}")
                m.add(rounding * q >= base_entry + sum(ext_raw.get(t, [])))
                table_terms[t].append(rounding * q)
                frag_terms[t].append(sum(ext_frag.get(t, [])))
                m.add(bpc * ecyc >= sum(ext_rx.get(t, [])))
                m.add(bpc * ecyc >= sum(ext_tx.get(t, [])))
                m.add(ecyc >= sum(ext_ctrl.get(t, [])))
            cycle_terms.append(pd.iterations * (ecyc + kern + sync * active))

    # program-wide budgets and the worst-tile variable
    budget = problem.table_budget
    worst = m.new_int_var(0, int(table_const.max(initial=0)) + 10**6, "worst_table")
    for t in range(tiles):
        if not table_terms[t]:
            m.add(worst >= int(table_const[t]))
            continue
        total = int(table_const[t]) + sum(table_terms[t])
        m.add(total <= budget - tighten.get(t, 0))
        m.add(worst >= total)
        if frag_terms[t]:
            m.add(int(frag_const[t]) + sum(frag_terms[t]) <= problem.fragment_limit)
    for ei, tc in enumerate(problem.tile_classes):
        if not class_table[ei]:
            continue
        # upper bound: a tile of the class charged every class it hosts for; realise() spreads hosts over the
        # class's tiles, so the bound holds for every one of them
        total = tc.table + sum(class_table[ei])
        m.add(total <= budget)
        m.add(tc.fragments + sum(class_frag[ei]) <= problem.fragment_limit)
        m.add(worst >= total)
    # a tile no option touches must already fit, or no plan exists (CP-SAT then proves infeasibility at once)
    if any(not table_terms[t] and (table_const[t] > budget or frag_const[t] > problem.fragment_limit)
           for t in range(tiles)):
        m.add_bool_or([])
    fixed_cycles = sum(pc.cycles * k for pc, k, p in zip(problem.direct.phases, problem.direct.iterations,
                                                          problem.capture.phases, strict=True)
                       if p.phase not in {pd.phase.phase for pd in problem.phases})
    objectives = {
        "cycles": fixed_cycles + sum(cycle_terms),
        "table": worst,
        "scratch": sum(scratch_terms),
        "relays": sum(relay_terms),
    }
    return ModelHandle(m, xs, zs, ns, objectives, classes_all)


def hint(handle: ModelHandle, selection: Selection) -> None:
    for pi, gx in enumerate(handle.x):
        for gi, opts in enumerate(gx):
            for oi, v in enumerate(opts):
                handle.model.add_hint(v, 1 if selection.choice[pi][gi] == oi else 0)
    for pi, pz in enumerate(handle.z):
        chosen = selection.hosts[pi] if pi < len(selection.hosts) else {}
        for key, zc in pz.items():
            tiles = set(chosen.get(key, []))
            for t, v in zc.items():
                handle.model.add_hint(v, 1 if t in tiles else 0)
    for pi, pn in enumerate(handle.n):
        counts = selection.counts[pi] if pi < len(selection.counts) else {}
        for key, v in pn.items():
            handle.model.add_hint(v, counts.get(key, 0))


@dataclass(eq=False)
class StagedResult:
    selection: Selection | None
    stages: list[tuple[str, SolveResult]]
    values: dict[str, float]

    @property
    def status(self) -> Status:
        if not self.stages:
            return Status.UNKNOWN
        first = self.stages[0][1].status
        if first in (Status.INFEASIBLE, Status.UNKNOWN):
            return first
        return Status.OPTIMAL if all(r.status is Status.OPTIMAL for _, r in self.stages) else Status.FEASIBLE


def solve_staged(problem: SelectionProblem, params: SolverParams, order: Sequence[str], *,
                 start: Selection | None = None, progress: Progress | None = None,
                 tighten: dict[int, int] | None = None) -> StagedResult:
    """Lexicographic optimisation: one CP-SAT solve per objective, each fixing the ones before it."""
    handle = build_model(problem, tighten=tighten)
    if start is not None:
        hint(handle, start)
    stages: list[tuple[str, SolveResult]] = []
    values: dict[str, float] = {}
    selection = start
    # fixed shares of the budget (not "what is left on the clock"), so deterministic runs stay deterministic
    shares = [0.45, 0.35, 0.15, 0.05][: len(order)]
    for i, name in enumerate(order):
        budget = params.time_limit * shares[i] / sum(shares)
        handle.model.minimize(handle.objectives[name])
        solver, res = run(handle.model, params.with_overrides(time_limit=max(0.1, budget)),
                          progress=progress)
        stages.append((name, res))
        if res.status in (Status.INFEASIBLE, Status.UNKNOWN):
            if i == 0:
                return StagedResult(None, stages, values)
            break
        selection = _read(handle, solver)
        value = round(res.objective or 0)
        values[name] = value
        handle.model.add(handle.objectives[name] <= value)
        # carry the solution into the next stage
        handle.model.clear_hints()
        hint(handle, selection)
    return StagedResult(selection, stages, values)


def _read(handle: ModelHandle, solver: cp_model.CpSolver) -> Selection:
    choice = [[int(np.argmax([solver.boolean_value(v) for v in opts])) for opts in gx] for gx in handle.x]
    hosts = [{key: [t for t, v in zc.items() if solver.boolean_value(v)] for key, zc in pz.items()}
             for pz in handle.z]
    counts = [{key: int(solver.value(v)) for key, v in pn.items() if solver.value(v)} for pn in handle.n]
    return Selection(choice, hosts, counts)
