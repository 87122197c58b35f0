"""The production scheduler mirrored (BRIEF §7, "B1024"): wave-by-wave list scheduling over endpoint slots.

Endpoints are transmit lanes and receive ports (both in the transmit-time frame, see ``streams``). Within a wave
(the k-th chunk of every stream, plus chunks held back by dependencies), the endpoint that becomes available
earliest is served first; among the chunks waiting on it, the one with the largest remaining endpoint work (the
most words still to move on its busiest endpoint) is tried. It starts if every other endpoint it needs and its
dependencies are free at that time; otherwise it moves to wait on the endpoint that blocks it, and the next chunk
is tried. Availability carries over from wave to wave and is never back-filled.

Why slots and not a heap of chunks keyed by their earliest start: a placed multicast chunk delays every other
chunk of its destination set, and re-keying all of them at every placement is quadratic (a 586k-transfer phase
took a minute that way). Parking a chunk on the one endpoint that blocks it means a placement wakes one chunk.
"""

from __future__ import annotations

import heapq

import numpy as np

from placer.ordering.streams import Chunks

RULES = ("b1024", "nowave")
"""``b1024`` is the production rule; ``nowave`` drops the wave barrier (stream order and dependencies remain) and
is used only as an extra incumbent for CP-SAT."""


def greedy_starts(chunks: Chunks, rule: str = "b1024") -> np.ndarray:
    """Start cycle (transmit-time frame) of every chunk under the mirrored B1024 rule (or ``nowave``)."""
    count = chunks.count
    if count == 0:
        return np.zeros(0, np.int64)
    tiles = chunks.tiles
    words = chunks.words.tolist()
    tail = chunks.tail.tolist()
    wave = chunks.wave.tolist() if rule == "b1024" else [0] * count
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

    nres = 2 * tiles
    avail = [0] * nres
    remaining = [0] * nres
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

    parked: list[list[tuple[int, int]]] = [[] for _ in range(nres)]  # per endpoint: (-work, chunk)
    queued = [False] * nres  # endpoint has an entry in `events`
    events: list[tuple[int, int]] = []  # (time, endpoint >= 0) or (time, -1 - chunk) for a dependency wait

    def blocker(c: int) -> tuple[int, int]:
        """Earliest start, and the endpoint that sets it (or ``-1 - c`` when its dependencies do)."""
        est = ready[c]
        who = -1 - c
        for r in res[c]:
            a = avail[r]
            if a > est:
                est = a
                who = r
        return est, who

    def enter(c: int, now: int) -> None:
        est, who = blocker(c)
        park(c, est, who, now)

    def park(c: int, est: int, who: int, now: int) -> None:
        if who < 0:  # waiting for a predecessor's data, not for an endpoint
            if est > now:
                heapq.heappush(events, (est, who))
                return
            who = res[c][0]
        w = 0  # largest remaining endpoint work, as of now
        for r in res[c]:
            if remaining[r] > w:
                w = remaining[r]
        heapq.heappush(parked[who], (-w, c))
        if not queued[who]:
            queued[who] = True
            heapq.heappush(events, (avail[who] if avail[who] > now else now, who))

    placed = 0
    for current in range(nwaves):
        for c in bucket[current]:
            enter(c, 0)
        while events:
            t, who = heapq.heappop(events)
            if who < 0:  # a dependency wait is over
                c = -1 - who
                est, blk = blocker(c)
                park(c, est, blk, t)
                continue
            r = who
            if avail[r] > t:  # stale: the endpoint was taken meanwhile
                heapq.heappush(events, (avail[r], r))
                continue
            queue = parked[r]
            while queue:
                _, c = queue[0]
                est, blk = blocker(c)
                if est <= t:
                    heapq.heappop(queue)
                    start[c] = t
                    end = t + words[c]
                    for x in res[c]:
                        avail[x] = end
                        remaining[x] -= words[c]
                    placed += 1
                    for b, lag in succs[c]:
                        if end + lag > ready[b]:
                            ready[b] = end + lag
                        npred[b] -= 1
                        if npred[b] == 0:
                            if wave[b] <= current:
                                enter(b, t)
                            else:
                                bucket[wave[b]].append(b)
                    break
                heapq.heappop(queue)  # blocked elsewhere: wait there
                park(c, est, blk, t)
            if queue:
                heapq.heappush(events, (avail[r], r))
            else:
                queued[r] = False
    if placed != count:  # unreachable for an acyclic chunk graph (levels guarantee it)
        raise RuntimeError(f"greedy placed {placed} of {count} chunks: dependency cycle")
    return np.asarray(start, np.int64)
