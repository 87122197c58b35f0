"""The relay-selection problem: every phase's groups, their options, and what the direct program costs.

Built once, shared by the greedy and the CP-SAT model, so both see the same groups, options and costs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from placer.alternatives.groups import GroupScan, Rejection, gainful, scan_capture
from placer.alternatives.memory import PhaseMemory
from placer.capture.model import Capture, Phase
from placer.cost.model import ProgramCost, program_cost, program_tiles
from placer.cost.state import PhaseState
from placer.machine import Machine
from placer.progress import track
from placer.selection.options import HostClass, Option, group_options
from placer.threads import ordered_map


@dataclass(eq=False)
class PhaseData:
    phase: Phase
    iterations: int
    state: PhaseState
    memory: PhaseMemory
    options: list[list[Option]]  # per eligible group: [direct, …]
    raw: np.ndarray  # direct raw table bytes per tile
    largest_gap: np.ndarray  # per tile: largest free aligned gap in the phase
    extra_phase: int  # id a local-pack extra phase of this phase would get
    # host classes by load level (large programs): exact class -> the bucket's class; None: exact classes
    buckets: dict[HostClass, HostClass] | None = None

    def classes(self, op: Option) -> list[HostClass]:
        """The host class of each of the option's segments (exact classes, or their load buckets)."""
        sigs = op.signatures()
        return sigs if self.buckets is None else [self.buckets[s] for s in sigs]


class TileClassPhase(NamedTuple):
    """What the model sees of a tile class's tiles in one selection phase."""

    used: bool  # the tiles send or receive in the phase (a host then pays no phase entry)
    raw: int  # direct raw table bytes
    tx: int
    rx: int
    ctrl: int
    gap: int  # largest free gap (capped at the largest buffer any option needs)


@dataclass(eq=False)
class TileClass:
    """Tiles that no option touches and that look the same to the model in every selection phase.

    Such tiles differ in nothing the model can see (direct load, per-phase counters, free memory), so the model
    counts how many of them host a segment instead of naming them.
    """

    tiles: np.ndarray
    table: int  # direct whole-program table bytes of each tile
    fragments: int
    per_phase: list[TileClassPhase]


@dataclass(eq=False)
class SelectionProblem:
    capture: Capture
    machine: Machine
    tiles: int
    table_budget: int
    fragment_limit: int
    scans: list[GroupScan]
    direct: ProgramCost
    phases: list[PhaseData] = field(default_factory=list)
    tile_classes: list[TileClass] = field(default_factory=list)
    explicit: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # tiles the model names one by one
    # budget-independent results shared by every budget of a sweep (the dict survives dataclasses.replace)
    shared: dict[str, Any] = field(default_factory=dict)


def pinned_tiles(direct: ProgramCost) -> np.ndarray:
    """Per phase (capture order) and tile, whether the row takes part in a shared table (``Sharing.pinned``).
    Changing such a row would change what another phase is charged, which the model's per-phase deltas do not
    see, so the selection keeps these rows as they are: no relay is hosted there, no group with such a replica is
    offered an option, and a group with such a sender no local-pack option (a direct-receive gather leaves its
    senders' rows as they were: the same sends, from the same addresses)."""
    if direct.sharing is None:
        return np.zeros((len(direct.phases), int(direct.table_bytes.shape[0])), bool)
    return direct.sharing.pinned()


# Segmentations per group the options are made of (``options._segmentations``: 1, the native count, the most, and
# the rest spread evenly). Six, not four: the cuts between 2 and the native count (3, 6) are what let the segments
# of the large operands pack under a flat worst tile (docs/selection.md, "What is chosen").
SEGMENTATIONS = 6

SHARED_ROW = "a replica's row shares its table with another phase's (docs/cost.md)"


def selection_scans(capture: Capture, direct: ProgramCost, full: list[GroupScan] | None = None) -> list[GroupScan]:
    """The replica groups the optimiser may relay: every gainful group (``groups.gainful``; ``full`` is the
    capture's full scan when the caller has it), except those with a replica whose row is pinned
    (``pinned_tiles``), which stay direct with the reason."""
    scans = [gainful(s) for s in full] if full is not None else scan_capture(capture)
    for scan, pin in zip(scans, pinned_tiles(direct), strict=True):
        if not pin.any():
            continue
        keep = []
        for g in scan.groups:
            touched = g.replicas.astype(np.int64)
            hit = touched[pin[touched]]
            if hit.size == 0:
                keep.append(g)
                continue
            scan.rejected.append(Rejection(scan.phase, g.index, g.replica_count, g.fragments, SHARED_ROW,
                                           int(g.transfers[0])))
        scan.groups = keep
    return scans


def build_problem(capture: Capture, machine: Machine, table_budget: int, fragment_limit: int, *,
                  scans: list[GroupScan] | None = None, local_pack: bool = True,
                  max_counts: int = SEGMENTATIONS, aggregate: bool = True, direct: ProgramCost | None = None,
                  workers: int = 1) -> SelectionProblem:
    tiles = program_tiles(capture, machine)
    direct = direct if direct is not None else program_cost(capture, machine)
    scans = scans if scans is not None else selection_scans(capture, direct)
    problem = SelectionProblem(capture, machine, tiles, table_budget, fragment_limit, scans, direct)
    pinned = pinned_tiles(direct)
    next_id = max(capture.phase_ids(), default=0) + 1
    work = [(pi, phase, scan) for pi, (phase, scan) in enumerate(zip(capture.phases, scans, strict=True))
            if scan.groups]

    def effects(w: tuple[int, Phase, GroupScan]) -> tuple[PhaseState, PhaseMemory, list[list[Option]], np.ndarray]:
        pi, phase, scan = w
        state = PhaseState(phase, machine, tiles, capture.allocations)
        memory = PhaseMemory(capture, phase, machine)
        options = [group_options(state, g, machine, local_pack=local_pack and not pinned[pi][g.sources].any(),
                                 max_counts=max_counts) for g in scan.groups]
        gaps = memory.largest_gaps(tiles)
        gaps[pinned[pi][:tiles]] = 0  # a pinned row hosts nothing (see pinned_tiles)
        return state, memory, options, gaps

    # a phase's options do not depend on another phase's: phases are worked out on ``workers`` threads
    for (_, phase, _), (state, memory, options, gaps) in zip(
            work, track(ordered_map(effects, work, workers), "option effects", len(work), "phases"), strict=True):
        problem.phases.append(PhaseData(phase, capture.iterations(phase.phase), state, memory, options,
                                        state.raw_table()[:tiles], gaps, next_id))
        next_id += 1
    if aggregate:
        _aggregate_tiles(problem)
    else:
        problem.explicit = np.ones(tiles, bool)
    return problem


def _aggregate_tiles(problem: SelectionProblem) -> None:
    tiles = problem.tiles
    touched = np.zeros(tiles, bool)
    cap = 0
    for pd in problem.phases:
        for opts in pd.options:
            for op in opts[1:]:
                touched[op.tiles[op.tiles < tiles]] = True
                touched[op.group.replicas] = True
                cap = max(cap, int(op.buffer_bytes.max()))
    keys: dict[tuple[int, int, tuple[TileClassPhase, ...]], list[int]] = {}
    for t in np.flatnonzero(~touched).tolist():
        per_phase = []
        for pd in problem.phases:
            st = pd.state
            ctrl = int(st.controls()[t])
            per_phase.append(TileClassPhase(bool(st.used()[t]), int(pd.raw[t]), int(st.tx[t]), int(st.rx[t]), ctrl,
                                            min(int(pd.largest_gap[t]), cap)))
        key = (int(problem.direct.table_bytes[t]), int(problem.direct.fragments[t]), tuple(per_phase))
        keys.setdefault(key, []).append(t)
    explicit = touched.copy()
    for (table, frags, seen), members in keys.items():
        if len(members) == 1:
            explicit[members[0]] = True
            continue
        problem.tile_classes.append(TileClass(np.asarray(members, np.int64), table, frags, list(seen)))
    problem.explicit = explicit


LOAD_STEP = 1.5  # segments whose host rows are within this factor of each other share a load bucket


def bucket_hosts(problem: SelectionProblem) -> None:
    """Give every phase load-bucketed host classes: segments of one variant whose host rows lie within LOAD_STEP of
    each other share a class charged the bucket's heaviest figures field by field (conservative, never
    optimistic), and the tiles barred from each segment are left to the host matching (``realise``), whose result
    is re-costed exactly. A handful of classes per phase instead of one per segment, without the coarse model's
    charging of every host with the heaviest segment of the whole phase."""
    for pd in problem.phases:
        sigs = sorted({sig for opts in pd.options for op in opts[1:] for sig in op.signatures()})
        level: dict[tuple[int, int], list[HostClass]] = {}
        for sig in sigs:
            step = int(np.floor(np.log(max(sig.raw, 1)) / np.log(LOAD_STEP)))
            level.setdefault((sig.variant, step), []).append(sig)
        buckets: dict[HostClass, HostClass] = {}
        for members in level.values():
            # field by field the heaviest; no barred tiles (left to the host matching)
            top = HostClass._make([*(max(m[i] for m in members) for i in range(len(members[0]) - 1)), 0])
            for m in members:
                buckets[m] = top
        pd.buckets = buckets
