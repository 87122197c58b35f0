"""Relay rewrites of a replica group (docs/reference.md §4).

Direct-receive (the production variant), per segment s with relay tile r and staging buffer B on r:
- gather: every fragment of s goes to r only, at B + (offset − s.start), replacing its multicast;
- forward: r multicasts every maximal covered interval of s (holes skipped, cut at the transfer limit) to every
  replica d at base(d) + offset.
Gathers are listed before forwards, so the receive-before-send dependency is the program order of the phase.

Local-pack (studied offline by the reference compiler), per segment: the relay receives each maximal *source run*
(consecutive fragments from one sender, contiguous in its memory for every Repeat iteration) into scratch, a
strided-copy kernel packs them into B, and the forwards run in an extra exchange phase right after.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from placer.alternatives.groups import ReplicaGroup
from placer.alternatives.segments import Segmentation
from placer.arrays import unique
from placer.capture.model import WORD32, Phase, csr_gather
from placer.units import ceil_div

Variant = Literal["direct", "direct-receive", "local-pack"]


@dataclass(frozen=True, eq=False)
class Intervals:
    """Per segment, the transfers a relay sends or receives: segment index, offset, bytes (parallel arrays)."""

    segment: np.ndarray
    offset: np.ndarray
    nbytes: np.ndarray

    def per_segment(self, k: int) -> np.ndarray:
        return np.bincount(self.segment, minlength=k)


def forward_intervals(group: ReplicaGroup, seg: Segmentation, max_bytes: int) -> Intervals:
    """Maximal covered intervals of each segment (holes skipped), cut at ``max_bytes``."""
    return _intervals(np.repeat(np.arange(seg.count), np.diff(seg.frag_start)), group.offsets, group.nbytes,
                      max_bytes)


def _intervals(seg_of: np.ndarray, off: np.ndarray, nb: np.ndarray, max_bytes: int) -> Intervals:
    """``forward_intervals`` of fragments in offset order within each segment, ``seg_of`` their segment ids."""
    # a new interval starts at a segment start or after a hole
    new = np.ones(len(off), bool)
    new[1:] = (off[1:] != off[:-1] + nb[:-1]) | (seg_of[1:] != seg_of[:-1])
    starts = np.flatnonzero(new)
    ends = np.concatenate([starts[1:], [len(off)]])
    i_start = off[starts]
    i_bytes = off[ends - 1] + nb[ends - 1] - i_start
    i_seg = seg_of[starts]
    pieces = ceil_div(i_bytes, max_bytes)
    rep = np.repeat(np.arange(len(starts)), pieces)
    k = np.arange(len(rep)) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    p_off = i_start[rep] + k * max_bytes
    p_bytes = np.minimum(max_bytes, i_start[rep] + i_bytes[rep] - p_off)
    return Intervals(i_seg[rep], p_off, p_bytes)


def source_runs(group: ReplicaGroup, seg: Segmentation, phase: Phase, max_bytes: int) -> Intervals:
    """Maximal runs of fragments, within a segment, from one sender and contiguous in its memory (all iterations)."""
    seg_of = np.repeat(np.arange(seg.count), np.diff(seg.frag_start))
    return cut_runs(group.offsets, group.nbytes, seg_of, source_joins(group, phase), max_bytes)


def source_joins(group: ReplicaGroup, phase: Phase) -> np.ndarray:
    """Per fragment (offset order): whether it extends the previous fragment's source run when no segment boundary
    falls between them -- one sender, one iteration count, contiguous on the replicas and at the source in every
    iteration. It does not depend on the segmentation, so a caller trying several can compute it once."""
    tr = group.transfers
    src_first = phase.src_ptr[tr]
    counts = phase.src_ptr[tr + 1] - src_first  # not np.diff(src_ptr)[tr]: that is a pass over the whole phase
    n = len(tr)
    joins = np.zeros(n, bool)
    if n > 1:
        same = (group.sources[1:] == group.sources[:-1]) & (counts[1:] == counts[:-1])
        same &= group.offsets[1:] == group.offsets[:-1] + group.nbytes[:-1]
        cand = np.flatnonzero(same)
        # contiguous at the source in every iteration (only the first address is compared when counts differ)
        ok = np.ones(len(cand), bool)
        for it in range(int(counts.max(initial=1))):
            a = phase.src_addr[np.minimum(src_first[cand] + it, len(phase.src_addr) - 1)]
            b = phase.src_addr[np.minimum(src_first[cand + 1] + it, len(phase.src_addr) - 1)]
            ok &= np.where(it < counts[cand], b == a + group.nbytes[cand], True)
        joins[cand[ok] + 1] = True
    return joins


def cut_runs(offsets: np.ndarray, nbytes: np.ndarray, seg_of: np.ndarray, joins: np.ndarray, max_bytes: int,
             copies: int = 1) -> Intervals:
    """``source_runs`` from a group's fragments (offset order), each one's segment ``seg_of`` and its
    ``source_joins``. The fragments may be ``copies`` segmentations of one group laid end to end (``seg_of``
    numbering their segments across them, the other arrays repeated): each is cut as if alone."""
    n = max(1, len(joins) // copies)
    joins = joins.copy()
    joins[1:] &= seg_of[1:] == seg_of[:-1]  # a run never crosses a segment boundary
    # a run may not exceed one transfer: cut it where its running byte count crosses a multiple of max_bytes
    run_id = np.cumsum(~joins) - 1
    starts = np.flatnonzero(~joins)
    cum = np.cumsum(nbytes)
    before = (cum - nbytes)[starts][run_id]
    piece = (cum - before - 1) // max_bytes
    key = run_id * (n + 1) + piece
    new = np.ones(len(key), bool)
    new[1:] = key[1:] != key[:-1]
    new[::n] = True  # every copy's first fragment starts a run
    first = np.flatnonzero(new)
    last = np.append(first[1:], len(key)) - 1
    run_bytes = offsets[last] + nbytes[last] - offsets[first]
    return Intervals(seg_of[first], offsets[first], run_bytes)


@dataclass(frozen=True, eq=False)
class RelayRewrite:
    """The transfers that replace a group, ready to append to its phase (and, for local-pack, the extra phase)."""

    remove: np.ndarray  # transfer indices in the phase
    gathers: Phase
    forwards: Phase  # appended after the gathers (direct-receive) or forming the extra phase (local-pack)
    copies: list[tuple[int, int, int, int]]  # local-pack kernel copies: (tile, from, to, bytes)


def direct_receive(
    group: ReplicaGroup, seg: Segmentation, hosts: np.ndarray, buffers: np.ndarray, phase: Phase, max_bytes: int
) -> RelayRewrite:
    return direct_receive_all([(group, seg, hosts, buffers)], phase, max_bytes)


def direct_receive_all(
    relays: Sequence[tuple[ReplicaGroup, Segmentation, np.ndarray, np.ndarray]], phase: Phase, max_bytes: int
) -> RelayRewrite:
    """Several groups of one phase relayed at once, as one rewrite: the same transfers, in the same order, as the
    groups' own rewrites one after another (every gather, then every forward) -- without a call per group, which
    the production rule's candidates of a thousand groups or more cannot afford."""
    sg = _segments(relays)
    tr = np.concatenate([g.transfers for g in sg.groups])
    src_counts = phase.src_ptr[tr + 1] - phase.src_ptr[tr]
    src_addr = phase.src_addr[csr_gather(phase.src_ptr, tr)]
    split = any(g.skip is not None for g in sg.groups)
    if split:  # pieces of transfers cut at panel bounds (``segments.split_at``): each reads its part of the source
        skip = np.concatenate([g.skip if g.skip is not None else np.zeros(g.fragments, np.int64) for g in sg.groups])
        src_addr = src_addr + np.repeat(skip, src_counts)
    gathers = Phase.build(
        phase.phase,
        source=np.concatenate([g.sources for g in sg.groups]),
        words=sg.nbytes // 4,
        dst_counts=np.ones(len(tr), np.int64),
        dst_tile=sg.hosts[sg.seg_of],
        dst_addr=sg.buffers[sg.seg_of] + sg.offsets - sg.lo[sg.seg_of],
        src_addr=src_addr,
        src_counts=src_counts,
        width=np.full(len(tr), WORD32, np.uint8),
    )
    return RelayRewrite(unique(tr) if split else tr, gathers, _forwards(sg, max_bytes, phase.phase), [])


@dataclass(frozen=True, eq=False)
class _Segments:
    """The segments of several relays numbered across their groups: each one's host, buffer and start offset,
    and each fragment's segment (fragments in group order, offset order within a group)."""

    groups: list[ReplicaGroup]
    counts: np.ndarray  # segments per group
    hosts: np.ndarray
    buffers: np.ndarray
    lo: np.ndarray
    seg_of: np.ndarray
    offsets: np.ndarray
    nbytes: np.ndarray


def _segments(relays: Sequence[tuple[ReplicaGroup, Segmentation, np.ndarray, np.ndarray]]) -> _Segments:
    groups = [g for g, _, _, _ in relays]
    segs = [s for _, s, _, _ in relays]
    counts = np.array([s.count for s in segs], np.int64)
    return _Segments(
        groups, counts,
        hosts=np.concatenate([np.asarray(h, np.int64) for _, _, h, _ in relays]),
        buffers=np.concatenate([np.asarray(b, np.int64) for _, _, _, b in relays]),
        lo=np.concatenate([s.bounds[:-1] for s in segs]),
        seg_of=np.repeat(np.arange(int(counts.sum())), np.concatenate([np.diff(s.frag_start) for s in segs])),
        offsets=np.concatenate([g.offsets for g in groups]),
        nbytes=np.concatenate([g.nbytes for g in groups]),
    )


def _forwards(sg: _Segments, max_bytes: int, phase_id: int) -> Phase:
    """Each relay multicasting its segments' covered intervals to every replica of its group, at the replica's
    base plus the offset."""
    iv = _intervals(sg.seg_of, sg.offsets, sg.nbytes, max_bytes)
    seg_group = np.repeat(np.arange(len(sg.groups)), sg.counts)
    replica_ptr = np.zeros(len(sg.groups) + 1, np.int64)
    np.cumsum([g.replica_count for g in sg.groups], out=replica_ptr[1:])
    flat = csr_gather(replica_ptr, seg_group[iv.segment])
    fanout = np.diff(replica_ptr)[seg_group[iv.segment]]
    return Phase.build(
        phase_id,
        source=sg.hosts[iv.segment],
        words=iv.nbytes // 4,
        dst_counts=fanout,
        dst_tile=np.concatenate([g.replicas for g in sg.groups])[flat],
        dst_addr=np.concatenate([g.bases for g in sg.groups])[flat] + np.repeat(iv.offset, fanout),
        src_addr=sg.buffers[iv.segment] + iv.offset - sg.lo[iv.segment],
    )


def local_pack(
    group: ReplicaGroup, seg: Segmentation, hosts: np.ndarray, buffers: np.ndarray, phase: Phase, max_bytes: int,
    extra_phase: int,
) -> RelayRewrite:
    """Gathers of source runs into scratch right after each packed buffer; forwards form ``extra_phase``."""
    runs = source_runs(group, seg, phase, max_bytes)
    seg_bytes = seg.segment_bytes()
    scratch = buffers + seg_bytes  # scratch follows the packed buffer in the same allocation
    # scratch offset of each run: runs of a segment land back to back in offset order
    run_cum = np.cumsum(runs.nbytes) - runs.nbytes
    seg_first = np.searchsorted(runs.segment, np.arange(seg.count))
    run_scratch = run_cum - run_cum[np.minimum(seg_first, len(run_cum) - 1)][runs.segment]
    # the run's first fragment supplies its source addresses
    first_frag = np.searchsorted(group.offsets, runs.offset)
    tr = group.transfers[first_frag]
    gathers = Phase.build(
        phase.phase,
        source=group.sources[first_frag],
        words=runs.nbytes // 4,
        dst_counts=np.ones(len(tr), np.int64),
        dst_tile=hosts[runs.segment],
        dst_addr=scratch[runs.segment] + run_scratch,
        src_addr=phase.src_addr[csr_gather(phase.src_ptr, tr)],
        src_counts=phase.src_ptr[tr + 1] - phase.src_ptr[tr],
        width=np.full(len(tr), WORD32, np.uint8),
    )
    # the kernel copies every fragment from its place in scratch to its packed place
    frag_run = np.searchsorted(runs.offset, group.offsets, side="right") - 1
    seg_of = np.repeat(np.arange(seg.count), np.diff(seg.frag_start))
    frm = scratch[seg_of] + run_scratch[frag_run] + (group.offsets - runs.offset[frag_run])
    to = buffers[seg_of] + group.offsets - seg.bounds[seg_of]
    copies = list(zip(hosts[seg_of].tolist(), frm.tolist(), to.tolist(), group.nbytes.tolist(), strict=True))
    forwards = _forwards(_segments([(group, seg, hosts, buffers)]), max_bytes, extra_phase)
    return RelayRewrite(group.transfers, gathers, forwards, copies)
