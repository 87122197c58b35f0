"""Relaying several groups at once gives exactly the transfers of relaying them one at a time."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.alternatives.groups import ReplicaGroup, scan_phase
from placer.alternatives.relay import direct_receive_all, forward_intervals
from placer.alternatives.segments import Segmentation, native
from placer.capture.model import WORD32, Phase, csr_gather
from tests.alternatives.test_group_scan import Hints, phases

FIELDS = ("source", "words", "width", "src_ptr", "src_addr", "dst_ptr", "dst_tile", "dst_addr")


def one_group(group: ReplicaGroup, seg: Segmentation, hosts: np.ndarray, buffers: np.ndarray, phase: Phase,
              max_bytes: int) -> tuple[Phase, Phase]:
    """The direct-receive relay (docs/reference.md §4) of one group: gathers to the segment's host, then forwards."""
    seg_of = np.repeat(np.arange(seg.count), np.diff(seg.frag_start))
    tr = group.transfers
    gathers = Phase.build(phase.phase, source=group.sources, words=phase.words[tr],
                          dst_counts=np.ones(len(tr), np.int64), dst_tile=hosts[seg_of],
                          dst_addr=buffers[seg_of] + group.offsets - seg.bounds[seg_of],
                          src_addr=phase.src_addr[csr_gather(phase.src_ptr, tr)],
                          src_counts=np.diff(phase.src_ptr)[tr], width=np.full(len(tr), WORD32, np.uint8))
    iv = forward_intervals(group, seg, max_bytes)
    m, r = len(iv.offset), group.replica_count
    forwards = Phase.build(phase.phase, source=hosts[iv.segment], words=iv.nbytes // 4,
                           dst_counts=np.full(m, r, np.int64), dst_tile=np.tile(group.replicas, m),
                           dst_addr=(group.bases[None, :] + iv.offset[:, None]).reshape(-1),
                           src_addr=buffers[iv.segment] + iv.offset - seg.bounds[iv.segment])
    return gathers, forwards


@settings(max_examples=150, deadline=None)
@given(phases(), st.sampled_from([4, 8, 16, 1 << 20]), st.randoms(use_true_random=False))
def test_all_at_once_equals_one_at_a_time(case: tuple[Phase, Hints], max_bytes: int, rnd: object) -> None:
    phase, hints = case
    groups = scan_phase(phase, hints, gainful_only=False).groups
    if not groups:
        return
    relays = []
    for g in groups:
        seg = native(g)
        hosts = np.asarray([rnd.randrange(100, 200) for _ in range(seg.count)], np.int64)  # type: ignore[attr-defined]
        buffers = np.asarray([8 * rnd.randrange(0, 1 << 12) for _ in range(seg.count)], np.int64)  # type: ignore[attr-defined]
        relays.append((g, seg, hosts, buffers))
    together = direct_receive_all(relays, phase, max_bytes)
    singles = [one_group(g, s, h, b, phase, max_bytes) for g, s, h, b in relays]
    gathers = Phase.concat(phase.phase, [gs for gs, _ in singles])
    forwards = Phase.concat(phase.phase, [fw for _, fw in singles])
    assert np.array_equal(together.remove, np.concatenate([g.transfers for g in groups]))
    for got, want in ((together.gathers, gathers), (together.forwards, forwards)):
        for f in FIELDS:
            assert np.array_equal(getattr(got, f), getattr(want, f)), f
            assert getattr(got, f).dtype == getattr(want, f).dtype, f
