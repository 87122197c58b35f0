"""Forward-backward improvement (double justification) of a chunk schedule.

The production rule never back-fills and never delays a chunk on purpose, so a multicast group can be held hostage
by one replica whose port is busy (the whole group waits for it). Re-scheduling the chunks one by one in the order
of a schedule, each at the earliest time *any gap* of all its resources allows (a serial schedule-generation scheme
with gap insertion), repairs much of that; alternating it with the mirror pass (latest times, in order of
decreasing end) is the classical forward-backward improvement of project scheduling. Each pass is a valid
schedule, and only a better horizon is kept, so the incumbent is never lost.
"""

from __future__ import annotations

import bisect
import time

import numpy as np

from placer.chunkmodel.chunks import Chunks


def _edges(chunks: Chunks) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    sa, sb = chunks.stream_edges()
    pred = np.concatenate([chunks.dep_pred, sa])
    succ = np.concatenate([chunks.dep_succ, sb])
    lag = np.concatenate([chunks.words[chunks.dep_pred] + chunks.tail[chunks.dep_pred], chunks.lane_words[sa]])
    return pred, succ, lag


def serial_sgs(
    order: list[int],
    words: list[int],
    release: list[int],
    res: list[list[int]],
    preds: list[list[tuple[int, int]]],
    nres: int,
    lane_words: list[int] | None = None,
) -> list[int]:
    """Place chunks in ``order`` (predecessors first), each at the earliest start >= its release and its
    predecessors' lags where all its resources have a free gap of its length (``lane_words`` on a chunk's first
    resource, its lane; ``words`` on its ports)."""
    lane_words = lane_words or words
    starts_of: list[list[int]] = [[] for _ in range(nres)]
    ends_of: list[list[int]] = [[] for _ in range(nres)]
    start = [0] * len(words)
    for c in order:
        t = release[c]
        for a, g in preds[c]:
            v = start[a] + g
            if v > t:
                t = v
        rs = res[c]
        moved = True
        while moved:
            moved = False
            for j, r in enumerate(rs):
                w = lane_words[c] if j == 0 else words[c]
                bs, be = starts_of[r], ends_of[r]
                k = bisect.bisect_right(bs, t) - 1
                if k >= 0 and be[k] > t:
                    t = be[k]
                    moved = True
                    k += 1
                else:
                    k += 1
                while k < len(bs) and bs[k] < t + w:
                    t = be[k]
                    moved = True
                    k += 1
        start[c] = t
        for j, r in enumerate(rs):
            k = bisect.bisect_right(starts_of[r], t)
            starts_of[r].insert(k, t)
            ends_of[r].insert(k, t + (lane_words[c] if j == 0 else words[c]))
    return start


_WORK_PER_SECOND = 150_000  # (chunk, endpoint) incidences one second of budget may place, both passes counted


def forward_backward(chunks: Chunks, starts: np.ndarray, *, time_limit: float = 5.0, rounds: int = 8,
                     deterministic: bool = True) -> np.ndarray:
    """Alternate backward (as late as possible) and forward (as early as possible) serial passes.

    Deterministic by default: the number of rounds comes from the phase size and ``time_limit`` (a work budget),
    not from the clock, so the same input always gives the same schedule."""
    clock = time.perf_counter()
    count = chunks.count
    words = chunks.words.tolist()
    # the mirror is taken over words + lead, which keeps every port window at one offset from the mirrored start;
    # lanes are held that long too (their last hold included): conservative, hence still valid
    full_arr = chunks.words + chunks.lead
    full = full_arr.tolist()
    release = (chunks.tail - chunks.lead).tolist()  # in the mirror, the latency after the chunk's end
    res = [[s, *(t + chunks.tiles).tolist()] for s, t in
           zip(chunks.source.tolist(), (chunks.set_tiles[d] for d in chunks.dset.tolist()), strict=True)]
    pred, succ, lag = _edges(chunks)
    fwd: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    bwd: list[list[tuple[int, int]]] = [[] for _ in range(count)]
    for a, b, g in zip(pred.tolist(), succ.tolist(), lag.tolist(), strict=True):
        fwd[b].append((a, g))
        bwd[a].append((b, g + full[b] - full[a]))  # mirrored time: t = H - s - lane length
    incidences = sum(len(r) for r in res)
    if deterministic:
        rounds = min(rounds, int(time_limit * _WORK_PER_SECOND) // max(1, 2 * incidences))
    zero = [0] * count
    best = np.asarray(starts, np.int64)
    best_h = int((best + chunks.words + chunks.tail).max(initial=0))
    cur = best
    round_time = 0.0
    for _ in range(rounds):
        began = time.perf_counter()
        if not deterministic and began - clock + round_time > time_limit:  # the next round would overrun
            break
        ends = cur + full_arr
        order = np.argsort(-ends, kind="stable").tolist()
        mirrored = serial_sgs(order, words, release, res, bwd, 2 * chunks.tiles, full)
        m = np.asarray(mirrored, np.int64)
        horizon = int((m + full_arr).max(initial=0))
        late = horizon - m - full_arr
        order = np.argsort(late, kind="stable").tolist()
        cur = np.asarray(serial_sgs(order, words, zero, res, fwd, 2 * chunks.tiles, full), np.int64)
        h = int((cur + chunks.words + chunks.tail).max(initial=0))
        round_time = time.perf_counter() - began
        if h < best_h:
            best, best_h = cur, h
        elif h >= best_h and np.array_equal(cur, best):
            break
    return best
