"""Segmentations of a replica group's extent [0, E) into contiguous relay segments, cut at fragment boundaries.

Native segmentation: the capture's panel hint when present. Without one it is inferred from the fragment pattern:
walking the fragments in offset order, a segment ends just before the first fragment whose sending tile already
sent into the current segment. Replicated activations are packed panel by panel, and within one panel every token
row comes from a different owner tile, so a repeated sender marks the next panel (the row axis wraps). Padding
holes never start a segment of their own: a segment must hold at least one fragment.

Candidate counts an optimiser may choose from: every merge of equal runs of neighbouring native segments (the
divisors of the native count), and the finer cut that halves each native segment at the fragment boundary closest
to its middle.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from placer.alternatives.groups import ReplicaGroup
from placer.arrays import unique

MAX_CANDIDATES = 8


@dataclass(frozen=True, eq=False)
class Segmentation:
    bounds: np.ndarray  # int64 offsets 0 = b0 < b1 < … < bk = E
    frag_start: np.ndarray  # int64: index of each segment's first fragment (offset order), plus len(fragments)

    @property
    def count(self) -> int:
        return int(self.bounds.shape[0] - 1)

    def segment_bytes(self) -> np.ndarray:
        return np.diff(self.bounds)


def _from_bounds(group: ReplicaGroup, bounds: np.ndarray) -> Segmentation:
    """Snap the cuts to fragment starts, drop empty segments and return the segmentation."""
    inner = unique(bounds[(bounds > 0) & (bounds < group.extent)])
    # a cut must fall on a fragment start so no fragment straddles two segments
    idx = np.searchsorted(group.offsets, inner, side="left")
    idx = unique(idx[(idx > 0) & (idx < group.fragments)])
    frag_start = np.concatenate([[0], idx, [group.fragments]]).astype(np.int64)
    cuts = group.offsets[idx]
    return Segmentation(np.concatenate([[0], cuts, [group.extent]]).astype(np.int64), frag_start)


def native(group: ReplicaGroup) -> Segmentation:
    if group.hint is not None and group.hint.splits:
        return _from_bounds(group, np.asarray(group.hint.boundaries, dtype=np.int64))
    cuts = _inferred_cuts(group)
    if not cuts.size:  # one segment (most groups: a programme has thousands of small ones)
        return Segmentation(np.array([0, group.extent], np.int64), np.array([0, group.fragments], np.int64))
    return _from_bounds(group, cuts)


def _inferred_cuts(group: ReplicaGroup) -> np.ndarray:
    src = group.sources.tolist()
    n = len(src)
    if n <= 1 or len(set(src)) == n:  # no sender repeats: one segment
        return np.zeros(0, np.int64)
    # one pass over the fragments in offset order: a sender already seen in the current segment starts the next
    cuts: list[int] = []
    seen: set[int] = set()
    offsets = group.offsets.tolist()
    for i, s in enumerate(src):
        if s in seen:
            cuts.append(offsets[i])
            seen = {s}
        else:
            seen.add(s)
    return np.asarray(cuts, np.int64)


def with_count(group: ReplicaGroup, base: Segmentation, k: int) -> Segmentation:
    """A segmentation with (about) ``k`` segments derived from the native one ``base``."""
    n = base.count
    if k == n:
        return base
    if k < n and n % k == 0:
        return _from_bounds(group, base.bounds[:: n // k])
    if k == 2 * n:
        mids = []
        for s in range(n):
            a, b = base.frag_start[s], base.frag_start[s + 1]
            if b - a >= 2:
                centre = (base.bounds[s] + base.bounds[s + 1]) / 2
                j = a + 1 + int(np.argmin(np.abs(group.offsets[a + 1 : b] - centre)))
                mids.append(group.offsets[j])
        return _from_bounds(group, np.sort(np.concatenate([base.bounds, np.asarray(mids, np.int64)])))
    # general k: cuts nearest the byte quantiles among native boundaries
    targets = np.arange(1, k) * group.extent / k
    pick = np.abs(base.bounds[None, :] - targets[:, None]).argmin(axis=1)
    return _from_bounds(group, base.bounds[pick])


def candidate_counts(group: ReplicaGroup, base: Segmentation) -> list[int]:
    n = base.count
    divisors = [d for d in range(1, n + 1) if n % d == 0]
    counts = set(divisors)
    if group.fragments >= 2 * n:
        counts.add(2 * n)
    chosen = sorted(counts)
    if len(chosen) > MAX_CANDIDATES:
        # keep 1, the native count and its double, and the divisors spread evenly in between
        keep = {1, n, 2 * n} & counts
        rest = [c for c in chosen if c not in keep]
        step = len(rest) / (MAX_CANDIDATES - len(keep))
        keep |= {rest[int(i * step)] for i in range(MAX_CANDIDATES - len(keep))}
        chosen = sorted(keep)
    return chosen


def candidates(group: ReplicaGroup) -> dict[int, Segmentation]:
    base = native(group)
    out: dict[int, Segmentation] = {}
    for k in candidate_counts(group, base):
        seg = with_count(group, base, k)
        out.setdefault(seg.count, seg)
    return out


def split_at(group: ReplicaGroup, bounds: np.ndarray) -> tuple[ReplicaGroup, Segmentation] | str:
    """The group's fragments cut at the panel ``bounds`` (the reference intersects every transfer with every panel
    before it checks a panel, ``relay.rs``'s ``intersection()``), and the panels over the pieces; or why a cut cannot
    be made (a bound inside a word of a fragment: a piece must be whole words). A group none of whose fragments
    crosses a bound is returned as it is. The pieces are in offset order (ties in the group's order), each panel's
    pieces contiguous in that order."""
    bounds = np.asarray(bounds, np.int64)
    ends = group.offsets + group.nbytes
    first_cut = np.searchsorted(bounds, group.offsets, side="right")  # first bound above each fragment's start
    past = np.searchsorted(bounds, ends, side="left")  # first bound at or past its end
    cuts = np.maximum(past - first_cut, 0)
    if not cuts.any():
        order = np.lexsort((np.arange(group.fragments), group.offsets))
        if (order != np.arange(group.fragments)).any():  # scan_buffers sorts already; keep this safe anyway
            group = replace(group, transfers=group.transfers[order], offsets=group.offsets[order],
                            nbytes=group.nbytes[order], sources=group.sources[order])
        frag_start = np.searchsorted(group.offsets, bounds, side="left").astype(np.int64)
        frag_start[-1] = group.fragments
        return group, Segmentation(bounds, frag_start)
    rep = np.repeat(np.arange(group.fragments), cuts + 1)
    k = np.arange(rep.shape[0]) - np.repeat(np.cumsum(cuts + 1) - (cuts + 1), cuts + 1)  # piece within fragment
    at = first_cut[rep] + k  # index of the bound that ends the piece (when it is not the fragment's last)
    start = np.where(k == 0, group.offsets[rep], bounds[np.minimum(at - 1, bounds.shape[0] - 1)])
    end = np.where(k == cuts[rep], ends[rep], bounds[np.minimum(at, bounds.shape[0] - 1)])
    skip = start - group.offsets[rep]
    if (skip % 4).any():
        bad = int(start[np.flatnonzero(skip % 4)[0]])
        return f"the panel boundary at offset {bad} falls inside a word of a fragment"
    order = np.lexsort((np.arange(rep.shape[0]), start))
    rep, start, end, skip = rep[order], start[order], end[order], skip[order]
    pieces = replace(group, transfers=group.transfers[rep], offsets=start, nbytes=end - start,
                     sources=group.sources[rep], skip=skip)
    frag_start = np.searchsorted(start, bounds, side="left").astype(np.int64)
    frag_start[-1] = rep.shape[0]
    return pieces, Segmentation(bounds, frag_start)


def panel_coverage(group: ReplicaGroup, seg: Segmentation) -> tuple[np.ndarray, np.ndarray]:
    """Per panel of ``split_at``'s output: whether its pieces cover it completely -- in offset order each starts
    where the one before ended, from the panel's start to its end (the reference's rows contiguous; an overlap, a
    repeated transfer or a hole breaks it) -- and its covered bytes (the reference requires them to equal the
    panel's storage bytes, which contiguity from start to end implies)."""
    k = seg.count
    counts = np.diff(seg.frag_start)
    panel_of = np.repeat(np.arange(k), counts)
    covered = np.bincount(panel_of, weights=group.nbytes, minlength=k).astype(np.int64)
    if not group.fragments:
        return np.zeros(k, bool), covered
    start, end = group.offsets, group.offsets + group.nbytes
    first = np.r_[True, panel_of[1:] != panel_of[:-1]]
    expect = np.where(first, seg.bounds[:-1][panel_of], np.r_[0, end[:-1]])
    broken = np.bincount(panel_of, weights=(start != expect), minlength=k) > 0
    last = np.flatnonzero(np.r_[panel_of[1:] != panel_of[:-1], True])
    ends_ok = np.zeros(k, bool)
    ends_ok[panel_of[last]] = end[last] == seg.bounds[1:][panel_of[last]]
    return (counts > 0) & ~broken & ends_ok & (covered == seg.segment_bytes()), covered
