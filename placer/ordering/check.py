"""An independent checker for a phase schedule.

It shares no code with the schedulers (no chunks, no dependency sweep, no latency helper): it re-derives latency
from the machine's geometry constants and re-derives conflicts pair by pair from the transfers' byte intervals.
What it checks, per transfer ``i`` of ``words[i]`` cycles sent at ``tx[i]`` and received by destination entry
``e`` at ``rx[e]``:
- every transfer sent once (one non-negative start) and received once per destination entry;
- latency: ``rx[e] == tx[i] + 52 + 2·row(tile)`` (the exchange is time-deterministic);
- no two transmissions overlap on one source lane; a send whose source addresses (every Repeat address) do not
  continue the lane's previous send (in time) writes the outgoing base first, so the lane must be idle for
  ``base_write`` (13) cycles before it (from cycle 0 for the first);
- no two receptions overlap on one receive port, where a short receive run (consecutive receptions from one
  source, back to back and contiguous in memory, at most ``short_words`` (51) words in all) keeps the port
  ``short_hold`` (5) cycles past its payload;
- control events: a tile issues at most one per cycle: its send cycles and its receive-control cycles (a
  receiver selects its source at the sender's send cycle, ``rx − latency``) are all distinct;
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
                   *, limit: int = 20, base_write: int = 13, short_words: int = 51,
                   short_hold: int = 5) -> list[str]:
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

    lead = _base_writes(phase, tx) * base_write
    out += _overlaps("lane", phase.source.astype(np.int64), tx - lead, words + lead, np.arange(n), limit)
    for i in np.flatnonzero(tx - lead < 0)[:limit].tolist():
        out.append(f"transfer {i}: its base write would start at cycle {tx[i] - lead[i]}")
    hold = _holds(phase, rx, owner, words, short_words, short_hold)
    out += _overlaps("receive port", phase.dst_tile.astype(np.int64), rx, words[owner] + hold, owner, limit)
    out += _controls(phase, tx, rx - lat, owner, limit)
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


def _base_writes(phase: Phase, tx: np.ndarray) -> np.ndarray:
    """1 where a send must write its lane's outgoing base (its sources do not continue the previous send's)."""
    out = np.ones(phase.n, np.int64)
    prev: dict[int, int] = {}
    for i in np.lexsort((tx, phase.source)).tolist():
        s = int(phase.source[i])
        j = prev.get(s)
        if j is not None:
            mine = phase.src_addr[phase.src_ptr[i]:phase.src_ptr[i + 1]]
            theirs = phase.src_addr[phase.src_ptr[j]:phase.src_ptr[j + 1]] + 4 * int(phase.words[j])
            if len(mine) == len(theirs) and bool(np.all(mine == theirs)):
                out[i] = 0
        prev[s] = i
    return out


def _holds(phase: Phase, rx: np.ndarray, owner: np.ndarray, words: np.ndarray, short_words: int,
           short_hold: int) -> np.ndarray:
    """Per destination entry: the cycles its port stays busy past its payload (the end of a short run)."""
    hold = np.zeros(len(rx), np.int64)
    run: list[int] = []
    run_words = 0
    last_tile = -1

    def close() -> None:
        if run and run_words <= short_words:
            hold[run[-1]] = short_hold

    for e in np.lexsort((rx, phase.dst_tile)).tolist():
        t = int(phase.dst_tile[e])
        if run and t == last_tile:
            p = run[-1]
            wp = int(words[owner[p]])
            if (phase.source[owner[e]] == phase.source[owner[p]] and rx[e] == rx[p] + wp
                    and phase.dst_addr[e] == phase.dst_addr[p] + 4 * wp):
                run.append(e)
                run_words += int(words[owner[e]])
                continue
        close()
        run, run_words, last_tile = [e], int(words[owner[e]]), t
    close()
    return hold


def _controls(phase: Phase, tx: np.ndarray, select: np.ndarray, owner: np.ndarray, limit: int) -> list[str]:
    """Two control events of one tile on one cycle (a transfer's own send and receive on one tile are one)."""
    tile = np.concatenate([phase.source.astype(np.int64), phase.dst_tile.astype(np.int64)])
    cyc = np.concatenate([tx, select])
    who = np.concatenate([np.arange(phase.n), owner])
    o = np.lexsort((cyc, tile))
    t, c, w = tile[o], cyc[o], who[o]
    clash = np.flatnonzero((t[1:] == t[:-1]) & (c[1:] == c[:-1]) & (w[1:] != w[:-1]))
    return [f"tile {t[k]}: control events of transfers {w[k]} and {w[k + 1]} both at cycle {c[k]}"
            for k in clash[:limit].tolist()]


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


def check_reference_schedule(phase: Phase, tx_start: Any, rx_start: Any, horizon: int, machine: Machine,
                             *, limit: int = 20) -> list[str]:
    """Violations of the reference's timing rules (``placer.refschedule.reference``), found without its code.

    Per transfer ``i`` sent at ``tx[i]`` and landing on destination entry ``e`` at ``rx[e]``, with the receiver's
    source select at ``X = rx − 52 − 2·row`` (51 for a 52-word transfer):
    - ``X == tx + mux_time(source, receiver) + 1`` (the route);
    - a tile's sends ``[tx, tx + words)`` are disjoint, and so are its selects ``[X, X + words)``;
    - a receive whose address does not continue the tile's previous one (in select order) lands after the previous
      payload has: ``rx >= previous rx + words``;
    - a tile's control events (select at X, teardown at X + words unless the next select is at that cycle,
      pointer at rx unless the address continues) never put two selects/teardowns, or two pointers, on one cycle,
      and none falls on one of the tile's send starts or the cycle after;
    - every conflicting pair of accesses (RAW, WAW, WAR over byte intervals, every Repeat address) in order;
    - no tile sends from an SRAM element (16 KiB below 0x80000, 32 KiB pairs above) while it receives into it
      (a receive holds its element to rx + words + 5);
    - the claimed horizon is the last send end or arrival + 5 (6 after a 52-word transfer)."""
    out: list[str] = []
    n = phase.n
    tx = np.asarray(tx_start, np.int64)
    rx = np.asarray(rx_start, np.int64)
    words = phase.words.astype(np.int64)
    owner = np.repeat(np.arange(n), np.diff(phase.dst_ptr))
    if tx.shape != (n,) or rx.shape != (len(phase.dst_tile),):
        return [f"{len(tx)} send and {len(rx)} receive times for {n} transfers and {len(phase.dst_tile)} "
                "destination entries"]
    dst = phase.dst_tile.astype(np.int64)
    w_e = words[owner]
    quirk = (w_e == 52).astype(np.int64)
    select = rx - 52 + quirk - 2 * machine.row(dst)
    expected = tx[owner] + machine.mux_time(phase.source[owner], dst) + 1
    for e in np.flatnonzero(select != expected)[:limit].tolist():
        out.append(f"transfer {owner[e]} selected by tile {dst[e]} at {select[e]}, the route gives {expected[e]}")
    out += _overlaps("lane", phase.source.astype(np.int64), tx, words, np.arange(n), limit)
    out += _overlaps("receive select", dst, select, w_e, owner, limit)

    by_tile = np.lexsort((select, dst))
    t, x, r, a, w = dst[by_tile], select[by_tile], rx[by_tile], phase.dst_addr[by_tile], w_e[by_tile]
    same = np.zeros(len(t), bool)
    same[1:] = t[1:] == t[:-1]
    contiguous = np.zeros(len(t), bool)
    contiguous[1:] = same[1:] & (a[1:] == a[:-1] + 4 * w[:-1])
    late = np.flatnonzero(same & ~contiguous & (np.roll(r + w, 1) > r))
    for k in late[:limit].tolist():
        out.append(f"tile {t[k]}: a receive lands at {r[k]} before the previous one's payload ends "
                   f"({r[k - 1] + w[k - 1]}) and its address does not continue it")
    cut = np.zeros(len(t), bool)  # the next select replaces this receive's teardown
    cut[:-1] = same[1:] & (x[1:] == x[:-1] + w[:-1])
    xpic_tile = np.concatenate([t, t[~cut]])
    xpic_cycle = np.concatenate([x, (x + w)[~cut]])
    out += _same_cycle("select/teardown", xpic_tile, xpic_cycle, limit)
    out += _same_cycle("pointer", t[~contiguous], r[~contiguous], limit)
    control_tile = np.concatenate([xpic_tile, t[~contiguous]])
    control_cycle = np.concatenate([xpic_cycle, r[~contiguous]])
    send_key = np.unique(phase.source.astype(np.int64) * (1 << 32) + tx)
    for lag in (0, 1):
        hit = np.isin(control_tile * (1 << 32) + control_cycle - lag, send_key)
        for k in np.flatnonzero(hit)[:limit].tolist():
            out.append(f"tile {control_tile[k]}: a receive control at {control_cycle[k]} falls on a send start "
                       f"({control_cycle[k] - lag})")
    out += _dependencies(phase, tx, rx, owner, limit)
    out += _element_clashes(phase, tx, rx, owner, limit)

    guard = 5 + quirk
    last = int(max((rx + w_e + guard).max(initial=0), (tx + words).max(initial=0)))
    if last != horizon:
        out.append(f"claimed horizon {horizon}, schedule ends at {last}")
    return out[:limit] if limit else out


def _same_cycle(what: str, tile: np.ndarray, cycle: np.ndarray, limit: int) -> list[str]:
    o = np.lexsort((cycle, tile))
    t, c = tile[o], cycle[o]
    clash = np.flatnonzero((t[1:] == t[:-1]) & (c[1:] == c[:-1]))
    return [f"tile {t[k]}: two {what} controls at cycle {c[k]}" for k in clash[:limit].tolist()]


def _element_clashes(phase: Phase, tx: np.ndarray, rx: np.ndarray, owner: np.ndarray, limit: int) -> list[str]:
    """A send and a receive of one tile that overlap in time on a common SRAM element."""
    words = phase.words.astype(np.int64)
    reads_of = np.repeat(np.arange(phase.n), np.diff(phase.src_ptr))
    tile = np.concatenate([phase.source[reads_of], phase.dst_tile]).astype(np.int64)
    lo = np.concatenate([phase.src_addr, phase.dst_addr]).astype(np.int64)
    tr = np.concatenate([reads_of, owner])
    recv = np.concatenate([np.zeros(len(reads_of), np.int64), np.ones(len(owner), np.int64)])
    start = np.concatenate([tx[reads_of], rx])
    end = start + words[tr] + recv * (5 + (words[tr] == 52))
    first, last = _element(lo), _element(lo + 4 * words[tr] - 1)
    span = last - first + 1
    row = np.repeat(np.arange(len(lo)), span)
    element = first[row] + np.arange(int(span.sum())) - np.repeat(np.cumsum(span) - span, span)
    key = tile[row] * 4096 + element
    both = np.intersect1d(key[recv[row] == 0], key[recv[row] == 1])
    keep = np.isin(key, both)
    row, key = row[keep], key[keep]
    order = np.lexsort((start[row], key))
    out: list[str] = []
    live: dict[int, list[tuple[int, int]]] = {0: [], 1: []}  # open windows by kind: (end, transfer)
    current = -1
    for k, r in zip(key[order].tolist(), row[order].tolist(), strict=True):
        if k != current:
            current, live = k, {0: [], 1: []}
        kind, s, f, i = int(recv[r]), int(start[r]), int(end[r]), int(tr[r])
        live[1 - kind] = [(e2, i2) for e2, i2 in live[1 - kind] if e2 > s]
        for other_end, other in live[1 - kind]:
            if other != i:
                out.append(f"tile {k // 4096}: transfer {i} {'receives into' if kind else 'sends from'} memory "
                           f"element {k % 4096} at {s} while transfer {other} still "
                           f"{'sends from' if kind else 'receives into'} it (until {other_end})")
                if len(out) >= limit:
                    return out
        live[kind] = [(e2, i2) for e2, i2 in live[kind] if e2 > s] + [(f, i)]
    return out


def _element(addr: np.ndarray) -> np.ndarray:
    """SRAM element of each address: 16 KiB below 0x80000, 32 KiB interleaved pairs above (ids from 64)."""
    return np.where(addr < 0x80000, addr >> 14, 64 + ((addr - 0x80000) >> 15))
