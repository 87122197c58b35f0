"""Byte-interval primitives for the validator, all on numpy arrays.

A byte on a tile is addressed by one int64 *key*, ``tile << KEY_SHIFT | address``, so intervals on different
tiles can never touch: sorting keys sorts by tile, then address, and one sorted pass handles every tile at
once.
"""

from __future__ import annotations

import numpy as np

KEY_SHIFT = 40
ADDRESS_LIMIT = 1 << (
    KEY_SHIFT - 1
)  # addresses + lengths stay below this, so keys never carry into the tile bits


def key(tile: np.ndarray | int, addr: np.ndarray | int) -> np.ndarray:
    return (np.asarray(tile, np.int64) << KEY_SHIFT) | np.asarray(addr, np.int64)


def key_tile(k: np.ndarray) -> np.ndarray:
    return np.asarray(k, np.int64) >> KEY_SHIFT


def key_addr(k: np.ndarray) -> np.ndarray:
    return np.asarray(k, np.int64) & ((1 << KEY_SHIFT) - 1)


def sorted_unique(x: np.ndarray) -> np.ndarray:
    """``np.unique`` for int64 keys via one sort (numpy's hash-based unique is several times slower here)."""
    x = np.sort(x)
    if len(x) < 2:
        return x
    keep = np.ones(len(x), bool)
    keep[1:] = x[1:] != x[:-1]
    return x[keep]


def ranges(first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(first[i], first[i] + counts[i])`` over i, without a Python loop."""
    counts = np.asarray(counts, np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    starts = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    return np.arange(total, dtype=np.int64) + np.repeat(np.asarray(first, np.int64) - starts, counts)


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted, disjoint, non-touching cover of the non-empty intervals ``[starts, ends)`` (keys)."""
    keep = ends > starts
    s, e = starts[keep], ends[keep]
    if len(s) == 0:
        return s, e
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), bool)
    new[1:] = s[1:] > reach[:-1]
    heads = np.flatnonzero(new)
    tails = np.append(heads[1:], len(s)) - 1
    return s[heads], reach[tails]


def overlaps(qs: np.ndarray, qe: np.ndarray, us: np.ndarray, ue: np.ndarray) -> np.ndarray:
    """For each query ``[qs, qe)``, does it overlap the disjoint sorted union ``(us, ue)``?"""
    if len(us) == 0 or len(qs) == 0:
        return np.zeros(len(qs), bool)
    # only the union interval starting last before qe can overlap: every earlier one ends before its start
    idx = np.searchsorted(us, qe, side="left") - 1
    ok = idx >= 0
    out = np.zeros(len(qs), bool)
    out[ok] = ue[idx[ok]] > qs[ok]
    return out & (qe > qs)


def inside(qs: np.ndarray, qe: np.ndarray, us: np.ndarray, ue: np.ndarray) -> np.ndarray:
    """For each query, is it wholly inside one interval of the disjoint sorted union ``(us, ue)``?"""
    if len(us) == 0 or len(qs) == 0:
        return np.zeros(len(qs), bool)
    idx = np.searchsorted(us, qs, side="right") - 1
    ok = idx >= 0
    out = np.zeros(len(qs), bool)
    out[ok] = ue[idx[ok]] >= qe[ok]
    return out


def cut(bounds: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Split intervals at the sorted unique ``bounds`` (which must contain every start and end).

    Returns ``(owner, seg)``: elementary segment ``seg`` = ``[bounds[seg], bounds[seg + 1])`` lies in interval
    ``owner``; pairs come out grouped by owner in address order.
    """
    first = np.searchsorted(bounds, starts)
    last = np.searchsorted(bounds, ends)
    counts = np.maximum(last - first, 0)
    owner = np.repeat(np.arange(len(starts), dtype=np.int64), counts)
    return owner, ranges(first, counts)


def runs(mask_new: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heads and (inclusive) tails of the runs delimited by ``mask_new`` (True where a run starts)."""
    heads = np.flatnonzero(mask_new)
    tails = np.append(heads[1:], len(mask_new)) - 1
    return heads, tails
