"""Every alternative of every eligible group, with its exact per-tile effect, for the selection model.

An option's effect splits in two parts:
- on the group's own tiles (its replicas and senders): a delta of raw table bytes, fragments, transmit/receive bytes
  and controls against the direct phase, computed on each replica's real receive sequence (the group's entries
  removed, the forwards appended at the end of the phase, as the rewrite lists them);
- on each relay host: a load per segment that does not depend on which tile hosts it, except for the phase-entry
  bytes a host pays if it had no other traffic in the phase (added by the model per tile).
Deltas of two groups on one replica are exact one at a time; where they interact (a pointer reset at the seam
between two groups' entries) the selection re-costs the realised plan exactly and tightens the model if needed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from placer.alternatives.groups import ReplicaGroup
from placer.alternatives.relay import Variant, forward_intervals, source_runs
from placer.alternatives.segments import Segmentation, candidates, native
from placer.capture.model import PAIRED64, Phase, csr_gather
from placer.cost.state import PhaseState
from placer.machine import Machine


class HostClass(NamedTuple):
    """Everything a relay host's cost depends on, and which tiles may host the segment: segments with equal host
    classes are interchangeable for every constraint and objective of the selection model (docs/selection.md,
    "Why the aggregation stays exact"). A tuple, so classes hash, compare and sort as before they had names."""

    variant: int  # 0 direct-receive, 1 local-pack
    kernel: int  # local-pack kernel cycles (0 for direct-receive)
    raw: int  # the host's table bytes in the phase, before rounding, without its phase entry
    frag: int
    tx: int
    rx: int
    ctrl: int
    buffer: int  # relay memory the segment needs on its host
    ext_raw: int  # local-pack: the host's load in the extra phase (0 for direct-receive)
    ext_frag: int
    ext_tx: int
    ext_ctrl: int
    barred: int  # key of the tiles that may not host the segment (its group's replicas, its senders); 0: none


@dataclass(frozen=True, eq=False)
class Load:
    """Per-segment (or per-tile) counters; every field an int64 array of the same length."""

    raw: np.ndarray  # table bytes before rounding, without the phase-entry bytes
    frag: np.ndarray
    tx: np.ndarray
    rx: np.ndarray
    ctrl: np.ndarray


@dataclass(eq=False)
class Option:
    group: ReplicaGroup
    variant: Variant
    seg: Segmentation | None
    tiles: np.ndarray  # tiles of the group whose counters change in the phase (replicas, senders)
    delta: Load  # change of those tiles' counters in the phase (raw includes entry changes)
    host: Load | None  # per segment, in the phase
    ext_tiles: np.ndarray  # local-pack: replicas active in the extra phase
    ext: Load | None  # local-pack: per replica, in the extra phase (without entry)
    ext_host: Load | None  # local-pack: per segment, in the extra phase (without entry)
    kernel_cycles: int
    buffer_bytes: np.ndarray  # per segment: relay memory needed
    banned: list[np.ndarray]  # per segment: tiles that may not host it (replicas and its senders)

    @property
    def count(self) -> int:
        return 0 if self.seg is None else self.seg.count

    @property
    def scratch(self) -> int:
        return int(self.buffer_bytes.sum())

    def signatures(self) -> list[HostClass]:
        """Per segment, its exact host class (:class:`HostClass`)."""
        if self.host is None:
            return []
        kind = 0 if self.variant == "direct-receive" else 1
        h = self.host
        e = self.ext_host if self.ext_host is not None else Load(*[np.zeros(self.count, np.int64)] * 5)
        # hash() of a tuple of ints is not salted, so the key is stable from run to run
        return [HostClass(kind, self.kernel_cycles if kind else 0, int(h.raw[s]), int(h.frag[s]), int(h.tx[s]),
                          int(h.rx[s]), int(h.ctrl[s]), int(self.buffer_bytes[s]), int(e.raw[s]), int(e.frag[s]),
                          int(e.tx[s]), int(e.ctrl[s]), hash(tuple(self.banned[s].tolist())))
                for s in range(self.count)]

    @property
    def name(self) -> str:
        if self.variant == "direct":
            return "direct"
        return f"{'DR' if self.variant == 'direct-receive' else 'LP'}{self.count}"


def group_options(state: PhaseState, group: ReplicaGroup, machine: Machine, *, local_pack: bool = True,
                  max_counts: int = 6) -> list[Option]:
    """The direct option plus direct-receive (and local-pack) options for the group's candidate counts."""
    phase = state.phase
    cost = machine.cost
    max_bytes = machine.exchange.max_transfer_words * 4
    long_limit = machine.exchange.send_count_words * 4
    replicas = group.replicas.astype(np.int64)
    removed = state.removed.copy()
    removed[group.transfers] = True
    # replicas' receive sequences without the group
    rec0 = state.receives[replicas]
    res0 = state.resets[replicas]
    sends_r = state.sends[replicas]
    longs_r = state.long_sends[replicas]
    raw0 = state.raw_table()[replicas]
    rec1, res1, last_end = _remaining_receives(state, replicas, removed)
    covered = int(group.nbytes.sum())

    segs = candidates(group)
    base = native(group)
    counts = sorted(segs)
    if len(counts) > max_counts:  # keep 1, native and the rest spread evenly
        keep = {counts[0], base.count, counts[-1]}
        rest = [k for k in counts if k not in keep]
        keep |= set(rest[:: max(1, len(rest) // max(1, max_counts - len(keep)))][: max_counts - len(keep)])
        counts = sorted(keep)

    direct = Option(group, "direct", None, np.zeros(0, np.int64), _zero(0), None, np.zeros(0, np.int64), None, None,
                    0, np.zeros(0, np.int64), [])
    out = [direct]
    tr = group.transfers
    paired = phase.width[tr] == PAIRED64
    for k in counts:
        seg = segs[k]
        iv = forward_intervals(group, seg, max_bytes)
        m = len(iv.offset)
        first_off = iv.offset[0]
        inner = int((iv.offset[1:] != iv.offset[:-1] + iv.nbytes[:-1]).sum())
        first_reset = (group.bases + first_off != last_end).astype(np.int64)
        seg_of = np.repeat(np.arange(seg.count), np.diff(seg.frag_start))
        pieces = iv.per_segment(seg.count)
        long_pieces = np.bincount(iv.segment, weights=(iv.nbytes > long_limit), minlength=seg.count).astype(np.int64)
        seg_cov = np.bincount(seg_of, weights=group.nbytes, minlength=seg.count).astype(np.int64)
        frags = np.diff(seg.frag_start)
        runs = np.ones(len(group.offsets), bool)
        runs[1:] = (group.offsets[1:] != group.offsets[:-1] + group.nbytes[:-1]) | (seg_of[1:] != seg_of[:-1])
        seg_runs = np.bincount(seg_of, weights=runs, minlength=seg.count).astype(np.int64)
        banned = [np.union1d(replicas, group.sources[seg.frag_start[s]: seg.frag_start[s + 1]]).astype(np.int64)
                  for s in range(seg.count)]
        # senders: a gather replaces each multicast; only a Paired64 multicast changes its lane use
        s_tiles, s_delta = _sender_delta(state, group, paired, phase)

        # direct-receive: replicas get m forward receives instead of the group's fragments
        rec2, res2 = rec1 + m, res1 + first_reset + inner
        act = (sends_r + rec2) > 0
        d_raw = cost.raw_table(sends_r, longs_r, rec2, res2, act) - raw0
        d_rep = Load(d_raw, rec2 - rec0, np.zeros_like(d_raw), np.zeros_like(d_raw),
                     cost.controls(sends_r, rec2, res2) - cost.controls(sends_r, rec0, res0))
        tiles, delta = _merge(replicas, d_rep, s_tiles, s_delta)
        host = Load(
            raw=cost.raw_table(pieces, long_pieces, frags, seg_runs, np.zeros(seg.count, bool)),
            frag=frags + pieces, tx=seg_cov, rx=seg_cov, ctrl=cost.controls(pieces, frags, seg_runs),
        )
        out.append(Option(group, "direct-receive", seg, tiles, delta, host, np.zeros(0, np.int64), None, None, 0,
                          seg.segment_bytes(), banned))

        if not local_pack:
            continue
        # local-pack: the group leaves the phase; forwards arrive in the extra phase
        rv = source_runs(group, seg, phase, max_bytes)
        run_count = rv.per_segment(seg.count)
        # a replica whose only traffic was this group keeps its phase entry in the model: conservative by 8 bytes
        # in that rare case (the tile may host a relay, which would pay the entry back), never optimistic
        act1 = (sends_r + rec0) > 0
        d_raw = cost.raw_table(sends_r, longs_r, rec1, res1, act1) - raw0
        d_rep = Load(d_raw, rec1 - rec0, np.zeros_like(d_raw), -np.full(len(replicas), covered),
                     cost.controls(sends_r, rec1, res1) - cost.controls(sends_r, rec0, res0))
        lp_s_tiles, lp_s_delta = _sender_delta_runs(state, group, rv, phase, machine)
        tiles, delta = _merge(replicas, d_rep, lp_s_tiles, lp_s_delta)
        ones = np.ones(seg.count, np.int64)
        host = Load(raw=cost.raw_table(0 * ones, 0 * ones, run_count, ones, np.zeros(seg.count, bool)),
                    frag=run_count, tx=0 * ones, rx=seg_cov, ctrl=cost.controls(0 * ones, run_count, ones))
        ext_host = Load(raw=cost.raw_table(pieces, long_pieces, 0 * ones, 0 * ones, np.zeros(seg.count, bool)),
                        frag=pieces, tx=seg_cov, rx=0 * ones, ctrl=cost.controls(pieces, 0 * ones, 0 * ones))
        ext_rep_res = 1 + inner
        nrep = len(replicas)
        ext = Load(raw=np.full(nrep, int(cost.raw_table(0, 0, m, ext_rep_res, 0))), frag=np.full(nrep, m),
                   tx=np.zeros(nrep, np.int64), rx=np.full(nrep, covered),
                   ctrl=np.full(nrep, int(cost.controls(np.int64(0), np.int64(m), np.int64(ext_rep_res)))))
        kernel = int(machine.local_pack.estimate(seg.segment_bytes()).max())
        out.append(Option(group, "local-pack", seg, tiles, delta, host, replicas, ext, ext_host, kernel,
                          seg.segment_bytes() + seg_cov, banned))
    return out


def _remaining_receives(state: PhaseState, tiles: np.ndarray, removed: np.ndarray) -> tuple[
        np.ndarray, np.ndarray, np.ndarray]:
    """Per tile: receives left once ``removed`` transfers go, their pointer resets, and the end address of the last
    one (-1 if none) -- every tile's receive sequence at once, in listed order."""
    n = len(tiles)
    if any(int(t) in state._app_recv for t in tiles.tolist()):  # a state with appended receives: tile by tile
        rec, res, last = np.zeros(n, np.int64), np.zeros(n, np.int64), np.full(n, -1, np.int64)
        for i, t in enumerate(tiles.tolist()):
            a, e = state._receive_sequence(t, removed)
            rec[i] = a.shape[0]
            res[i] = (1 + int((a[1:] != e[:-1]).sum())) if a.shape[0] else 0
            last[i] = e[-1] if e.shape[0] else -1
        return rec, res, last
    pos = csr_gather(state._entry_ptr, tiles)
    owner = np.repeat(np.arange(n), state._entry_ptr[tiles + 1] - state._entry_ptr[tiles])
    ent = state._entries[pos]
    keep = ~removed[state._dst_transfer[ent]]
    ent, owner = ent[keep], owner[keep]
    a = state.phase.dst_addr[ent].astype(np.int64)
    e = a + state._dst_bytes[ent]
    rec = np.bincount(owner, minlength=n).astype(np.int64)
    brk = np.ones(len(a), bool)
    brk[1:] = (owner[1:] != owner[:-1]) | (a[1:] != e[:-1])
    res = np.bincount(owner, weights=brk, minlength=n).astype(np.int64)
    last = np.full(n, -1, np.int64)
    tail = np.flatnonzero(np.r_[owner[1:] != owner[:-1], True]) if len(owner) else np.zeros(0, np.int64)
    last[owner[tail]] = e[tail]
    return rec, res, last


def _zero(n: int) -> Load:
    z = np.zeros(n, np.int64)
    return Load(z, z, z, z, z)


def _sender_delta(state: PhaseState, group: ReplicaGroup, paired: np.ndarray, phase: Phase) -> tuple[
        np.ndarray, Load]:
    if not paired.any():
        return np.zeros(0, np.int64), _zero(0)
    nb = group.nbytes[paired]
    src = group.sources[paired].astype(np.int64)
    tiles = np.unique(np.concatenate([src, src ^ 1]))
    tx = np.zeros(len(tiles), np.int64)
    np.add.at(tx, np.searchsorted(tiles, src), nb - nb // 2)  # the whole word now on the sender's own lane
    np.add.at(tx, np.searchsorted(tiles, src ^ 1), -(nb // 2))  # and no longer on the partner's
    z = np.zeros(len(tiles), np.int64)
    return tiles, Load(z, z, tx, z, z)


def _sender_delta_runs(state: PhaseState, group: ReplicaGroup, rv: object, phase: Phase,
                       machine: Machine) -> tuple[np.ndarray, Load]:
    """Local-pack senders send one transfer per source run instead of one per fragment."""
    from placer.alternatives.relay import Intervals

    assert isinstance(rv, Intervals)
    first = np.searchsorted(group.offsets, rv.offset)
    run_src = group.sources[first].astype(np.int64)
    tiles = np.unique(group.sources.astype(np.int64))
    lim = machine.exchange.send_count_words * 4
    before = np.bincount(np.searchsorted(tiles, group.sources), minlength=len(tiles))
    before_long = np.bincount(np.searchsorted(tiles, group.sources), weights=group.nbytes > lim, minlength=len(tiles))
    after = np.bincount(np.searchsorted(tiles, run_src), minlength=len(tiles))
    after_long = np.bincount(np.searchsorted(tiles, run_src), weights=rv.nbytes > lim, minlength=len(tiles))
    d_s = (after - before).astype(np.int64)
    d_l = (after_long - before_long).astype(np.int64)
    c = machine.cost
    z = np.zeros(len(tiles), np.int64)
    # only sends change (the same tiles keep sending): the formula on the send deltas alone
    return tiles, Load(c.raw_table(d_s, d_l, z, z, z), d_s, z, z, c.controls(d_s, z, z))


def _merge(t1: np.ndarray, l1: Load, t2: np.ndarray, l2: Load) -> tuple[np.ndarray, Load]:
    tiles = np.union1d(t1, t2).astype(np.int64)
    out = {}
    for f in ("raw", "frag", "tx", "rx", "ctrl"):
        arr = np.zeros(len(tiles), np.int64)
        np.add.at(arr, np.searchsorted(tiles, t1), getattr(l1, f))
        if len(t2):
            np.add.at(arr, np.searchsorted(tiles, t2), getattr(l2, f))
        out[f] = arr
    return tiles, Load(**out)
