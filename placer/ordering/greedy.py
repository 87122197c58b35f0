"""The production scheduler mirrored (BRIEF §7, "B1024"): wave-by-wave list scheduling of chunks.

Within a wave (the k-th chunk of every stream, plus chunks held back by dependencies) the next chunk placed is the
one that can start earliest; ties go to the chunk whose busiest endpoint (lane or port) has the most words still to
move. A chunk starts when its lane, all its destination ports (in the transmit-time frame, see ``streams``) and its
dependencies allow; resource availability carries over from wave to wave and is never back-filled.

Earliest starts only grow as chunks are placed, so a heap keyed by a stale start is a valid lower bound: a popped
chunk is re-evaluated and pushed back when its start moved. Everything per chunk is plain Python on lists (a numpy
call per chunk would cost more than the work); the per-word work is nil.
"""

from __future__ import annotations

import heapq

import numpy as np

from placer.ordering.streams import Chunks

RULES = ("b1024", "nowave", "narrow", "wide")
"""``b1024`` is the production rule; the others are list-scheduling variants used only as extra CP-SAT
incumbents: ``nowave`` drops the wave barrier (stream order and dependencies remain), ``narrow``/``wide`` also
break ties of equal start by fewest/most destinations before endpoint work."""


def greedy_starts(chunks: Chunks, rule: str = "b1024", priority: np.ndarray | None = None) -> np.ndarray:
    """Start cycle (transmit-time frame) of every chunk under the mirrored B1024 rule (or a variant)."""
    count = chunks.count
    if count == 0:
        return np.zeros(0, np.int64)
    tiles = chunks.tiles
    words = chunks.words.tolist()
    tail = chunks.tail.tolist()
    wave = chunks.wave.tolist() if rule == "b1024" else [0] * count
    fan_sign = {"narrow": 1, "wide": -1}.get(rule, 0)
    fan = [fan_sign * len(chunks.set_tiles[d]) for d in chunks.dset.tolist()]
    if priority is not None:  # an explicit priority (larger first) replaces the fan-out tie-break
        fan = (-np.asarray(priority, np.int64)).tolist()
    set_res = [(t + tiles).tolist() for t in chunks.set_tiles]
    res = [[s, *set_res[d]] for s, d in zip(chunks.source.tolist(), chunks.dset.tolist(), strict=True)]

    succs: list[list[tuple[int, int]]] = [[] for _ in range(count)]  # (successor, lag after the chunk's end)
    npred = [0] * count
    for a, b in zip(chunks.dep_pred.tolist(), chunks.dep_succ.tolist(), strict=True):
        succs[a].append((b, tail[a]))
        npred[b] += 1
    sa, sb = chunks.stream_edges()
    for a, b in zip(sa.tolist(), sb.tolist(), strict=True):
        succs[a].append((b, 0))
        npred[b] += 1

    avail = [0] * (2 * tiles)
    remaining = [0] * (2 * tiles)
    for c in range(count):
        for r in res[c]:
            remaining[r] += words[c]
    ready = [0] * count
    start = [-1] * count
    nwaves = max(wave) + 1
    bucket: list[list[int]] = [[] for _ in range(nwaves)]
    for c in range(count):
        if npred[c] == 0:
            bucket[wave[c]].append(c)

    def key(c: int) -> tuple[int, int, int, int]:
        est = ready[c]
        work = 0
        for r in res[c]:
            a = avail[r]
            if a > est:
                est = a
            w = remaining[r]
            if w > work:
                work = w
        return est, fan[c], -work, c

    heap: list[tuple[int, int, int, int]] = []
    placed = 0
    current = 0
    while current < nwaves or heap:
        if current < nwaves:
            for c in bucket[current]:
                heapq.heappush(heap, key(c))
        while heap:
            est0, _, _, c = heapq.heappop(heap)
            k = key(c)
            if k[0] > est0:
                heapq.heappush(heap, k)
                continue
            est = k[0]
            start[c] = est
            end = est + words[c]
            for r in res[c]:
                avail[r] = end
                remaining[r] -= words[c]
            placed += 1
            for b, lag in succs[c]:
                if end + lag > ready[b]:
                    ready[b] = end + lag
                npred[b] -= 1
                if npred[b] == 0:
                    if wave[b] <= current:
                        heapq.heappush(heap, key(b))
                    else:
                        bucket[wave[b]].append(b)
        current += 1
    if placed != count:  # unreachable for an acyclic chunk graph (levels guarantee it)
        raise RuntimeError(f"greedy placed {placed} of {count} chunks: dependency cycle")
    return np.asarray(start, np.int64)
