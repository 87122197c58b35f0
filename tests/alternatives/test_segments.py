"""Relay segments (``placer.alternatives.segments``) of hand-built replica groups, against answers worked out by
hand: the native panels (from the capture's panel hint, or inferred from repeated senders), each segment's bytes,
and the other counts an optimiser may choose."""

from __future__ import annotations

import numpy as np
import pytest

from placer.alternatives.groups import ReplicaGroup, scan_phase
from placer.alternatives.segments import MAX_CANDIDATES, Segmentation, candidate_counts, candidates, native, with_count
from placer.capture.model import PanelHint, Phase
from tests.builders import group_phase

REPLICAS = [1, 2, 3]


def group_of(phase: Phase, hints: dict[tuple[int, tuple[int, ...]], PanelHint] | None = None) -> ReplicaGroup:
    """The phase's one replica group."""
    groups = scan_phase(phase, hints, gainful_only=False).groups
    assert len(groups) == 1
    return groups[0]


def hinted(phase: Phase, boundaries: tuple[int, ...], splits: bool = True) -> ReplicaGroup:
    return group_of(phase, {(phase.phase, tuple(REPLICAS)): PanelHint(phase.phase, tuple(REPLICAS), boundaries,
                                                                      splits=splits)})


def check_partition(group: ReplicaGroup, seg: Segmentation) -> None:
    """Segments cover [0, E) back to back, each holds at least one fragment, no fragment straddles a cut."""
    b = seg.bounds
    assert b[0] == 0
    assert b[-1] == group.extent
    assert (np.diff(b) > 0).all()
    assert seg.segment_bytes().sum() == group.extent
    assert seg.frag_start[0] == 0
    assert seg.frag_start[-1] == group.fragments
    assert (np.diff(seg.frag_start) > 0).all()
    seg_of = np.repeat(np.arange(seg.count), np.diff(seg.frag_start))
    assert (group.offsets >= b[seg_of]).all()
    assert (group.offsets + group.nbytes <= b[seg_of + 1]).all()


def test_a_repeated_sender_starts_the_next_panel() -> None:
    # twelve 32-byte slots from senders 4, 5, 4, 5, ... (slot 5, one of sender 5's, a hole): each time sender 4
    # comes again a panel ends, so every panel is two slots, 64 bytes -- the one holding the hole included
    group = group_of(group_phase(0, REPLICAS, [4, 5], 12, holes=(5,)))
    assert (group.extent, group.fragments) == (384, 11)
    seg = native(group)
    assert seg.bounds.tolist() == [0, 64, 128, 192, 256, 320, 384]
    assert seg.frag_start.tolist() == [0, 2, 4, 5, 7, 9, 11]  # the third panel: slot 4 alone, then the hole
    assert seg.segment_bytes().tolist() == [64] * 6
    check_partition(group, seg)


def test_distinct_senders_are_one_segment() -> None:
    group = group_of(group_phase(0, REPLICAS, [4, 5, 6, 7, 8, 9], 6))
    seg = native(group)
    assert seg.bounds.tolist() == [0, 192]
    assert seg.frag_start.tolist() == [0, 6]
    assert seg.count == 1


def test_the_listing_order_does_not_change_the_panels() -> None:
    # pointer resets on the replicas (a shuffled listing): the panels follow the offsets, not the listing
    plain = native(group_of(group_phase(0, REPLICAS, [4, 5, 6], 12)))
    shuffled = native(group_of(group_phase(0, REPLICAS, [4, 5, 6], 12, interleave=True, seed=3)))
    assert plain.bounds.tolist() == shuffled.bounds.tolist() == [0, 96, 192, 288, 384]


def test_a_panel_hint_gives_the_panels_snapped_to_fragment_starts() -> None:
    # slots of 32 bytes; the hint's cuts at 100 and 256 of an extent of 448 (two trailing slots of padding): 100
    # falls inside slot 3 ([96, 128)), so that panel starts at the next fragment, 128
    phase = group_phase(0, REPLICAS, [4, 5], 12)
    group = hinted(phase, (0, 100, 256, 448))
    assert group.extent == 448
    seg = native(group)
    assert seg.bounds.tolist() == [0, 128, 256, 448]
    assert seg.frag_start.tolist() == [0, 4, 8, 12]
    assert seg.segment_bytes().tolist() == [128, 128, 192]  # the last holds the trailing padding
    check_partition(group, seg)


def test_a_hint_that_does_not_split_leaves_the_panels_to_the_senders() -> None:
    phase = group_phase(0, REPLICAS, [4, 5], 8)
    assert native(hinted(phase, (), splits=False)).bounds.tolist() == native(group_of(phase)).bounds.tolist() \
        == [0, 64, 128, 192, 256]


def test_a_cut_inside_a_hole_falls_on_the_next_fragment() -> None:
    # slots 3 and 4 are holes: the hint's cut at 100 (inside the hole) moves to slot 5's start, 160
    group = hinted(group_phase(0, REPLICAS, [4], 8, holes=(3, 4)), (0, 100, 256))
    seg = native(group)
    assert seg.bounds.tolist() == [0, 160, 256]
    assert seg.frag_start.tolist() == [0, 3, 6]
    check_partition(group, seg)


def test_fewer_segments_merge_equal_runs_of_panels_and_twice_as_many_halve_them() -> None:
    group = group_of(group_phase(0, REPLICAS, [4, 5, 6, 7], 24, holes=(9,)))  # six panels of four 32-byte slots
    base = native(group)
    assert base.bounds.tolist() == [0, 128, 256, 384, 512, 640, 768]
    assert with_count(group, base, 6) is base
    assert with_count(group, base, 3).bounds.tolist() == [0, 256, 512, 768]
    assert with_count(group, base, 2).bounds.tolist() == [0, 384, 768]
    assert with_count(group, base, 1).bounds.tolist() == [0, 768]
    # halves at the fragment start nearest each panel's middle: slot 9 is a hole, so the third panel (slots 8-11)
    # is cut at slot 10 (equally near: 320 is its middle), the others at their middles
    halves = with_count(group, base, 12)
    assert halves.bounds.tolist() == [0, 64, 128, 192, 256, 320, 384, 448, 512, 576, 640, 704, 768]
    assert halves.frag_start.tolist() == [0, 2, 4, 6, 8, 9, 11, 13, 15, 17, 19, 21, 23]
    # any other count: cuts at the panel boundaries nearest the byte quantiles (768 / 4: 192, 384, 576)
    assert with_count(group, base, 4).bounds.tolist() == [0, 128, 384, 512, 768]
    for k in (1, 2, 3, 4, 6, 12):
        check_partition(group, with_count(group, base, k))


def test_candidate_counts_are_the_divisors_and_the_double() -> None:
    group = group_of(group_phase(0, REPLICAS, [4, 5, 6, 7], 24))  # six panels, 24 fragments
    assert candidate_counts(group, native(group)) == [1, 2, 3, 6, 12]
    segs = candidates(group)
    assert sorted(segs) == [1, 2, 3, 6, 12]
    assert all(s.count == k for k, s in segs.items())
    few = group_of(group_phase(0, REPLICAS, [4, 5], 3))  # two panels of three fragments: no room to halve
    assert candidate_counts(few, native(few)) == [1, 2]


def test_candidates_are_capped_keeping_one_the_native_count_and_its_double() -> None:
    group = group_of(group_phase(0, REPLICAS, [4, 5], 120, frag_words=2))  # 60 panels: 12 divisors, and 120
    base = native(group)
    assert base.count == 60
    counts = candidate_counts(group, base)
    assert len(counts) == MAX_CANDIDATES
    assert {1, 60, 120} <= set(counts)
    assert all(60 % c == 0 or c == 120 for c in counts)
    assert counts == sorted(counts)


@pytest.mark.parametrize("seed", range(4))
def test_every_candidate_partitions_the_extent(seed: int) -> None:
    rng = np.random.default_rng(seed)
    holes = tuple(int(h) for h in rng.choice(30, size=5, replace=False))
    group = group_of(group_phase(0, REPLICAS, [4, 5, 6], 30, holes=holes, interleave=True, seed=seed))
    for seg in candidates(group).values():
        check_partition(group, seg)
