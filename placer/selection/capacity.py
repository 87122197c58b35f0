"""The table stage at the cycles bound: a CP-SAT model over option choices and host *capacity*.

When a plan's cycles equal their lower bound, the cycles stage is proved optimal and every selection phase runs at
exactly its own bound (each phase's cycles are at least its bound and the sum is at the sum of the bounds). A
lexicographically optimal plan then keeps every tile's transmit and receive bytes, and controls, under the
phase's cap: it uses no local-pack option (its extra phase adds a sync) and a relay segment can only go to a tile
with room for it under the cap. In the heavy phases of real programs that room, not memory, decides how many
groups can be relayed at all -- and so how low the worst tile can go.

The model (variables, one function per constraint family, objective):
- ``x[p][g][o]``: group g of phase p takes option o (direct or direct-receive with o's segment count).
- ``h[p][t]``: tile t hosts one segment in phase p, only where t has room (transmit, receive and free memory)
  for the phase's smallest segment.
- *Capacity* (Hall's condition): for every receive-size threshold s of the phase, the chosen segments of at
  least s receive bytes number at most the hosting tiles with room for s; for every tile set that is a scarce
  segment's (the few tiles with room for it and not barred from it), the chosen segments confined to it number
  at most its hosting tiles; in all, segments <= hosts.
- *Tables*: every tile's program table is at least its direct table, plus each chosen option's exact effect on
  it, plus the smallest segment's host rows per phase it hosts, less the model's slack (seams, rounding: the
  same ``model_slack`` every bound uses); fragments likewise against the limit; the worst tile ``T``.
- Objective: minimise ``T`` (then, in a second short solve, the relay scratch with ``T`` held).

Every constraint is one every real plan at the cycles bound satisfies (which segment lands where, the barred
tiles and the exact host rows are relaxed), so CP-SAT's best bound is a valid lower bound on the table stage. A
solution is turned into a plan by ``place_segments``: segments by falling host rows, each on the tile with the
lowest table among those that may take it (room under the caps, free memory, not barred, not pinned); the plan
is then re-costed exactly, so the model's relaxations can only cost the plan, never make a report wrong.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, NamedTuple

import numpy as np

from placer.alternatives.relay import direct_receive, local_pack
from placer.alternatives.segments import native
from placer.arrays import isin, unique
from placer.modes import PlanMode
from placer.progress import SolverCallback
from placer.selection.options import spread_counts
from placer.selection.plan import Plan, RelayChoice
from placer.selection.problem import SelectionProblem
from placer.solver import Cutoff, SolveResult, SolverParams, Status, run
from placer.units import ceil_div

THRESHOLDS = 8  # size thresholds of the capacity condition per phase (quantiles of the segment sizes)


@dataclass(eq=False)
class Release:
    """Schedule-true caps only: a replica takes its forwards no sooner than their gathers have landed on the
    host, so the words it receives from relays, counted from the latest such release, must also fit the phase's
    target (the port bound of ``placer.refschedule.reference`` with a relay's release)."""

    cap: np.ndarray  # per tile: cycles for the latest release plus the words relays forward to it
    delay: dict[tuple[int, int], int]  # (group, option): cycles until its latest forward may start
    words: list[int]  # per group: words a relay forwards to each replica


@dataclass(eq=False)
class PhaseCaps:
    """One selection phase: what each tile may transmit and receive (bytes) and issue (controls) with the
    segments it hosts, which of the phase's options and tiles the model may use, and (schedule-true caps) the
    replicas' release condition."""

    rx_cap: np.ndarray  # per tile
    tx_cap: np.ndarray
    ctrl_cap: np.ndarray
    options: list[list[int]]  # per group: indices (into pd.options) of direct and the relay options offered
    room: np.ndarray  # per tile: may host the phase's smallest segment
    release: Release | None = None


def phase_caps(problem: SelectionProblem) -> list[PhaseCaps]:
    """Every selection phase's caps at its estimated cycles bound (the estimate's busiest transmit or receive
    total, the same for every tile) and which of its options and tiles the model may use."""
    bpc = problem.machine.exchange.bytes_per_cycle
    tiles = problem.tiles
    out = []
    for pd in problem.phases:
        st = pd.state
        k = int(np.maximum(ceil_div(st.tx[:tiles], bpc), ceil_div(st.rx[:tiles], bpc)).max(initial=0))
        options = [[oi for oi, op in enumerate(opts) if op.variant != "local-pack"] for opts in pd.options]
        full = np.full(tiles, bpc * k, np.int64)
        out.append(with_room(pd, PhaseCaps(full, full, np.full(tiles, k, np.int64), options,
                                           np.zeros(tiles, bool))))
    return out


def memory_caps(problem: SelectionProblem, local_pack: bool = False) -> list[PhaseCaps]:
    """No cycle caps: every direct-receive option offered (``local_pack``: and every local-pack one the problem
    has) and a host limited only by its free memory. For programs the production rule's plan does not fit, where
    fitting the budget comes before the cycles, and for the table first."""
    tiles = problem.tiles
    free = np.full(tiles, np.iinfo(np.int64).max // 4, np.int64)
    out = []
    for pd in problem.phases:
        options = [[oi for oi, op in enumerate(opts) if local_pack or op.variant != "local-pack"]
                   for opts in pd.options]
        out.append(with_room(pd, PhaseCaps(free.copy(), free.copy(), free.copy(), options, np.zeros(tiles, bool))))
    return out


def fewer_cuts(problem: SelectionProblem, caps: list[PhaseCaps], most: int) -> list[PhaseCaps] | None:
    """``caps`` with each group's relay options limited to ``most`` of its segment counts, chosen as the options'
    own are (``options.spread_counts``); None where no group offers more."""
    out, fewer = [], False
    for pd, pc in zip(problem.phases, caps, strict=True):
        options = []
        for gi, offered in enumerate(pc.options):
            opts = pd.options[gi]
            counts = sorted({opts[oi].count for oi in offered} - {0})
            if len(counts) <= most:
                options.append(offered)
                continue
            keep = {0, *spread_counts(counts, native(opts[offered[0]].group).count, most)}
            options.append([oi for oi in offered if opts[oi].count in keep])
            fewer = True
        out.append(with_room(pd, replace(pc, options=options)))
    return out if fewer else None


def with_room(pd: Any, pc: PhaseCaps) -> PhaseCaps:
    """``pc`` with ``room`` set: the tiles with room under the caps for the phase's smallest offered segment."""
    tiles = len(pc.rx_cap)
    relays = [pd.options[gi][oi] for gi, idx in enumerate(pc.options) for oi in idx[1:]]
    room = np.zeros(tiles, bool)
    if relays:
        st = pd.state
        rx = min(int(op.host.rx.min()) for op in relays if op.host is not None)
        tx = min(int(op.host.tx.min()) for op in relays if op.host is not None)
        buf = min(int(op.buffer_bytes.min()) for op in relays)
        room = (st.rx[:tiles] + rx <= pc.rx_cap) & (st.tx[:tiles] + tx <= pc.tx_cap) & (pd.largest_gap >= buf)
    pc.room = room
    return pc


@dataclass(eq=False)
class CapacityModel:
    model: Any  # cp_model.CpModel
    x: list[list[dict[int, Any]]]  # per phase, per group: option index -> literal
    h: list[dict[int, Any]]  # per phase: tile -> literal
    worst: Any  # T
    scratch: Any  # Σ chosen segments' buffer bytes
    caps: list[PhaseCaps]


def build(problem: SelectionProblem, caps: list[PhaseCaps], slack: dict[int, int],
          table_cap: int | None = None) -> CapacityModel:
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    tiles = problem.tiles
    table_terms: list[list[tuple[int, Any]]] = [[] for _ in range(tiles)]
    frag_terms: list[list[tuple[int, Any]]] = [[] for _ in range(tiles)]
    x = _choices(m, problem, caps, table_terms, frag_terms)
    h = _hosting(m, problem, caps, x, table_terms, frag_terms)
    _releases(m, problem, caps, x)
    base = problem.direct.table_bytes[:tiles].astype(np.int64).copy()
    for t, s in slack.items():
        base[t] -= s
    worst = m.new_int_var(0, int(max(base.max(initial=0), 0)) + 1, "T")
    _tables(m, problem, base, table_terms, frag_terms, worst, table_cap)
    scratch = sum(int(problem.phases[pi].options[gi][oi].scratch) * v
                  for pi, per in enumerate(x) for gi, lits in enumerate(per) for oi, v in lits.items()
                  if problem.phases[pi].options[gi][oi].variant != "direct")
    return CapacityModel(m, x, h, worst, scratch, caps)


def _choices(m: Any, problem: SelectionProblem, caps: list[PhaseCaps], table_terms: list[list[tuple[int, Any]]],
             frag_terms: list[list[tuple[int, Any]]]) -> list[list[dict[int, Any]]]:
    """One option per group; each option's exact effect on its replicas' (and senders') tables and fragments."""
    tiles = problem.tiles
    x: list[list[dict[int, Any]]] = []
    for pd, pc in zip(problem.phases, caps, strict=True):
        per: list[dict[int, Any]] = []
        for gi, idx in enumerate(pc.options):
            lits = {oi: m.new_bool_var(f"x{pd.phase.phase}_{gi}_{oi}") for oi in idx}
            m.add_exactly_one(lits.values())
            for oi, v in lits.items():
                op = pd.options[gi][oi]
                if op.variant == "direct":
                    continue
                for t, d, f in zip(op.tiles.tolist(), op.delta.raw.tolist(), op.delta.frag.tolist(), strict=True):
                    if t < tiles:
                        if d:
                            table_terms[t].append((int(d), v))
                        if f:
                            frag_terms[t].append((int(f), v))
            per.append(lits)
        x.append(per)
    return x


def _releases(m: Any, problem: SelectionProblem, caps: list[PhaseCaps], x: list[list[dict[int, Any]]]) -> None:
    """Schedule-true caps: per replica, the latest release of the relays it is a replica of plus the words they
    forward to it stay within its cap (only where relaying every group of the replica at its latest option would
    break it)."""
    for pi, (pd, pc) in enumerate(zip(problem.phases, caps, strict=True)):
        rel = pc.release
        if rel is None:
            continue
        member: dict[int, list[int]] = {}  # replica -> groups with a relay option
        for gi, idx in enumerate(pc.options):
            if len(idx) > 1:
                for t in _replicas(pd.options[gi][0], problem.tiles).tolist():
                    member.setdefault(t, []).append(gi)
        for t, groups in sorted(member.items()):
            worst = max(rel.delay[(gi, oi)] for gi in groups for oi in pc.options[gi][1:])
            if worst + sum(rel.words[gi] for gi in groups) <= rel.cap[t]:
                continue
            late = m.new_int_var(0, worst, f"r{pd.phase.phase}_{t}")
            for gi in groups:
                for oi in pc.options[gi][1:]:
                    m.add(late >= rel.delay[(gi, oi)]).only_enforce_if(x[pi][gi][oi])
            relayed = sum(rel.words[gi] * (1 - x[pi][gi][pc.options[gi][0]]) for gi in groups)
            m.add(late + relayed <= max(int(rel.cap[t]), 0))


def _hosting(m: Any, problem: SelectionProblem, caps: list[PhaseCaps], x: list[list[dict[int, Any]]],
             table_terms: list[list[tuple[int, Any]]], frag_terms: list[list[tuple[int, Any]]]
             ) -> list[dict[int, Any]]:
    """Host literals where a tile has room, the capacity condition per size threshold, and the hosts' rows."""
    h: list[dict[int, Any]] = []
    for pi, (pd, pc) in enumerate(zip(problem.phases, caps, strict=True)):
        chosen = [(pd.options[gi][oi], v) for gi, lits in enumerate(x[pi]) for oi, v in lits.items()
                  if pd.options[gi][oi].variant == "direct-receive"]
        hosts: dict[int, Any] = {}
        if not chosen:
            h.append(hosts)
            continue
        rows = min(int(op.host.raw.min()) for op, _ in chosen if op.host is not None)
        frags = min(int(op.host.frag.min()) for op, _ in chosen if op.host is not None)
        for t in np.flatnonzero(pc.room).tolist():
            hosts[t] = m.new_bool_var(f"h{pd.phase.phase}_{t}")
            table_terms[t].append((rows, hosts[t]))
            if frags:
                frag_terms[t].append((frags, hosts[t]))
        _thresholds(m, pd, pc, chosen, hosts)
        _scarce(m, pd, pc, chosen, hosts, problem.shared.setdefault("scarce_sets", {}), pi)
        m.add(sum(op.count * v for op, v in chosen) <= sum(hosts.values()))
        h.append(hosts)
    return h


def _thresholds(m: Any, pd: Any, pc: PhaseCaps, chosen: list[tuple[Any, Any]], hosts: dict[int, Any]) -> None:
    """Hall's condition on nested sets: for every receive-size threshold s, the chosen segments receiving at
    least s number at most the hosting tiles with room for s under the cap. (Adding transmit thresholds, pairs
    (receive, transmit), was tried: on SigLIP b2 CP-SAT's bound after 10 deterministic seconds fell from about
    49,600 B to 43,100 B, and the scarce sets below already cover what they add.)"""
    st = pd.state
    sizes = unique(np.concatenate([op.host.rx for op, _ in chosen if op.host is not None]))
    for s in unique(np.quantile(sizes, np.linspace(0, 1, THRESHOLDS + 1), method="lower")).tolist():
        need = [(int((op.host.rx >= s).sum()), v) for op, v in chosen if op.host is not None
                and (op.host.rx >= s).any()]
        fit = [v for t, v in hosts.items() if st.rx[t] + s <= pc.rx_cap[t]]
        m.add(sum(c * v for c, v in need) <= sum(fit))


SCARCE = 64  # a segment that at most this many tiles may host is counted in Hall's condition on its tile set


def _scarce(m: Any, pd: Any, pc: PhaseCaps, chosen: list[tuple[Any, Any]], hosts: dict[int, Any],
            cache: dict[int, _Scarce], pi: int) -> None:
    """Hall's condition on the tile sets of scarce segments. A segment's tiles are those with room under the caps
    for its receive and transmit bytes and for its buffer, not barred from it (its group's replicas and senders).
    An option with a segment no tile may host is never chosen; for every set A that is some scarce segment's
    tiles, the chosen segments whose tiles lie within A number at most the hosting tiles of A. (In SigLIP's
    MLP-down and MAP inputs dozens of groups' large segments compete for the same one or two non-grid tiles;
    without this the model relays them all and the plan cannot place them.)"""
    if pi not in cache:  # the sets depend on the options and caps only: every budget of a sweep shares them
        cache[pi] = _scarce_sets(pd, pc, [op for op, _ in chosen], np.fromiter(hosts, np.int64, len(hosts)))
    never, sets = cache[pi]
    for c in never:
        m.add(chosen[c][1] == 0)
    for a, need in sets:
        m.add(sum(k * chosen[c][1] for k, c in need) <= sum(hosts[t] for t in a))


# per phase: the chosen options no tile can host, and each scarce set's tiles with (segments within it, option)
_Scarce = tuple[list[int], list[tuple[list[int], list[tuple[int, int]]]]]


def _scarce_sets(pd: Any, pc: PhaseCaps, ops: list[Any], tiles: np.ndarray) -> _Scarce:
    """What ``_scarce`` adds, by index into ``ops`` (the phase's direct-receive options, in model order)."""
    rx_room = pc.rx_cap[tiles] - pd.state.rx[tiles].astype(np.int64)
    tx_room = pc.tx_cap[tiles] - pd.state.tx[tiles].astype(np.int64)
    gap = pd.largest_gap[tiles]
    never: list[int] = []
    allowed: list[tuple[int, list[frozenset[int]]]] = []  # per option: each scarce segment's tiles
    sets: dict[frozenset[int], list[int]] = {}
    for c, op in enumerate(ops):
        if op.host is None:
            continue
        mine: list[frozenset[int]] = []
        for s in range(op.count):
            ok = (rx_room >= op.host.rx[s]) & (tx_room >= op.host.tx[s]) & (gap >= op.buffer_bytes[s])
            ok &= ~isin(tiles, op.banned[s])
            a = tiles[ok]
            if a.size == 0:
                never.append(c)
                mine = []
                break
            if a.size <= SCARCE:
                key = frozenset(a.tolist())
                mine.append(key)
                sets.setdefault(key, a.tolist())
        if mine:
            allowed.append((c, mine))
    out = []
    for key, a in sets.items():
        need = [(k, c) for c, mine in allowed if (k := sum(1 for b in mine if b <= key))]
        if sum(k for k, _ in need) > len(a):
            out.append((a, need))
    return never, out


def _tables(m: Any, problem: SelectionProblem, base: np.ndarray, table_terms: list[list[tuple[int, Any]]],
            frag_terms: list[list[tuple[int, Any]]], worst: Any, table_cap: int | None) -> None:
    """Every tile's table under ``T`` (and the budget, or ``table_cap``), its fragments under the limit."""
    tiles = problem.tiles
    frag_base = problem.direct.fragments[:tiles].astype(np.int64)
    cap = problem.table_budget if table_cap is None else table_cap
    for t in range(tiles):
        expr = int(base[t]) + sum(c * v for c, v in table_terms[t])
        m.add(worst >= expr)
        if frag_terms[t]:
            m.add(int(frag_base[t]) + sum(c * v for c, v in frag_terms[t]) <= problem.fragment_limit)
    m.add(worst <= cap)


def hint(cm: CapacityModel, problem: SelectionProblem, plan: Plan) -> None:
    """Hint the model with a plan's choices (a plan at the cycles bound uses no local-pack option)."""
    by_key = {(r.group.phase, r.group.index): r for r in plan.relays}
    for pi, pd in enumerate(problem.phases):
        hosted: set[int] = set()
        for gi, lits in enumerate(cm.x[pi]):
            g = pd.options[gi][0].group
            r = by_key.get((g.phase, g.index))
            pick = 0
            if r is not None and r.variant == "direct-receive":
                pick = next((oi for oi in lits if pd.options[gi][oi].variant == "direct-receive"
                             and pd.options[gi][oi].count == r.segmentation.count), 0)
                if pick:
                    hosted.update(int(t) for t in r.hosts.tolist())
            for oi, v in lits.items():
                cm.model.add_hint(v, oi == pick)
        for t, v in cm.h[pi].items():
            cm.model.add_hint(v, t in hosted)


@dataclass
class CapacityResult:
    table: SolveResult
    scratch: SolveResult | None
    choice: list[list[int]] | None  # per phase, per group: option index into pd.options
    work: float = 0.0
    backstop: bool = False
    notes: list[str] = field(default_factory=list)


# CP-SAT's "max_lp" worker spends most of its time in root LP work its deterministic clock hardly counts (PE-core
# b1: one 22 s task of 6.8 deterministic s), so with it the search ends on the wall clock, not on its work
# allowance. The bound still comes from the capacity LP and the "max_lp_sym" worker (PE b1 loses 0.4 KB of it).
CAPACITY_TUNING: dict[str, Any] = {"ignore_subsolvers": ["max_lp"]}


def solve(problem: SelectionProblem, params: SolverParams, slack: dict[int, int], caps: list[PhaseCaps], *,
          start: Plan | None = None, progress: SolverCallback | None = None,
          wall: Callable[[], float] | None = None, scratch_share: float = 0.2) -> CapacityResult:
    """Minimise the worst tile under ``caps``, then the scratch with it held; ``params.time_limit`` is the
    work of both solves (deterministic seconds in deterministic mode), ``wall`` the backstop."""
    cm = build(problem, caps, slack)
    if start is not None:
        hint(cm, problem, start)
    cm.model.minimize(cm.worst)
    left = wall() if wall is not None else None
    solver, res = run(cm.model, replace(params, time_limit=max(0.05, params.time_limit * (1 - scratch_share)),
                                        backstop=left), progress=progress, tuning=CAPACITY_TUNING)
    work, backstop = res.work, res.backstop
    if res.status not in (Status.OPTIMAL, Status.FEASIBLE):
        return CapacityResult(res, None, None, work, backstop)
    choice = _read(cm, solver)
    worst = int(solver.value(cm.worst))
    # second solve: least scratch with the worst tile held at what was found
    cm.model.clear_hints()
    for pi, per in enumerate(cm.x):
        for gi, lits in enumerate(per):
            for oi, v in lits.items():
                cm.model.add_hint(v, choice[pi][gi] == oi)
    for hosts in cm.h:
        for v in hosts.values():
            cm.model.add_hint(v, bool(solver.value(v)))
    cm.model.add(cm.worst <= worst)
    cm.model.minimize(cm.scratch)
    left = wall() if wall is not None else None
    if left is not None and left <= 0.1:
        return CapacityResult(res, None, choice, work, True)
    if work >= params.time_limit:
        # CP-SAT finishes a batch of its workers' tasks before it stops, so the first solve can spend more than
        # the whole allowance (SigLIP b2: about 20 deterministic s for its first batch); the scratch solve is then
        # skipped on that deterministic count, not left to the wall clock
        return CapacityResult(res, None, choice, work, backstop)
    solver2, res2 = run(cm.model, replace(params, time_limit=max(0.05, params.time_limit * scratch_share),
                                          backstop=left), progress=progress, tuning=CAPACITY_TUNING)
    work += res2.work
    backstop |= res2.backstop
    if res2.status in (Status.OPTIMAL, Status.FEASIBLE):
        choice = _read(cm, solver2)
    return CapacityResult(res, res2, choice, work, backstop)


def uniform_choice(problem: SelectionProblem, caps: list[PhaseCaps], rank: int) -> list[list[int]]:
    """Per phase, every group at the ``rank``-th relay option the caps offer it (by segment count), where every
    group of the phase has one of that segment count; other phases direct."""
    out = []
    for pd, pc in zip(problem.phases, caps, strict=True):
        counts = [sorted(pd.options[gi][oi].count for oi in idx[1:]) for gi, idx in enumerate(pc.options)]
        want = {c[rank - 1] for c in counts if len(c) >= rank}
        row = [0] * len(pd.options)
        if len(want) == 1 and all(len(c) >= rank for c in counts):
            k = want.pop()
            row = [next(oi for oi in idx[1:] if pd.options[gi][oi].count == k) for gi, idx in enumerate(pc.options)]
        out.append(row)
    return out


def plan_choice(problem: SelectionProblem, plan: Plan) -> list[list[int]]:
    """Per phase and group, the index of the option a plan takes (0: direct), found by variant and segment
    count."""
    taken = {(r.group.phase, r.group.index): (r.variant, r.segmentation.count) for r in plan.relays}
    out = []
    for pd in problem.phases:
        row = []
        for opts in pd.options:
            g = opts[0].group
            want = taken.get((g.phase, g.index))
            row.append(0 if want is None else next((oi for oi, op in enumerate(opts)
                                                    if (op.variant, op.count) == want), 0))
        out.append(row)
    return out


def _read(cm: CapacityModel, solver: Any) -> list[list[int]]:
    return [[next(oi for oi, v in lits.items() if solver.value(v)) for lits in per] for per in cm.x]


def place_segments(problem: SelectionProblem, choice: list[list[int]], caps: list[PhaseCaps],
                   mode: PlanMode = PlanMode.CPSAT, prefer: str = "table") -> Plan:
    """The plan of a choice: every chosen segment on a tile that may take it under ``caps``.

    Per phase, segments by falling host rows, each on the tile with the lowest program table (ties: the highest
    tile number, the production rule's order; ``prefer="highest"``: the highest tile number alone, the production
    rule's order) among those with room under the caps for its bytes and controls, free memory for its buffer, not
    barred from it (its group's replicas and its senders) and not already hosting. A group whose segments cannot
    all be placed stays direct."""
    tiles = problem.tiles
    machine = problem.machine
    # the tables the choices leave before any host is added: direct, plus every chosen option's replica effect
    table = problem.direct.table_bytes[:tiles].astype(np.int64).copy()
    for pi, pd in enumerate(problem.phases):
        for gi, oi in enumerate(choice[pi]):
            op = pd.options[gi][oi]
            if op.variant != "direct":
                np.add.at(table, op.tiles[op.tiles < tiles], op.delta.raw[op.tiles < tiles])
    plan = Plan(mode, machine, problem.table_budget, problem.fragment_limit)
    max_bytes = machine.exchange.max_transfer_words * 4
    order = np.arange(tiles)[::-1]
    for pi, (pd, pc) in enumerate(zip(problem.phases, caps, strict=True)):
        st = pd.state
        ctrl = st.controls()[:tiles].astype(np.int64).copy()
        chosen = [(gi, pd.options[gi][oi]) for gi, oi in enumerate(choice[pi])
                  if pd.options[gi][oi].variant == "direct-receive"]
        for _gi, op in chosen:
            np.add.at(ctrl, op.tiles[op.tiles < tiles], op.delta.ctrl[op.tiles < tiles])
        free = pd.largest_gap.copy()
        busy = np.zeros(tiles, bool)
        segs = [(int(op.host.raw[s]), gi, op, s) for gi, op in chosen if op.host is not None for s in range(op.count)]
        segs.sort(key=lambda e: (-e[0], e[1], e[3]))
        placed: dict[int, list[tuple[int, int, int, int]]] = {}  # group -> (segment, tile, address, rows)
        failed: set[int] = set()
        for rows, gi, op, s in segs:
            if gi in failed:
                continue
            assert op.host is not None
            ok = (~busy & (st.rx[:tiles] + int(op.host.rx[s]) <= pc.rx_cap)
                  & (st.tx[:tiles] + int(op.host.tx[s]) <= pc.tx_cap)
                  & (ctrl + int(op.host.ctrl[s]) <= pc.ctrl_cap) & (free >= int(op.buffer_bytes[s])))
            ok[op.banned[s][op.banned[s] < tiles]] = False
            cand = order[ok[order]]
            if cand.size == 0:
                failed.add(gi)
                continue
            # the first minimum: the highest tile number
            t = int(cand[0]) if prefer == "highest" else int(cand[np.argmin(table[cand])])
            addr = pd.memory.first_fit(t, int(op.buffer_bytes[s]))
            if addr is None:
                failed.add(gi)
                continue
            busy[t] = True
            table[t] += rows
            placed.setdefault(gi, []).append((s, t, addr, rows))
        for gi, op in chosen:
            if gi in failed or len(placed.get(gi, [])) != op.count:
                # the group stays direct: its hosts are free again, its replicas keep their rows
                for _s, t, _a, rows in placed.get(gi, []):
                    busy[t] = False
                    table[t] -= rows
                np.subtract.at(table, op.tiles[op.tiles < tiles], op.delta.raw[op.tiles < tiles])
                continue
            assert op.seg is not None
            segs_of = sorted(placed[gi])
            hosts = np.array([t for _s, t, _a, _r in segs_of], np.int64)
            buffers = np.array([a for _s, _t, a, _r in segs_of], np.int64)
            rw = direct_receive(op.group, op.seg, hosts, buffers, pd.phase, max_bytes)
            plan.relays.append(RelayChoice(op.group, op.variant, op.seg, hosts, buffers, rw))
    return plan


# -- a constructive search at the cycles bound: relay where it lowers the heaviest replicas, hosts placed at once -----

@dataclass(eq=False)
class _Hosting:
    """One phase's hosting state: what each tile may still take under the caps, and which tiles already host."""

    limits: np.ndarray  # rows rx, tx, ctrl, gap (below), so one comparison tests a segment's four needs at once
    free: np.ndarray  # not hosting yet in this phase

    @property
    def rx(self) -> np.ndarray:
        """Receive bytes left under the cap (a view: writing to it updates ``limits``)."""
        row: np.ndarray = self.limits[0]
        return row

    @property
    def tx(self) -> np.ndarray:
        row: np.ndarray = self.limits[1]
        return row

    @property
    def ctrl(self) -> np.ndarray:
        row: np.ndarray = self.limits[2]
        return row

    @property
    def gap(self) -> np.ndarray:
        """Largest free gap (0: may not host at all)."""
        row: np.ndarray = self.limits[3]
        return row


@dataclass(frozen=True, eq=False)
class _Needs:
    """A relay option's segments as ``_hosts_for`` asks for them. Segments with the same needs (a group's equal
    panels) form a class whose tiles are found once; what tells them apart, the tiles barred from each, is checked
    tile by tile on the few best candidates."""

    count: int
    order: list[int]  # segments by falling receive bytes (ties: lower segment first)
    cls: list[int]  # per segment: its class
    need: np.ndarray  # (classes, 4, 1): receive, transmit, controls and buffer a host must have left
    raw: np.ndarray  # per class: the host rows a segment adds to its host's table
    size: np.ndarray  # per class: its segments
    banned: list[np.ndarray]  # per segment: the tiles that may not host it
    _barred: dict[int, frozenset[int]] = field(default_factory=dict)

    def barred(self, s: int) -> frozenset[int]:
        """``banned[s]`` as a set, made when first asked for (most searches end before any segment's)."""
        hit = self._barred.get(s)
        if hit is None:
            hit = self._barred[s] = frozenset(self.banned[s].tolist())
        return hit


def _host_raw(op: Any, entry: int) -> np.ndarray:
    """Per segment of a relay option: the rows it adds to its host's table. A local-pack host also sends the
    segment in the extra phase, which it enters (``entry``: the machine's phase-entry bytes); the phase entry
    itself is left out, as for a direct-receive host (most hosts take part in the phase anyway)."""
    raw: np.ndarray = op.host.raw if op.ext_host is None else op.host.raw + op.ext_host.raw + entry
    return raw


def _needs(op: Any, entry: int) -> _Needs:
    h = op.host
    rows = list(zip(h.rx.tolist(), h.tx.tolist(), h.ctrl.tolist(), op.buffer_bytes.tolist(),
                    _host_raw(op, entry).tolist(), strict=True))
    index: dict[tuple[int, ...], int] = {}
    cls = [index.setdefault(r, len(index)) for r in rows]
    classes = np.array(list(index), np.int64).reshape(len(index), 5)
    return _Needs(op.count, np.argsort(-h.rx, kind="stable").tolist(), cls, classes[:, :4, None], classes[:, 4],
                  np.bincount(cls, minlength=len(index)), op.banned)


def _hosts_for(nd: _Needs, host: _Hosting, table: np.ndarray, ceiling: int) -> list[int] | None:
    """A host for every segment, or None: per segment (largest first) the tile that fits it most tightly on
    receive bytes (keeping roomy tiles for larger segments) among those that may take it and stay at or under
    ``ceiling`` with its rows; ties: lower table, then higher tile number.

    Every segment needs a tile of its own, so the search gives up at once when fewer tiles are free than there are
    segments, or fewer may take a class than it has segments (most calls end here). Otherwise the tiles that may
    take any class are ranked once by the rule above; a segment's host is then the first of its class's ranked
    tiles not already taken and not barred from it, found among the first (taken + barred + 1)."""
    if np.count_nonzero(host.free) < nd.count:
        return None
    ok = (host.limits >= nd.need).all(axis=1) & (table <= (ceiling - nd.raw)[:, None]) & host.free
    if (np.count_nonzero(ok, axis=1) < nd.size).any():
        return None
    cand = np.flatnonzero(ok.any(axis=0))
    cand = cand[np.lexsort((-cand, table[cand], host.rx[cand]))]
    ranked = [cand[row] for row in ok[:, cand]]
    taken: set[int] = set()
    out = [0] * nd.count
    for s in nd.order:
        barred = nd.barred(s)
        for t in ranked[nd.cls[s]][: len(taken) + len(barred) + 1].tolist():
            if t not in taken and t not in barred:
                break
        else:
            return None
        taken.add(t)
        out[s] = t
    return out


@dataclass(frozen=True, eq=False)
class _Effects:
    """Several options' effects on the real tiles (tiles, delta) laid end to end: effect i is [starts[i], ends[i])."""

    tiles: np.ndarray
    delta: np.ndarray
    starts: np.ndarray
    ends: np.ndarray


def _concat(effects: list[tuple[np.ndarray, np.ndarray]]) -> _Effects:
    sizes = np.array([len(t) for t, _ in effects], np.int64)
    ends = np.cumsum(sizes)
    if not effects:
        return _Effects(np.zeros(0, np.int64), np.zeros(0, np.int64), ends, ends)
    return _Effects(np.concatenate([t for t, _ in effects]), np.concatenate([d for _, d in effects]), ends - sizes,
                    ends)


def _maxima(values: np.ndarray, fx: _Effects) -> np.ndarray:
    """Per effect: the largest of ``values`` over its stretch, and at least 0 (``max(initial=0)``)."""
    out = np.zeros(len(fx.starts), values.dtype)
    full = fx.ends > fx.starts
    if full.any():  # reduceat over the non-empty stretches only: each then runs to the next one's start
        out[full] = np.maximum.reduceat(values, fx.starts[full])
    return np.maximum(out, 0)


def _sums(values: np.ndarray, fx: _Effects) -> np.ndarray:
    """Per effect: the sum of ``values`` over its stretch (integers: exact whatever the order)."""
    c = np.zeros(len(values) + 1, values.dtype)
    np.cumsum(values, out=c[1:])
    sums: np.ndarray = c[fx.ends] - c[fx.starts]
    return sums


def _excesses(table: np.ndarray, fx: _Effects, level: int, sign: int) -> np.ndarray:
    """Per effect: how its tiles' excess over ``level`` changes if ``sign`` times its delta is added to them."""
    cur = table[fx.tiles] - level
    return _sums(np.maximum(cur + sign * fx.delta, 0) - np.maximum(cur, 0), fx)


class _Group(NamedTuple):
    options: list[int]  # indices into the group's options, those the caps offer but direct
    counts: list[int]  # their segment counts
    fx: _Effects  # their effects, in that order


class _State:
    """A plan at the cycles bound under construction: every tile's table, each phase's hosting state, the relays."""

    def __init__(self, problem: SelectionProblem, caps: list[PhaseCaps], by_hosts: bool = False) -> None:
        self.problem, self.caps = problem, caps
        self.by_hosts = by_hosts  # ``try_relay`` judges an option by its hosts too (``relay_greedy``)
        self.entry = problem.machine.cost.phase_entry_bytes  # what a local-pack extra phase adds to each tile in it
        tiles = self.tiles = problem.tiles
        self.table = problem.direct.table_bytes[:tiles].astype(np.int64).copy()
        self.hosting = []
        for pd, pc in zip(problem.phases, caps, strict=True):
            st = pd.state
            self.hosting.append(_Hosting(np.stack([pc.rx_cap - st.rx[:tiles].astype(np.int64),
                                                   pc.tx_cap - st.tx[:tiles].astype(np.int64),
                                                   pc.ctrl_cap - st.controls()[:tiles].astype(np.int64),
                                                   np.where(pc.room, pd.largest_gap, 0).astype(np.int64)]),
                                         pc.room.copy()))
        self.chosen: dict[tuple[int, int], tuple[int, list[int], list[int]]] = {}  # (phase, group) -> option, hosts
        # per phase: relayed group -> option, and a count of its changes (the key of ``relayed_effects``' cache)
        self.relayed: list[dict[int, int]] = [{} for _ in caps]
        self._version = [0] * len(caps)
        self._undone: tuple[int, int, int] | None = None  # (phase, group, version before) of the latest undo
        self._effects: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._needs: dict[tuple[int, int, int], _Needs] = {}
        self._host_loads: dict[tuple[int, int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._groups: dict[tuple[int, int], _Group] = {}
        self._relayed_fx: dict[int, tuple[int, np.ndarray, _Effects]] = {}
        self._replicas: dict[tuple[int, int], np.ndarray] = {}
        self._released: dict[int, tuple[int, np.ndarray, np.ndarray]] = {}

    def effect(self, pi: int, gi: int, oi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The real tiles option ``oi`` of the group changes and its change of their raw table and control
        words (the searches below ask for these hundreds of thousands of times)."""
        key = (pi, gi, oi)
        hit = self._effects.get(key)
        if hit is None:
            op = self.problem.phases[pi].options[gi][oi]
            tiles, raw, ctrl = op.tiles, op.delta.raw, op.delta.ctrl
            if op.ext is not None:
                tiles, raw, ctrl = _with_extra_phase(op, self.entry)
            keep = tiles < self.tiles
            hit = self._effects[key] = (tiles[keep], raw[keep], ctrl[keep])
            # ``_apply`` adds by fancy indexing, which needs each tile once (an option's tiles are a set)
            assert len(unique(hit[0])) == len(hit[0])
        return hit

    def host_loads(self, pi: int, gi: int, oi: int) -> tuple[np.ndarray, np.ndarray]:
        """Per segment of a relay option: the rows it adds to its host's table, and its receive, transmit and
        control loads there (one row each, as ``_Hosting.limits`` lays them out)."""
        key = (pi, gi, oi)
        hit = self._host_loads.get(key)
        if hit is None:
            op = self.problem.phases[pi].options[gi][oi]
            assert op.host is not None  # a relay option
            hit = self._host_loads[key] = (_host_raw(op, self.entry).astype(np.int64),
                                           np.stack([op.host.rx, op.host.tx, op.host.ctrl]).astype(np.int64))
        return hit

    def needs(self, pi: int, gi: int, oi: int) -> _Needs:
        key = (pi, gi, oi)
        hit = self._needs.get(key)
        if hit is None:
            hit = self._needs[key] = _needs(self.problem.phases[pi].options[gi][oi], self.entry)
        return hit

    def group(self, pi: int, gi: int) -> _Group:
        """The group's relay options the caps offer (in their order): segment counts and effects end to end."""
        key = (pi, gi)
        hit = self._groups.get(key)
        if hit is None:
            options = [oi for oi in self.caps[pi].options[gi][1:] if self.release_alone(pi, gi, oi)]
            hit = self._groups[key] = _Group(options, [self.problem.phases[pi].options[gi][oi].count for oi in options],
                                             _concat([self.effect(pi, gi, oi)[:2] for oi in options]))
        return hit

    def relayed_effects(self, pi: int) -> tuple[np.ndarray, _Effects]:
        """The phase's relayed groups and their chosen options' effects, end to end (kept until the phase changes)."""
        hit = self._relayed_fx.get(pi)
        if hit is None or hit[0] != self._version[pi]:
            groups = list(self.relayed[pi])
            hit = (self._version[pi], np.array(groups, np.int64),
                   _concat([self.effect(pi, gj, self.relayed[pi][gj])[:2] for gj in groups]))
            self._relayed_fx[pi] = hit
        return hit[1], hit[2]

    def replicas(self, pi: int, gi: int) -> np.ndarray:
        key = (pi, gi)
        hit = self._replicas.get(key)
        if hit is None:
            hit = self._replicas[key] = _replicas(self.problem.phases[pi].options[gi][0], self.tiles)
        return hit

    def try_relay(self, pi: int, gi: int, ceiling: int) -> bool:
        """Relay the group with the option that lowers its heaviest replica most and whose segments all find a
        host now (none raised above ``ceiling``); False if none does. (Choosing by the heaviest tile the relay
        touches, hosts included, was tried: it prefers finer cuts, which use up the capacity-limited phases'
        hosts on fewer groups, and left the worst tile higher on the bundled workloads.)"""
        g = self.group(pi, gi)
        current = int(self.table[self.replicas(pi, gi)].max(initial=0))
        after = _maxima(self.table[g.fx.tiles] + g.fx.delta, g.fx).tolist()
        tried = sorted((a, c, oi) for a, c, oi in zip(after, g.counts, g.options, strict=True) if a < current)
        if self.by_hosts:
            return self._relay_touched(pi, gi, [oi for _after, _count, oi in tried], ceiling)
        return any(self.relay_as(pi, gi, oi, ceiling) for _after, _count, oi in tried)

    def _relay_touched(self, pi: int, gi: int, options: list[int], ceiling: int) -> bool:
        """Relay the group with the option whose heaviest touched tile -- replica or host, each placed as
        ``relay_as`` places it -- is lightest (ties: the earlier in ``options``). Where every tile needs relief,
        a host's rows decide: one segment of a 3,888-fragment operand adds 31 KB to its host, 96 segments 340 B
        each to 96 hosts, for 700 B more per replica."""
        best: tuple[int, int] | None = None
        for rank, oi in enumerate(options):
            if not self.relay_as(pi, gi, oi, ceiling):
                continue
            hosts = self.chosen[(pi, gi)][1]
            touched = int(max(self.table[self.replicas(pi, gi)].max(initial=0), self.table[hosts].max()))
            self.undo(pi, gi)
            if best is None or (touched, rank) < best:
                best = (touched, rank)
        return best is not None and self.relay_as(pi, gi, options[best[1]], ceiling)

    def relay_as(self, pi: int, gi: int, oi: int, ceiling: int) -> bool:
        """Relay the group with option ``oi`` if its replicas can wait for its forwards (schedule-true caps) and
        every segment finds a host now (none raised above ``ceiling``)."""
        pd = self.problem.phases[pi]
        op = pd.options[gi][oi]
        if not self.releases_fit(pi, gi, oi):
            return False
        hosts = _hosts_for(self.needs(pi, gi, oi), self.hosting[pi], self.table, ceiling)
        if hosts is None:
            return False
        buffers = [pd.memory.first_fit(t, int(op.buffer_bytes[s])) for s, t in enumerate(hosts)]
        if any(b is None for b in buffers):
            return False
        self._apply(pi, gi, oi, hosts, +1)
        self._choose(pi, gi, (oi, hosts, [int(b) for b in buffers if b is not None]))
        self._version[pi] += 1
        return True

    def releases_fit(self, pi: int, gi: int, oi: int) -> bool:
        """Under schedule-true caps: every replica of the group, with this option relayed too, still takes the
        words relays forward to it after their latest release within the phase's target."""
        rel = self.caps[pi].release
        if rel is None:
            return True
        words, latest = self.released(pi)
        r = self.replicas(pi, gi)
        late = np.maximum(latest[r], rel.delay[(gi, oi)])
        return bool((late + words[r] + rel.words[gi] <= rel.cap[r]).all())

    def release_alone(self, pi: int, gi: int, oi: int) -> bool:
        """Under schedule-true caps: the group's replicas could wait for this option's forwards if no other group
        of the phase were relayed (an option that fails this never fits; the searches do not try it)."""
        rel = self.caps[pi].release
        if rel is None:
            return True
        r = self.replicas(pi, gi)
        return bool((rel.delay[(gi, oi)] + rel.words[gi] <= rel.cap[r]).all())

    def released(self, pi: int) -> tuple[np.ndarray, np.ndarray]:
        """Per tile, the words relays forward to it in the phase and the latest of their releases (kept until the
        phase changes)."""
        hit = self._released.get(pi)
        if hit is None or hit[0] != self._version[pi]:
            rel = self.caps[pi].release
            assert rel is not None
            words = np.zeros(self.tiles, np.int64)
            latest = np.zeros(self.tiles, np.int64)
            for gj, oj in self.relayed[pi].items():
                r = self.replicas(pi, gj)
                words[r] += rel.words[gj]
                np.maximum.at(latest, r, rel.delay[(gj, oj)])
            hit = self._released[pi] = (self._version[pi], words, latest)
        return hit[1], hit[2]

    def undo(self, pi: int, gi: int) -> None:
        oi, hosts, _ = self.chosen.pop((pi, gi))
        del self.relayed[pi][gi]
        self._apply(pi, gi, oi, hosts, -1)
        self._undone = (pi, gi, self._version[pi])
        self._version[pi] += 1

    def restore(self, pi: int, gi: int, saved: tuple[int, list[int], list[int]]) -> None:
        """Put a relay back as it was (``saved``: option, hosts, buffers)."""
        self._apply(pi, gi, saved[0], saved[1], +1)
        self._choose(pi, gi, saved)
        if self._undone is not None and self._undone[:2] == (pi, gi) and self._version[pi] == self._undone[2] + 1:
            self._version[pi] = self._undone[2]  # undone and put back with nothing between: the phase is as it was
        else:
            self._version[pi] += 1
        self._undone = None

    def _choose(self, pi: int, gi: int, choice: tuple[int, list[int], list[int]]) -> None:
        self.chosen[(pi, gi)] = choice
        self.relayed[pi][gi] = choice[0]

    def _apply(self, pi: int, gi: int, oi: int, hosts: list[int], sign: int) -> None:
        host = self.hosting[pi]
        tiles, raw, ctrl = self.effect(pi, gi, oi)
        # the tiles of an effect are distinct, and so are a relay's hosts (one segment per tile and phase): plain
        # fancy-index updates are exact, in half the time of ``np.add.at`` and a loop over the hosts
        self.table[tiles] += sign * raw
        host.ctrl[tiles] -= sign * ctrl
        at = np.asarray(hosts, np.int64)
        rows, loads = self.host_loads(pi, gi, oi)
        self.table[at] += sign * rows
        host.limits[:3, at] -= sign * loads
        host.free[at] = sign < 0

    def plan(self, mode: PlanMode) -> Plan:
        problem = self.problem
        plan = Plan(mode, problem.machine, problem.table_budget, problem.fragment_limit)
        max_bytes = problem.machine.exchange.max_transfer_words * 4
        for (pi, gi), (oi, hosts, buffers) in sorted(self.chosen.items()):
            pd = problem.phases[pi]
            op = pd.options[gi][oi]
            assert op.seg is not None
            h, b = np.asarray(hosts, np.int64), np.asarray(buffers, np.int64)
            if op.variant == "local-pack":
                plan.relays.append(RelayChoice(op.group, op.variant, op.seg, h, b,
                                               local_pack(op.group, op.seg, h, b, pd.phase, max_bytes,
                                                          pd.extra_phase), pd.extra_phase))
            else:
                plan.relays.append(RelayChoice(op.group, op.variant, op.seg, h, b,
                                               direct_receive(op.group, op.seg, h, b, pd.phase, max_bytes)))
        return plan


def _with_extra_phase(op: Any, entry: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A local-pack option's tiles and their change of raw table and control words: its phase's (replicas and
    senders) and, on its replicas, the extra phase's rows with that phase's entry (controls: the phase's only,
    the caps' concern). A tile is a replica of one group per phase, so one entry each is exact but for rounding."""
    tiles = np.concatenate([op.tiles, op.ext_tiles]).astype(np.int64)
    u, at = np.unique(tiles, return_inverse=True)
    raw = np.zeros(len(u), np.int64)
    np.add.at(raw, at, np.concatenate([op.delta.raw, op.ext.raw + entry]))
    ctrl = np.zeros(len(u), np.int64)
    np.add.at(ctrl, at[: len(op.tiles)], op.delta.ctrl)
    return u, raw, ctrl


SWAP_ROUNDS = 3000  # improving moves at most (each is a few numpy passes over the tiles)
REPACKS = 4  # rounds of re-cutting, packing (``_repack``) and coarsening (``_coarsen``) in the host-aware construction


def relay_greedy(problem: SelectionProblem, caps: list[PhaseCaps], mode: PlanMode = PlanMode.CPSAT,
                 rounds: int = SWAP_ROUNDS, cutoff: Cutoff | None = None, by_hosts: bool = False,
                 other: list[Plan] | None = None) -> Plan:
    """A plan at the cycles bound that lowers the worst tile.

    Construction: phases in order of how many tiles could host in them (most first: relaying there is hardly
    limited, and what it leaves decides the rest); in each, groups with the heaviest replica first, each relayed
    if a relay lowers its heaviest replica and every segment finds a host (``_hosts_for``: room under the caps,
    free memory, not barred, not raising the worst tile).
    Improvement: while a move lowers the worst tile (or leaves it and fewer tiles at it), at a worst tile: relay
    a group of it that is direct, making room if needed by returning to direct one relayed group of the same
    phase whose replicas stay below the worst. Deterministic; the caller re-costs the plan exactly. At ``cutoff``
    (checked between relays) the plan built so far is returned: valid, at the cycles bound, less improved.

    ``by_hosts``: each group takes the option whose heaviest touched tile, hosts included, is lightest (with
    ``memory_caps``, the construction for programs the production rule's plan does not fit, and for the table
    first); at the end the worst tiles are re-cut (``_recut``), every segment is packed again across the phases
    (``_repack``) and cuts are coarsened where their hosts have room (``_coarsen``), in rounds while one moves;
    all of it twice, the second time cutting finer a hosted segment nothing else can take (``_close_both``); the
    plan of the run not kept is appended to ``other`` (if given) when it differs."""
    cutoff = cutoff or Cutoff()
    st = _State(problem, caps, by_hosts)
    order = sorted(range(len(caps)), key=lambda pi: (-int(caps[pi].room.sum()), pi))
    limited = [pi for pi in order if _limited(problem.phases[pi], caps[pi])]
    for pi in order:
        if pi in limited:
            continue
        groups = [gi for gi, idx in enumerate(caps[pi].options) if len(idx) > 1]
        heaviest = {gi: int(st.table[st.replicas(pi, gi)].max(initial=0)) for gi in groups}
        for gi in sorted(groups, key=lambda g: (-heaviest[g], g)):
            if cutoff.reached():
                return st.plan(mode)
            st.try_relay(pi, gi, int(st.table.max(initial=0)))
    if not cutoff.reached():
        _weighted(st, limited)
    if not cutoff.reached():
        _improve(st, _members(st), order, rounds, cutoff)
    if by_hosts:  # a worst tile that hosts is relieved first; a re-cut may leave one that hosts
        dropped = _close_both(st, rounds, cutoff)
        if dropped is not None and other is not None:
            kept = dict(st.chosen)
            _replace(st, dropped)
            other.append(st.plan(mode))
            _replace(st, kept)
    elif not cutoff.reached():
        _relieve_hosts(st, rounds)
    return st.plan(mode)


def _close(st: _State, member: list[dict[int, int]], rounds: int, cutoff: Cutoff, finer: bool) -> None:
    """Relieve the hosts, then rounds of re-cutting the worst tiles (``_recut``, each followed by relieving the
    hosts again), packing every segment again (``_repack``) and coarsening (``_coarsen``), while one of them moves
    something (at most ``REPACKS``). ``finer``: see ``_relieve_hosts``."""
    _relieve_hosts(st, rounds, finer)
    for _ in range(REPACKS):
        while not cutoff.reached() and _recut(st, member, rounds, cutoff):
            _relieve_hosts(st, rounds, finer)
        if cutoff.reached():
            return
        packed = _repack(st, rounds)
        if not _coarsen(st) and not packed:
            return


_Chosen = dict[tuple[int, int], tuple[int, list[int], list[int]]]  # (phase, group) -> option, hosts, buffers


def _close_both(st: _State, rounds: int, cutoff: Cutoff) -> _Chosen | None:
    """``_close`` the construction twice from the same start: as it is, and with a hosted segment that no other
    tile can take cut finer (``_relieve_hosts`` with ``finer``); the second is kept only if its worst tile is
    lower or fewer tiles are at it. Where tile memory binds (full depth), a coarse segment's buffer fits only the
    few tiles with that much free memory, and the worst tile stays on one of them until its group is cut finer.
    Not instead of the first close: always cutting finer ends some programs a little higher, and cutting finer
    only after the first close finds its plan already coarsened up to the worst tile (docs/selection.md, "The
    host-aware construction"). Returns the relays of the run not kept (None: the runs agree, or the clock
    stopped the second)."""
    if cutoff.reached():
        return None
    member = _members(st)
    start = dict(st.chosen)
    _close(st, member, rounds, cutoff, finer=False)
    if cutoff.reached():
        return None
    first = dict(st.chosen)
    top = int(st.table.max(initial=0))
    at_top = int((st.table == top).sum())
    _replace(st, start)
    _close(st, member, rounds, cutoff, finer=True)
    if cutoff.reached():
        _replace(st, first)
        return None
    second = dict(st.chosen)
    if not _lower(st.table, top, at_top):
        _replace(st, first)
        return second if second != first else None
    return first if second != first else None


def _replace(st: _State, chosen: _Chosen) -> None:
    """Undo every relay of the state and put ``chosen`` in its place."""
    for key in sorted(st.chosen):
        st.undo(*key)
    for key, choice in sorted(chosen.items()):
        st.restore(*key, choice)


def relieve_hosts(problem: SelectionProblem, caps: list[PhaseCaps], plan: Plan, mode: PlanMode = PlanMode.CPSAT,
                  rounds: int = SWAP_ROUNDS) -> Plan:
    """A plan at the cycles bound with its worst tiles relieved of hosting (``_relieve_hosts``); the plan itself
    if nothing moved or it is not one at the cycles bound (a local-pack relay, or a segmentation the caps do not
    offer). The tables it works on are the model's (no sharing, no seams): the caller re-costs the plan."""
    st = _State(problem, caps)
    where = {(pd.options[gi][0].group.phase, pd.options[gi][0].group.index): (pi, gi)
             for pi, pd in enumerate(problem.phases) for gi in range(len(pd.options))}
    for r in plan.relays:
        pi, gi = where[(r.group.phase, r.group.index)]
        pd = problem.phases[pi]
        oi = next((oi for oi in caps[pi].options[gi][1:] if pd.options[gi][oi].count == r.segmentation.count), None)
        if r.variant != "direct-receive" or oi is None:
            return plan
        st.restore(pi, gi, (oi, [int(t) for t in r.hosts.tolist()], [int(b) for b in r.buffers.tolist()]))
    return st.plan(mode) if _relieve_hosts(st, rounds) else plan


def _relieve_hosts(st: _State, rounds: int, finer: bool = False) -> int:
    """While the worst tile hosts segments, move one of them (its group's segments re-placed, none on that tile,
    every host staying below the worst) or, failing that, return the group to direct if its replicas stay below
    the worst, or (``finer``) cut the group finer, its segments placed the same way and its replicas staying
    below the worst. The capacity model charges a host only the phase's smallest segment's rows, so its plans can
    pile large segments on one spare tile (SigLIP b2: tile 1471 hosts in five phases and is the only tile above
    52.5 KB). Returns the number of moves."""
    for done in range(rounds):
        top = int(st.table.max(initial=0))
        t = int(np.argmax(st.table))
        hosted = sorted(((pi, gi) for (pi, gi), (_oi, hosts, _b) in st.chosen.items() if t in hosts),
                        key=lambda k: (-_host_rows(st, k, t), k))
        moved = False
        for pi, gi in hosted:
            saved = st.chosen[(pi, gi)]
            st.undo(pi, gi)
            free = st.hosting[pi].free
            free[t] = False  # not back on the tile being relieved
            moved = st.relay_as(pi, gi, saved[0], top - 1)
            free[t] = True  # nothing of phase pi is on it now (a tile hosts one segment per phase)
            if not moved and int(st.table[st.replicas(pi, gi)].max(initial=0)) < top:
                moved = True  # the group stays direct: its replicas stay below the worst tile
            if not moved and finer:
                free[t] = False
                moved = _cut_finer(st, pi, gi, saved[0], top)
                free[t] = True
            if moved:
                break
            st.restore(pi, gi, saved)
        if not moved:
            return done
    return rounds


def _cut_finer(st: _State, pi: int, gi: int, oi: int, top: int) -> bool:
    """Relay the (undone) group at the fewest segments above option ``oi``'s whose segments find hosts below
    ``top`` and whose replicas stay below it: smaller segments need less room and less free memory."""
    count = st.problem.phases[pi].options[gi][oi].count
    g = st.group(pi, gi)
    for c, finer in sorted(zip(g.counts, g.options, strict=True)):
        if c <= count or not st.relay_as(pi, gi, finer, top - 1):
            continue
        if int(st.table[st.replicas(pi, gi)].max(initial=0)) < top:
            return True
        st.undo(pi, gi)
    return False


def _recut(st: _State, member: list[dict[int, int]], rounds: int, cutoff: Cutoff) -> int:
    """While a worst tile is a replica of a relayed group whose option is not the one most favourable to it,
    re-cut that group: another option that relieves the tile more, its segments re-placed with every host below
    the worst; taken if the worst tile falls or fewer tiles are at it. Where every tile needs relief the
    construction cuts operands fine so that hosts stay light, and its worst tiles are then replicas that a
    coarser cut would relieve: on PE-core b2 every tile at the worst is a replica of six relayed groups at up to
    240 bytes above their most favourable option. Returns the number of moves."""
    for done in range(rounds):
        top = int(st.table.max(initial=0))
        at_top = int((st.table == top).sum())
        moved = False
        for t in np.flatnonzero(st.table == top).tolist():
            if cutoff.reached():
                return done
            for pi, gi in sorted((pi, m[t]) for pi, m in enumerate(member) if (pi, m.get(t)) in st.chosen):
                on_t = {oi: int(d[tiles == t].sum()) for oi in st.group(pi, gi).options
                        for tiles, d, _c in [st.effect(pi, gi, oi)]}
                now = on_t.get(st.chosen[(pi, gi)][0], 0)
                for oi in sorted((oi for oi, d in on_t.items() if d < now), key=lambda oi: (on_t[oi], oi)):
                    if _switch(st, pi, gi, oi, top - 1, partial(_lower, top=top, at_top=at_top)):
                        moved = True
                        break
                if moved:
                    break
            if moved:
                break
        if not moved:
            return done
    return rounds


def _repack(st: _State, rounds: int) -> bool:
    """Re-host every chosen segment at once, the relays' options kept, and take the hosts if the worst tile falls
    (or stays with fewer tiles at it). The construction hosts each group as it relays it, phase by phase, so early
    segments take the roomiest tiles whatever their size; here every phase's segments are packed together, the
    largest first, each on the lightest tile that may take it (longest processing time first), and then, while
    the worst tile hosts, one of its segments moves to a tile that stays under it or trades places with a smaller
    segment there (``_Packing.settle``). On SigLIP b2 with the table first the plan's worst tile was 1,000 B above
    its mean (every worst tile hosting a 3.3 KB MLP-down segment); packed together, 300 B. Returns True if it
    re-hosted."""
    if not st.chosen:
        return False
    top = int(st.table.max(initial=0))
    at_top = int((st.table == top).sum())
    saved = dict(st.chosen)
    for pi, gi in sorted(saved):
        st.undo(pi, gi)
    # what the tables and the hosts' limits are with every relay's replicas changed and nothing hosted
    table = st.table.copy()
    limits = [h.limits.copy() for h in st.hosting]
    for (pi, gi), (oi, _h, _b) in saved.items():
        tiles, raw, ctrl = st.effect(pi, gi, oi)
        np.add.at(table, tiles, raw)
        np.add.at(limits[pi][2], tiles, -ctrl)
    keys: list[tuple[int, int, int]] = []  # (phase, group, segment)
    rows: list[int] = []
    allowed: list[np.ndarray] = []
    for (pi, gi), (oi, _h, _b) in sorted(saved.items()):
        nd = st.needs(pi, gi, oi)
        fit = (limits[pi] >= nd.need).all(axis=1) & st.hosting[pi].free  # per class: tiles with room
        for s in range(nd.count):
            ok = fit[nd.cls[s]].copy()
            ok[nd.banned[s][nd.banned[s] < st.tiles]] = False
            keys.append((pi, gi, s))
            rows.append(int(nd.raw[nd.cls[s]]))
            allowed.append(ok)
    order = sorted(range(len(keys)), key=lambda i: (-rows[i], keys[i]))
    packing = _Packing([keys[i] for i in order], np.array([rows[i] for i in order], np.int64),
                       np.stack([allowed[i] for i in order]), table, len(st.caps))
    better = packing.pack() and (packing.settle(rounds) < top or (
        int(packing.table.max()) == top and int((packing.table == top).sum()) < at_top))
    chosen = saved
    if better:
        where = dict(zip(packing.keys, packing.tile.tolist(), strict=True))
        chosen = {}
        for (pi, gi), (oi, _h, _b) in saved.items():
            pd = st.problem.phases[pi]
            op = pd.options[gi][oi]
            hosts = [where[(pi, gi, s)] for s in range(op.count)]
            buffers = [pd.memory.first_fit(t, int(op.buffer_bytes[s])) for s, t in enumerate(hosts)]
            if any(b is None for b in buffers):
                better, chosen = False, saved
                break
            chosen[(pi, gi)] = (oi, hosts, [int(b) for b in buffers if b is not None])
    for key, choice in sorted(chosen.items()):
        st.restore(*key, choice)
    return better


@dataclass(eq=False)
class _Packing:
    """``_repack``'s segments, largest first, and where they are: one row per segment."""

    keys: list[tuple[int, int, int]]  # (phase, group, segment)
    rows: np.ndarray  # the rows each adds to its host's table
    allowed: np.ndarray  # (segments, tiles): the tiles that may host it
    table: np.ndarray  # per tile: its table, the segments it hosts included
    phases: int
    tile: np.ndarray = field(init=False)  # per segment: its host (-1: none yet)
    phase: np.ndarray = field(init=False)
    busy: np.ndarray = field(init=False)  # (phases, tiles): hosts a segment in the phase

    def __post_init__(self) -> None:
        self.tile = np.full(len(self.keys), -1, np.int64)
        self.phase = np.array([k[0] for k in self.keys], np.int64)
        self.busy = np.zeros((self.phases, len(self.table)), bool)

    def pack(self) -> bool:
        """Each segment, largest first, on the lightest tile that may take it (ties: the highest tile number, the
        production rule's order); False if one finds none."""
        by_number = np.arange(len(self.table))[::-1]
        for i in range(len(self.keys)):
            cand = by_number[(self.allowed[i] & ~self.busy[self.phase[i]])[by_number]]
            if not cand.size:
                return False
            self._put(i, int(cand[np.argmin(self.table[cand])]))
        return True

    def settle(self, rounds: int) -> int:
        """While the worst tile hosts, move its largest segment that can go elsewhere (``_move``); returns the
        worst tile."""
        for _ in range(rounds):
            w = int(np.argmax(self.table))
            move = next((m for i in np.flatnonzero(self.tile == w).tolist()
                         if (m := self._move(i, w)) is not None), None)
            if move is None:
                break
            i, t, j = move
            self._put(i, t)
            if j >= 0:
                self._put(j, w)
        return int(self.table.max())

    def _move(self, i: int, w: int) -> tuple[int, int, int] | None:
        """Where segment ``i`` can go from the worst tile ``w``: the lightest tile that takes it under the worst,
        else the lightest that trades it a smaller segment with both tiles ending under the worst and neither
        hosting twice in a phase (``j`` = -1: no trade). Ties: the highest tile number, then the larger segment."""
        rows, table, tile, phase, busy = self.rows, self.table, self.tile, self.phase, self.busy
        top = int(table[w])
        p = phase[i]
        ok = self.allowed[i] & ~busy[p] & (table + rows[i] < top)
        ok[w] = False
        cand = np.flatnonzero(ok)
        if cand.size:
            return i, int(cand[np.lexsort((-cand, table[cand]))[0]]), -1
        # j on tile t trades with i: i fits there once j leaves, and j (smaller) fits on w once i leaves
        trade = ((rows < rows[i]) & (table[tile] + rows[i] - rows < top) & (tile != w) & (tile >= 0)
                 & self.allowed[i][tile] & self.allowed[:, w]
                 & ((phase == p) | (~busy[p][tile] & ~busy[phase, w])))
        cand = np.flatnonzero(trade)
        if not cand.size:
            return None
        j = int(cand[np.lexsort((cand, -tile[cand], table[tile[cand]]))[0]])
        return i, int(tile[j]), j

    def _put(self, i: int, t: int) -> None:
        """Host segment ``i`` on tile ``t`` (off its current host, if any)."""
        old = int(self.tile[i])
        if old >= 0:
            self.table[old] -= self.rows[i]
            if self.busy[self.phase[i], old] and not ((self.tile == old) & (self.phase == self.phase[i])
                                                      & (np.arange(len(self.keys)) != i)).any():
                self.busy[self.phase[i], old] = False
        self.tile[i] = t
        self.table[t] += self.rows[i]
        self.busy[self.phase[i], t] = True


def _coarsen(st: _State) -> int:
    """Move each relayed group, in (phase, group) order, to the option of least total change (replicas and hosts)
    whose segments find hosts with no tile raised above the worst: the total falls, so the next ``_repack`` has
    more room under the worst tile. Returns the number of moves."""
    moves = 0
    for pi, gi in sorted(st.chosen):
        top = int(st.table.max(initial=0))
        total = {oi: _total_change(st, pi, gi, oi) for oi in st.group(pi, gi).options}
        now = total.get(st.chosen[(pi, gi)][0], 0)
        for oi in sorted((oi for oi, t in total.items() if t < now), key=lambda oi: (total[oi], oi)):
            # its replicas may be relieved less: the worst tile must not rise
            if _switch(st, pi, gi, oi, top, partial(_no_higher, top=top)):
                moves += 1
                break
    return moves


def _switch(st: _State, pi: int, gi: int, oi: int, ceiling: int, keep: Callable[[np.ndarray], bool]) -> bool:
    """Move a relayed group to option ``oi``, its segments placed with no host above ``ceiling``, and keep the move
    if ``keep(tables)`` then holds; otherwise the group is put back as it was. Returns True if the move is kept."""
    saved = st.chosen[(pi, gi)]
    st.undo(pi, gi)
    if st.relay_as(pi, gi, oi, ceiling):
        if keep(st.table):
            return True
        st.undo(pi, gi)
    st.restore(pi, gi, saved)
    return False


def _lower(table: np.ndarray, top: int, at_top: int) -> bool:
    """The worst tile fell below ``top``, or fewer tiles than ``at_top`` are at it."""
    return int(table.max(initial=0)) < top or int((table == top).sum()) < at_top


def _no_higher(table: np.ndarray, top: int) -> bool:
    return int(table.max(initial=0)) <= top


def _total_change(st: _State, pi: int, gi: int, oi: int) -> int:
    """What a relay option adds to the tables' total: its replicas' and senders' change and its hosts' rows."""
    op = st.problem.phases[pi].options[gi][oi]
    assert op.host is not None
    extra = 0 if op.ext is None else int(op.ext.raw.sum()) + st.entry * len(op.ext_tiles)
    return int(op.delta.raw.sum()) + extra + int(_host_raw(op, st.entry).sum())


def _host_rows(st: _State, key: tuple[int, int], t: int) -> int:
    oi, hosts, _b = st.chosen[key]
    op = st.problem.phases[key[0]].options[key[1]][oi]
    assert op.host is not None
    return int(_host_raw(op, st.entry)[hosts.index(t)])


def _members(st: _State) -> list[dict[int, int]]:
    """Per phase: which group each tile is a replica of."""
    member: list[dict[int, int]] = []
    for pi, pc in enumerate(st.caps):
        m: dict[int, int] = {}
        for gi, idx in enumerate(pc.options):
            if len(idx) > 1:
                for t in st.replicas(pi, gi).tolist():
                    m[t] = gi
        member.append(m)
    return member


def _limited(pd: Any, pc: PhaseCaps) -> bool:
    """True when the phase's tiles with room cannot host a segment for every group even at its fewest segments:
    which groups get a relay there is the real choice."""
    need = sum(min((pd.options[gi][oi].count for oi in idx[1:]), default=0) for gi, idx in enumerate(pc.options))
    return need > int(pc.room.sum())


def _weighted(st: _State, phases: list[int], spread: int = 2048) -> None:
    """Relay in the capacity-limited phases, all at once: each step takes the group whose relay removes the most
    weight per segment it needs, a replica weighing exp((its table - the worst) / ``spread``) -- so the tiles
    near the top count, and a tile another phase's relay already lowered stops counting (the phases' choices
    cover different tiles). Deterministic: ties go to the lower (phase, group).

    An option's gain is summed again only when a weight on its tiles changed (a step moves few tables, and the
    worst tile, which moves every weight, less often); the sums are the same floating-point sums either way."""
    problem = st.problem
    todo = sorted((pi, gi) for pi in phases for gi, idx in enumerate(st.caps[pi].options) if len(idx) > 1)
    keys = [(pi, gi, oi) for pi, gi in todo for oi in st.caps[pi].options[gi][1:]]  # the order ties are broken in
    fx = _concat([st.effect(*k)[:2] for k in keys])
    counts = [problem.phases[pi].options[gi][oi].count for pi, gi, oi in keys]
    group_of = np.array([todo.index(k[:2]) for k in keys], np.int64)
    starts, ends = fx.starts.tolist(), fx.ends.tolist()
    alive = np.ones(len(keys), bool)
    gains = np.zeros(len(keys))
    weight = None
    while alive.any():
        top = int(st.table.max(initial=0))
        fresh = np.exp((st.table - top) / spread)
        dirty = alive.copy()
        if weight is not None:
            dirty &= _sums((fresh != weight)[fx.tiles].astype(np.int64), fx) > 0
        weight = fresh
        prod = weight[fx.tiles] * fx.delta
        for i in np.flatnonzero(dirty).tolist():
            gains[i] = float(-prod[starts[i]:ends[i]].sum()) / counts[i]
        # the first option (in ``keys`` order) with the largest positive gain
        pick = alive & (gains > 0)
        if not pick.any():
            return
        best = int(np.argmax(np.where(pick, gains, -np.inf)))
        pi, gi, _oi = keys[best]
        alive &= group_of != group_of[best]
        st.try_relay(pi, gi, top)


def _improve(st: _State, member: list[dict[int, int]], order: list[int], rounds: int, cutoff: Cutoff) -> None:
    """Lower the tables above a level just under the worst: for each tile above it (heaviest first), relay a
    group of it that is direct -- making room, if needed, by returning to direct a relayed group of the same phase
    whose replicas add less excess than the relay removes. A move is taken only if the excess over the level
    falls (``by_hosts``: and the worst tile does not rise -- that plan is a candidate as a whole; the others are
    sources of per-phase configurations, where the wider move measured better: SigLIP b2's default plan has a
    Σ B1024 change of -2,512 cycles with it, -2,495 without); when no move is left the level goes up by half its
    distance to the worst (finer moves), and the search stops when the level reaches the worst (or at ``cutoff``,
    checked at each tile)."""
    problem = st.problem
    margin = 4096
    for _ in range(rounds):
        top = int(st.table.max(initial=0))
        level = top - margin
        moved = False
        over = np.flatnonzero(st.table > level)
        for t in over[np.argsort(-st.table[over], kind="stable")].tolist():
            if cutoff.reached():
                return
            for pi in order:
                gi = member[pi].get(t)
                if gi is None or (pi, gi) in st.chosen:
                    continue
                # what relaying it would remove, with its best option's effect on its replicas
                best = -int(_excesses(st.table, st.group(pi, gi).fx, level, +1).min(initial=0))
                if best <= 0:
                    continue
                if st.try_relay(pi, gi, top):
                    moved = True
                    break
                # what returning each relayed group of the phase to direct would add over the level, all at once
                # (the swaps are tried by (loss, group): the order the groups are listed in does not matter)
                relayed, fx = st.relayed_effects(pi)
                losses = _excesses(st.table, fx, level, -1)
                cheap = np.flatnonzero(losses < best)
                for _loss, gj in sorted(zip(losses[cheap].tolist(), relayed[cheap].tolist(), strict=True)):
                    saved = st.chosen[(pi, gj)]
                    st.undo(pi, gj)
                    if st.try_relay(pi, gi, top):
                        if not st.by_hosts or int(st.table.max(initial=0)) <= top:
                            moved = True
                            break
                        # gj's replicas, direct again, rose above the worst tile (one hosts for another group):
                        # less excess over the level, but a worse plan
                        st.undo(pi, gi)
                    st.restore(pi, gj, saved)
                if moved:
                    break
            if moved:
                break
        if not moved:
            margin //= 2
            if margin < problem.machine.cost.table_rounding:
                return


def _replicas(op: Any, tiles: int) -> np.ndarray:
    r = op.group.replicas.astype(np.int64)
    replicas: np.ndarray = r[r < tiles]
    return replicas
