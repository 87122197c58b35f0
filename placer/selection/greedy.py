"""The production relay rule (BRIEF §5), mirrored exactly.

Per phase (in program order), per eligible group in order of first appearance in the listing: build the
native-segment direct-receive alternative; each segment's relay is the highest-numbered tile not yet used as a relay
in the phase that is neither a sender nor a receiver of the group; accept it only if the phase's modelled cycles do
not increase and the worst tile's table bytes plus relay scratch becomes smaller than the previous worst.
Otherwise the group stays direct. There is no search over the relay count, and a rejected group is not revisited.

How this reads BRIEF §5 where it is terse: "unused" means not already hosting a relay segment in the phase (a
relay hosts at most one segment per phase, §4); "the worst tile" is the program's worst tile, table bytes summed
over the stored phases plus the relay scratch it hosts summed over phases, since the budget applies to that tile.
One addition the production rule leaves to a later pass: a tile whose free memory in the phase cannot hold the
segment's buffer is skipped (the next lower tile is tried), so that every accepted relay has a placed buffer.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.alternatives.groups import GroupScan, ReplicaGroup
from placer.alternatives.memory import PhaseMemory
from placer.alternatives.relay import RelayRewrite, direct_receive
from placer.alternatives.segments import Segmentation, native
from placer.capture.model import Capture, Phase
from placer.machine import Machine
from placer.problem.cost import program_cost, program_tiles
from placer.problem.state import PhaseState, TileCounters
from placer.progress import track
from placer.selection.plan import Plan, RelayChoice


@dataclass(frozen=True)
class Decision:
    """Why the rule took or left a group (for the report)."""

    phase: int
    group: int
    accepted: bool
    reason: str
    cycles_before: int
    cycles_after: int
    worst_before: int
    worst_after: int


def pick_hosts(
    group: ReplicaGroup, seg_count: int, seg_bytes: np.ndarray, hosting: np.ndarray, memory: PhaseMemory, tiles: int,
    order: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Eligible tiles not yet hosting, one per segment, each with room for its buffer: the highest-numbered first
    (the production rule) or in the given ``order``."""
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


def greedy_phase(phase: Phase, scan: GroupScan, capture: Capture, machine: Machine, tiles: int,
                 program: np.ndarray) -> tuple[list[RelayChoice], list[Decision], PhaseState]:
    """Apply the rule to one phase; ``program`` (table + scratch per tile, whole program) is updated in place."""
    state = PhaseState(phase, machine, tiles)
    memory = PhaseMemory(capture, phase, machine)
    choices: list[RelayChoice] = []
    decisions: list[Decision] = []
    hosting = np.zeros(tiles + 1, bool)
    for group in scan.groups:
        seg = native(group)
        cycles = state.cycles()
        worst = int(program.max(initial=0))
        picked = pick_hosts(group, seg.count, seg.segment_bytes(), hosting, memory, tiles)
        if picked is None:
            decisions.append(Decision(phase.phase, group.index, False, "not enough unused relay tiles", cycles,
                                      cycles, worst, worst))
            continue
        hosts, buffers = picked
        trial = try_relay(state, group, seg, hosts, buffers, tiles)
        new_program = program.copy()
        new_program[trial.changed] += trial.table_delta
        np.add.at(new_program, hosts, seg.segment_bytes())
        _, cyc = state.with_counters(trial.counters)
        new_cycles = int(cyc[:tiles].max(initial=0)) + machine.exchange.sync_cycles
        new_worst = int(new_program.max(initial=0))
        ok = new_cycles <= cycles and new_worst < worst
        reason = "accepted" if ok else ("cycles would rise" if new_cycles > cycles else "worst tile not reduced")
        decisions.append(Decision(phase.phase, group.index, ok, reason, cycles, new_cycles, worst, new_worst))
        if not ok:
            continue
        state.commit(trial.rewrite.remove, trial.appended, trial.counters,
                     {int(h): int(b) for h, b in zip(hosts, seg.segment_bytes(), strict=True)})
        program[:] = new_program
        hosting[hosts] = True
        for h, b, nbytes in zip(hosts.tolist(), buffers.tolist(), seg.segment_bytes().tolist(), strict=True):
            memory.reserve(h, b, nbytes)
        choices.append(RelayChoice(group, "direct-receive", seg, hosts, buffers, trial.rewrite))
    return choices, decisions, state


def budget_plan(capture: Capture, scans: list[GroupScan], machine: Machine, table_budget: int,
                fragment_limit: int, max_passes: int = 3) -> Plan:
    """placer's own budget-aware construction (not the production rule): a feasible start for CP-SAT.

    Groups are visited largest first (fragments × replicas); a group is relayed, native segments, direct-receive,
    when one of its replicas is over the budget and relaying lowers the total excess (Σ over tiles of the table
    bytes over the budget plus the fragments over the limit); hosts are the eligible tiles with the most headroom.
    """
    tiles = program_tiles(capture, machine)
    plan = Plan("budget-greedy", machine, table_budget, fragment_limit)
    cost = program_cost(capture, machine)
    table = cost.table_bytes[:tiles].copy()
    frags = cost.fragments[:tiles].copy()
    phases = {p.phase: p for p in capture.phases}
    states: dict[int, tuple[PhaseState, PhaseMemory, np.ndarray]] = {}
    groups = sorted((g for s in scans for g in s.groups), key=lambda g: (-g.fragments * g.replica_count, g.key()))
    done: set[tuple[int, int]] = set()
    for _ in range(max_passes):
        progress = False
        for group in groups:
            if (table <= table_budget).all() and (frags <= fragment_limit).all():
                return plan
            if group.key() in done or not ((table[group.replicas] > table_budget).any()
                                           or (frags[group.replicas] > fragment_limit).any()):
                continue
            phase = phases[group.phase]
            if group.phase not in states:
                states[group.phase] = (PhaseState(phase, machine, tiles), PhaseMemory(capture, phase, machine),
                                       np.zeros(tiles + 1, bool))
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


def greedy_plan(capture: Capture, scans: list[GroupScan], machine: Machine, table_budget: int,
                fragment_limit: int) -> tuple[Plan, list[Decision]]:
    tiles = program_tiles(capture, machine)
    plan = Plan("greedy", machine, table_budget, fragment_limit)
    decisions: list[Decision] = []
    program = program_cost(capture, machine).table_bytes[:tiles].copy()
    for phase, scan in track(zip(capture.phases, scans, strict=True), "production rule", len(scans), "phases"):
        if not scan.groups:
            continue
        choices, dec, _ = greedy_phase(phase, scan, capture, machine, tiles, program)
        plan.relays.extend(choices)
        decisions.extend(dec)
    return plan, decisions
