"""Streams, waves and dependencies."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

from placer.capture.model import Phase
from placer.chunkmodel.chunks import build_chunks
from placer.machine import load_machine
from placer.streams.dependencies import transfer_dependencies, transfer_levels
from tests.ordering.synthetic import relay_phase, replica_phase

from .helpers import small_phases

MACHINE = load_machine()


def _naive_pairs(phase: Phase) -> set[tuple[int, int]]:
    """Every conflicting pair i < j, by brute force over all accesses."""
    acc = []  # (transfer, tile, lo, hi, write)
    for i in range(phase.n):
        b = 4 * int(phase.words[i])
        for a in phase.source_addresses(i):
            acc.append((i, int(phase.source[i]), a, a + b, False))
        for t, a in phase.destinations(i):
            acc.append((i, t, a, a + b, True))
    out = set()
    for x in acc:
        for y in acc:
            if x[0] < y[0] and x[1] == y[1] and x[2] < y[3] and y[2] < x[3] and (x[4] or y[4]):
                out.add((x[0], y[0]))
    return out


def _closure(n: int, pred: np.ndarray, succ: np.ndarray) -> set[tuple[int, int]]:
    reach: list[set[int]] = [set() for _ in range(n)]
    for a, b in sorted(zip(pred.tolist(), succ.tolist(), strict=True), key=lambda e: -e[0]):
        reach[a] |= {b} | reach[b]
    return {(a, b) for a in range(n) for b in reach[a]}


@settings(max_examples=60, deadline=None)
@given(small_phases())
def test_dependencies_match_naive_pairs(phase: Phase) -> None:
    deps = transfer_dependencies(phase)
    naive = _naive_pairs(phase)
    edges = set(zip(deps.pred.tolist(), deps.succ.tolist(), strict=True))
    assert edges <= naive  # no invented dependency
    assert naive <= _closure(phase.n, deps.pred, deps.succ)  # every conflict ordered, maybe transitively


def test_raw_waw_war_and_repeat_addresses() -> None:
    # 0 writes tile 5 [100,108); 1 reads tile 5 [104,...) in its 2nd Repeat iteration only (RAW);
    # 2 writes tile 5 [104,108) (WAW with 0, WAR with 1); 3 touches unrelated bytes
    phase = Phase.build(0, source=[1, 5, 2, 3], words=[2, 1, 1, 1], dst_counts=[1, 1, 1, 1],
                        dst_tile=[5, 7, 5, 8], dst_addr=[100, 0, 104, 0], src_addr=[0, 500, 104, 0, 0],
                        src_counts=[1, 2, 1, 1])
    deps = transfer_dependencies(phase)
    edges = set(zip(deps.pred.tolist(), deps.succ.tolist(), strict=True))
    assert (0, 1) in edges  # RAW through the second iteration address
    assert (1, 2) in edges  # WAR
    assert (0, 2) in edges or (0, 1) in edges  # WAW is implied via 0 -> 1 -> 2
    assert all(3 not in e for e in edges)
    assert transfer_levels(phase.n, deps).tolist() == [0, 1, 2, 0]


def test_relay_forwards_depend_on_their_gathers() -> None:
    phase = relay_phase(groups=2, replicas=4, fragments=16, segments=2)
    chunks = build_chunks(phase, MACHINE)
    deps = chunks.transfer_deps
    forward = phase.fanout > 1
    assert forward[deps.succ].all()
    assert not forward[deps.pred].any()
    # every forward depends on gathers
    assert set(np.flatnonzero(forward).tolist()) == set(deps.succ.tolist())
    assert len(chunks.dep_pred) > 0
    assert (chunks.level[chunks.dep_succ] > chunks.level[chunks.dep_pred]).all()


def test_waves_are_stream_words_before_over_1024() -> None:
    phase = replica_phase(groups=2, replicas=3, fragments=300, sources=2, weight_words=5000, tiles=64)
    for cap in (256, 1024):
        chunks = build_chunks(phase, MACHINE, wave_words=cap)
        words = phase.words[chunks.order].astype(np.int64)
        payload = np.add.reduceat(words, chunks.ptr[:-1])
        assert int(payload.sum()) == int(phase.words.sum())
        # one stream = one source and one destination set; a chunk's first transfer has wave·cap <= words before
        # it in its stream < (wave + 1)·cap, and waves never decrease along a stream
        for s in np.unique(chunks.stream)[:10].tolist():
            idx = np.flatnonzero(chunks.stream == s)
            assert len(set(chunks.source[idx].tolist())) == 1
            assert len(set(chunks.dset[idx].tolist())) == 1
            before = np.cumsum(payload[idx]) - payload[idx]
            assert (before // cap == chunks.wave[idx]).all()
            assert (np.diff(chunks.wave[idx]) >= 1).all()
