"""The production scheduler (docs/reference.md §7, "B1024") in placer's chunk model: a balanced order, then the row
builder times it. (``placer.refschedule.reference`` is the rule-for-rule port; this is the model CP-SAT improves in.)

Order. Each chunk (one stream's transfers of one wave, see ``chunks``) is ranked by (wave, larger stream total
first, stream id, position); wave by wave, the chunks are taken from a heap keyed by (the latest ready time among
the chunk's endpoints, then the larger remaining endpoint work, then the stream id). Every endpoint the chunk uses
(its source's transmit lane, each receiver's port) then becomes ready at the pick time + the chunk's cycles;
remaining work counts the chunks of every wave not yet taken, and a chunk's work is its busiest endpoint's. The
final order sorts by dependency depth (a relay's gathers, depth 0, before its forwards, depth 1), then wave, then
pick order; a chunk's transfers keep their stream positions.

Row builder. The chunks are timed in that order, each as early as its lane, its ports and its predecessors allow
(a predecessor's payload must have landed at all its receivers; no fixed lag): a later chunk may start earlier in
time than an earlier one whose endpoints are busy. A chunk's send and receive controls may not fall on a cycle
where one of its tiles already has a control event (a tile issues one control per cycle): a conflicting chunk is
pushed one cycle at a time. Availability is never back-filled, as in the production rule.

Keys only get worse as chunks are taken (ready times grow, remaining work shrinks), so the heap is lazy: a popped
chunk whose key changed is pushed back with its new key, and a popped chunk whose key is current is the minimum.

The balancing heap (``placer.streams.balance.balanced_picks``) is the one the reference's order uses, compiled;
:func:`balanced_order_heap` is the literal reading of the rule that the fast one is tested against.
"""

from __future__ import annotations

import heapq

import numpy as np

from placer.chunkmodel.chunks import Chunks
from placer.streams.balance import balanced_picks

RULES = ("b1024", "nowave")
"""``b1024`` is the production rule; ``nowave`` balances all chunks in one wave (stream order and dependencies
remain) and is used only as an extra incumbent for CP-SAT."""


def balanced_order(chunks: Chunks, rule: str = "b1024") -> list[int]:
    """The B1024 final order of the chunks (see the module docstring)."""
    if chunks.count == 0:
        return []
    wave = chunks.wave if rule == "b1024" else np.zeros(chunks.count, np.int64)
    picked = balanced_picks(chunks.tiles, chunks.words, chunks.stream, wave, chunks.stream_total, chunks.source,
                            chunks.dset, chunks.set_tiles)
    order: list[int] = np.lexsort((picked, wave, chunks.level)).tolist()
    return order


def balanced_order_heap(chunks: Chunks, rule: str = "b1024") -> list[int]:
    """The same order as :func:`balanced_order`, with one lazy heap over every chunk of a wave: the literal
    reading of the rule, quadratic where many chunks share a port; kept to test the fast version against."""
    count = chunks.count
    if count == 0:
        return []
    tiles = chunks.tiles
    words = chunks.words.tolist()
    stream = chunks.stream.tolist()
    source = chunks.source.tolist()
    dset = chunks.dset.tolist()
    wave = chunks.wave.tolist() if rule == "b1024" else [0] * count
    set_ports = [t.tolist() for t in chunks.set_tiles]
    lane_ready = [0] * tiles
    port_ready = [0] * tiles
    lane_work = np.bincount(chunks.source, weights=chunks.words, minlength=tiles).astype(np.int64).tolist()
    chunk, res = chunks.resources()
    on_port = res >= tiles
    port_work = np.bincount(res[on_port] - tiles, weights=chunks.words[chunk[on_port]],
                            minlength=tiles).astype(np.int64).tolist()
    # a destination set's (latest ready, largest remaining work) over its ports, recomputed only when one of its
    # ports changed: multicast chunks share their set's ports, so this is most of the key
    sets_of_port: list[list[int]] = [[] for _ in range(tiles)]
    for sid, ports in enumerate(set_ports):
        for d in ports:
            sets_of_port[d].append(sid)
    nsets = len(set_ports)
    set_ready = [0] * nsets
    set_work = [0] * nsets
    dirty = [True] * nsets

    def key(c: int) -> tuple[int, int, int, int]:
        sid = dset[c]
        if dirty[sid]:
            t = w = 0
            for d in set_ports[sid]:
                if port_ready[d] > t:
                    t = port_ready[d]
                if port_work[d] > w:
                    w = port_work[d]
            set_ready[sid], set_work[sid], dirty[sid] = t, w, False
        s = source[c]
        return max(lane_ready[s], set_ready[sid]), -max(lane_work[s], set_work[sid]), stream[c], c

    # rank: (wave, larger stream total first, stream id, position); the heap is filled in rank order
    rank = np.lexsort((chunks.wave, chunks.stream, -chunks.stream_total, np.asarray(wave)))
    by_wave: dict[int, list[int]] = {}
    for c in rank.tolist():
        by_wave.setdefault(wave[c], []).append(c)
    picked = [0] * count
    n_picked = 0
    for k in sorted(by_wave):
        heap = [key(c) for c in by_wave[k]]
        heapq.heapify(heap)
        entry = heapq.heappop(heap) if heap else None
        while entry is not None:
            c = entry[3]
            now = key(c)
            if now != entry:  # stale: re-enter with the current key (taken at once if still the smallest)
                entry = heapq.heappushpop(heap, now)
                continue
            end = now[0] + words[c]
            s = source[c]
            lane_ready[s] = end
            lane_work[s] -= words[c]
            for d in set_ports[dset[c]]:
                port_ready[d] = end
                port_work[d] -= words[c]
                for sid in sets_of_port[d]:
                    dirty[sid] = True
            picked[c] = n_picked
            n_picked += 1
            entry = heapq.heappop(heap) if heap else None
    order: list[int] = np.lexsort((np.asarray(picked), np.asarray(wave), chunks.level)).tolist()
    return order


def row_builder(chunks: Chunks, order: list[int]) -> np.ndarray:
    """Time the chunks in ``order`` (predecessors first): each at the earliest cycle its lane, ports and
    dependencies allow, then pushed one cycle at a time past control-event conflicts on its tiles."""
    count = chunks.count
    tiles = chunks.tiles
    words = chunks.words.tolist()
    lane_words = chunks.lane_words.tolist()
    tail = chunks.tail.tolist()
    source = chunks.source.tolist()
    set_tiles = [t.tolist() for t in chunks.set_tiles]
    dset = chunks.dset.tolist()
    ptr = chunks.ptr.tolist()
    offsets = chunks.offset.tolist()
    succs: list[list[int]] = [[] for _ in range(count)]
    for a, b in zip(chunks.dep_pred.tolist(), chunks.dep_succ.tolist(), strict=True):
        succs[a].append(b)
    lane = [0] * tiles
    port = [0] * tiles
    used: list[set[int]] = [set() for _ in range(tiles)]  # control-event cycles per tile
    ready = [0] * count
    start = [-1] * count
    for c in order:
        s = source[c]
        dests = set_tiles[dset[c]]
        t = max(ready[c], lane[s])
        for d in dests:
            if port[d] > t:
                t = port[d]
        offs = offsets[ptr[c]:ptr[c + 1]]
        who = [used[s], *(used[d] for d in dests)]
        while any(t + o in u for u in who for o in offs):
            t += 1
        start[c] = t
        events = [t + o for o in offs]
        for u in who:
            u.update(events)
        lane[s] = t + lane_words[c]
        for d in dests:
            port[d] = t + words[c]
        landed = t + words[c] + tail[c]
        for b in succs[c]:
            if landed > ready[b]:
                ready[b] = landed
    if min(start, default=0) < 0:  # unreachable when ``order`` lists every chunk once
        raise RuntimeError("row builder: a chunk was not placed")
    return np.asarray(start, np.int64)


def retime(chunks: Chunks, starts: np.ndarray) -> np.ndarray:
    """Re-run the row builder in the order of an existing schedule: compacts it and resolves control-event
    conflicts (the CP-SAT models do not see control cycles). Start order is a topological order of every
    dependency and stream edge (each has a positive lag), so the result is valid."""
    order = np.lexsort((np.arange(chunks.count), starts)).tolist()
    return row_builder(chunks, order)


def greedy_starts(chunks: Chunks, rule: str = "b1024") -> np.ndarray:
    """Start cycle (transmit frame) of every chunk under the mirrored B1024 rule (or ``nowave``)."""
    if chunks.count == 0:
        return np.zeros(0, np.int64)
    return row_builder(chunks, balanced_order(chunks, rule))
