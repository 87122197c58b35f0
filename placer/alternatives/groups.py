"""Replica groups (docs/reference.md §4): the multicasts of one phase that deliver one replicated operand.

A group is every transfer of a phase with the same destination tile set D, |D| ≥ 2. It is *eligible* for a relay
when it is coordinate-preserving (each transfer lands at the same offset from every replica's base address, the
base being the lowest address the group writes on that replica) and its fragments do not overlap. Equal replica
extents follow from coordinate preservation. A group whose fragments already lie in as few contiguous runs as
there are fragments (typically a single fragment) has nothing to gain from a relay and is not offered one.
Ineligible groups stay direct, with the reason and the first offending transfer recorded.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.capture.model import Capture, PanelHint, Phase
from placer.progress import track
from placer.threads import ordered_map


@dataclass(eq=False)
class ReplicaGroup:
    phase: int
    index: int  # numbering within the phase, in order of first appearance in the listing
    transfers: np.ndarray  # int64 indices into the phase, sorted by offset
    replicas: np.ndarray  # int32 sorted destination tiles
    bases: np.ndarray  # int64 base address on each replica (same order as replicas)
    offsets: np.ndarray  # int64 offset of each transfer (same order as transfers)
    nbytes: np.ndarray  # int64 bytes of each transfer
    sources: np.ndarray  # int32 source tile of each transfer
    extent: int  # E: the replica extent in bytes (panel hint's, when given, else the end of the last fragment)
    hint: PanelHint | None = None  # the capture's panel hint (``splits = False``: the operand has no native panels)
    runs: int = 0  # contiguous runs its fragments form on a replica (a relay forwards about this many intervals)

    @property
    def fragments(self) -> int:
        return int(self.transfers.shape[0])

    @property
    def replica_count(self) -> int:
        return int(self.replicas.shape[0])

    @property
    def covered_bytes(self) -> int:
        return int(self.nbytes.sum())

    def key(self) -> tuple[int, int]:
        return (self.phase, self.index)


DUPLICATE_TILE = "a transfer lists the same destination tile twice"
SKEWED = "not coordinate-preserving: offsets differ between replicas"
OVERLAP = "fragments overlap"
# Rejections that the reference makes per transfer: it drops the offending transfer (or keeps both overlapping
# ones), its group's panels then miss (or double) bytes, and the whole phase's candidate is abandoned. The other
# rejections are of the group as a whole and leave only that group direct.
TRANSFER_LEVEL = frozenset({DUPLICATE_TILE, SKEWED, OVERLAP})


@dataclass(frozen=True)
class Rejection:
    """Why a multicast group stays direct."""

    phase: int
    index: int
    replicas: int
    transfers: int
    reason: str
    transfer: int  # first offending transfer index in the phase

    @property
    def transfer_level(self) -> bool:
        """True when the reason lies in a transfer (``TRANSFER_LEVEL``): the production rule keeps the whole
        phase direct."""
        return self.reason in TRANSFER_LEVEL


@dataclass(eq=False)
class GroupScan:
    phase: int
    groups: list[ReplicaGroup]
    rejected: list[Rejection]


NOTHING_TO_GAIN = "nothing to gain: every fragment is already its own contiguous run"
NO_PANELS = "its operand does not split into native panels (the capture's panel hint says so)"


def gainful(scan: GroupScan) -> GroupScan:
    """The groups the optimiser considers: a relay can merge their fragments (fewer runs than fragments) and their
    operand splits into panels (a row-major weight block, whose panels are strided, is left direct: relaying it
    whole would save each replica at most a receive or two)."""
    keep, rejected = [], list(scan.rejected)
    for g in scan.groups:
        why = NOTHING_TO_GAIN if g.runs >= g.fragments else NO_PANELS if g.hint is not None and not g.hint.splits \
            else None
        if why is None:
            keep.append(g)
        else:
            rejected.append(Rejection(g.phase, g.index, g.replica_count, g.fragments, why, int(g.transfers[0])))
    return GroupScan(scan.phase, keep, rejected)


def scan_phase(phase: Phase, hints: dict[tuple[int, tuple[int, ...]], PanelHint] | None = None, *,
               gainful_only: bool = True) -> GroupScan:
    """Find the replica groups of one phase, vectorised over its transfers.

    ``gainful_only=False`` keeps every eligible group (docs/reference.md §4), as the production rule (§5 there) needs;
    ``gainful_only=True`` is ``gainful`` of that, what the optimiser considers.
    """
    hints = hints or {}
    groups: list[ReplicaGroup] = []
    rejected: list[Rejection] = []
    if phase.n == 0:
        return GroupScan(phase.phase, groups, rejected)
    fan = phase.fanout
    multi = np.flatnonzero(fan >= 2)
    if multi.size == 0:
        return GroupScan(phase.phase, groups, rejected)
    ids = phase.dst_set_ids()[multi]
    order = np.lexsort((multi, ids))
    ids_sorted = ids[order]
    members_sorted = multi[order]
    cuts = np.flatnonzero(np.diff(ids_sorted)) + 1
    starts = np.concatenate([[0], cuts])
    ends = np.concatenate([cuts, [len(order)]])
    # number groups by first appearance in the listing, so the numbering is stable and readable
    firsts = members_sorted[starts]
    rank = np.empty(starts.shape[0], np.int64)
    rank[np.argsort(firsts, kind="stable")] = np.arange(starts.shape[0])
    for g in _check_groups(phase, members_sorted, starts, ends, rank, hints):
        if isinstance(g, Rejection):
            rejected.append(g)
        else:
            groups.append(g)
    groups.sort(key=lambda g: g.index)
    rejected.sort(key=lambda r: r.index)
    scan = GroupScan(phase.phase, groups, rejected)
    return gainful(scan) if gainful_only else scan


def scan_phase_reference(phase: Phase, hints: dict[tuple[int, tuple[int, ...]], PanelHint] | None = None
                         ) -> GroupScan:
    """The same scan one group at a time (``_check_group``): the plain reading the vectorised scan is tested
    against."""
    hints = hints or {}
    groups: list[ReplicaGroup] = []
    rejected: list[Rejection] = []
    multi = np.flatnonzero(phase.fanout >= 2)
    if multi.size == 0:
        return GroupScan(phase.phase, groups, rejected)
    ids = phase.dst_set_ids()[multi]
    order = np.lexsort((multi, ids))
    ids_sorted, members_sorted = ids[order], multi[order]
    cuts = np.flatnonzero(np.diff(ids_sorted)) + 1
    starts, ends = np.concatenate([[0], cuts]), np.concatenate([cuts, [len(order)]])
    for index, g in enumerate(np.argsort(members_sorted[starts], kind="stable")):
        group = _check_group(phase, index, members_sorted[starts[g]: ends[g]], hints)
        if isinstance(group, Rejection):
            rejected.append(group)
        else:
            groups.append(group)
    return GroupScan(phase.phase, groups, rejected)


def _check_groups(phase: Phase, members: np.ndarray, starts: np.ndarray, ends: np.ndarray, rank: np.ndarray,
                  hints: dict[tuple[int, tuple[int, ...]], PanelHint]) -> list[ReplicaGroup | Rejection]:
    """``_check_group`` for every group at once: groups of equal fan-out are one (transfers x replicas) matrix, so
    a phase of 200k transfers in 20k groups costs a few numpy passes instead of 20k small ones."""
    out: list[ReplicaGroup | Rejection] = []
    fan_all = phase.fanout
    gsize = ends - starts
    gfan = fan_all[members[starts]]
    group_of = np.repeat(np.arange(starts.shape[0]), gsize)  # position in ``members`` -> group
    for f in np.unique(gfan).tolist():
        sel_groups = np.flatnonzero(gfan == f)
        rows_pos = np.concatenate([np.arange(starts[g], ends[g]) for g in sel_groups.tolist()]) \
            if sel_groups.shape[0] < 64 else np.flatnonzero(np.isin(group_of, sel_groups))
        tr = members[rows_pos]  # transfers, grouped, each group's in listing order
        grp = group_of[rows_pos]
        first = phase.dst_ptr[tr]
        idx = first[:, None] + np.arange(f)[None, :]
        tiles = phase.dst_tile[idx]
        addrs = phase.dst_addr[idx]
        if not (np.diff(tiles, axis=1) > 0).all():  # captures usually list destinations by tile already
            by_tile = np.argsort(tiles, axis=1, kind="stable")
            tiles = np.take_along_axis(tiles, by_tile, axis=1)
            addrs = np.take_along_axis(addrs, by_tile, axis=1)
        g_start = np.flatnonzero(np.r_[True, grp[1:] != grp[:-1]])
        g_ids = grp[g_start]
        n_rows = np.diff(np.r_[g_start, grp.shape[0]])
        dup_row = (np.diff(tiles, axis=1) == 0).any(axis=1)
        bases = np.minimum.reduceat(addrs, g_start, axis=0)  # (groups, f)
        offsets = addrs - np.repeat(bases, n_rows, axis=0)
        skew_row = (offsets != offsets[:, :1]).any(axis=1)
        off = offsets[:, 0]
        nb = phase.nbytes[tr]
        # within each group: fragments by offset (ties in listing order)
        srt = np.lexsort((np.arange(tr.shape[0]), off, grp))
        off_s, nb_s, tr_s, grp_s = off[srt], nb[srt], tr[srt], grp[srt]
        same = np.r_[grp_s[1:] == grp_s[:-1], False]
        gap_next = np.r_[off_s[1:] - (off_s[:-1] + nb_s[:-1]), 0]
        overlap_at = same & (gap_next < 0)  # the fragment after this one overlaps it
        new_run = same & (gap_next != 0)
        sg_start = np.flatnonzero(np.r_[True, grp_s[1:] != grp_s[:-1]])
        runs = 1 + np.add.reduceat(new_run.astype(np.int64), sg_start)
        ov_any = np.add.reduceat(overlap_at.astype(np.int64), sg_start) > 0
        last = np.r_[sg_start[1:], grp_s.shape[0]] - 1
        extent = off_s[last] + nb_s[last]
        dup_g = np.add.reduceat(dup_row.astype(np.int64), g_start) > 0
        skew_g = np.add.reduceat(skew_row.astype(np.int64), g_start) > 0
        for k, g in enumerate(g_ids.tolist()):
            index = int(rank[g])
            a, b = int(g_start[k]), int(g_start[k]) + int(n_rows[k])
            sa, sb = int(sg_start[k]), int(last[k]) + 1

            def reject(reason: str, transfer: int, g: int = g, index: int = index, f: int = f) -> Rejection:
                return Rejection(phase.phase, index, f, int(gsize[g]), reason, transfer)

            if dup_g[k]:
                out.append(reject(DUPLICATE_TILE,
                                  int(tr[a + int(np.argmax(dup_row[a:b]))])))
                continue
            if skew_g[k]:
                out.append(reject(SKEWED,
                                  int(tr[a + int(np.argmax(skew_row[a:b]))])))
                continue
            if ov_any[k]:
                out.append(reject(OVERLAP, int(tr_s[sa + int(np.argmax(overlap_at[sa:sb])) + 1])))
                continue
            replicas = tiles[a]
            ext = int(extent[k])
            hint = hints.get((phase.phase, tuple(replicas.tolist())))
            if hint is not None and hint.splits:
                if hint.boundaries[-1] < ext:
                    out.append(reject(f"panel hint extent {hint.boundaries[-1]} is shorter than the data ({ext})",
                                      int(tr[a])))
                    continue
                ext = hint.boundaries[-1]
            t_sorted = tr_s[sa:sb].astype(np.int64)
            out.append(ReplicaGroup(
                phase=phase.phase, index=index, transfers=t_sorted, replicas=replicas.astype(np.int32),
                bases=bases[k].astype(np.int64), offsets=off_s[sa:sb].astype(np.int64),
                nbytes=nb_s[sa:sb].astype(np.int64), sources=phase.source[t_sorted], extent=ext, hint=hint,
                runs=int(runs[k])))
    return out


def _check_group(
    phase: Phase, index: int, members: np.ndarray, hints: dict[tuple[int, tuple[int, ...]], PanelHint],
) -> ReplicaGroup | Rejection:
    fan = int(phase.fanout[members[0]])
    starts = phase.dst_ptr[members]
    # destinations of every member as a (transfers × replicas) matrix, each row sorted by tile
    idx = starts[:, None] + np.arange(fan)[None, :]
    tiles = phase.dst_tile[idx]
    addrs = phase.dst_addr[idx]
    row_order = np.argsort(tiles, axis=1, kind="stable")
    tiles = np.take_along_axis(tiles, row_order, axis=1)
    addrs = np.take_along_axis(addrs, row_order, axis=1)
    replicas = tiles[0]

    def reject(reason: str, at: int) -> Rejection:
        return Rejection(phase.phase, index, fan, len(members), reason, int(members[at]))

    dup = np.flatnonzero((np.diff(tiles, axis=1) == 0).any(axis=1))
    if dup.size:
        return reject(DUPLICATE_TILE, int(dup[0]))
    bases = addrs.min(axis=0)
    offsets = addrs - bases[None, :]
    skew = np.flatnonzero((offsets != offsets[:, :1]).any(axis=1))
    if skew.size:
        return reject(SKEWED, int(skew[0]))
    off = offsets[:, 0]
    nbytes = phase.nbytes[members]
    by_offset = np.argsort(off, kind="stable")
    off_s, nb_s = off[by_offset], nbytes[by_offset]
    overlap = np.flatnonzero(off_s[1:] < off_s[:-1] + nb_s[:-1])
    if overlap.size:
        return reject(OVERLAP, int(by_offset[overlap[0] + 1]))
    runs = 1 + int((off_s[1:] != off_s[:-1] + nb_s[:-1]).sum())
    extent = int(off_s[-1] + nb_s[-1])
    hint = hints.get((phase.phase, tuple(int(t) for t in replicas)))
    if hint is not None and hint.splits:
        if hint.boundaries[-1] < extent:
            return reject(f"panel hint extent {hint.boundaries[-1]} is shorter than the data ({extent})", 0)
        extent = hint.boundaries[-1]
    return ReplicaGroup(
        phase=phase.phase,
        index=index,
        transfers=members[by_offset],
        replicas=replicas.astype(np.int32),
        bases=bases.astype(np.int64),
        offsets=off_s.astype(np.int64),
        nbytes=nb_s.astype(np.int64),
        sources=phase.source[members[by_offset]],
        extent=extent,
        hint=hint,
        runs=runs,
    )


def panel_index(capture: Capture) -> dict[tuple[int, tuple[int, ...]], PanelHint]:
    return {(h.phase, h.tiles): h for h in capture.panels}


def scan_capture(capture: Capture, gainful_only: bool = True, workers: int = 1) -> list[GroupScan]:
    """Every phase's scan (phases scanned on ``workers`` threads)."""
    hints = panel_index(capture)
    scans = ordered_map(lambda p: scan_phase(p, hints, gainful_only=gainful_only), capture.phases, workers)
    return list(track(scans, "scan replica groups", len(capture.phases), "phases"))
