"""Which transfers of an exchange phase depend on which, and how deep each lies (docs/reference.md §7).

Every access is a byte interval on one tile: a transfer reads ``[a, a + bytes)`` on its source for each Repeat
address and writes ``[addr, addr + bytes)`` on each destination. Two accesses of different transfers conflict when
they overlap on one tile and at least one writes (read-after-write, write-after-write, write-after-read), ordered
by listed order, which is program order. Each transfer's *level* is the longest dependency chain ending at it (a
relay's gathers 0, its forwards 1). Both schedulers order by these: the reference's (``placer.refschedule``) and
placer's chunk model (``placer.chunkmodel``, which lifts them to chunks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placer.arrays import unique
from placer.capture.model import Phase

_ADDR_BITS = 40  # addresses are < 2^40; a tile id above it makes one sortable (tile, address) key


@dataclass(eq=False)
class Dependencies:
    """Transfer-level dependency edges ``pred[k] -> succ[k]`` (``pred < succ`` in listed order, unique)."""

    pred: npt.NDArray[np.int64]
    succ: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.pred.shape[0])


def transfer_dependencies(phase: Phase) -> Dependencies:
    """RAW, WAW and WAR edges between transfers of ``phase`` (listed order is program order).

    Only accesses in an overlap cluster that holds a write can conflict, so they are filtered first; the survivors
    are cut into elementary byte segments per tile and, per segment in listed order, each access depends on the last
    earlier write (RAW/WAW) and each read precedes the next later write (WAR). Older conflicts follow by
    transitivity, so the edge count stays linear in the accesses.
    """
    n = phase.n
    if n == 0:
        return Dependencies(np.zeros(0, np.int64), np.zeros(0, np.int64))
    nbytes = phase.nbytes
    r_tr = np.repeat(np.arange(n, dtype=np.int64), np.diff(phase.src_ptr))
    w_tr = phase.dst_transfer()
    tr = np.concatenate([r_tr, w_tr])
    tile = np.concatenate([phase.source[r_tr], phase.dst_tile]).astype(np.int64)
    lo = np.concatenate([phase.src_addr, phase.dst_addr]).astype(np.int64)
    hi = lo + nbytes[tr]
    is_write = np.concatenate([np.zeros(len(r_tr), bool), np.ones(len(w_tr), bool)])
    lo_key = (tile << _ADDR_BITS) | lo
    hi_key = (tile << _ADDR_BITS) | hi

    keep = _conflicting_accesses(lo_key, hi_key, is_write)
    if not keep.any():
        return Dependencies(np.zeros(0, np.int64), np.zeros(0, np.int64))
    tr, lo_key, hi_key, is_write = tr[keep], lo_key[keep], hi_key[keep], is_write[keep]

    bounds = unique(np.concatenate([lo_key, hi_key]))
    seg_lo = np.searchsorted(bounds, lo_key)
    counts = np.searchsorted(bounds, hi_key) - seg_lo
    rec = np.repeat(np.arange(len(tr)), counts)
    first = np.cumsum(counts) - counts
    seg = seg_lo[rec] + (np.arange(len(rec)) - first[rec])
    # within a segment: listed order, and a transfer's own read before its own write
    order = np.lexsort((is_write[rec], tr[rec], seg))
    seg, rec = seg[order], rec[order]
    t, w = tr[rec], is_write[rec]
    m = len(seg)
    pos = np.arange(m)
    new_seg = np.ones(m, bool)
    new_seg[1:] = seg[1:] != seg[:-1]
    seg_start = np.maximum.accumulate(np.where(new_seg, pos, 0))
    seg_end = np.zeros(m, np.int64)  # one past the last position of the segment
    starts = np.flatnonzero(new_seg)
    seg_end[starts] = np.append(starts[1:], m)
    seg_end = np.maximum.accumulate(seg_end)

    last_w = np.maximum.accumulate(np.where(w, pos, -1))
    prev_w = np.full(m, -1)
    prev_w[1:] = last_w[:-1]
    ok = prev_w >= seg_start
    preds = [t[prev_w[ok]]]
    succs = [t[ok]]

    next_w = np.minimum.accumulate(np.where(w, pos, m)[::-1])[::-1]
    after_w = np.full(m, m)
    after_w[:-1] = next_w[1:]
    ok = ~w & (after_w < seg_end)
    preds.append(t[ok])
    succs.append(t[after_w[ok]])

    pred = np.concatenate(preds)
    succ = np.concatenate(succs)
    real = pred != succ
    key = unique(pred[real] * n + succ[real])
    return Dependencies(key // n, key % n)


def _conflicting_accesses(lo_key: np.ndarray, hi_key: np.ndarray, is_write: np.ndarray) -> np.ndarray:
    """Mask of accesses whose overlap cluster (per tile, by address) has two or more members and a write."""
    order = np.argsort(lo_key, kind="stable")
    run_hi = np.maximum.accumulate(hi_key[order])
    new = np.ones(len(order), bool)
    new[1:] = lo_key[order][1:] >= run_hi[:-1]
    cluster = np.cumsum(new) - 1
    size = np.bincount(cluster)
    writes = np.bincount(cluster, weights=is_write[order])
    keep_sorted = (size[cluster] >= 2) & (writes[cluster] > 0)
    keep = np.empty(len(order), bool)
    keep[order] = keep_sorted
    return keep


def transfer_levels(n: int, deps: Dependencies) -> npt.NDArray[np.int64]:
    """Longest dependency chain ending at each transfer (0 for transfers with no predecessor)."""
    level = np.zeros(n, np.int64)
    if len(deps) == 0:
        return level
    for _ in range(64):  # vectorised relaxation: one round per chain link, chains are short in practice
        new = level.copy()
        np.maximum.at(new, deps.succ, level[deps.pred] + 1)
        if np.array_equal(new, level):
            return level
        level = new
    # a long chain: one exact pass in listed order (edges always point forward)
    order = np.argsort(deps.succ, kind="stable")
    lv = level.tolist()
    for p, s in zip(deps.pred[order].tolist(), deps.succ[order].tolist(), strict=True):
        if lv[p] + 1 > lv[s]:
            lv[s] = lv[p] + 1
    return np.asarray(lv, np.int64)
