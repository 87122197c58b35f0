"""Every alternative of every eligible group, with its exact per-tile effect, for the selection model.

An option's effect splits in two parts:
- on the group's own tiles (its replicas and senders): a delta of raw table bytes, fragments, transmit/receive bytes
  and controls against the direct phase, computed on each replica's real receive sequence (the group's entries
  removed, the forwards appended at the end of the phase, as the rewrite lists them);
- on each relay host: a load per segment that does not depend on which tile hosts it, except for the phase-entry
  bytes a host pays if it had no other traffic in the phase (added by the model per tile).
Deltas of two groups on one replica are exact one at a time; where they interact (a pointer reset at the seam
between two groups' entries) the selection re-costs the realised plan exactly and tightens the model if needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from placer.alternatives.groups import ReplicaGroup
from placer.alternatives.relay import Variant, cut_runs, source_joins
from placer.alternatives.segments import Segmentation, candidate_counts, native, with_count
from placer.arrays import union1d, unique
from placer.capture.model import csr_gather
from placer.cost.model import BAND_SHIFT, receive_resets, tile_resets
from placer.cost.state import PhaseState
from placer.machine import Machine


class HostClass(NamedTuple):
    """Everything a relay host's cost depends on, and which tiles may host the segment: segments with equal host
    classes are interchangeable for every constraint and objective of the selection model (docs/selection.md,
    "Why the aggregation stays exact"). A tuple, so classes hash, compare and sort as before they had names."""

    variant: int  # 0 direct-receive, 1 local-pack
    kernel: int  # local-pack kernel cycles (0 for direct-receive)
    raw: int  # the host's table bytes in the phase, before rounding, without its phase entry
    frag: int
    tx: int
    rx: int
    ctrl: int
    buffer: int  # relay memory the segment needs on its host
    ext_raw: int  # local-pack: the host's load in the extra phase (0 for direct-receive)
    ext_frag: int
    ext_tx: int
    ext_ctrl: int
    barred: int  # key of the tiles that may not host the segment (its group's replicas, its senders); 0: none


@dataclass(frozen=True, eq=False)
class Load:
    """Per-segment (or per-tile) counters; every field an int64 array of the same length."""

    raw: np.ndarray  # table bytes before rounding, without the phase-entry bytes
    frag: np.ndarray
    tx: np.ndarray
    rx: np.ndarray
    ctrl: np.ndarray


@dataclass(eq=False)
class Option:
    group: ReplicaGroup
    variant: Variant
    seg: Segmentation | None
    tiles: np.ndarray  # tiles of the group whose counters change in the phase (replicas, senders)
    delta: Load  # change of those tiles' counters in the phase (raw includes entry changes)
    host: Load | None  # per segment, in the phase
    ext_tiles: np.ndarray  # local-pack: replicas active in the extra phase
    ext: Load | None  # local-pack: per replica, in the extra phase (without entry)
    ext_host: Load | None  # local-pack: per segment, in the extra phase (without entry)
    kernel_cycles: int
    buffer_bytes: np.ndarray  # per segment: relay memory needed
    banned: list[np.ndarray]  # per segment: tiles that may not host it (replicas and its senders)

    @property
    def count(self) -> int:
        return 0 if self.seg is None else self.seg.count

    @property
    def scratch(self) -> int:
        return int(self.buffer_bytes.sum())

    def signatures(self) -> list[HostClass]:
        """Per segment, its exact host class (:class:`HostClass`)."""
        if self.host is None:
            return []
        kind = 0 if self.variant == "direct-receive" else 1
        h = self.host
        e = self.ext_host if self.ext_host is not None else Load(*[np.zeros(self.count, np.int64)] * 5)
        # hash() of a tuple of ints is not salted, so the key is stable from run to run
        return [HostClass(kind, self.kernel_cycles if kind else 0, int(h.raw[s]), int(h.frag[s]), int(h.tx[s]),
                          int(h.rx[s]), int(h.ctrl[s]), int(self.buffer_bytes[s]), int(e.raw[s]), int(e.frag[s]),
                          int(e.tx[s]), int(e.ctrl[s]), hash(tuple(self.banned[s].tolist())))
                for s in range(self.count)]

    @property
    def name(self) -> str:
        if self.variant == "direct":
            return "direct"
        return f"{'DR' if self.variant == 'direct-receive' else 'LP'}{self.count}"


def group_options(state: PhaseState, group: ReplicaGroup, machine: Machine, *, local_pack: bool = True,
                  max_counts: int = 6) -> list[Option]:
    """The direct option plus direct-receive (and local-pack) options for the group's candidate counts.

    A group has about a thousand fragments and up to ``max_counts`` segmentations; what costs is the number of
    array passes, not their length. So whatever does not depend on the segmentation (the replicas' sequences
    without the group, the senders, the holes, where source runs may join) is worked out once, and every
    segmentation's segments are counted in one pass over all of them laid end to end (``_segments``); each
    option's arrays are then slices of those."""
    phase = state.phase
    cost = machine.cost
    max_bytes = machine.exchange.max_transfer_words * 4
    long_limit = machine.exchange.send_count_words * 4
    replicas = group.replicas.astype(np.int64)
    nrep = len(replicas)
    removed = state.removed.copy()
    removed[group.transfers] = True
    # replicas' receive sequences without the group
    rec0 = state.receives[replicas]
    res0 = state.resets[replicas]
    sends_r = state.sends[replicas]
    longs_r = state.long_sends[replicas]
    raw0 = state.raw_table()[replicas]
    ctrl0 = cost.controls(sends_r, rec0, res0)
    rec1, res1, last_start, last_end = _remaining_receives(state, replicas, removed)
    covered = int(group.nbytes.sum())

    direct = Option(group, "direct", None, np.zeros(0, np.int64), _zero(0), None, np.zeros(0, np.int64), None, None,
                    0, np.zeros(0, np.int64), [])
    segs = _segmentations(group, max_counts)
    sg = _segments(group, segs, replicas, max_bytes, long_limit)
    ns = sg.first[-1]
    no = np.zeros(ns, bool)
    zero = np.zeros(ns, np.int64)
    one = np.ones(ns, np.int64)

    # direct-receive: replicas get the forwards instead of the group's fragments (a row per segmentation), with a
    # pointer reset at the first forward unless it continues the replica's last receive and one per hole between
    # fragments; a gather replaces each multicast one for one, so the senders' counters do not change
    rec2 = rec1 + sg.forwards[:, None]
    first_fwd = group.bases + group.offsets[0]
    res2 = res1 + ((first_fwd != last_end) | _crosses(replicas, last_start, first_fwd, state.bounds)).astype(np.int64) \
        + sg.holes
    dr_tiles = replicas.copy()
    dr = np.zeros((len(segs), 5, len(dr_tiles)), np.int64)
    dr[:, 0] = cost.raw_table(sends_r, longs_r, rec2, res2, (sends_r + rec2) > 0) - raw0
    dr[:, 1] = rec2 - rec0
    dr[:, 4] = cost.controls(sends_r, rec2, res2) - ctrl0
    dr_host = Load(raw=cost.raw_table(sg.pieces, sg.long_pieces, sg.frags, sg.intervals, no),
                   frag=sg.frags + sg.pieces, tx=sg.cover, rx=sg.cover,
                   ctrl=cost.controls(sg.pieces, sg.frags, sg.intervals))
    if local_pack:
        # local-pack: the group leaves the phase; forwards arrive in the extra phase. A replica whose only traffic
        # was this group keeps its phase entry in the model: conservative by 8 bytes in that rare case (the tile
        # may host a relay, which would pay the entry back), never optimistic. Senders send one transfer per
        # source run instead of one per fragment: only sends change (the same tiles keep sending), so the formula
        # is applied to the send deltas alone
        snd = unique(group.sources.astype(np.int64))
        lp_tiles, lp_at_rep, lp_at_snd = _union(replicas, snd)
        lp_rep = np.zeros((5, len(lp_tiles)), np.int64)
        lp_rep[:, lp_at_rep] = [cost.raw_table(sends_r, longs_r, rec1, res1, (sends_r + rec0) > 0) - raw0,
                                rec1 - rec0, np.zeros(nrep, np.int64), -np.full(nrep, covered),
                                cost.controls(sends_r, rec1, res1) - ctrl0]
        at_src = np.searchsorted(snd, group.sources)
        rv = cut_runs(np.tile(group.offsets, len(segs)), np.tile(group.nbytes, len(segs)), sg.seg_of,
                      np.tile(source_joins(group, phase), len(segs)), max_bytes, len(segs))
        # per segmentation and sender: sends after the relay, by each run's first fragment, and before it
        by = sg.which[rv.segment] * len(snd) + at_src[np.searchsorted(group.offsets, rv.offset)]
        shape = (len(segs), len(snd))
        d_s = (np.bincount(by, minlength=shape[0] * shape[1]).reshape(shape)
               - np.bincount(at_src, minlength=len(snd))).astype(np.int64)
        d_l = (np.bincount(by, weights=rv.nbytes > long_limit, minlength=shape[0] * shape[1]).reshape(shape)
               - np.bincount(at_src, weights=group.nbytes > long_limit, minlength=len(snd))).astype(np.int64)
        z = np.zeros(shape, np.int64)
        lp = np.repeat(lp_rep[None], len(segs), axis=0)
        lp[:, 0, lp_at_snd] += cost.raw_table(d_s, d_l, z, z, z)
        lp[:, 1, lp_at_snd] += d_s
        lp[:, 4, lp_at_snd] += cost.controls(d_s, z, z)
        runs = rv.per_segment(ns)
        lp_host = Load(raw=cost.raw_table(zero, zero, runs, one, no), frag=runs, tx=zero, rx=sg.cover,
                       ctrl=cost.controls(zero, runs, one))
        ext_host = Load(raw=cost.raw_table(sg.pieces, sg.long_pieces, zero, zero, no), frag=sg.pieces, tx=sg.cover,
                        rx=zero, ctrl=cost.controls(sg.pieces, zero, zero))
        kernels = machine.local_pack.estimate(sg.extent)
        ext_res = 1 + sg.holes

    out = [direct]
    for i, seg in enumerate(segs):
        at = slice(sg.first[i], sg.first[i + 1])
        banned = sg.banned[at]
        out.append(Option(group, "direct-receive", seg, dr_tiles, Load(*dr[i]), _slice(dr_host, at),
                          np.zeros(0, np.int64), None, None, 0, sg.extent[at], banned))
        if not local_pack:
            continue
        m = int(sg.forwards[i])
        ext = Load(raw=np.full(nrep, int(cost.raw_table(0, 0, m, ext_res, 0))), frag=np.full(nrep, m),
                   tx=np.zeros(nrep, np.int64), rx=np.full(nrep, covered),
                   ctrl=np.full(nrep, int(cost.controls(np.int64(0), np.int64(m), np.int64(ext_res)))))
        out.append(Option(group, "local-pack", seg, lp_tiles, Load(*lp[i]), _slice(lp_host, at), replicas, ext,
                          _slice(ext_host, at), int(kernels[at].max()), sg.extent[at] + sg.cover[at], banned))
    return out


def _segmentations(group: ReplicaGroup, max_counts: int) -> list[Segmentation]:
    """The candidate segmentations the options are made of, fewest segments first: at most ``max_counts``,
    keeping 1, the native count and the most, and the rest spread evenly."""
    base = native(group)
    segs: dict[int, Segmentation] = {}  # what ``candidates`` returns, without inferring the native cut twice
    for k in candidate_counts(group, base):
        seg = with_count(group, base, k)
        segs.setdefault(seg.count, seg)
    return [segs[k] for k in spread_counts(sorted(segs), base.count, max_counts)]


def spread_counts(counts: list[int], native_count: int, most: int) -> list[int]:
    """At most ``most`` of the sorted segment ``counts``: the first, the native count and the last kept, the rest
    spread evenly among the others."""
    if len(counts) <= most:
        return counts
    keep = {counts[0], native_count, counts[-1]}
    rest = [k for k in counts if k not in keep]
    keep |= set(rest[:: max(1, len(rest) // max(1, most - len(keep)))][: most - len(keep)])
    return sorted(keep)


class _Segments(NamedTuple):
    """Every segmentation's segments numbered one after another (segmentation i's are ``first[i]:first[i + 1]``),
    what the options need of each, and per fragment of every segmentation (the group's fragments repeated once per
    segmentation) its segment."""

    first: list[int]
    which: np.ndarray  # per segment: its segmentation
    seg_of: np.ndarray  # per fragment of every segmentation
    frags: np.ndarray  # per segment: fragments
    extent: np.ndarray  # its bytes from first to last (the relay buffer)
    cover: np.ndarray  # its bytes the fragments cover
    pieces: np.ndarray  # its forwards (``forward_intervals``)
    long_pieces: np.ndarray  # those over the long-send limit
    intervals: np.ndarray  # the covered intervals the forwards are cut from
    banned: list[np.ndarray]  # the tiles that may not host it (its group's replicas and its senders), sorted
    forwards: np.ndarray  # per segmentation: its forwards in all
    holes: int  # gaps between consecutive fragments (each one a pointer reset on a replica receiving the forwards)


def _segments(group: ReplicaGroup, segs: list[Segmentation], replicas: np.ndarray, max_bytes: int,
              long_limit: int) -> _Segments:
    n, k = group.fragments, len(segs)
    counts = [s.count for s in segs]
    first = [0, *np.cumsum(counts).tolist()]
    frags = np.concatenate([s.frag_start[1:] - s.frag_start[:-1] for s in segs])
    seg_of = np.repeat(np.arange(first[-1]), frags)
    head = np.cumsum(frags) - frags  # each segment's first fragment, among all segmentations' fragments
    offsets, nbytes = np.tile(group.offsets, k), np.tile(group.nbytes, k)
    cum = np.zeros(n * k + 1, np.int64)
    np.cumsum(nbytes, out=cum[1:])
    hole = group.offsets[1:] != group.offsets[:-1] + group.nbytes[:-1]
    # forwards: a segment's maximal covered intervals, each cut into L // max_bytes full pieces and one of
    # L % max_bytes if that is not zero (every fragment has at least one word, so every interval has bytes)
    new = np.tile(np.concatenate([[True], hole]), k)
    new[head] = True
    i0 = np.flatnonzero(new)
    i1 = np.append(i0[1:], n * k) - 1
    i_seg = seg_of[i0]
    full, rest = np.divmod(offsets[i1] + nbytes[i1] - offsets[i0], max_bytes)
    i_pieces = full + (rest > 0)
    pieces = np.bincount(i_seg, weights=i_pieces, minlength=first[-1]).astype(np.int64)
    long_pieces = np.bincount(i_seg, weights=full * int(max_bytes > long_limit) + (rest > long_limit),
                              minlength=first[-1]).astype(np.int64)
    # barred tiles: marked in a (segment, tile of the group) grid and read back row by row, all segments at once
    local = union1d(replicas, group.sources.astype(np.int64))
    mark = np.zeros((first[-1], len(local)), bool)
    mark[:, np.searchsorted(local, replicas)] = True
    mark[seg_of, np.tile(np.searchsorted(local, group.sources), k)] = True
    rows, cols = np.nonzero(mark)
    tiles = local[cols]
    cut = [0, *np.searchsorted(rows, np.arange(1, first[-1])).tolist(), len(tiles)]
    return _Segments(
        first, np.repeat(np.arange(k), counts), seg_of, frags,
        np.concatenate([s.segment_bytes() for s in segs]), cum[head + frags] - cum[head], pieces, long_pieces,
        np.bincount(i_seg, minlength=first[-1]), [tiles[a:b] for a, b in pairwise(cut)],
        np.add.reduceat(pieces, first[:-1]), int(hole.sum()),
    )


def _slice(load: Load, at: slice) -> Load:
    return Load(load.raw[at], load.frag[at], load.tx[at], load.rx[at], load.ctrl[at])


def _union(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sorted union of two sorted tile lists without repeats, and where each list's tiles sit in it (so a
    list's values can be added at those places with a plain fancy-index ``+=``)."""
    tiles = union1d(a, b).astype(np.int64)
    return tiles, np.searchsorted(tiles, a), np.searchsorted(tiles, b)


def _remaining_receives(state: PhaseState, tiles: np.ndarray, removed: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per tile: receives left once ``removed`` transfers go, their pointer resets, and the start and end address
    of the last one (-1 if none) -- every tile's receive sequence at once, in listed order."""
    n = len(tiles)
    if any(int(t) in state._app_recv for t in tiles.tolist()):  # a state with appended receives: tile by tile
        rec, res = np.zeros(n, np.int64), np.zeros(n, np.int64)
        first, last = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        for i, t in enumerate(tiles.tolist()):
            a, e = state._receive_sequence(t, removed)
            rec[i] = a.shape[0]
            res[i] = tile_resets(a, e, t, state.bounds)
            first[i], last[i] = (a[-1], e[-1]) if e.shape[0] else (-1, -1)
        return rec, res, first, last
    pos = csr_gather(state._entry_ptr, tiles)
    owner = np.repeat(np.arange(n), state._entry_ptr[tiles + 1] - state._entry_ptr[tiles])
    ent = state._entries[pos]
    keep = ~removed[state._dst_transfer[ent]]
    ent, owner = ent[keep], owner[keep]
    a = state.phase.dst_addr[ent].astype(np.int64)
    e = a + state._dst_bytes[ent]
    rec = np.bincount(owner, minlength=n).astype(np.int64)
    # entries are in tile order already (``tiles`` ascending), listed order within a tile
    brk = receive_resets(tiles[owner], a, e - a, np.arange(len(a)), state.bounds)
    res = np.bincount(owner, weights=brk, minlength=n).astype(np.int64)
    first, last = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
    tail = np.flatnonzero(np.r_[owner[1:] != owner[:-1], True]) if len(owner) else np.zeros(0, np.int64)
    first[owner[tail]] = a[tail]
    last[owner[tail]] = e[tail]
    return rec, res, first, last


def _crosses(tiles: np.ndarray, before: np.ndarray, addr: np.ndarray, bounds: np.ndarray | None) -> np.ndarray:
    """Whether a receive at ``addr`` lies in another allocation than one starting at ``before`` on the same tile
    (an allocation bound in (before, addr], ``allocation_bounds``): a pointer reset even if it continues it."""
    if bounds is None or not bounds.size:
        return np.zeros(tiles.shape, bool)
    band = tiles.astype(np.int64) << BAND_SHIFT
    crosses: np.ndarray = (np.searchsorted(bounds, band + before, side="right")
                           != np.searchsorted(bounds, band + addr, side="right"))
    return crosses


def _zero(n: int) -> Load:
    z = np.zeros(n, np.int64)
    return Load(z, z, z, z, z)
