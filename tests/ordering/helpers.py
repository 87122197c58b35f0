"""Small random phases for the ordering tests (hypothesis strategies) and a brute-force optimum."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import strategies as st

from placer.capture.model import Phase
from placer.chunkmodel.chunks import Chunks

TILES = 12  # tiles 0..11 of the default machine: rows 0..5, so latencies differ


@st.composite
def small_phases(draw: st.DrawFn, max_transfers: int = 8, max_words: int = 200) -> Phase:
    """Random transfers on few tiles over a small address range, so RAW/WAW/WAR conflicts are common."""
    n = draw(st.integers(1, max_transfers))
    source, words, counts, dtile, daddr, saddr, scount = [], [], [], [], [], [], []
    for _ in range(n):
        s = draw(st.integers(0, TILES - 1))
        w = draw(st.integers(1, max_words))
        others = [t for t in range(TILES) if t != s]
        dests = draw(st.lists(st.sampled_from(others), min_size=1, max_size=3, unique=True))
        iters = draw(st.integers(1, 2))
        source.append(s)
        words.append(w)
        counts.append(len(dests))
        dtile += dests
        daddr += [draw(st.integers(0, 64)) * 16 for _ in dests]
        saddr += [draw(st.integers(0, 64)) * 16 for _ in range(iters)]
        scount.append(iters)
    return Phase.build(0, source, words, counts, dtile, daddr, saddr, src_counts=scount)


def brute_force_horizon(chunks: Chunks) -> int:
    """Optimum over every order: place each chunk at its earliest conflict-free time (active schedules)."""
    count = chunks.count
    # (resource, cycles held): the lane for lane_words, each port for words
    res = [{(int(chunks.source[c]), int(chunks.lane_words[c]))}
           | {(chunks.tiles + int(t), int(chunks.words[c])) for t in chunks.set_tiles[chunks.dset[c]]}
           for c in range(count)]
    edges = [(int(a), int(b), int(chunks.words[a] + chunks.tail[a]))
             for a, b in zip(chunks.dep_pred, chunks.dep_succ, strict=True)]
    same = chunks.stream[1:] == chunks.stream[:-1]
    edges += [(int(a), int(a) + 1, int(chunks.lane_words[a])) for a in np.flatnonzero(same)]
    best = None
    for perm in itertools.permutations(range(count)):
        pos = {c: k for k, c in enumerate(perm)}
        if any(pos[a] > pos[b] for a, b, _ in edges):
            continue
        start: dict[int, int] = {}
        for c in perm:
            lo = max([start[a] + g for a, b, g in edges if b == c] + [0])
            cands = sorted({lo} | {start[p] + w for p in start for _, w in res[p] if start[p] + w > lo})
            for t in cands:
                if all(t + wc <= start[p] or start[p] + wp <= t
                       for p in start for rc, wc in res[c] for rp, wp in res[p] if rc == rp):
                    start[c] = t
                    break
        h = max(start[c] + int(chunks.words[c] + chunks.tail[c]) for c in range(count))
        best = h if best is None else min(best, h)
    assert best is not None
    return best
