"""An independent checker for a phase schedule.

It shares no code with the schedulers (no chunks, no dependency sweep, no latency helper): it re-derives latency
from the machine's geometry constants and re-derives conflicts pair by pair from the transfers' byte intervals.
What it checks, per transfer ``i`` of ``words[i]`` cycles sent at ``tx[i]`` and received by destination entry
``e`` at ``rx[e]``:
- every transfer sent once (one non-negative start) and received once per destination entry;
- latency: ``rx[e] == tx[i] + 52 + 2·row(tile)`` (the exchange is time-deterministic);
- no two transmissions overlap on one source lane, no two receptions on one receive port;
- for every pair ``i < j`` (listed order) touching overlapping bytes of one tile, at least one writing:
  RAW: ``j`` reads what ``i`` wrote there → ``tx[j] >= rx_i + words[i]``;
  WAW: both write → ``rx_j >= rx_i + words[i]``; WAR: ``i`` reads, ``j`` writes → ``rx_j >= tx[i] + words[i]``;
  reads are every Repeat address of the source;
- the claimed horizon is the last landing cycle.
Pairs are found per tile by sorting accesses by address and sweeping (Python), simple rather than fast.
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np

from placer.capture.model import Phase
from placer.machine import Machine


def check_schedule(phase: Phase, tx_start: Any, rx_start: Any, horizon: int, machine: Machine,
                   *, limit: int = 20) -> list[str]:
    """Violations found (at most ``limit`` messages); an empty list means the schedule is valid."""
    out: list[str] = []
    n = phase.n
    tx = np.asarray(tx_start, np.int64)
    rx = np.asarray(rx_start, np.int64)
    words = phase.words.astype(np.int64)
    fan = np.diff(phase.dst_ptr)
    owner = np.repeat(np.arange(n), fan)
    if tx.shape != (n,):
        return [f"{len(tx)} send times for {n} transfers"]
    if rx.shape != (len(phase.dst_tile),):
        return [f"{len(rx)} receive times for {len(phase.dst_tile)} destination entries"]
    for i in np.flatnonzero(tx < 0)[:limit].tolist():
        out.append(f"transfer {i} not sent (start {tx[i]})")

    lat = _latency(machine, phase.dst_tile.astype(np.int64))
    bad = np.flatnonzero(rx != tx[owner] + lat)
    for e in bad[:limit].tolist():
        out.append(f"transfer {owner[e]} lands on tile {phase.dst_tile[e]} at {rx[e]}, expected "
                   f"{tx[owner[e]] + lat[e]} (latency {lat[e]})")

    out += _overlaps("lane", phase.source.astype(np.int64), tx, words, np.arange(n), limit)
    out += _overlaps("receive port", phase.dst_tile.astype(np.int64), rx, words[owner], owner, limit)
    out += _dependencies(phase, tx, rx, owner, limit)

    last = int(max((rx + words[owner]).max(initial=0), (tx + words).max(initial=0)))
    if last != horizon:
        out.append(f"claimed horizon {horizon}, schedule ends at {last}")
    return out[:limit] if limit else out


def _latency(machine: Machine, tiles: np.ndarray) -> np.ndarray:
    g = machine.geometry
    pair = tiles // 2
    block = pair // g.rows
    row = pair % g.rows
    row = np.where(block % 2 == 1, g.rows - 1 - row, row)
    return g.latency_base + g.latency_per_row * row


def _overlaps(what: str, tile: np.ndarray, start: np.ndarray, length: np.ndarray, transfer: np.ndarray,
              limit: int) -> list[str]:
    order = np.lexsort((start, tile))
    t, s, e, tr = tile[order], start[order], start[order] + length[order], transfer[order]
    clash = np.flatnonzero((t[1:] == t[:-1]) & (s[1:] < e[:-1]))
    return [f"{what} of tile {t[k]}: transfers {tr[k]} [{s[k]}, {e[k]}) and {tr[k + 1]} "
            f"[{s[k + 1]}, {e[k + 1]}) overlap" for k in clash[:limit].tolist()]


def _dependencies(phase: Phase, tx: np.ndarray, rx: np.ndarray, owner: np.ndarray, limit: int) -> list[str]:
    """Every conflicting pair, found per tile with an address sweep, checked against the three rules."""
    n = phase.n
    nbytes = phase.words.astype(np.int64) * 4
    words = phase.words.astype(np.int64)
    # accesses: (tile, lo, hi, transfer, is_write, time the access happens on that tile, its end)
    reads_of = np.repeat(np.arange(n), np.diff(phase.src_ptr))
    acc_tile = np.concatenate([phase.source[reads_of], phase.dst_tile]).astype(np.int64)
    acc_lo = np.concatenate([phase.src_addr, phase.dst_addr]).astype(np.int64)
    acc_tr = np.concatenate([reads_of, owner])
    acc_hi = acc_lo + nbytes[acc_tr]
    acc_w = np.concatenate([np.zeros(len(reads_of), bool), np.ones(len(owner), bool)])
    acc_t = np.concatenate([tx[reads_of], rx])
    out: list[str] = []
    order = np.lexsort((acc_lo, acc_tile)).tolist()
    tiles_l = acc_tile.tolist()
    lo_l, hi_l, tr_l, w_l, t_l = acc_lo.tolist(), acc_hi.tolist(), acc_tr.tolist(), acc_w.tolist(), acc_t.tolist()
    words_l = words.tolist()
    active: list[tuple[int, int]] = []  # (hi, access) of the current tile, a heap
    cur_tile = -1
    for k in order:
        if tiles_l[k] != cur_tile:
            cur_tile = tiles_l[k]
            active = []
        while active and active[0][0] <= lo_l[k]:
            heapq.heappop(active)
        for _, m in active:
            if not (w_l[k] or w_l[m]) or tr_l[k] == tr_l[m]:
                continue
            i, j = (m, k) if tr_l[m] < tr_l[k] else (k, m)  # i is the earlier-listed access
            need = t_l[i] + words_l[tr_l[i]]
            if t_l[j] < need:
                kind = "RAW" if w_l[i] and not w_l[j] else ("WAW" if w_l[i] else "WAR")
                out.append(f"{kind} on tile {cur_tile}: transfer {tr_l[j]} at {t_l[j]} before transfer "
                           f"{tr_l[i]} is done there ({need})")
                if len(out) >= limit:
                    return out
        heapq.heappush(active, (hi_l[k], k))
    return out
