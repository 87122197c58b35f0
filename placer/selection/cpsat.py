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

from placer.selection.options import Option
from placer.selection.problem import PhaseData, SelectionProblem
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
    totals: dict[int, cp_model.LinearExprT] = field(default_factory=dict)  # per tile: program table (modelled)


Signature = tuple[int, ...]


def _class_loads(sig: Signature) -> dict[str, int]:
    kind, kernel, raw, frag, tx, rx, ctrl, buffer, e_raw, e_frag, e_tx, e_ctrl, _barred = sig
    return {"variant": kind, "kernel": kernel, "raw": raw, "frag": frag, "tx": tx, "rx": rx, "ctrl": ctrl,
            "buffer": buffer, "ext_raw": e_raw, "ext_frag": e_frag, "ext_tx": e_tx, "ext_ctrl": e_ctrl}


ANY: Signature = ()  # the single host class of the coarse host model
EXACT_HOST_LIMIT = 40_000  # above this many (class, tile) pairs the coarse host model is used


def exact_host_pairs(problem: SelectionProblem) -> int:
    pairs = 0
    for pd in problem.phases:
        sigs = {sig for opts in pd.options for op in opts[1:] for sig in op.signatures()}
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


def build_model(problem: SelectionProblem, *, tighten: dict[int, int] | None = None, coarse: bool | None = None,
                active: set[int] | None = None, fixed: list[PhaseFixed] | None = None) -> ModelHandle:
    """Build the CP-SAT model. ``tighten`` lowers a tile's table budget (lazy correction of seam effects; negative
    values raise it, for the relaxation that proves infeasibility).

    ``coarse`` (default: when the exact host model would exceed EXACT_HOST_LIMIT pairs) replaces host classes by
    one "hosts a segment" literal per tile and phase, each host charged the heaviest segment *chosen* in its phase:
    linear in the tiles instead of in tiles × classes, and conservative -- never optimistic -- about host loads.
    """
    if coarse is None:
        coarse = exact_host_pairs(problem) > EXACT_HOST_LIMIT
    active = set(range(len(problem.phases))) if active is None else active
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
    coarse_cyc: dict[int, list[tuple[cp_model.LinearExprT, cp_model.LinearExprT, cp_model.LinearExprT,
                                     cp_model.IntVar]]] = {}
    ns: list[dict[tuple[Signature, int], cp_model.IntVar]] = []
    # aggregated tile classes: program-wide table/fragment terms (upper bounds, see docs/selection.md)
    class_table: list[list[cp_model.LinearExprT]] = [[] for _ in problem.tile_classes]
    class_frag: list[list[cp_model.LinearExprT]] = [[] for _ in problem.tile_classes]

    direct_index = {p.phase: i for i, p in enumerate(problem.capture.phases)}
    for pi, pd in enumerate(problem.phases):
        if pi not in active:
            # held at the incumbent: its exact contribution replaces the direct one
            assert fixed is not None
            dp = problem.direct.phases[direct_index[pd.phase.phase]]
            table_const += fixed[pi].table[:tiles] - dp.table_bytes[:tiles]
            frag_const += fixed[pi].fragments[:tiles] - dp.fragments[:tiles]
            cycle_terms.append(fixed[pi].cycles)
            scratch_terms.append(fixed[pi].scratch)
            relay_terms.append(fixed[pi].relays)
            xs.append([])
            zs.append({})
            ns.append({})
            continue
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
        host_cond: dict[int, tuple[cp_model.IntVar, dict[str, cp_model.LinearExprT]]] = {}

        def ecyc_of(_pi: int, box: list[cp_model.IntVar] = ecyc_box, ph: int = pd.phase.phase) -> cp_model.IntVar:
            if not box:
                box.append(m.new_int_var(0, 10**8, f"extra_cycles_{ph}"))
            return box[0]

        kernel_terms: list[tuple[int, cp_model.IntVar]] = []
        for gi, opts in enumerate(pd.options):
            gx = [m.new_bool_var(f"x_{pd.phase.phase}_{gi}_{op.name}") for op in opts]
            m.add_exactly_one(gx)
            for oi, (op, v) in enumerate(zip(opts, gx, strict=True)):
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

        if coarse:
            pz_c, pn_c = _coarse_hosts(m, problem, pi, pd, xs[pi], class_table, class_frag, ecyc_of, host_cond,
                                       coarse_cyc.setdefault(pi, []))
            zs.append(pz_c)
            ns.append(pn_c)
            classes = {}
        # hosts (exact model: one literal per host class and tile)
        pz: dict[Signature, dict[int, cp_model.IntVar]] = {}
        pn: dict[tuple[Signature, int], cp_model.IntVar] = {}
        class_hosts: dict[int, list[cp_model.IntVar]] = {}
        phase_class_loads: dict[int, list[tuple[int, int, cp_model.IntVar]]] = {}
        class_cyc: list[tuple[int, int, int, cp_model.IntVar]] = []
        host_of_tile: dict[int, list[tuple[cp_model.IntVar, dict[str, int], str]]] = {}
        for ci, (key, members) in enumerate(classes.items() if not coarse else []):
            loads = _class_loads(key)
            # a tile barred from every segment of the class (a replica, or a sender of that segment) gets no literal
            banned_everywhere = None
            for g, o, _ in members:
                op = pd.options[g][o]
                sigs = op.signatures()
                common = None
                for s, sig in enumerate(sigs):
                    if sig == key:
                        common = op.banned[s] if common is None else np.intersect1d(common, op.banned[s])
                assert common is not None
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
                phase_class_loads.setdefault(ei, []).append((add, loads["frag"] + loads["ext_frag"], yv))
                class_cyc.append((tx0 + loads["tx"], rx0 + loads["rx"], ctrl0 + loads["ctrl"], yv))
            need = sum(n * xs[pi][g][o] for g, o, n in members)
            m.add(sum(zc.values()) + sum(counted) == need)
            for t, v in zc.items():
                host_of_tile.setdefault(t, []).append((v, loads, variant))
        # a class tile hosts at most one segment per phase: charge it the heaviest class it may host in the phase
        for ei, lst in phase_class_loads.items():
            mx = m.new_int_var(0, max(a for a, _, _ in lst), f"class_table_{pd.phase.phase}_{ei}")
            mf = m.new_int_var(0, max(f for _, f, _ in lst), f"class_frag_{pd.phase.phase}_{ei}")
            for a, f, yv in lst:
                m.add(mx >= a * yv)
                m.add(mf >= f * yv)
            class_table[ei].append(mx)
            class_frag[ei].append(mf)
        if not coarse:
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
        affected = sorted(set(raw_e) | set(frag_e) | set(tx_e) | set(rx_e) | set(ctrl_e) | set(host_cond))
        unaffected_max = int(np.delete(cyc_const, affected).max(initial=0)) if affected else int(cyc_const.max())
        horizon = int(max(st.tx.max(), st.rx.max()) // bpc + 4 * int(st.receives.max()) + 10**6)
        cyc = m.new_int_var(unaffected_max, horizon, f"cycles_{pd.phase.phase}")
        for t in affected:
            raw0 = int(pd.raw[t])
            q = m.new_int_var(0, (raw0 + 10**6) // rounding + 1, f"q_{pd.phase.phase}_{t}")
            m.add(rounding * q >= raw0 + sum(raw_e.get(t, [])))
            table_const[t] -= int(st.table()[t])
            table_terms[t].append(rounding * q)
            ctrl0 = int(st.controls()[t])
            if t in host_cond:
                z, load = host_cond[t]
                m.add(rounding * q >= raw0 + sum(raw_e.get(t, [])) + load["raw"]).only_enforce_if(z)
                fr = m.new_int_var(-(10**6), 10**6, f"f_{pd.phase.phase}_{t}")
                m.add(fr >= sum(frag_e.get(t, [])))
                m.add(fr >= sum(frag_e.get(t, [])) + load["frag"]).only_enforce_if(z)
                frag_terms[t].append(fr)
                m.add(bpc * cyc >= int(st.tx[t]) + sum(tx_e.get(t, [])) + load["tx"]).only_enforce_if(z)
                m.add(bpc * cyc >= int(st.rx[t]) + sum(rx_e.get(t, [])) + load["rx"]).only_enforce_if(z)
                m.add(cyc >= ctrl0 + sum(ctrl_e.get(t, [])) + load["ctrl"]).only_enforce_if(z)
            elif t in frag_e:
                frag_terms[t].append(sum(frag_e[t]))
            m.add(bpc * cyc >= int(st.tx[t]) + sum(tx_e.get(t, [])))
            m.add(bpc * cyc >= int(st.rx[t]) + sum(rx_e.get(t, [])))
            m.add(cyc >= ctrl0 + sum(ctrl_e.get(t, [])))
        for tx_b, rx_b, ctrl_b, yv in class_cyc:
            m.add(bpc * cyc >= tx_b * yv)
            m.add(bpc * cyc >= rx_b * yv)
            m.add(cyc >= ctrl_b * yv)
        if coarse:
            for tx_b, rx_b, ctrl_b, yv in coarse_cyc.pop(pi, []):
                m.add(bpc * cyc >= tx_b).only_enforce_if(yv)
                m.add(bpc * cyc >= rx_b).only_enforce_if(yv)
                m.add(cyc >= ctrl_b).only_enforce_if(yv)

        cycle_terms.append(pd.iterations * (cyc + sync))

        # the local-pack extra phase, shared by every local-pack group of this phase
        if lp_vars:
            extra_on = m.new_bool_var(f"extra_{pd.phase.phase}")
            for v in lp_vars:
                m.add_implication(v, extra_on)
            m.add(extra_on <= sum(lp_vars))
            ecyc = ecyc_of(pi)
            kern = m.new_int_var(0, 10**8, f"kernel_{pd.phase.phase}")
            for kc, v in kernel_terms:
                m.add(kern >= kc * v)
            for t in sorted(set(ext_raw) | set(ext_tx) | ({t for t in host_cond if "ext_raw" in host_cond[t][1]})):
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
                if t in host_cond and "ext_raw" in host_cond[t][1]:
                    z, load = host_cond[t]
                    m.add(rounding * q >= c.phase_entry_bytes + sum(ext_raw.get(t, [])) + load["ext_raw"]
                          ).only_enforce_if(z)
                    fe = m.new_int_var(0, 10**6, f"fe_{pd.phase.phase}_{t}")
                    m.add(fe >= load["ext_frag"]).only_enforce_if(z)
                    frag_terms[t].append(fe)
                    m.add(bpc * ecyc >= sum(ext_tx.get(t, [])) + load["ext_tx"]).only_enforce_if(z)
                    m.add(ecyc >= sum(ext_ctrl.get(t, [])) + load["ext_ctrl"]).only_enforce_if(z)
            cycle_terms.append(pd.iterations * (ecyc + kern + sync * extra_on))

    # program-wide budgets and the worst-tile variable
    budget = problem.table_budget
    totals: dict[int, cp_model.LinearExprT] = {}
    worst = m.new_int_var(0, int(table_const.max(initial=0)) + 10**6, "worst_table")
    for t in range(tiles):
        if not table_terms[t]:
            m.add(worst >= int(table_const[t]))
            continue
        total = int(table_const[t]) + sum(table_terms[t])
        totals[t] = total
        m.add(total <= budget - tighten.get(t, 0))
        m.add(worst >= total)
        if frag_terms[t]:
            m.add(int(frag_const[t]) + sum(frag_terms[t]) <= problem.fragment_limit)
    for ei, tc in enumerate(problem.tile_classes):
        if not class_table[ei]:
            continue
        # upper bound: a tile of the class charged, in every phase, the heaviest segment the class hosts there
        # the class's tiles may differ by what the incumbent put on them in phases held fixed: take the worst
        total = int(table_const[tc.tiles].max()) + sum(class_table[ei])
        m.add(total <= budget)
        m.add(int(frag_const[tc.tiles].max()) + sum(class_frag[ei]) <= problem.fragment_limit)
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
    return ModelHandle(m, xs, zs, ns, objectives, totals)


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
                  class_frag: list[list[cp_model.LinearExprT]], ecyc_of: object,
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
        base = -(-raw0 // rnd) * rnd
        qv = m.new_int_var(base // rnd, 10**6, f"qc_{ph}_{ei}")
        m.add(rnd * qv >= raw0 + entry + load["raw"]).only_enforce_if(yv)
        extra = rnd * qv - base
        fv = m.new_int_var(0, 10**6, f"fc_{ph}_{ei}")
        m.add(fv >= load["frag"] + load["ext_frag"]).only_enforce_if(yv)
        if has_lp:
            qe = m.new_int_var(0, 10**6, f"qce_{ph}_{ei}")
            m.add(rnd * qe >= c.phase_entry_bytes + load["ext_raw"]).only_enforce_if(yv)
            extra = extra + rnd * qe
            ecyc = ecyc_of(pi)  # type: ignore[operator]
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
    def status(self) -> Status:
        if not self.stages:
            return Status.UNKNOWN
        first = self.stages[0][1].status
        if first in (Status.INFEASIBLE, Status.UNKNOWN):
            return first
        return Status.OPTIMAL if all(r.status is Status.OPTIMAL for _, r in self.stages) else Status.FEASIBLE


def solve_staged(problem: SelectionProblem, params: SolverParams, order: Sequence[str], *,
                 start: Selection | None = None, progress: Progress | None = None,
                 tighten: dict[int, int] | None = None, active: set[int] | None = None,
                 fixed: list[PhaseFixed] | None = None) -> StagedResult:
    """Lexicographic optimisation: one CP-SAT solve per objective, each fixing the ones before it.

    With ``active``, only those selection phases are free; the others are held at ``start`` (whose exact
    contributions are ``fixed``)."""
    handle = build_model(problem, tighten=tighten, active=active, fixed=fixed)
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
        # full probing costs seconds on this model's many tile constraints; level 0 trips a CP-SAT check (9.15)
        # with interleaved search
        solver, res = run(handle.model, params.with_overrides(time_limit=max(0.1, budget)), progress=progress,
                          tuning={"cp_model_probing_level": 1})
        stages.append((name, res))
        if res.status in (Status.INFEASIBLE, Status.UNKNOWN):
            if i == 0:
                return StagedResult(None, stages, values)
            break
        selection = _read(handle, solver, start)
        value = round(res.objective or 0)
        values[name] = value
        handle.model.add(handle.objectives[name] <= value)
        # carry the solution into the next stage
        handle.model.clear_hints()
        hint(handle, selection)
    return StagedResult(selection, stages, values)


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
