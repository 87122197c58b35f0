"""The production relay rule (docs/reference.md §5), mirrored exactly: one all-or-nothing candidate per exchange phase.

Phases are decided one at a time, in program order, each on its own (no whole-program state):

1. Skip a phase with no multicast, and a phase in which some destination is also read in the phase (on the same
   tile, at any Repeat source address): an existing receive-then-forward or alias ordering must be kept. With the
   capture's allocations, "destination" is the whole allocation written (the reference compares storage roots);
   without them, the bytes written.
2. Group the multicasts by their sorted destination set. A group rejected for a reason that lies in a transfer
   (a duplicated destination tile, offsets that differ between replicas, overlapping fragments) keeps the whole
   phase direct: the reference drops or double-counts that transfer, its group's panels then miss or exceed their
   bytes and the phase's candidate is abandoned. Otherwise a group is kept when it splits into its native panels
   (no fragment crosses a panel boundary); groups that do not stay direct alone; every kept group joins the
   candidate.
3. The candidate relays every kept group at its native segmentation, direct-receive. Groups are taken in the order
   of their sorted destination lists, panels in offset order; each panel's host is the highest-numbered tile not
   already a relay in this candidate and neither a destination nor a sender of its group. placer passes over a
   tile whose free memory in the phase cannot hold the panel's buffer (the reference does no memory check) and
   counts those tiles in the decision. If the panels outnumber the tiles, a panel finds no host, or a panel is
   incomplete (covered bytes ≠ panel bytes), the whole phase stays direct.
4. Scratch of a relay is its panel's bytes. Accept the candidate iff the phase's estimated cycles (docs/reference.md §3)
   do not rise and max over tiles of (phase rows + relay scratch on the tile) < the phase's previous max rows.

A rejected phase is left exactly as it was. Nothing is searched: no relay counts, no host choices.

``budget_plan`` at the end of this module is not the production rule: it is placer's own budget-aware
construction ("budget-greedy"), a feasible start for CP-SAT when the production rule breaks the budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from placer.alternatives.groups import GroupScan, Rejection, ReplicaGroup, panel_index, scan_phase
from placer.alternatives.memory import PhaseMemory
from placer.alternatives.relay import RelayRewrite, direct_receive, direct_receive_all
from placer.alternatives.segments import Segmentation, native
from placer.capture.model import Allocations, Capture, Phase
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
INELIGIBLE_TRANSFER = "ineligible transfer"
NO_ELIGIBLE_GROUP = "no eligible group"
INCOMPLETE_PANEL = "incomplete panel"
PANELS_OUTNUMBER_TILES = "panels outnumber tiles"
NO_HOST = "no host"
CYCLES_ROSE = "cycles rose"
ROWS_NOT_LOWER = "rows not lower"


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
    skipped_hosts: int = 0  # tiles passed over because their free memory could not hold the buffer
    detail: str = ""

    @property
    def accepted(self) -> bool:
        return self.reason == ACCEPTED

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
                "skipped_hosts": self.skipped_hosts, "detail": self.detail}


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


def native_panels(group: ReplicaGroup) -> Segmentation | str:
    """The group's native panels (the capture's panel hint, else inferred), or why the operand does not split."""
    if group.hint is not None and not group.hint.splits:
        return (f"operand {group.hint.operand or '?'} does not split into native panels (its panels are not "
                "contiguous on the replicas)")
    if group.hint is None:
        seg = native(group)
        if seg.count == 1:  # no inner boundary for a fragment to cross
            return seg
        bounds = seg.bounds
    else:
        bounds = np.asarray(group.hint.boundaries, np.int64)
    ends = group.offsets + group.nbytes
    inner = bounds[1:-1]
    cut = np.searchsorted(group.offsets, inner, side="left")  # first fragment starting at or after each bound
    straddle = (cut > 0) & (ends[np.maximum(cut - 1, 0)] > inner)
    if straddle.any():
        return f"a fragment crosses the panel boundary at offset {int(inner[np.argmax(straddle)])}"
    frag_start = np.searchsorted(group.offsets, bounds, side="left").astype(np.int64)
    frag_start[-1] = group.fragments
    return Segmentation(bounds, frag_start)


def incomplete_panel(group: ReplicaGroup, seg: Segmentation) -> str | None:
    """The first panel whose fragments do not cover it exactly (a hole, or no fragment at all), described."""
    if seg.count == 1:  # most groups: one panel, covered by all the fragments
        need = int(seg.bounds[1] - seg.bounds[0])
        if group.covered_bytes == need:
            return None
        return (f"group {group.index} panel 0: [{int(seg.bounds[0])}, {int(seg.bounds[1])}) has "
                f"{group.covered_bytes:,} of {need:,} bytes covered")
    panel_of = np.repeat(np.arange(seg.count), np.diff(seg.frag_start))
    covered = np.bincount(panel_of, weights=group.nbytes, minlength=seg.count).astype(np.int64)
    short = np.flatnonzero(covered != seg.segment_bytes())
    if short.size == 0:
        return None
    s = int(short[0])
    return (f"group {group.index} panel {s}: [{int(seg.bounds[s])}, {int(seg.bounds[s + 1])}) has "
            f"{int(covered[s]):,} of {int(seg.segment_bytes()[s]):,} bytes covered")


@dataclass
class Candidate:
    """The phase's kept groups in host-assignment order, their native panels, why the other groups stay direct
    (one line per group), and the first rejection that keeps the whole phase direct, if any."""

    groups: list[ReplicaGroup]
    panels: list[Segmentation]
    direct: list[str]
    abort: Rejection | None = None


def candidate_groups(phase: Phase, hints: dict, scan: GroupScan | None = None) -> Candidate:
    """The phase's kept groups and native panels (docs/reference.md §5's eligibility and grouping); ``scan`` is the
    phase's full scan (``gainful_only=False``) when the caller has it."""
    scan = scan if scan is not None else scan_phase(phase, hints, gainful_only=False)
    direct = [f"group {r.index}: {r.reason}" for r in scan.rejected]
    kept, panels = [], []
    for g in scan.groups:
        seg = native_panels(g)
        if isinstance(seg, str):
            direct.append(f"group {g.index}: {seg}")
            continue
        kept.append(g)
        panels.append(seg)
    # groups keyed by their sorted destination set, visited in that key's order
    order = sorted(range(len(kept)), key=lambda i: kept[i].replicas.tolist())
    abort = next((r for r in scan.rejected if r.transfer_level), None)
    return Candidate([kept[i] for i in order], [panels[i] for i in order], direct, abort)


def assign_hosts(groups: list[ReplicaGroup], panels: list[Segmentation], memory: PhaseMemory,
                 tiles: int) -> tuple[list[tuple[np.ndarray, np.ndarray]] | str, list[int]]:
    """Per group, (hosts, buffer addresses) of its panels, or which panel found no host; and the tiles passed over
    because no free gap of theirs could hold the buffer."""
    room = memory.largest_gaps(tiles).tolist()  # a host is never revisited in its phase: its reservation never matters
    hosting = np.zeros(tiles, bool)
    out = []
    skipped: set[int] = set()
    for g, seg in zip(groups, panels, strict=True):
        eligible = ~hosting
        eligible[g.replicas[g.replicas < tiles]] = False
        eligible[g.sources[g.sources < tiles]] = False
        walk = np.flatnonzero(eligible)[::-1].tolist()  # highest-numbered first
        hosts, buffers = [], []
        for s, nbytes in enumerate(seg.segment_bytes().tolist()):
            found = None
            for i, t in enumerate(walk):
                if room[t] >= nbytes:
                    addr = memory.first_fit(t, nbytes)
                    if addr is not None:
                        found = (i, t, addr)
                        break
            if found is None:
                skipped.update(walk)
                return f"group {g.index} panel {s} ({nbytes:,} B)", sorted(skipped)
            i, t, addr = found
            skipped.update(walk[:i])  # the eligible tiles above t: too full
            del walk[i]
            hosting[t] = True
            memory.reserve(t, addr, nbytes)
            hosts.append(t)
            buffers.append(addr)
        out.append((np.asarray(hosts, np.int64), np.asarray(buffers, np.int64)))
    return out, sorted(skipped)


def decide_phase(phase: Phase, before: PhaseCost, capture: Capture, machine: Machine, tiles: int,
                 hints: dict, scan: GroupScan | None = None) -> tuple[list[RelayChoice], Decision]:
    """Apply the rule to one phase: the relays it takes (all of the candidate's or none) and why."""
    figures: dict[str, Any] = {"cycles_before": before.cycles, "rows_before": before.worst_table()}
    if phase.n == 0 or not (phase.fanout >= 2).any():
        return [], Decision(phase.phase, NO_MULTICAST, **figures)
    alias = reads_a_destination(phase, capture.allocations)
    if alias is not None:
        written = "in an allocation the phase also writes" if len(capture.allocations) else \
            "which the phase also writes"
        return [], Decision(phase.phase, RECEIVE_THEN_FORWARD, detail=f"tile {alias[0]} reads {alias[1]:#x}, "
                            f"{written}", **figures)
    cand = candidate_groups(phase, hints, scan)
    direct: dict[str, Any] = {"direct_groups": len(cand.direct), "direct_reasons": tuple(cand.direct[:MAX_REASONS])}
    if cand.abort is not None:
        bad = cand.abort
        return [], Decision(phase.phase, INELIGIBLE_TRANSFER, groups=tuple(g.index for g in cand.groups),
                            detail=f"group {bad.index}: {bad.reason} (transfer {bad.transfer})", **direct, **figures)
    if not cand.groups:
        return [], Decision(phase.phase, NO_ELIGIBLE_GROUP, **direct, **figures)
    ids = tuple(g.index for g in cand.groups)
    base: dict[str, Any] = {"groups": ids, "relays": sum(s.count for s in cand.panels), **direct, **figures}
    for g, seg in zip(cand.groups, cand.panels, strict=True):
        hole = incomplete_panel(g, seg)
        if hole is not None:
            return [], Decision(phase.phase, INCOMPLETE_PANEL, detail=hole, **base)
    if base["relays"] > tiles:
        return [], Decision(phase.phase, PANELS_OUTNUMBER_TILES, detail=f"{base['relays']:,} panels, "
                            f"{tiles:,} tiles", **base)
    placed, skipped = assign_hosts(cand.groups, cand.panels, PhaseMemory(capture, phase, machine), tiles)
    if isinstance(placed, str):
        return [], Decision(phase.phase, NO_HOST, skipped_hosts=len(skipped), detail=f"{placed} found no tile "
                            f"with room ({len(skipped):,} eligible tiles too full)", **base)
    max_bytes = machine.exchange.max_transfer_words * 4
    relays = [(g, seg, hosts, buffers) for g, seg, (hosts, buffers) in zip(cand.groups, cand.panels, placed,
                                                                          strict=True)]
    # the trial rewrites every group at once; a group's own rewrite is built only if the phase is accepted
    trial = direct_receive_all(relays, phase, max_bytes)
    kept = np.ones(phase.n, bool)
    kept[trial.remove] = False
    after = tile_counters(Phase.concat(phase.phase, [phase.take(np.flatnonzero(kept)), trial.gathers,
                                                     trial.forwards], extra=phase.extra), machine, tiles,
                          capture.allocations)
    scratch = np.zeros(tiles, np.int64)
    for _, seg, hosts, _ in relays:
        np.add.at(scratch, hosts, seg.segment_bytes())
    rows_after = int((after.table_bytes + scratch).max(initial=0))
    failed = [why for why, bad in ((CYCLES_ROSE, after.cycles > before.cycles),
                                   (ROWS_NOT_LOWER, rows_after >= before.worst_table())) if bad]
    decision = Decision(phase.phase, " and ".join(failed) or ACCEPTED, cycles_after=after.cycles,
                        rows_after=rows_after, table_after=after.worst_table(), scratch=int(scratch.sum()),
                        skipped_hosts=len(skipped), detail=_skipped_note(skipped), **base)
    if not decision.accepted:
        return [], decision
    return [RelayChoice(g, "direct-receive", seg, hosts, buffers, direct_receive(g, seg, hosts, buffers, phase,
                                                                                  max_bytes))
            for g, seg, hosts, buffers in relays], decision


def _skipped_note(skipped: list[int]) -> str:
    if not skipped:
        return ""
    shown = ", ".join(map(str, skipped[::-1][:8])) + (" …" if len(skipped) > 8 else "")
    return f"passed over {len(skipped):,} tiles whose free memory cannot hold the buffer ({shown})"


def production_plan(capture: Capture, machine: Machine, table_budget: int, fragment_limit: int, *,
                    scans: list[GroupScan] | None = None, direct: ProgramCost | None = None,
                    workers: int = 1) -> tuple[Plan, list[Decision]]:
    """The production rule over the whole program: its plan and one decision per phase, in phase order.
    ``scans`` (every phase's full scan, ``gainful_only=False``) and ``direct`` (the program's cost) save the work
    when the caller has them. A phase's decision does not depend on another's, so phases are decided on
    ``workers`` threads."""
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
    """The entry point select.py calls: the production rule, on every phase's full scan (``gainful_only=False``:
    the rule keeps groups the optimiser prunes)."""
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
