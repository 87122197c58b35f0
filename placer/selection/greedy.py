"""The production relay rule (docs/reference.md §5), mirrored exactly: one all-or-nothing candidate per exchange phase.

Phases are decided one at a time, in program order, each on its own (no whole-program state):

1. Skip a phase with no multicast, and a phase in which some destination is also read in the phase (on the same
   tile, at any Repeat source address): an existing receive-then-forward or alias ordering must be kept. With the
   capture's allocations, "destination" is the whole allocation written (the reference compares storage roots);
   without them, the bytes written.
2. Judge each multicast on its own: one that names a destination tile twice, or lands at different offsets from
   its group's lowest address on each replica, stays direct, and the rest of the phase is still considered. Group
   the others by their sorted list of destination *buffers* -- the live allocation holding each destination
   address (the reference groups by destination shards); a destination in no live allocation has its tile's one
   unnamed buffer, which is the tile-set grouping of a capture without allocations (``groups.scan_buffers``). A
   group whose operand has no native panels stays direct alone; every other group joins the candidate, its
   fragments cut at its panel bounds (``segments.split_at``).
3. The candidate relays every group at its native panels, direct-receive. If the panels outnumber the tiles the
   phase stays direct. Groups are taken in the order of their sorted destination lists, panels in offset order;
   each panel's host is the highest-numbered tile not already a relay in this candidate and neither a destination
   nor a sender of its group -- memory unseen, as the reference. The whole phase stays direct as soon as a panel
   finds no host or is incomplete: its pieces, in offset order, must cover it as contiguous runs from its start to
   its end (covered bytes = the panel's storage bytes; a hole, an overlap or a repeated transfer breaks it).
4. Scratch of a relay is its panel's storage bytes. Accept the candidate iff the phase's estimated cycles
   (docs/reference.md §3) do not rise and max over tiles of (phase rows + relay scratch on the tile) < the phase's
   previous max rows.
5. Place every accepted relay buffer with the production allocator (``PhaseMemory.allocate``) around its host's
   live allocations and the phase's reads and writes, as the reference places its staging buffers after
   selection. A buffer that does not fit is the reference's allocation failure ("tile T has insufficient Standard
   SRAM for N bytes"): the decision says so with the phase and what was live, the phase's relays are not in the
   plan (it cannot be built), and ``placer solve --mode greedy`` exits non-zero.

A rejected phase is left exactly as it was. Nothing is searched: no relay counts, no host choices.

``budget_plan`` at the end of this module is not the production rule: it is placer's own budget-aware
construction ("budget-greedy"), a feasible start for CP-SAT when the production rule breaks the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from placer.alternatives.groups import GroupScan, ReplicaGroup, SharedBytes, panel_index, scan_buffers
from placer.alternatives.memory import PhaseMemory
from placer.alternatives.relay import RelayRewrite, direct_receive, direct_receive_all
from placer.alternatives.segments import Segmentation, native, panel_coverage, split_at
from placer.capture.model import Allocations, Capture, PanelHint, Phase
from placer.cost.model import BAND_SHIFT, PhaseCost, ProgramCost, program_cost, program_tiles, tile_counters
from placer.cost.state import PhaseState, TileCounters
from placer.machine import Machine
from placer.modes import PlanMode
from placer.progress import track
from placer.selection.plan import Plan, RelayChoice
from placer.solver import Cutoff
from placer.threads import ordered_map

RULE_NAME = PlanMode.PRODUCTION_RULE
MAX_REASONS = 5  # reasons listed per phase for the groups that stay direct

ACCEPTED = "accepted"
NO_MULTICAST = "no multicast"
RECEIVE_THEN_FORWARD = "receive-then-forward phase"
NO_ELIGIBLE_GROUP = "no eligible group"
INCOMPLETE_PANEL = "incomplete panel"
PANELS_OUTNUMBER_TILES = "panels outnumber tiles"
NO_HOST = "no host"
CYCLES_ROSE = "cycles rose"
ROWS_NOT_LOWER = "rows not lower"
BYTES_WRITTEN_TWICE = "bytes written twice"  # placer's own veto (docs/reference.md §4), after the reference's checks


@dataclass(frozen=True)
class Decision:
    """What the rule did with one phase, and the figures it decided on."""

    phase: int
    reason: str  # ACCEPTED or why the phase stays direct (one or two of the constants above)
    groups: tuple[int, ...] = ()  # the candidate's groups (indices in the phase's scan)
    direct_groups: int = 0  # multicast groups that failed eligibility and stay direct whatever happens
    direct_reasons: tuple[str, ...] = ()  # why, for the first few of them
    relays: int = 0  # panels of the candidate (one relay each)
    scratch: int = 0  # bytes of relay buffers, summed over the candidate's relays
    cycles_before: int = 0
    cycles_after: int | None = None  # the candidate's estimate (None: the rule never built one)
    rows_before: int = 0  # the phase's max per-tile rows
    rows_after: int | None = None  # max over tiles of the candidate's rows + relay scratch (the tested figure)
    table_after: int | None = None  # max over tiles of the candidate's rows alone
    direct_transfers: int = 0  # multicasts judged ineligible one by one: each stays direct, the phase goes on
    placement: tuple[str, ...] = ()  # accepted, but these relay buffers do not fit (the first few): no plan
    unplaced: int = 0  # how many relay buffers of the accepted candidate the allocator could not place
    detail: str = ""

    @property
    def accepted(self) -> bool:
        return self.reason == ACCEPTED

    @property
    def built(self) -> bool:
        """Accepted and every relay buffer placed: the phase's relays are in the rule's plan."""
        return self.accepted and not self.unplaced

    @property
    def has_candidate(self) -> bool:
        """True when the phase had groups to relay (whether or not a candidate could be completed)."""
        return bool(self.groups)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "accepted": self.accepted, "reason": self.reason, "groups": list(self.groups),
                "direct_groups": self.direct_groups, "direct_reasons": list(self.direct_reasons),
                "relays": self.relays, "scratch_bytes": self.scratch,
                "cycles_before": self.cycles_before, "cycles_after": self.cycles_after,
                "rows_before": self.rows_before, "rows_after": self.rows_after, "table_after": self.table_after,
                "direct_transfers": self.direct_transfers, "placement_failures": list(self.placement),
                "unplaced_buffers": self.unplaced, "detail": self.detail}


def reads_a_destination(phase: Phase, allocations: Allocations | None = None) -> tuple[int, int] | None:
    """A (tile, address) read by some transfer of the phase where the phase also writes, if any.

    With ``allocations`` (the capture's extension), "where" is the allocation: the reference compares storage
    roots, so writing any part of an allocation that the phase reads any part of, on that tile, counts. Bytes in
    no allocation live in the phase, and every byte of a capture without the extension, are compared as bytes.
    """
    if phase.n == 0:
        return None
    band = np.int64(1) << BAND_SHIFT  # one band per tile keeps tiles apart
    nb = phase.nbytes
    # the written bytes as merged runs (the same union as the receive entries, a small fraction of their number)
    w_tile, w_lo, w_hi = phase.dst_runs()
    w_start = w_tile.astype(np.int64) * band + w_lo
    w_end = w_start + (w_hi - w_lo)
    src_rows = np.repeat(np.arange(phase.n), np.diff(phase.src_ptr))
    r_at = phase.source[src_rows].astype(np.int64) * band + phase.src_addr
    r_start, r_end = r_at, r_at + nb[src_rows]
    if allocations is not None and len(allocations):
        live = (allocations.first <= phase.phase) & (allocations.last >= phase.phase)
        a_start = allocations.tile[live].astype(np.int64) * band + allocations.start[live]
        a_end = allocations.tile[live].astype(np.int64) * band + allocations.end[live]
        w_start, w_end = _widened(w_start, w_end, a_start, a_end)
        r_start, r_end = _widened(r_start, r_end, a_start, a_end)
    order = np.argsort(w_start, kind="stable")
    w_start, reach = w_start[order], np.maximum.accumulate(w_end[order])
    # the last write starting before each read ends overlaps it iff the writes so far reach past the read's start
    last = np.searchsorted(w_start, r_end, side="left") - 1
    hit = np.flatnonzero((last >= 0) & (reach[np.maximum(last, 0)] > r_start) & (r_end > r_start))
    if hit.size == 0:
        return None
    i = int(hit[0])
    return int(r_at[i] // band), int(r_at[i] % band)


def _widened(start: np.ndarray, end: np.ndarray, a_start: np.ndarray,
             a_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each [start, end) widened to the whole allocation [a_start, a_end) holding its first byte, if one does:
    live allocations of a tile do not share bytes, so two widened intervals meet iff they touch one allocation."""
    order = np.argsort(a_start, kind="stable")
    a_start, a_end = a_start[order], a_end[order]
    k = np.searchsorted(a_start, start, side="right") - 1
    kk = np.maximum(k, 0)
    inside = (k >= 0) & (a_end[kk] > start) if a_start.size else np.zeros(start.shape, bool)
    if not inside.any():
        return start, end
    return np.where(inside, a_start[kk], start), np.where(inside, np.maximum(a_end[kk], end), end)


def rule_panels(group: ReplicaGroup) -> np.ndarray | str:
    """The bounds of the group's native panels (``relay.rs``'s ``panel_views()``): the capture's panel hint, else
    inferred from the fragment pattern (``segments.native``); or why the operand does not split into them."""
    if group.hint is not None and not group.hint.splits:
        return (f"operand {group.hint.operand or '?'} does not split into native panels (its panels are not "
                "contiguous on the replicas)")
    if group.hint is None:
        return native(group).bounds
    return np.asarray(group.hint.boundaries, np.int64)


@dataclass
class Candidate:
    """The phase's groups that survive grouping, in the rule's order, each cut at its native panels (``split_at``),
    with the groups and the transfers that stay direct on their own (one line per group, the first few transfers)."""

    groups: list[ReplicaGroup]
    panels: list[Segmentation]
    direct: list[str]
    dropped: list[str]
    dropped_count: int = 0


def candidate_groups(phase: Phase, hints: dict[tuple[int, tuple[int, ...]], PanelHint],
                     allocations: Allocations | None = None) -> Candidate:
    """The phase's groups and native panels (docs/reference.md §5's eligibility and grouping): transfers judged one
    by one and grouped by their destination buffers (``groups.scan_buffers``), groups without native panels left
    direct, every fragment cut at its group's panel bounds."""
    scan = scan_buffers(phase, hints, allocations)
    direct = [f"group {r.index}: {r.reason}" for r in scan.rejected]
    kept, panels = [], []
    for g in scan.groups:
        bounds = rule_panels(g)
        if isinstance(bounds, str):
            direct.append(f"group {g.index}: {bounds}")
            continue
        split = split_at(g, bounds)
        if isinstance(split, str):
            direct.append(f"group {g.index}: {split}")
            continue
        kept.append(split[0])
        panels.append(split[1])
    dropped = [f"transfer {r.transfer}: {r.reason}" for r in scan.dropped]
    return Candidate(kept, panels, direct, dropped, scan.dropped_count)


def assign_hosts(groups: list[ReplicaGroup], panels: list[Segmentation],
                 tiles: int) -> tuple[list[np.ndarray], tuple[int, int] | None, tuple[int, int] | None]:
    """Hosts as the reference chooses them, memory unseen: for each group in order and each of its panels, the
    highest-numbered tile not yet a relay of this candidate and neither a destination nor a sender of the group;
    the panels checked in the same walk. Returns the hosts per group, the first (group position, panel) that found
    no host and the first that is incomplete, whichever the reference meets first (the other is None)."""
    used = np.zeros(tiles, bool)
    out: list[np.ndarray] = []
    for gi, (g, seg) in enumerate(zip(groups, panels, strict=True)):
        eligible = ~used
        eligible[g.replicas[g.replicas < tiles]] = False
        eligible[g.sources[g.sources < tiles]] = False
        walk = np.flatnonzero(eligible)[::-1][: seg.count]
        complete, _ = panel_coverage(g, seg)
        bad = np.flatnonzero(~complete)
        first_bad = int(bad[0]) if bad.size else seg.count
        if walk.shape[0] < seg.count and walk.shape[0] <= first_bad:
            return out, (gi, int(walk.shape[0])), None
        if bad.size:
            return out, None, (gi, first_bad)
        used[walk] = True
        out.append(walk.astype(np.int64))
    return out, None, None


def incomplete_panel(group: ReplicaGroup, seg: Segmentation, s: int) -> str:
    """Panel ``s`` of the group, described: what its pieces cover of it."""
    _, covered = panel_coverage(group, seg)
    need = int(seg.segment_bytes()[s])
    lo, hi = int(seg.bounds[s]), int(seg.bounds[s + 1])
    how = "not as contiguous rows (pieces overlap or repeat)" if covered[s] >= need else "covered"
    if covered[s] != need or how == "covered":
        return f"group {group.index} panel {s}: [{lo}, {hi}) has {int(covered[s]):,} of {need:,} bytes covered"
    return f"group {group.index} panel {s}: [{lo}, {hi}) is covered {how}"


UNPLACED_BUFFER = 1 << 62  # a trial buffer's address where its host has no room (never next to a real receive)


def place_buffers(relays: list[tuple[ReplicaGroup, Segmentation, np.ndarray, np.ndarray]], memory: PhaseMemory,
                  capture: Capture, phase: Phase) -> tuple[list[np.ndarray], list[str]]:
    """Every relay buffer of an accepted candidate placed by the production allocator (``PhaseMemory.allocate``),
    as the reference places its staging buffers after selection; the addresses per relay, and for each buffer that
    does not fit the reference's allocation failure ("tile T has insufficient Standard SRAM for N bytes"), with the
    phase, the relay and what was live."""
    out, failed = [], []
    alloc = capture.allocations
    mem = memory.machine.memory
    capacity = min(mem.end, mem.loader_limit) - mem.base
    for g, seg, hosts, _ in relays:
        addrs = np.zeros(seg.count, np.int64)
        for s, (t, nbytes) in enumerate(zip(hosts.tolist(), seg.segment_bytes().tolist(), strict=True)):
            addr = memory.allocate(t, nbytes)
            if addr is None:
                live = alloc.live_on(t, phase.phase) if len(alloc) else np.zeros(0, np.int64)
                names = sorted({alloc.name[i] or "unnamed" for i in live.tolist()}) if len(alloc.name) else []
                gaps = [y - x for x, y in memory.gaps(t)]
                failed.append(f"tile {t} has insufficient Standard SRAM for {nbytes} bytes (phase {phase.phase}, "
                              f"relay buffer of group {g.index} panel {s}; live: {len(live):,} allocation"
                              f"{'' if len(live) == 1 else 's'}"
                              + (f" ({', '.join(names[:4])}{', …' if len(names) > 4 else ''})" if names else "")
                              + f" and the phase's reads and writes, {memory.busy_bytes(t):,} of {capacity:,} bytes "
                              f"busy, largest free gap {max(gaps, default=0):,} B)")
                addrs[s] = UNPLACED_BUFFER
                continue
            memory.reserve(t, addr, nbytes)
            addrs[s] = addr
        out.append(addrs)
    return out, failed


def decide_phase(phase: Phase, before: PhaseCost, capture: Capture, machine: Machine, tiles: int,
                 hints: dict[tuple[int, tuple[int, ...]], PanelHint],
                 scan: GroupScan | None = None) -> tuple[list[RelayChoice], Decision]:  # noqa: ARG001
    """Apply the rule to one phase: the relays it takes (all of the candidate's or none) and why. ``scan`` is not
    used (the rule groups by destination buffers, ``groups.scan_buffers``); it is accepted for the callers that
    pass the optimiser's scan."""
    figures: dict[str, Any] = {"cycles_before": before.cycles, "rows_before": before.worst_table()}
    if phase.n == 0 or not (phase.fanout >= 2).any():
        return [], Decision(phase.phase, NO_MULTICAST, **figures)
    alias = reads_a_destination(phase, capture.allocations)
    if alias is not None:
        written = "in an allocation the phase also writes" if len(capture.allocations) else \
            "which the phase also writes"
        return [], Decision(phase.phase, RECEIVE_THEN_FORWARD, detail=f"tile {alias[0]} reads {alias[1]:#x}, "
                            f"{written}", **figures)
    cand = candidate_groups(phase, hints, capture.allocations)
    direct: dict[str, Any] = {"direct_groups": len(cand.direct),
                              "direct_reasons": tuple((cand.direct + cand.dropped)[:MAX_REASONS]),
                              "direct_transfers": cand.dropped_count}
    if not cand.groups:
        return [], Decision(phase.phase, NO_ELIGIBLE_GROUP, **direct, **figures)
    ids = tuple(g.index for g in cand.groups)
    base: dict[str, Any] = {"groups": ids, "relays": sum(s.count for s in cand.panels), **direct, **figures}
    if base["relays"] > tiles:
        return [], Decision(phase.phase, PANELS_OUTNUMBER_TILES, detail=f"{base['relays']:,} panels, "
                            f"{tiles:,} tiles", **base)
    hosts, no_host, hole = assign_hosts(cand.groups, cand.panels, tiles)
    if no_host is not None:
        g = cand.groups[no_host[0]]
        nbytes = int(cand.panels[no_host[0]].segment_bytes()[no_host[1]])
        return [], Decision(phase.phase, NO_HOST, detail=f"group {g.index} panel {no_host[1]} ({nbytes:,} B) found "
                            "no tile that is neither a relay of this candidate nor a destination or sender of its "
                            "group", **base)
    if hole is not None:
        return [], Decision(phase.phase, INCOMPLETE_PANEL, detail=incomplete_panel(
            cand.groups[hole[0]], cand.panels[hole[0]], hole[1]), **base)
    shared = SharedBytes(phase)
    for g in cand.groups:
        other = shared.foreign(g.transfers)
        if other is not None:
            # placer's one departure from the reference (docs/reference.md §4): it would relay the group and the
            # original's last writer of those bytes would change
            return [], Decision(phase.phase, BYTES_WRITTEN_TWICE,
                                detail=f"group {g.index}: transfer {other} also writes some of its bytes", **base)
    memory = PhaseMemory(capture, phase, machine)
    # the trial's buffers: where the allocator will put them (a receive's pointer reset can depend on the address);
    # a host without room gets an address no receive ends at, and the candidate is judged all the same
    trial_buffers = []
    for h, seg in zip(hosts, cand.panels, strict=True):
        fit = [memory.first_fit(t, n) for t, n in zip(h.tolist(), seg.segment_bytes().tolist(), strict=True)]
        trial_buffers.append(np.array([UNPLACED_BUFFER if a is None else a for a in fit], np.int64))
    max_bytes = machine.exchange.max_transfer_words * 4
    relays = list(zip(cand.groups, cand.panels, hosts, trial_buffers, strict=True))
    # the trial rewrites every group at once; a group's own rewrite is built only if the phase is accepted
    trial = direct_receive_all(relays, phase, max_bytes)
    kept = np.ones(phase.n, bool)
    kept[trial.remove] = False
    after = tile_counters(Phase.concat(phase.phase, [phase.take(np.flatnonzero(kept)), trial.gathers,
                                                     trial.forwards], extra=phase.extra), machine, tiles,
                          capture.allocations)
    scratch = np.zeros(tiles, np.int64)
    for _, seg, h, _ in relays:
        np.add.at(scratch, h, seg.segment_bytes())  # the panel's storage bytes (docs/reference.md §5)
    rows_after = int((after.table_bytes + scratch).max(initial=0))
    failed = [why for why, bad in ((CYCLES_ROSE, after.cycles > before.cycles),
                                   (ROWS_NOT_LOWER, rows_after >= before.worst_table())) if bad]
    result: dict[str, Any] = {"cycles_after": after.cycles, "rows_after": rows_after,
                              "table_after": after.worst_table(), "scratch": int(scratch.sum()), **base}
    if failed:
        return [], Decision(phase.phase, " and ".join(failed), **result)
    placed, unplaced = place_buffers(relays, memory, capture, phase)
    if unplaced:
        more = f" (and {len(unplaced) - 1:,} more)" if len(unplaced) > 1 else ""
        return [], Decision(phase.phase, ACCEPTED, placement=tuple(unplaced[:MAX_REASONS]),
                            unplaced=len(unplaced), detail=f"accepted, but the plan cannot be built: "
                            f"{unplaced[0]}{more}", **result)
    return [RelayChoice(g, "direct-receive", seg, h, b, direct_receive(g, seg, h, b, phase, max_bytes))
            for (g, seg, h, _), b in zip(relays, placed, strict=True)], Decision(phase.phase, ACCEPTED, **result)


def placement_failures(decisions: list[Decision]) -> list[str]:
    """The reference's allocation failures of the rule's accepted relays (each decision lists its first few)."""
    return [why for d in decisions for why in d.placement]


def production_plan(capture: Capture, machine: Machine, table_budget: int, fragment_limit: int, *,
                    scans: list[GroupScan] | None = None, direct: ProgramCost | None = None,
                    workers: int = 1) -> tuple[Plan, list[Decision]]:
    """The production rule over the whole program: its plan and one decision per phase, in phase order.
    ``direct`` (the program's cost) saves the work when the caller has it; ``scans`` (the optimiser's tile-set
    scans) are not used: the rule groups by destination buffers (``groups.scan_buffers``). A phase's decision does
    not depend on another's, so phases are decided on ``workers`` threads. The plan holds the relays of every
    accepted phase whose buffers the allocator placed; an accepted phase whose buffers do not all fit is reported in
    its decision (``placement``, ``placement_failures``) and left out: the reference compiler fails there."""
    tiles = program_tiles(capture, machine)
    direct = direct if direct is not None else program_cost(capture, machine, workers)
    hints = panel_index(capture)
    plan = Plan(RULE_NAME, machine, table_budget, fragment_limit)
    decisions = []
    per_phase = scans if scans is not None else [None] * len(capture.phases)
    work = list(zip(capture.phases, direct.phases, per_phase, strict=True))
    decided = ordered_map(lambda w: decide_phase(w[0], w[1], capture, machine, tiles, hints, w[2]), work, workers)
    for choices, decision in track(decided, "production rule", len(work), "phases"):
        plan.relays.extend(choices)
        decisions.append(decision)
    return plan, decisions


def greedy_plan(capture: Capture, scans: list[GroupScan] | None, machine: Machine, table_budget: int,
                fragment_limit: int, direct: ProgramCost | None = None,
                workers: int = 1) -> tuple[Plan, list[Decision]]:
    """The entry point select.py calls: the production rule (``scans`` are not used, see ``production_plan``)."""
    return production_plan(capture, machine, table_budget, fragment_limit, scans=scans, direct=direct,
                           workers=workers)


# -- placer's budget-aware construction ("budget-greedy"): NOT the production rule ----------------------------------

def pick_hosts(
    group: ReplicaGroup, seg_count: int, seg_bytes: np.ndarray, hosting: np.ndarray, memory: PhaseMemory, tiles: int,
    order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Eligible tiles not yet hosting, one per segment, each with room for its buffer: the highest-numbered first
    or in the given ``order``."""
    banned = hosting[:tiles].copy()
    banned[group.replicas] = True
    banned[group.sources] = True
    hosts, buffers = [], []
    order = np.arange(tiles)[::-1] if order is None else order
    candidates = order[~banned[order]].tolist()
    ci = 0
    for s in range(seg_count):
        while ci < len(candidates):
            t = candidates[ci]
            ci += 1
            addr = memory.first_fit(t, int(seg_bytes[s]))
            if addr is not None:
                hosts.append(t)
                buffers.append(addr)
                break
        else:
            return None
    return np.asarray(hosts, np.int64), np.asarray(buffers, np.int64)


@dataclass(frozen=True, eq=False)
class Trial:
    """A native direct-receive relay of one group, evaluated against its phase as it stands."""

    rewrite: RelayRewrite
    appended: Phase
    counters: TileCounters
    changed: np.ndarray  # real tiles whose counters change
    table_delta: np.ndarray  # their change of rounded table bytes in the phase


def try_relay(state: PhaseState, group: ReplicaGroup, seg: Segmentation, hosts: np.ndarray, buffers: np.ndarray,
              tiles: int) -> Trial:
    phase = state.phase
    rewrite = direct_receive(group, seg, hosts, buffers, phase, state.machine.exchange.max_transfer_words * 4)
    appended = Phase.concat(phase.phase, [rewrite.gathers, rewrite.forwards], extra={})
    counters = state.evaluate(rewrite.remove, appended)
    changed = counters.tiles[counters.tiles < tiles]
    delta = state.table(counters)[: len(changed)] - state.table()[changed]
    return Trial(rewrite, appended, counters, changed, delta)


def budget_plan(capture: Capture, scans: list[GroupScan], machine: Machine, table_budget: int,
                fragment_limit: int, max_passes: int = 3, cutoff: Cutoff | None = None) -> Plan:
    """placer's own budget-aware construction (not the production rule): a feasible start for CP-SAT.

    Groups are visited largest first (fragments × replicas); a group is relayed, native segments, direct-receive,
    when one of its replicas is over the budget and relaying lowers the total excess (Σ over tiles of the table
    bytes over the budget plus the fragments over the limit); hosts are the eligible tiles with the most headroom.
    At ``cutoff`` the relays chosen so far are returned (a valid plan, which may not fit).
    """
    tiles = program_tiles(capture, machine)
    plan = Plan(PlanMode.BUDGET_GREEDY, machine, table_budget, fragment_limit)
    cost = program_cost(capture, machine)
    table = cost.table_bytes[:tiles].copy()
    frags = cost.fragments[:tiles].copy()
    phases = {p.phase: p for p in capture.phases}
    # rows that share a table with another phase host nothing (``selection.problem.pinned_tiles``)
    pins = cost.sharing.pinned() if cost.sharing is not None else np.zeros((len(capture.phases), tiles), bool)
    pinned = {p.phase: pin for p, pin in zip(capture.phases, pins, strict=True)}
    states: dict[int, tuple[PhaseState, PhaseMemory, np.ndarray]] = {}
    groups = sorted((g for s in scans for g in s.groups), key=lambda g: (-g.fragments * g.replica_count, g.key()))
    done: set[tuple[int, int]] = set()
    for _ in track(range(max_passes), f"budget-greedy construction ({table_budget:,} B)", unit="passes"):
        progress = False
        for group in groups:
            if (table <= table_budget).all() and (frags <= fragment_limit).all():
                return plan
            if cutoff is not None and cutoff.reached():
                return plan
            if group.key() in done or not ((table[group.replicas] > table_budget).any()
                                           or (frags[group.replicas] > fragment_limit).any()):
                continue
            phase = phases[group.phase]
            if group.phase not in states:
                states[group.phase] = (PhaseState(phase, machine, tiles, capture.allocations),
                                       PhaseMemory(capture, phase, machine),
                                       np.concatenate([pinned[group.phase][:tiles], [False]]))
            state, memory, hosting = states[group.phase]
            seg = native(group)
            picked = pick_hosts(group, seg.count, seg.segment_bytes(), hosting, memory, tiles,
                                order=np.argsort(table, kind="stable"))
            if picked is None:
                continue
            hosts, buffers = picked
            trial = try_relay(state, group, seg, hosts, buffers, tiles)
            changed, counters = trial.changed, trial.counters
            new_table = table.copy()
            new_table[changed] += trial.table_delta
            new_frags = frags.copy()
            new_frags[changed] += ((counters.sends + counters.receives)[: len(changed)]
                                   - (state.sends + state.receives)[changed])
            def excess(tab: np.ndarray, frg: np.ndarray) -> int:
                return int(np.maximum(tab - table_budget, 0).sum() + np.maximum(frg - fragment_limit, 0).sum())

            if excess(new_table, new_frags) >= excess(table, frags):
                continue
            state.commit(trial.rewrite.remove, trial.appended, counters, {})
            table, frags = new_table, new_frags
            hosting[hosts] = True
            done.add(group.key())
            plan.relays.append(RelayChoice(group, "direct-receive", seg, hosts, buffers, trial.rewrite))
            progress = True
        if not progress:
            break
    return plan
