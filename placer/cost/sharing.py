"""Shared phase tables (docs/reference.md §3, the reference's finer per-tile estimator).

A tile stores one exchange table per phase it takes part in, but two phases whose rows on that tile are the same
instruction sequence -- the same sends (word counts) and the same receives (source tile, word count, pointer
reset or not), in listed order -- can share one table: the first use of a *row signature* costs its bytes, the
second use ``shared_second_patch_bytes`` (12) per *patch*, every later use ``shared_later_patch_bytes`` (4) per
patch, rounded up to ``table_rounding``. A patch is an address the later use needs and the first use's table does
not hold: each send's source address and each pointer reset's destination address, compared position by position.
A phase whose sources change between Repeat iterations (a transfer with two different source addresses) is never
shared. A use is charged the smaller of its shared and its own bytes (sharing that costs more is not taken).

This is what makes the reference's four attention rounds -- the same exchange pattern for different heads --
cheap after the first, and why its encoded per-tile maximum (99 KB on batch-two SigLIP) is far below its Σ of
phase maxima (143 KB); ``machine.cost.share_phase_tables = 0`` turns it off.

Everything is numpy per phase: each tile's signature is an order-sensitive 64-bit hash of its row (collisions
between two different rows have probability about 2^-64 per pair), and patches are counted element-wise only for
the tiles whose signature repeats.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from placer.arrays import unique
from placer.capture.model import Phase, csr_gather, tile_order
from placer.machine import Machine
from placer.threads import ordered_map
from placer.units import round_up

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a well-spread 64-bit hash of each element."""
    x = x.astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        x ^= x >> np.uint64(31)
        x *= np.uint64(0xBF58476D1CE4E5B9)
        x ^= x >> np.uint64(27)
        x *= np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return x


@dataclass(eq=False)
class RowSignatures:
    """One phase's rows, per tile: the signature (0 = the tile has no row, or the phase is never shared) and the
    addresses a sharing use would have to patch, as a CSR over tiles (sends first, then pointer resets)."""

    signature: np.ndarray  # uint64 (tiles,)
    addr_ptr: np.ndarray  # int64 (tiles + 1,)
    addr: np.ndarray  # int64


def varies_per_iteration(phase: Phase) -> bool:
    """True when some transfer reads a different source address in different Repeat iterations."""
    counts = np.diff(phase.src_ptr)
    if not (counts > 1).any():
        return False
    first = np.repeat(phase.first_src_addr(), counts)
    return bool((phase.src_addr != first).any())


_RANK_KEYS = np.zeros(0, np.uint64)


def _rank_keys(n: int) -> np.ndarray:
    """``_mix(k) * _GOLDEN`` for every rank k < n (kept and grown: the ranks of every phase's entries look them
    up instead of hashing millions of small integers again)."""
    global _RANK_KEYS
    keys = _RANK_KEYS
    if keys.size < n:
        with np.errstate(over="ignore"):
            keys = _mix(np.arange(max(n, 2 * keys.size), dtype=np.uint64)) * _GOLDEN
        keys.flags.writeable = False
        _RANK_KEYS = keys
    return keys


def _per_tile(tile: np.ndarray, value: np.ndarray, tiles: int,
              order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Order-sensitive hash of each tile's entries (listed order), entry order by tile (``order``,
    ``tile_order(tile)``), and entry counts."""
    counts = np.bincount(tile, minlength=tiles)[:tiles]
    first = np.zeros(tiles + 1, np.int64)
    np.cumsum(counts, out=first[1:])
    rank = np.arange(order.shape[0], dtype=np.int64) - np.repeat(first[:-1], counts)
    with np.errstate(over="ignore"):
        h = _mix(value[order] ^ _rank_keys(int(counts.max(initial=0)))[rank])
    sig = np.zeros(tiles, np.uint64)
    busy = np.flatnonzero(counts)
    if busy.size:
        sig[busy] = np.add.reduceat(h, first[busy])
    return sig, order, counts


# per phase (a phase is not changed once built), tile count and reset flags (with and without the capture's
# allocations they differ): its rows' signatures, computed once; the flags are kept with them, so their id stays
# theirs
_ROWS: weakref.WeakKeyDictionary[Phase, dict[tuple[int, int], tuple[np.ndarray, RowSignatures]]] = \
    weakref.WeakKeyDictionary()


def row_signatures(phase: Phase, resets: np.ndarray, tiles: int) -> RowSignatures:
    """Signatures and patchable addresses of every tile's row in ``phase`` (cached); ``resets`` flags each receive
    entry (the phase's ``dst_*`` order) that resets the tile's receive pointer."""
    per = _ROWS.get(phase)
    if per is None:
        per = _ROWS.setdefault(phase, {})
    key = (tiles, id(resets))
    if key not in per:
        per[key] = (resets, _row_signatures(phase, resets, tiles))
    return per[key][1]


def _row_signatures(phase: Phase, resets: np.ndarray, tiles: int) -> RowSignatures:
    empty = RowSignatures(np.zeros(tiles, np.uint64), np.zeros(tiles + 1, np.int64), np.zeros(0, np.int64))
    if phase.n == 0 or varies_per_iteration(phase):
        return empty
    src = phase.source.astype(np.int64)
    send_val = np.uint64(1) << np.uint64(60) | phase.words.astype(np.uint64)
    s_sig, s_order, s_counts = _per_tile(src, send_val, tiles, phase.source_order())
    dt = phase.dst_transfer()
    r_val = (np.uint64(2) << np.uint64(60) | src[dt].astype(np.uint64) << np.uint64(20)
             | phase.words[dt].astype(np.uint64) << np.uint64(1) | resets.astype(np.uint64))
    r_sig, r_order, _ = _per_tile(phase.dst_tile.astype(np.int64), r_val, tiles, phase.dst_order())
    with np.errstate(over="ignore"):
        sig = _mix(s_sig) + _mix(r_sig ^ _GOLDEN)
    sig[(s_counts == 0) & (np.bincount(phase.dst_tile, minlength=tiles)[:tiles] == 0)] = 0
    # patchable addresses per tile: its sends' source addresses, then its pointer resets' addresses
    reset_entries = r_order[resets[r_order] == 1]
    a_tile = np.concatenate([src[s_order], phase.dst_tile[reset_entries].astype(np.int64)])
    a_val = np.concatenate([phase.first_src_addr()[s_order], phase.dst_addr[reset_entries]])
    order = tile_order(a_tile)  # stable: sends (already by tile) keep listed order, then resets
    ptr = np.zeros(tiles + 1, np.int64)
    np.cumsum(np.bincount(a_tile, minlength=tiles)[:tiles], out=ptr[1:])
    return RowSignatures(sig, ptr, a_val[order])


@dataclass(eq=False)
class Sharing:
    """What sharing does to a program: per phase and tile the bytes charged (``charged``, P × tiles) and the first
    use each shared row points to (``first_use``: phase index, −1 when the row is its own)."""

    charged: np.ndarray  # int64 (P, tiles)
    first_use: np.ndarray  # int64 (P, tiles)

    def pinned(self) -> np.ndarray:
        """(P, tiles) bool: rows whose charge depends on, or determines, another phase's -- every use charged
        less than its own rows and the first use it points to."""
        out = self.first_use >= 0
        p, t = np.nonzero(out)
        out[self.first_use[p, t], t] = True
        return out

    def shared_phases(self) -> set[int]:
        """Indices of the phases whose charge on some tile depends on another phase's row: every use that saves
        bytes, and the first use it shares (changing either one's row changes the charge)."""
        later = self.first_use >= 0
        out = set(np.flatnonzero(later.any(axis=1)).tolist())
        out |= set(unique(self.first_use[later]).tolist())
        return out


def share_tables(phases: list[Phase], own: np.ndarray, resets: list[np.ndarray], machine: Machine,
                 tiles: int, workers: int = 1) -> Sharing:
    """Charge every (phase, tile) row under the sharing rule; ``own`` (P × tiles) holds each row's own rounded
    bytes and ``resets[p]`` the pointer-reset flag of every receive entry of phase p (rows signed on ``workers``
    threads)."""
    c = machine.cost
    charged = own.astype(np.int64, copy=True)
    first_use = np.full(own.shape, -1, np.int64)
    if not c.share_phase_tables or len(phases) < 2:
        return Sharing(charged, first_use)
    rows = list(ordered_map(lambda pr: row_signatures(pr[0], pr[1], tiles), list(zip(phases, resets, strict=True)),
                            workers))
    sig = np.stack([r.signature for r in rows])  # (P, tiles)
    p_idx, t_idx = np.nonzero(sig)
    if p_idx.size == 0:
        return Sharing(charged, first_use)
    s = sig[p_idx, t_idx]
    order = np.lexsort((p_idx, s, t_idx))  # by tile, then signature, then phase (program order)
    p_idx, t_idx, s = p_idx[order], t_idx[order], s[order]
    new_run = np.ones(p_idx.shape[0], bool)
    new_run[1:] = (t_idx[1:] != t_idx[:-1]) | (s[1:] != s[:-1])
    run_start = np.maximum.accumulate(np.where(new_run, np.arange(p_idx.shape[0]), 0))
    use = np.arange(p_idx.shape[0]) - run_start  # 0: first use, 1: second, 2+: later
    later = np.flatnonzero(use > 0)
    if later.size == 0:
        return Sharing(charged, first_use)
    first_p = p_idx[run_start[later]]
    lp, lt, lu = p_idx[later], t_idx[later], use[later]
    patches = np.zeros(later.shape[0], np.int64)
    pair = first_p * len(phases) + lp
    for key in unique(pair).tolist():
        sel = np.flatnonzero(pair == key)
        f, q = divmod(key, len(phases))
        tl = lt[sel]
        counts = rows[q].addr_ptr[tl + 1] - rows[q].addr_ptr[tl]
        same = counts == rows[f].addr_ptr[tl + 1] - rows[f].addr_ptr[tl]  # always, unless two hashes collided
        sel, tl, counts = sel[same], tl[same], counts[same]
        patches[pair == key] = np.iinfo(np.int32).max
        a = rows[f].addr[csr_gather(rows[f].addr_ptr, tl)]
        b = rows[q].addr[csr_gather(rows[q].addr_ptr, tl)]
        csum = np.concatenate([[0], np.cumsum((a != b).astype(np.int64))])
        ends = np.cumsum(counts)
        patches[sel] = csum[ends] - csum[ends - counts]
    per = np.where(lu == 1, c.shared_second_patch_bytes, c.shared_later_patch_bytes)
    rnd = c.table_rounding
    cost = round_up(per * patches, rnd)
    take = cost < own[lp, lt]
    charged[lp[take], lt[take]] = cost[take]
    first_use[lp[take], lt[take]] = first_p[take]
    return Sharing(charged, first_use)
