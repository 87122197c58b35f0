"""The selection model's constraints, one function per family (docs/selection.md, "The CP-SAT model").

Each family creates the variables it needs in :class:`Variables` and posts its constraints; ``build_model``
(``placer.selection.cpsat.model``) calls them phase by phase in a fixed order:

- :func:`held_phase` -- a phase held at the incumbent (neighbourhoods): its exact contribution, no variables;
- :func:`choose_options` -- one literal per option, exactly one per group, each option's exact effect on its
  own tiles (:func:`option_effects`);
- :func:`exact_hosts` / :func:`coarse_hosts` -- who hosts the chosen segments (hosted = chosen), with the
  hosts' loads (:func:`named_host_loads`);
- :func:`tables_and_cycles` -- per affected tile its rounded table (8·q ≥ raw) and the phase's cycles;
- :func:`extra_phase` -- the local-pack extra phase;
- :func:`budgets` -- the program-wide hard limits per tile and the worst-tile variable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from placer.arrays import intersect1d
from placer.selection.cpsat.variables import (
    ANY,
    ClassCycles,
    ClassMember,
    Expr,
    HostKey,
    PhaseFixed,
    PhaseTerms,
    Terms,
    Variables,
)
from placer.selection.options import HostClass, Option
from placer.selection.problem import PhaseData, SelectionProblem
from placer.solver import lazy_module
from placer.units import round_up

if TYPE_CHECKING:
    from ortools.sat.python import cp_model
else:  # loaded when the first model is built (``placer.solver.lazy_module``)
    cp_model = lazy_module("ortools.sat.python.cp_model")

EXACT_HOST_LIMIT = 40_000  # above this many (class, tile) pairs the coarse host model is used


def exact_host_pairs(problem: SelectionProblem, active: set[int] | None = None) -> int:
    """How many (host class, named tile) literals the exact host model of the (``active``) phases needs."""
    pairs = 0
    for pi, pd in enumerate(problem.phases):
        if active is not None and pi not in active:
            continue
        sigs = {sig for opts in pd.options for op in opts[1:] for sig in pd.classes(op)}
        pairs += len(sigs) * int(problem.explicit.sum())
    return pairs


# --- a phase held at the incumbent ------------------------------------------------------------------------------


def held_phase(v: Variables, pd: PhaseData, fixed: PhaseFixed) -> None:
    """A phase held at the incumbent: its exact contribution replaces the direct one."""
    tiles = v.problem.tiles
    dp = v.problem.direct.phases[v.direct_index[pd.phase.phase]]
    v.table_const += fixed.table[:tiles] - dp.table_bytes[:tiles]
    v.frag_const += fixed.fragments[:tiles] - dp.fragments[:tiles]
    v.cycle_terms.append(fixed.cycles)
    v.scratch_terms.append(fixed.scratch)
    v.relay_terms.append(fixed.relays)
    v.xs.append([])
    v.zs.append({})
    v.ns.append({})


# --- options ----------------------------------------------------------------------------------------------------


def choose_options(v: Variables, pd: PhaseData, terms: PhaseTerms) -> dict[HostClass, list[ClassMember]]:
    """One literal per option, exactly one per group; each option's exact effect on its own tiles. Returns the
    phase's host classes and the options with segments of each."""
    m = v.m
    px: list[list[cp_model.IntVar]] = []
    classes: dict[HostClass, list[ClassMember]] = {}
    for gi, opts in enumerate(pd.options):
        gx = [m.new_bool_var(f"x_{pd.phase.phase}_{gi}_{op.name}") for op in opts]
        m.add_exactly_one(gx)
        for oi, (op, x) in enumerate(zip(opts, gx, strict=True)):
            if op.variant == "direct":
                continue
            sigs = pd.classes(op)
            for sig in set(sigs):
                classes.setdefault(sig, []).append(ClassMember(gi, oi, sigs.count(sig)))
            v.scratch_terms.append(op.scratch * x)
            v.relay_terms.append(op.count * x)
            option_effects(v, op, x, terms)
        px.append(gx)
    v.xs.append(px)
    return classes


def option_effects(v: Variables, op: Option, x: cp_model.IntVar, terms: PhaseTerms) -> None:
    """The option's exact effect on its replicas and senders, enforced by its literal ``x``."""
    fields_ = (terms.raw, terms.frag, terms.tx, terms.rx, terms.ctrl)
    deltas = (op.delta.raw, op.delta.frag, op.delta.tx, op.delta.rx, op.delta.ctrl)
    for i, t in enumerate(op.tiles.tolist()):
        if t >= v.problem.tiles:
            continue
        terms.raw.setdefault(t, [])  # an affected tile even when its table does not move
        for target, delta in zip(fields_, deltas, strict=True):
            if delta[i]:
                PhaseTerms.add(target, t, int(delta[i]) * x)
    if op.variant == "local-pack":
        assert op.ext is not None
        terms.lp_vars.append(x)
        terms.kernels.append((op.kernel_cycles, x))
        for i, t in enumerate(op.ext_tiles.tolist()):
            PhaseTerms.add(terms.ext_raw, t, int(op.ext.raw[i]) * x)
            PhaseTerms.add(terms.ext_frag, t, int(op.ext.frag[i]) * x)
            PhaseTerms.add(terms.ext_rx, t, int(op.ext.rx[i]) * x)
            PhaseTerms.add(terms.ext_ctrl, t, int(op.ext.ctrl[i]) * x)
            terms.ext_members.setdefault(t, []).append(x)


# --- hosts ------------------------------------------------------------------------------------------------------


def exact_hosts(v: Variables, pi: int, pd: PhaseData, classes: dict[HostClass, list[ClassMember]],
                terms: PhaseTerms) -> None:
    """One literal per (host class, named tile), a count per (host class, tile class); hosted = chosen."""
    m, c, problem = v.m, v.cost, v.problem
    pz: dict[HostKey, dict[int, cp_model.IntVar]] = {}
    pn: dict[tuple[HostKey, int], cp_model.IntVar] = {}
    class_hosts: dict[int, list[cp_model.IntVar]] = {}
    class_loads: dict[int, list[tuple[int, int, cp_model.IntVar]]] = {}
    host_of_tile: dict[int, list[tuple[cp_model.IntVar, HostClass]]] = {}
    for ci, (key, members) in enumerate(classes.items()):
        ok = (pd.largest_gap >= key.buffer) & problem.explicit
        barred = _barred_everywhere(pd, key, members)
        if len(barred):
            ok[barred] = False
        zc = {t: m.new_bool_var(f"z_{pd.phase.phase}_{ci}_{t}") for t in np.flatnonzero(ok).tolist()}
        pz[key] = zc
        counted = []
        for ei, tc in enumerate(problem.tile_classes):
            at = tc.per_phase[pi]
            if at.gap < key.buffer:
                continue
            nv, yv = _class_count(m, len(tc.tiles), f"{pd.phase.phase}_{ci}_{ei}")
            pn[(key, ei)] = nv
            class_hosts.setdefault(ei, []).append(nv)
            counted.append(nv)
            entry = 0 if at.used else c.phase_entry_bytes
            add = c.rounded(at.raw + entry + key.raw) - c.rounded(at.raw)
            if key.variant:  # local-pack
                add += c.rounded(c.phase_entry_bytes + key.ext_raw)
                ecyc = v.extra_cycles(pd, terms)
                m.add(v.bpc * ecyc >= key.ext_tx * yv)
                m.add(ecyc >= key.ext_ctrl * yv)
            class_loads.setdefault(ei, []).append((add, key.frag + key.ext_frag, yv))
            terms.class_cycles.append(ClassCycles(at.tx + key.tx, at.rx + key.rx, at.ctrl + key.ctrl, yv))
        need = sum(n * v.xs[pi][g][o] for g, o, n in members)
        m.add(sum(zc.values()) + sum(counted) == need)
        for t, z in zc.items():
            host_of_tile.setdefault(t, []).append((z, key))
    # a class tile hosts at most one segment per phase: charge it the heaviest class it may host in the phase
    for ei, lst in class_loads.items():
        mx = m.new_int_var(0, max(a for a, _, _ in lst), f"class_table_{pd.phase.phase}_{ei}")
        mf = m.new_int_var(0, max(f for _, f, _ in lst), f"class_frag_{pd.phase.phase}_{ei}")
        for a, f, yv in lst:
            m.add(mx >= a * yv)
            m.add(mf >= f * yv)
        v.class_table[ei].append(mx)
        v.class_frag[ei].append(mf)
    for ei, hosts in class_hosts.items():
        m.add(sum(hosts) <= len(problem.tile_classes[ei].tiles))
    for t, hosted in host_of_tile.items():
        named_host_loads(v, pd, t, hosted, terms)
    v.zs.append(pz)
    v.ns.append(pn)


def named_host_loads(v: Variables, pd: PhaseData, t: int, lst: list[tuple[cp_model.IntVar, HostClass]],
                     terms: PhaseTerms) -> None:
    """A named tile hosts at most one segment per phase and carries exactly its class's load."""
    c = v.cost
    if len(lst) > 1:
        v.m.add_at_most_one(z for z, _ in lst)
    entry = 0 if pd.state.used()[t] else c.phase_entry_bytes
    for z, key in lst:
        PhaseTerms.add(terms.raw, t, (key.raw + entry) * z)
        PhaseTerms.add(terms.frag, t, key.frag * z)
        PhaseTerms.add(terms.tx, t, key.tx * z)
        PhaseTerms.add(terms.rx, t, key.rx * z)
        PhaseTerms.add(terms.ctrl, t, key.ctrl * z)
        if key.variant:  # local-pack
            PhaseTerms.add(terms.ext_raw, t, (key.ext_raw + c.phase_entry_bytes) * z)
            PhaseTerms.add(terms.ext_frag, t, key.ext_frag * z)
            PhaseTerms.add(terms.ext_tx, t, key.ext_tx * z)
            PhaseTerms.add(terms.ext_ctrl, t, key.ext_ctrl * z)


def _barred_everywhere(pd: PhaseData, key: HostClass, members: list[ClassMember]) -> np.ndarray:
    """Tiles barred from every segment of a host class (a replica of its group, or a sender of the segment)."""
    barred: np.ndarray | None = None
    for g, o, _ in members:
        op = pd.options[g][o]
        for s, sig in enumerate(pd.classes(op)):
            if sig == key:
                barred = op.banned[s] if barred is None else intersect1d(barred, op.banned[s])
    return np.zeros(0, np.int64) if barred is None else barred


_LOAD_FIELDS = ("raw", "frag", "tx", "rx", "ctrl", "buffer", "ext_raw", "ext_frag", "ext_tx", "ext_ctrl")


def _option_max(op: Option) -> dict[str, int]:
    """The heaviest segment of an option, field by field."""
    assert op.host is not None
    out = {f: int(getattr(op.host, f).max()) for f in ("raw", "frag", "tx", "rx", "ctrl")}
    out["buffer"] = int(op.buffer_bytes.max())
    for f in ("raw", "frag", "tx", "ctrl"):
        out["ext_" + f] = int(getattr(op.ext_host, f).max()) if op.ext_host is not None else 0
    return out


def coarse_hosts(v: Variables, pi: int, pd: PhaseData, terms: PhaseTerms) -> None:
    """The coarse host model of one phase (large models): a literal per tile, every host charged the heaviest
    segment *chosen* in the phase -- linear in the tiles instead of in tiles × classes, and conservative, never
    optimistic, about host loads."""
    m, problem, px = v.m, v.problem, v.xs[pi]
    c = v.cost
    bpc = v.bpc
    ph = pd.phase.phase
    relays = [(gi, oi, op) for gi, opts in enumerate(pd.options) for oi, op in enumerate(opts)
              if op.variant != "direct"]
    if not relays:
        v.zs.append({ANY: {}})
        v.ns.append({})
        return
    maxima = [(_option_max(op), px[gi][oi], op) for gi, oi, op in relays]
    load: dict[str, cp_model.IntVar] = {}
    for f in _LOAD_FIELDS:
        top = max(mx[f] for mx, _, _ in maxima)
        load[f] = m.new_int_var(0, top, f"L{f}_{ph}")
        for mx, x, _ in maxima:
            if mx[f]:
                m.add(load[f] >= mx[f] * x)
    has_lp = any(op.variant == "local-pack" for _, _, op in relays)
    smallest = min(mx["buffer"] for mx, _, _ in maxima)
    st = pd.state
    zc: dict[int, cp_model.IntVar] = {}
    for t in np.flatnonzero(problem.explicit & (pd.largest_gap >= smallest)).tolist():
        z = m.new_bool_var(f"z_{ph}_{t}")
        zc[t] = z
        m.add(load["buffer"] <= int(pd.largest_gap[t])).only_enforce_if(z)
        entry = 0 if st.used()[t] else c.phase_entry_bytes
        cond: dict[str, Expr] = {"raw": load["raw"] + entry, "frag": load["frag"],
                                                 "tx": load["tx"], "rx": load["rx"], "ctrl": load["ctrl"]}
        if has_lp:
            cond.update({f: load[f] for f in ("ext_raw", "ext_frag", "ext_tx", "ext_ctrl")})
        terms.host_cond[t] = (z, cond)
    counted: list[cp_model.IntVar] = []
    pn: dict[tuple[HostKey, int], cp_model.IntVar] = {}
    rnd = c.table_rounding
    for ei, tc in enumerate(problem.tile_classes):
        at = tc.per_phase[pi]
        if at.gap < smallest:
            continue
        nv, yv = _class_count(m, len(tc.tiles), f"{ph}_{ei}")
        m.add(load["buffer"] <= at.gap).only_enforce_if(yv)
        pn[(ANY, ei)] = nv
        counted.append(nv)
        entry = 0 if at.used else c.phase_entry_bytes
        base = round_up(at.raw, rnd)
        qv = m.new_int_var(base // rnd, 10**6, f"qc_{ph}_{ei}")
        m.add(rnd * qv >= at.raw + entry + load["raw"]).only_enforce_if(yv)
        extra = rnd * qv - base
        fv = m.new_int_var(0, 10**6, f"fc_{ph}_{ei}")
        m.add(fv >= load["frag"] + load["ext_frag"]).only_enforce_if(yv)
        if has_lp:
            qe = m.new_int_var(0, 10**6, f"qce_{ph}_{ei}")
            m.add(rnd * qe >= c.phase_entry_bytes + load["ext_raw"]).only_enforce_if(yv)
            extra = extra + rnd * qe
            ecyc = v.extra_cycles(pd, terms)
            m.add(bpc * ecyc >= load["ext_tx"]).only_enforce_if(yv)
            m.add(ecyc >= load["ext_ctrl"]).only_enforce_if(yv)
        v.class_table[ei].append(extra)
        v.class_frag[ei].append(fv)
        terms.class_cycles.append(ClassCycles(at.tx + load["tx"], at.rx + load["rx"], at.ctrl + load["ctrl"], yv))
    need = sum(op.count * px[gi][oi] for gi, oi, op in relays)
    m.add(sum(zc.values()) + sum(counted) == need)
    # with classes, aggregated tiles host at most one segment per phase each
    v.zs.append({ANY: zc})
    v.ns.append(pn)


# --- tables and cycles ------------------------------------------------------------------------------------------


def tables_and_cycles(v: Variables, pd: PhaseData, terms: PhaseTerms) -> None:
    """Per affected tile: its rounded table (8·q ≥ raw) and its share of the phase's cycles."""
    m, st, bpc, rounding = v.m, pd.state, v.bpc, v.cost.table_rounding
    tiles = v.problem.tiles
    cyc_const = st.tile_cycles()[:tiles]
    affected = sorted(set(terms.raw) | set(terms.frag) | set(terms.tx) | set(terms.rx) | set(terms.ctrl)
                      | set(terms.host_cond))
    unaffected_max = int(np.delete(cyc_const, affected).max(initial=0)) if affected else int(cyc_const.max())
    horizon = int(max(st.tx.max(), st.rx.max()) // bpc + 4 * int(st.receives.max()) + 10**6)
    cyc = m.new_int_var(unaffected_max, horizon, f"cycles_{pd.phase.phase}")

    def total(t_: Terms, t: int) -> Expr:
        return sum(t_.get(t, []))

    for t in affected:
        raw0 = int(pd.raw[t])
        q = m.new_int_var(0, (raw0 + 10**6) // rounding + 1, f"q_{pd.phase.phase}_{t}")
        m.add(rounding * q >= raw0 + total(terms.raw, t))
        v.table_const[t] -= int(st.table()[t])
        v.table_terms[t].append(rounding * q)
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
            v.frag_terms[t].append(fr)
            m.add(bpc * cyc >= tx0 + total(terms.tx, t) + load["tx"]).only_enforce_if(z)
            m.add(bpc * cyc >= rx0 + total(terms.rx, t) + load["rx"]).only_enforce_if(z)
            m.add(cyc >= ctrl0 + total(terms.ctrl, t) + load["ctrl"]).only_enforce_if(z)
        elif t in terms.frag:
            v.frag_terms[t].append(total(terms.frag, t))
    for cc in terms.class_cycles:  # aggregated hosts, when their class hosts
        m.add(bpc * cyc >= cc.tx).only_enforce_if(cc.hosts)
        m.add(bpc * cyc >= cc.rx).only_enforce_if(cc.hosts)
        m.add(cyc >= cc.ctrl).only_enforce_if(cc.hosts)
    v.cycle_terms.append(pd.iterations * (cyc + v.problem.machine.exchange.sync_cycles))


def extra_phase(v: Variables, pd: PhaseData, terms: PhaseTerms) -> None:
    """The local-pack extra phase, shared by every local-pack group of the phase: its tables and cycles."""
    c = v.cost
    m, bpc, rounding = v.m, v.bpc, c.table_rounding
    extra_on = m.new_bool_var(f"extra_{pd.phase.phase}")
    for x in terms.lp_vars:
        m.add_implication(x, extra_on)
    m.add(extra_on <= sum(terms.lp_vars))
    ecyc = v.extra_cycles(pd, terms)
    kern = m.new_int_var(0, 10**8, f"kernel_{pd.phase.phase}")
    for kc, x in terms.kernels:
        m.add(kern >= kc * x)
    coarse_hosts_ = {t for t, (_, load) in terms.host_cond.items() if "ext_raw" in load}
    for t in sorted(set(terms.ext_raw) | set(terms.ext_tx) | coarse_hosts_):
        members = terms.ext_members.get(t, [])
        u = m.new_bool_var(f"ext_active_{pd.phase.phase}_{t}") if members else None
        for x in members:
            m.add_implication(x, u)  # type: ignore[arg-type]  # u exists when there are members
        base_entry = c.phase_entry_bytes * u if u is not None else 0
        q = m.new_int_var(0, 10**6, f"qe_{pd.phase.phase}_{t}")
        m.add(rounding * q >= base_entry + sum(terms.ext_raw.get(t, [])))
        v.table_terms[t].append(rounding * q)
        v.frag_terms[t].append(sum(terms.ext_frag.get(t, [])))
        m.add(bpc * ecyc >= sum(terms.ext_rx.get(t, [])))
        m.add(bpc * ecyc >= sum(terms.ext_tx.get(t, [])))
        m.add(ecyc >= sum(terms.ext_ctrl.get(t, [])))
        if t in coarse_hosts_:
            z, load = terms.host_cond[t]
            m.add(rounding * q >= c.phase_entry_bytes + sum(terms.ext_raw.get(t, [])) + load["ext_raw"]
                  ).only_enforce_if(z)
            fe = m.new_int_var(0, 10**6, f"fe_{pd.phase.phase}_{t}")
            m.add(fe >= load["ext_frag"]).only_enforce_if(z)
            v.frag_terms[t].append(fe)
            m.add(bpc * ecyc >= sum(terms.ext_tx.get(t, [])) + load["ext_tx"]).only_enforce_if(z)
            m.add(ecyc >= sum(terms.ext_ctrl.get(t, [])) + load["ext_ctrl"]).only_enforce_if(z)
    v.cycle_terms.append(pd.iterations * (ecyc + kern + v.problem.machine.exchange.sync_cycles * extra_on))


# --- the whole program ------------------------------------------------------------------------------------------


def budgets(v: Variables) -> tuple[cp_model.IntVar, dict[int, Expr]]:
    """Per tile: table within the budget and fragments within the limit; the worst-tile variable."""
    m, problem = v.m, v.problem
    budget, limit = problem.table_budget, problem.fragment_limit
    table_const, frag_const = v.table_const, v.frag_const
    totals: dict[int, Expr] = {}
    worst = m.new_int_var(0, int(table_const.max(initial=0)) + 10**6, "worst_table")
    for t in range(problem.tiles):
        if not v.table_terms[t]:
            m.add(worst >= int(table_const[t]))
            continue
        total = int(table_const[t]) + sum(v.table_terms[t])
        totals[t] = total
        m.add(total <= budget - v.tighten.get(t, 0))
        m.add(worst >= total)
        if v.frag_terms[t]:
            m.add(int(frag_const[t]) + sum(v.frag_terms[t]) <= limit)
    for ei, tc in enumerate(problem.tile_classes):
        if not v.class_table[ei]:
            continue
        # upper bound: a class tile charged, in every phase, the heaviest segment its class hosts there; the
        # class's tiles may differ by what the incumbent put on them in phases held fixed: take the worst
        total = int(table_const[tc.tiles].max()) + sum(v.class_table[ei])
        m.add(total <= budget)
        m.add(int(frag_const[tc.tiles].max()) + sum(v.class_frag[ei]) <= limit)
        m.add(worst >= total)
    # a tile no option touches must already fit, or no plan exists (CP-SAT then proves infeasibility at once)
    if any(not v.table_terms[t] and (table_const[t] > budget or frag_const[t] > limit)
           for t in range(problem.tiles)):
        m.add_bool_or([])
    return worst, totals


def _class_count(m: cp_model.CpModel, size: int, name: str) -> tuple[cp_model.IntVar, cp_model.IntVar]:
    """How many of a tile class's ``size`` tiles do something (``n_<name>``), and whether any does (``y_<name>``)."""
    nv = m.new_int_var(0, size, f"n_{name}")
    yv = m.new_bool_var(f"y_{name}")
    m.add(nv <= size * yv)
    m.add(nv >= yv)
    return nv, yv
