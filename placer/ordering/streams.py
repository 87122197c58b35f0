"""Streams, waves, chunks and dependencies of one exchange phase (BRIEF §7).

A *chunk* is the unit every scheduler in this package places: a run of consecutive transfers of one stream
(same source, same destination set) holding at most ``wave_words`` words (a single longer transfer is a chunk on
its own: transfers are never split, since a split would add table rows). A chunk occupies its source's transmit
lane for ``words`` cycles starting at its start ``s`` and every destination ``d``'s receive port over
``[s + lat(d), s + lat(d) + words)``. Because every chunk received on port ``d`` is shifted by the same
``lat(d)``, two chunks overlap on ``d`` exactly when their transmit windows overlap: every resource (lane or port)
is therefore handled in the transmit-time frame, and a chunk needs one interval, not one per destination.

Dependencies are found per transfer (read-after-write, write-after-write, write-after-read over byte intervals on
one tile, every Repeat address counted) and lifted to chunks. Each transfer gets a *level* (longest dependency
chain ending at it); streams are ordered by (level, source address) and chunks never mix levels, so every chunk
dependency goes from a lower to a higher level and the chunk graph is acyclic whatever the listed order was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.capture.model import Phase
from placer.machine import Machine

_ADDR_BITS = 40  # addresses are < 2^40; a tile id above it makes one sortable (tile, address) key


@dataclass(eq=False)
class Dependencies:
    """Transfer-level dependency edges ``pred[k] -> succ[k]`` (``pred < succ`` in listed order, unique)."""

    pred: np.ndarray  # int64
    succ: np.ndarray  # int64

    def __len__(self) -> int:
        return int(self.pred.shape[0])


def transfer_dependencies(phase: Phase) -> Dependencies:
    """RAW, WAW and WAR edges between transfers of ``phase`` (listed order is program order).

    Only accesses in an overlap cluster that holds a write can conflict, so they are filtered first; the survivors
    are cut into elementary byte segments per tile and, per segment in listed order, each access depends on the last
    earlier write (RAW/WAW) and each read precedes the next later write (WAR). Older conflicts follow by
    transitivity, so the edge count stays linear in the accesses.
    """
    n = phase.n
    if n == 0:
        return Dependencies(np.zeros(0, np.int64), np.zeros(0, np.int64))
    nbytes = phase.nbytes
    r_tr = np.repeat(np.arange(n, dtype=np.int64), np.diff(phase.src_ptr))
    w_tr = phase.dst_transfer()
    tr = np.concatenate([r_tr, w_tr])
    tile = np.concatenate([phase.source[r_tr], phase.dst_tile]).astype(np.int64)
    lo = np.concatenate([phase.src_addr, phase.dst_addr]).astype(np.int64)
    hi = lo + nbytes[tr]
    is_write = np.concatenate([np.zeros(len(r_tr), bool), np.ones(len(w_tr), bool)])
    lo_key = (tile << _ADDR_BITS) | lo
    hi_key = (tile << _ADDR_BITS) | hi

    keep = _conflicting_accesses(lo_key, hi_key, is_write)
    if not keep.any():
        return Dependencies(np.zeros(0, np.int64), np.zeros(0, np.int64))
    tr, lo_key, hi_key, is_write = tr[keep], lo_key[keep], hi_key[keep], is_write[keep]

    bounds = np.unique(np.concatenate([lo_key, hi_key]))
    seg_lo = np.searchsorted(bounds, lo_key)
    counts = np.searchsorted(bounds, hi_key) - seg_lo
    rec = np.repeat(np.arange(len(tr)), counts)
    first = np.cumsum(counts) - counts
    seg = seg_lo[rec] + (np.arange(len(rec)) - first[rec])
    # within a segment: listed order, and a transfer's own read before its own write
    order = np.lexsort((is_write[rec], tr[rec], seg))
    seg, rec = seg[order], rec[order]
    t, w = tr[rec], is_write[rec]
    m = len(seg)
    pos = np.arange(m)
    new_seg = np.ones(m, bool)
    new_seg[1:] = seg[1:] != seg[:-1]
    seg_start = np.maximum.accumulate(np.where(new_seg, pos, 0))
    seg_end = np.zeros(m, np.int64)  # one past the last position of the segment
    starts = np.flatnonzero(new_seg)
    seg_end[starts] = np.append(starts[1:], m)
    seg_end = np.maximum.accumulate(seg_end)

    last_w = np.maximum.accumulate(np.where(w, pos, -1))
    prev_w = np.full(m, -1)
    prev_w[1:] = last_w[:-1]
    ok = prev_w >= seg_start
    preds = [t[prev_w[ok]]]
    succs = [t[ok]]

    next_w = np.minimum.accumulate(np.where(w, pos, m)[::-1])[::-1]
    after_w = np.full(m, m)
    after_w[:-1] = next_w[1:]
    ok = ~w & (after_w < seg_end)
    preds.append(t[ok])
    succs.append(t[after_w[ok]])

    pred = np.concatenate(preds)
    succ = np.concatenate(succs)
    real = pred != succ
    key = np.unique(pred[real] * n + succ[real])
    return Dependencies(key // n, key % n)


def _conflicting_accesses(lo_key: np.ndarray, hi_key: np.ndarray, is_write: np.ndarray) -> np.ndarray:
    """Mask of accesses whose overlap cluster (per tile, by address) has two or more members and a write."""
    order = np.argsort(lo_key, kind="stable")
    run_hi = np.maximum.accumulate(hi_key[order])
    new = np.ones(len(order), bool)
    new[1:] = lo_key[order][1:] >= run_hi[:-1]
    cluster = np.cumsum(new) - 1
    size = np.bincount(cluster)
    writes = np.bincount(cluster, weights=is_write[order])
    keep_sorted = (size[cluster] >= 2) & (writes[cluster] > 0)
    keep = np.empty(len(order), bool)
    keep[order] = keep_sorted
    return keep


def transfer_levels(n: int, deps: Dependencies) -> np.ndarray:
    """Longest dependency chain ending at each transfer (0 for transfers with no predecessor)."""
    level = np.zeros(n, np.int64)
    if len(deps) == 0:
        return level
    for _ in range(64):  # vectorised relaxation: one round per chain link, chains are short in practice
        new = level.copy()
        np.maximum.at(new, deps.succ, level[deps.pred] + 1)
        if np.array_equal(new, level):
            return level
        level = new
    # a long chain: one exact pass in listed order (edges always point forward)
    order = np.argsort(deps.succ, kind="stable")
    lv = level.tolist()
    for p, s in zip(deps.pred[order].tolist(), deps.succ[order].tolist(), strict=True):
        if lv[p] + 1 > lv[s]:
            lv[s] = lv[p] + 1
    return np.asarray(lv, np.int64)


@dataclass(eq=False)
class Chunks:
    """A phase cut into chunks, with everything a scheduler or a bound needs, as flat arrays.

    ``order[ptr[c]:ptr[c+1]]`` are chunk ``c``'s transfers in send order; ``offset[k]`` is the cycle at which
    transfer ``order[k]`` starts relative to its chunk's start. Chunks are numbered stream by stream, waves in order.
    """

    phase: int
    tiles: int
    words: np.ndarray  # int64 (C,) cycles on every resource
    source: np.ndarray  # int64 (C,)
    dset: np.ndarray  # int64 (C,) destination set id
    stream: np.ndarray  # int64 (C,)
    wave: np.ndarray  # int64 (C,) position of the chunk in its stream
    level: np.ndarray  # int64 (C,)
    tail: np.ndarray  # int64 (C,) largest destination latency: data has landed everywhere by start+words+tail
    ptr: np.ndarray  # int64 (C+1,)
    order: np.ndarray  # int64 (n,) transfers in chunk order
    offset: np.ndarray  # int64 (n,) start of order[k] relative to its chunk
    set_tiles: list[np.ndarray]  # destination tiles of each destination set
    set_latency: list[np.ndarray]  # their latencies, same order
    latency: np.ndarray  # int64 (tiles,) latency of every tile as a destination
    dep_pred: np.ndarray  # int64 chunk dependency edges (data: start(b) >= start(a) + words(a) + tail(a))
    dep_succ: np.ndarray
    transfer_deps: Dependencies

    @property
    def count(self) -> int:
        return int(self.words.shape[0])

    def stream_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Consecutive chunks of a stream: order edges (start(b) >= start(a) + words(a))."""
        same = self.stream[1:] == self.stream[:-1]
        a = np.flatnonzero(same)
        return a, a + 1

    def resources(self) -> tuple[np.ndarray, np.ndarray]:
        """Incidence (chunk, resource): resource ``s`` is tile s's transmit lane, ``tiles + d`` d's receive port."""
        sizes = np.array([len(t) for t in self.set_tiles], np.int64)
        fan = sizes[self.dset]
        chunk = np.concatenate([np.arange(self.count), np.repeat(np.arange(self.count), fan)])
        flat = np.concatenate(self.set_tiles) if self.set_tiles else np.zeros(0, np.int64)
        set_ptr = np.zeros(len(sizes) + 1, np.int64)
        np.cumsum(sizes, out=set_ptr[1:])
        starts = set_ptr[self.dset]
        idx = np.repeat(starts - (np.cumsum(fan) - fan), fan) + np.arange(int(fan.sum()))
        res = np.concatenate([self.source, self.tiles + flat[idx].astype(np.int64)])
        return chunk, res


def build_chunks(phase: Phase, machine: Machine, *, wave_words: int = 1024, tiles: int | None = None) -> Chunks:
    """Streams keyed by (source, destination set) in (level, source address) order, cut into waves of at most
    ``wave_words`` words, plus the chunk dependency graph."""
    n = phase.n
    if tiles is None:
        top = max(int(phase.source.max(initial=-1)), int(phase.dst_tile.max(initial=-1))) + 1
        tiles = max(machine.tiles, top)
    latency = machine.latency(np.arange(tiles)).astype(np.int64)
    deps = transfer_dependencies(phase)
    level = transfer_levels(n, deps)
    dset = phase.dst_set_ids()
    nsets = int(dset.max(initial=-1)) + 1
    stream_key = phase.source.astype(np.int64) * max(nsets, 1) + dset
    addr = phase.first_src_addr() if n else np.zeros(0, np.int64)
    order = np.lexsort((np.arange(n), addr, level, stream_key))

    words_sorted = phase.words[order].astype(np.int64)
    key_sorted = stream_key[order]
    level_sorted = level[order]
    brk = np.ones(n, bool)  # a (stream, level) run starts here
    if n > 1:
        brk[1:] = (key_sorted[1:] != key_sorted[:-1]) | (level_sorted[1:] != level_sorted[:-1])
    chunk_of, offset = _pack(words_sorted, brk, wave_words)
    nchunks = int(chunk_of[-1]) + 1 if n else 0
    ptr = np.zeros(nchunks + 1, np.int64)
    np.cumsum(np.bincount(chunk_of, minlength=nchunks), out=ptr[1:])
    head = order[ptr[:-1]]  # first transfer of each chunk
    c_words = np.bincount(chunk_of, weights=words_sorted, minlength=nchunks).astype(np.int64)
    c_stream_key = stream_key[head]
    _, c_stream = np.unique(c_stream_key, return_inverse=True)
    c_stream = c_stream.reshape(-1).astype(np.int64)
    new_stream = np.ones(nchunks, bool)
    new_stream[1:] = c_stream[1:] != c_stream[:-1]
    idx = np.arange(nchunks)
    c_wave = idx - np.maximum.accumulate(np.where(new_stream, idx, 0))

    # one representative transfer per destination set gives its tiles
    set_rep = np.zeros(nsets, np.int64)
    set_rep[dset[::-1]] = np.arange(n)[::-1]
    set_tiles = [phase.dst_tile[phase.dst_ptr[i]:phase.dst_ptr[i + 1]].astype(np.int64) for i in set_rep.tolist()]
    set_latency = [latency[t] for t in set_tiles]
    set_tail = np.array([int(lat.max(initial=0)) for lat in set_latency], np.int64)
    c_dset = dset[head]

    chunk_of_transfer = np.empty(n, np.int64)
    chunk_of_transfer[order] = chunk_of
    cp = chunk_of_transfer[deps.pred]
    cs = chunk_of_transfer[deps.succ]
    key = np.unique(cp * max(nchunks, 1) + cs)
    return Chunks(
        phase=phase.phase,
        tiles=tiles,
        words=c_words,
        source=phase.source[head].astype(np.int64),
        dset=c_dset,
        stream=c_stream,
        wave=c_wave.astype(np.int64),
        level=level[head],
        tail=set_tail[c_dset] if nchunks else np.zeros(0, np.int64),
        ptr=ptr,
        order=order.astype(np.int64),
        offset=offset,
        set_tiles=set_tiles,
        set_latency=set_latency,
        latency=latency,
        dep_pred=key // max(nchunks, 1),
        dep_succ=key % max(nchunks, 1),
        transfer_deps=deps,
    )


def _pack(words: np.ndarray, brk: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy first-fit packing along the sorted transfers: a new chunk at every run break or when the next
    transfer would take the chunk past ``cap`` words. Sequential by nature, so one plain loop (no numpy per item)."""
    chunk = np.empty(len(words), np.int64)
    offset = np.empty(len(words), np.int64)
    c = -1
    fill = 0
    ch = chunk.tolist()
    of = offset.tolist()
    for k, (wd, b) in enumerate(zip(words.tolist(), brk.tolist(), strict=True)):
        if b or fill + wd > cap:
            c += 1
            fill = 0
        ch[k] = c
        of[k] = fill
        fill += wd
    return np.asarray(ch, np.int64), np.asarray(of, np.int64)
