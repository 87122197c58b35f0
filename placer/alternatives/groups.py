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

from placer.arrays import isin, unique
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
    # the production rule's groups (``scan_buffers``): the destination buffer of each replica (the start of the
    # live allocation holding it; -1 where the capture has none) -- the key groups are formed and ordered by
    buffers: np.ndarray | None = None
    # fragments cut at panel bounds (``split_at``): bytes from the start of its transfer where each piece begins
    # (a transfer then appears once per piece in ``transfers``); None: every fragment is a whole transfer
    skip: np.ndarray | None = None

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


SHARED_BYTES = "another transfer of the phase writes some of the same bytes (a relay would reorder the writes)"


class SharedBytes:
    """The phase's destination byte ranges that overlap on a tile, as runs (a run: ranges on one tile, each
    starting before the ones before it end): which transfers write into each run with another transfer."""

    def __init__(self, phase: Phase) -> None:
        self.runs: dict[int, set[int]] = {}  # run -> the transfers writing into it
        self.of: dict[int, set[int]] = {}  # transfer -> its runs shared with another transfer
        if not _overlapping(phase):
            return
        owner = phase.dst_transfer()
        tile = phase.dst_tile.astype(np.int64)
        start = phase.dst_addr.astype(np.int64)
        end = start + phase.nbytes.astype(np.int64)[owner]
        o = np.lexsort((start, tile))
        t, a, e, w = tile[o], start[o], end[o], owner[o]
        # the furthest end so far on the tile: addresses are below 2^40, so offsetting by the tile keeps tiles apart
        reach = np.maximum.accumulate(e + (t << 40)) - (t << 40)
        fresh = np.r_[True, (t[1:] != t[:-1]) | (a[1:] >= reach[:-1])] if t.size else np.zeros(0, bool)
        run = np.cumsum(fresh) - 1
        shared = np.bincount(run)[run] > 1 if t.size else np.zeros(0, bool)
        for r, x in zip(run[shared].tolist(), w[shared].tolist(), strict=True):
            self.runs.setdefault(r, set()).add(x)
            self.of.setdefault(x, set()).add(r)
        for r in [r for r, xs in self.runs.items() if len(xs) < 2]:  # one transfer's own ranges overlapping
            for x in self.runs.pop(r):
                self.of[x].discard(r)

    def foreign(self, transfers: np.ndarray) -> int | None:
        """A transfer outside ``transfers`` that writes some of their bytes, or None."""
        if not self.runs:
            return None
        mine = set(transfers.tolist())
        for x in mine:
            for r in self.of.get(x, ()):
                other = self.runs[r] - mine
                if other:
                    return min(other)
        return None


def _overlapping(phase: Phase) -> bool:
    """Whether any two of the phase's destination ranges overlap on a tile, read from its cached write runs (about
    a thousandth of its entries: ranges that follow each other back to back are one run, so overlapping ranges lie
    in overlapping runs)."""
    tile, start, end = phase.dst_runs()
    if tile.size < 2:
        return False
    o = np.lexsort((start, tile))
    t, a, e = tile[o].astype(np.int64), start[o].astype(np.int64), end[o].astype(np.int64)
    reach = np.maximum.accumulate(e + (t << 40)) - (t << 40)
    return bool(((t[1:] == t[:-1]) & (a[1:] < reach[:-1])).any())


def refuse_shared_bytes(phase: Phase, found: list[ReplicaGroup | Rejection]) -> list[ReplicaGroup | Rejection]:
    """``found`` with each group whose bytes another transfer of the phase also writes (on a replica) turned into
    a rejection: the original's last writer would no longer be last once the group's bytes arrive by a forward.
    Compiled programs never write one byte twice in a phase; a capture may (docs/reference.md §4). placer's scan;
    the production rule's mirror checks the same after the reference's own checks (``greedy.decide_phase``)."""
    shared = SharedBytes(phase)
    if not shared.runs:
        return found
    out: list[ReplicaGroup | Rejection] = []
    for g in found:
        x = shared.foreign(g.transfers) if isinstance(g, ReplicaGroup) else None
        out.append(g if x is None or not isinstance(g, ReplicaGroup) else
                   Rejection(g.phase, g.index, g.replica_count, g.fragments, SHARED_BYTES, x))
    return out


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
    for g in refuse_shared_bytes(phase, _check_groups(phase, members_sorted, starts, ends, rank, hints)):
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
    found = [_check_group(phase, index, members_sorted[starts[g]: ends[g]], hints)
             for index, g in enumerate(np.argsort(members_sorted[starts], kind="stable"))]
    for group in refuse_shared_bytes(phase, found):
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
    for f in unique(gfan).tolist():
        sel_groups = np.flatnonzero(gfan == f)
        rows_pos = np.concatenate([np.arange(starts[g], ends[g]) for g in sel_groups.tolist()]) \
            if sel_groups.shape[0] < 64 else np.flatnonzero(isin(group_of, sel_groups))
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


# -- the production rule's grouping (docs/reference.md §5): destination buffers, transfers judged one by one -------


@dataclass(eq=False)
class BufferScan:
    """One phase as the production rule sees it: its multicasts grouped by their sorted list of destination buffers
    (``groups``, in that list's order), the transfers it leaves direct on their own (``dropped_count``, the first
    few in ``dropped``: the rest of the phase is still considered), and the groups that stay direct as a whole."""

    phase: int
    groups: list[ReplicaGroup]
    rejected: list[Rejection]
    dropped: list[Rejection]
    dropped_count: int = 0


MAX_DROPPED = 5  # ineligible transfers listed per phase (all are counted)


def _live_buffers(allocations: object, phase_id: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The allocations live in the phase as (tile << 33 | start) keys, sorted, with their starts and ends."""
    from placer.capture.model import Allocations

    if not isinstance(allocations, Allocations) or not len(allocations):
        z = np.zeros(0, np.int64)
        return z, z, z
    live = np.flatnonzero((allocations.first <= phase_id) & (allocations.last >= phase_id))
    key = (allocations.tile[live].astype(np.int64) << 33) | allocations.start[live].astype(np.int64)
    order = np.argsort(key, kind="stable")
    return key[order], allocations.start[live][order].astype(np.int64), allocations.end[live][order].astype(np.int64)


def _buffer_keys(set_ids: np.ndarray, tiles: np.ndarray, buf: np.ndarray) -> np.ndarray:
    """A dense id per transfer (rows of ``tiles``/``buf``, destinations sorted by tile) such that equal ids mean
    equal lists of destination (tile, buffer): the tile set's id, then two random 64-bit signatures of the buffers,
    checked exactly afterwards (``np.unique`` over the rows where a check fails, which a collision of both would
    take, about 2^-128)."""
    if not (buf >= 0).any():
        return np.unique(set_ids, return_inverse=True)[1].reshape(-1)
    rng = np.random.default_rng(0xB0FFE25)
    r1, r2 = rng.integers(1, 2**63, size=(2, buf.shape[1]), dtype=np.int64).view(np.uint64)
    b = buf.view(np.uint64)
    with np.errstate(over="ignore"):
        h1 = (b * r1[None, :]).sum(axis=1).view(np.int64)
        h2 = (b * r2[None, :]).sum(axis=1).view(np.int64)
    order = np.lexsort((h2, h1, set_ids))
    s_id, s1, s2 = set_ids[order], h1[order], h2[order]
    new = np.r_[True, (s_id[1:] != s_id[:-1]) | (s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1])]
    run = np.cumsum(new) - 1
    head = order[np.flatnonzero(new)][run]
    if not ((buf[order] == buf[head]).all() and (tiles[order] == tiles[head]).all()):
        return np.unique(np.concatenate([tiles, buf], axis=1), axis=0, return_inverse=True)[1].reshape(-1)
    ids = np.empty(set_ids.shape[0], np.int64)
    ids[order] = run
    return ids


def scan_buffers(phase: Phase, hints: dict[tuple[int, tuple[int, ...]], PanelHint] | None = None,
                 allocations: object = None) -> BufferScan:
    """The production rule's groups of one phase (docs/reference.md §5, ``relay.rs``'s ``candidate()``).

    A destination's *buffer* is the allocation of the capture's ``allocations`` extension, live in the phase, that
    holds its address on its tile (the reference groups by destination shards). Each transfer is judged on its own:
    one that names a destination tile twice, or lands at different offsets from its group's lowest address on each
    replica (the reference's "destination extents equal to the source's"), stays direct and the rest of the phase is
    still considered. The others are grouped by their sorted list of destination buffers: two operands sent to the
    same tiles are two groups. A destination in no live allocation (every destination of a capture without the
    extension) has its tile's one unnamed buffer, which is placer's tile-set grouping of before. A transfer's
    offsets are measured from its group's lowest address on each replica (an allocation is a storage root and may
    hold several operands, at offsets that differ from tile to tile); one whose offsets differ between replicas is
    left direct and the group's bases are taken over the rest. Overlapping transfers are kept: the panel check finds
    them (``split_at`` and the rule's coverage test)."""
    hints = hints or {}
    pid = phase.phase
    empty = BufferScan(pid, [], [], [])
    if phase.n == 0:
        return empty
    fan_all = phase.fanout
    multi = np.flatnonzero(fan_all >= 2)
    if multi.size == 0:
        return empty
    a_key, a_start, a_end = _live_buffers(allocations, pid)
    nb_all = phase.nbytes
    dropped: list[Rejection] = []
    dropped_count = 0
    # (first transfer, group or its rejection, the rule's order key)
    found: list[tuple[int, ReplicaGroup | Rejection, tuple[tuple[int, ...], tuple[int, ...]]]] = []

    def drop(tr: np.ndarray, reason: str, f: int) -> None:
        nonlocal dropped_count
        dropped_count += int(tr.shape[0])
        for t in tr[: max(0, MAX_DROPPED - len(dropped))].tolist():
            dropped.append(Rejection(pid, -1, f, 1, reason, int(t)))

    fan_multi = fan_all[multi]
    for f in unique(fan_multi).tolist():
        tr = multi[fan_multi == f]  # listing order
        idx = phase.dst_ptr[tr][:, None] + np.arange(f)[None, :]
        tiles = phase.dst_tile[idx].astype(np.int64)
        addrs = phase.dst_addr[idx].astype(np.int64)
        if not (np.diff(tiles, axis=1) > 0).all():
            by_tile = np.argsort(tiles, axis=1, kind="stable")
            tiles = np.take_along_axis(tiles, by_tile, axis=1)
            addrs = np.take_along_axis(addrs, by_tile, axis=1)
        dup = (np.diff(tiles, axis=1) == 0).any(axis=1)
        if a_key.size:
            k = np.searchsorted(a_key, (tiles << 33) | addrs, side="right") - 1
            kk = np.maximum(k, 0)
            inside = (k >= 0) & ((a_key[kk] >> 33) == tiles) & (a_end[kk] > addrs)
            buf = np.where(inside, a_start[kk], -1)
        else:
            inside = np.zeros(tiles.shape, bool)
            buf = np.full(tiles.shape, -1, np.int64)
        if dup.any():
            drop(tr[dup], DUPLICATE_TILE, f)
        keep = ~dup
        if not keep.any():
            continue
        tr, tiles, addrs, buf = tr[keep], tiles[keep], addrs[keep], buf[keep]
        inv = _buffer_keys(phase.dst_set_ids()[tr], tiles, buf)
        order = np.lexsort((tr, inv))
        tr, tiles, addrs, buf, inv = tr[order], tiles[order], addrs[order], buf[order], inv[order]
        while True:  # a transfer skewed against its group's bases is dropped, the bases taken over the rest (once)
            g_start = np.flatnonzero(np.r_[True, inv[1:] != inv[:-1]])
            n_rows = np.diff(np.r_[g_start, inv.shape[0]])
            bases = np.minimum.reduceat(addrs, g_start, axis=0)
            offsets = addrs - np.repeat(bases, n_rows, axis=0)
            skew = (offsets != offsets[:, :1]).any(axis=1)
            if not skew.any():
                break
            drop(tr[skew], SKEWED, f)
            tr, tiles, addrs, buf, inv = tr[~skew], tiles[~skew], addrs[~skew], buf[~skew], inv[~skew]
            if not tr.size:
                break
        if not tr.size:
            continue
        off = offsets[:, 0]
        nb = nb_all[tr]
        grp = np.repeat(np.arange(g_start.shape[0]), n_rows)
        srt = np.lexsort((tr, off, grp))  # within each group: by offset, ties in listing order
        off_s, nb_s, tr_s = off[srt], nb[srt], tr[srt]
        same = np.r_[grp[srt][1:] == grp[srt][:-1], False]
        gap_next = np.r_[off_s[1:] - (off_s[:-1] + nb_s[:-1]), 0]
        runs = 1 + np.add.reduceat((same & (gap_next != 0)).astype(np.int64), g_start)
        data_end = np.maximum.reduceat(off_s + nb_s, g_start)
        firsts = np.minimum.reduceat(tr, g_start)
        for k in range(g_start.shape[0]):
            a, b = int(g_start[k]), int(g_start[k] + n_rows[k])
            replicas = tiles[a]
            ext = int(data_end[k])
            hint = hints.get((pid, tuple(replicas.tolist())))
            if hint is not None and hint.splits:
                if hint.boundaries[-1] < ext:
                    found.append((int(firsts[k]), Rejection(pid, -1, f, b - a, f"panel hint extent "
                                                           f"{hint.boundaries[-1]} is shorter than the data ({ext})",
                                                           int(tr_s[a])), ((), ())))
                    continue
                ext = int(hint.boundaries[-1])
            t_sorted = tr_s[a:b].astype(np.int64)
            bufs = buf[a]
            # the rule's order: sorted destination lists -- tiles first (shard ids are not in a capture), then buffers
            order_key = (tuple(replicas.tolist()), tuple(np.where(bufs >= 0, bufs, bases[k]).tolist()))
            found.append((int(firsts[k]), ReplicaGroup(
                phase=pid, index=-1, transfers=t_sorted, replicas=replicas.astype(np.int32),
                bases=bases[k].astype(np.int64), offsets=off_s[a:b].astype(np.int64),
                nbytes=nb_s[a:b].astype(np.int64), sources=phase.source[t_sorted], extent=ext, hint=hint,
                runs=int(runs[k]), buffers=bufs.astype(np.int64)), order_key))
    # number groups by first appearance in the listing (as ``scan_phase`` does)
    found.sort(key=lambda x: x[0])
    groups: list[tuple[tuple[tuple[int, ...], tuple[int, ...]], ReplicaGroup]] = []
    rejected: list[Rejection] = []
    for i, (_, g, key) in enumerate(found):
        if isinstance(g, Rejection):
            rejected.append(Rejection(g.phase, i, g.replicas, g.transfers, g.reason, g.transfer))
        else:
            g.index = i
            groups.append((key, g))
    groups.sort(key=lambda x: x[0])
    return BufferScan(pid, [g for _, g in groups], rejected, dropped, dropped_count)
