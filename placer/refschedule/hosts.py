"""Which forward a relay host sends first, and which gathers it takes before each (under the reference's rules).

A host with several forwards receives their segments on one port and sends them on one lane, and a forward's
send may not overlap a receive into an SRAM element it reads (the memory rule). When its segments share elements,
the order decides how much of the gathering a send can overlap: with segments 1..4 over elements A|B, B, B|C, C,
sending 1, 4, 2, 3 lets forward 1 go as soon as segment 1 is in (while segment 4 lands in C) where 1, 2, 3, 4
holds forward 1 until segment 2 is in B too. This module tries, per host, every order of up to ``PERMUTED``
forwards (else as listed and reversed), and two placements of a gather piece (in its own forward's block, or in
the block of the first forward that reads its element), on a small model of the host alone: its port takes the
pieces one after another, its lane the forwards, with the memory rule between them, list order first, and each
forward no sooner than its replicas end the direct receives they take before it (in the schedule the search
starts from). It keeps the plan whose last forward ends first (then the smallest sum of forward starts, then the
first tried).

The model leaves out routes, latencies and the gathers' senders; ``materialize`` times the resulting list by the
real rules, and the order is kept only if that schedule is shorter.
"""

from __future__ import annotations

import itertools

import numpy as np

from placer.arrays import isin, unique
from placer.capture.model import Phase
from placer.refschedule.hostbound import PERMUTED  # the bound and the plans try the same orders
from placer.refschedule.reference import ReferenceSchedule, hazard_pairs
from placer.streams.dependencies import Dependencies

_LATENCY = 60  # about the cycles from a send to its payload on a replica (route, select, pointer)


def _earliest(start: int, words: int, busy: list[tuple[int, int]]) -> int:
    """The earliest t >= start with [t, t + words) clear of every interval in ``busy``."""
    moved = True
    while moved:
        moved = False
        for a, b in busy:
            if a < start + words and start < b:
                start, moved = b, True
    return start


Piece = tuple[frozenset[int], frozenset[int]]  # (the forwards a gather feeds, none if it feeds none; its keys)


def _simulate(blocks: list[list[tuple[frozenset[int], int, frozenset[int]]]],
              sends: list[tuple[int, int, frozenset[int]]], release: dict[int, int]) -> tuple[int, int]:
    """Blocks of pieces (forwards fed, words, element keys), each followed by its forward (id, words, keys it
    reads; no sooner than its release): (last send end, sum of send starts)."""
    port = lane = total = 0
    landed: dict[int, int] = {}
    received: dict[int, list[tuple[int, int]]] = {}
    sent: dict[int, list[tuple[int, int]]] = {}
    for pieces, (f, fw, reads) in zip(blocks, sends, strict=True):
        for feeds, w, keys in pieces:
            t = _earliest(port, w, [iv for k in keys for iv in sent.get(k, [])])
            port = t + w
            for k in keys:
                received.setdefault(k, []).append((t, port))
            for g in feeds:
                landed[g] = max(landed.get(g, 0), port)
        t = _earliest(max(lane, landed.get(f, 0), release.get(f, 0)), fw,
                      [iv for k in reads for iv in received.get(k, [])])
        lane = t + fw
        total += t
        for k in reads:
            sent.setdefault(k, []).append((t, lane))
    return lane, total


def plan_hosts(phase: Phase, deps: Dependencies, levels: np.ndarray, release: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray]:
    """Per transfer: the block of a gather of a planned host (-1 otherwise), and the lane rank of a forward of one
    (-1 otherwise); ``release``: the earliest a forward's replicas can take it. Hosts with one forward keep the
    incumbent's order (nothing to choose)."""
    slot = np.full(phase.n, -1, np.int64)
    rank = np.full(phase.n, -1, np.int64)
    forwards = unique(deps.succ[levels[deps.succ] == 1])
    hosts, count = np.unique(phase.source[forwards], return_counts=True)
    if not (count > 1).any():
        return slot, rank
    owner = phase.dst_transfer()
    on_host = isin(phase.source, hosts[count > 1])  # transfers sent by a planned host
    at_host = np.flatnonzero(isin(phase.dst_tile, hosts[count > 1]))  # entries received by one
    s_tr, s_key, entry, d_key = hazard_pairs(phase)
    reads: dict[int, set[int]] = {}
    for t, k in zip(s_tr[on_host[s_tr]].tolist(), s_key[on_host[s_tr]].tolist(), strict=True):
        reads.setdefault(t, set()).add(k)
    writes: dict[int, set[int]] = {}
    mine = isin(entry, at_host)
    for e, k in zip(entry[mine].tolist(), d_key[mine].tolist(), strict=True):
        writes.setdefault(e, set()).add(k)
    fed: dict[int, set[int]] = {}  # gather → the forwards it feeds (a fragment may straddle two segments)
    edge = (levels[deps.succ] == 1) & on_host[deps.succ]
    for a, b in zip(deps.pred[edge].tolist(), deps.succ[edge].tolist(), strict=True):
        fed.setdefault(a, set()).add(b)
    by_host: dict[int, list[int]] = {}
    for f in forwards[on_host[forwards]].tolist():
        by_host.setdefault(int(phase.source[f]), []).append(f)
    pieces: dict[int, dict[Piece, int]] = {h: {} for h in by_host}
    members: dict[tuple[int, Piece], list[int]] = {}
    words = phase.words.tolist()
    for e, h, t in zip(at_host.tolist(), phase.dst_tile[at_host].tolist(), owner[at_host].tolist(), strict=True):
        piece = frozenset(fed.get(t, ())), frozenset(writes.get(e, ()))
        if not piece[0] and not piece[1]:
            continue  # neither gathered nor in the way of a forward
        pieces[h][piece] = pieces[h].get(piece, 0) + words[t]
        members.setdefault((h, piece), []).append(t)
    for h, fs in by_host.items():
        orders = (itertools.permutations(fs) if len(fs) <= PERMUTED else iter([tuple(fs), tuple(reversed(fs))]))
        best: tuple[int, int] | None = None
        choice: tuple[tuple[int, ...], dict[Piece, int]] | None = None
        for order in orders:
            at = {f: k for k, f in enumerate(order)}
            for early in (False, True):
                place: dict[Piece, int] = {}
                for feeds, keys in pieces[h]:
                    own = min([at[f] for f in feeds if f in at], default=0)
                    if early:  # before the first forward that reads what it writes
                        own = min([own] + [at[f] for f in fs if keys & reads.get(f, set())])
                    place[(feeds, keys)] = own
                blocks: list[list[tuple[frozenset[int], int, frozenset[int]]]] = [[] for _ in order]
                for (feeds, keys), b in place.items():
                    blocks[b].append((feeds, pieces[h][(feeds, keys)], keys))
                sends = [(f, words[f], frozenset(reads.get(f, set()))) for f in order]
                score = _simulate(blocks, sends, {f: int(release[f]) for f in order})
                if best is None or score < best:
                    best, choice = score, (order, place)
        assert choice is not None
        order, place = choice
        for k, f in enumerate(order):
            rank[f] = k
        for piece, b in place.items():
            for t in members[(h, piece)]:
                slot[t] = b if slot[t] < 0 else min(slot[t], b)
    return slot, rank


def host_order(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule, *,
               interleave: bool) -> np.ndarray | None:
    """``schedule``'s order with each planned host's gathers permuted among the places its gathers held, block by
    block, and its forwards in their planned order: among the places its forwards held (``interleave`` False:
    after every gather, so each replica takes them after its direct receives), or each just after the last gather
    of its block (so a forward is listed before the gathers its send must not overlap, but also before the direct
    receives its replicas have not yet taken). None when no host has two forwards."""
    # a forward's replicas take it after the direct receives listed before it: when those end in ``schedule``
    owner = phase.dst_transfer()
    words = phase.words.astype(np.int64)
    direct = levels[owner] == 0
    busy = np.zeros(int(phase.dst_tile.max(initial=0)) + 1, np.int64)
    np.maximum.at(busy, phase.dst_tile[direct], (schedule.rx_start + words[owner])[direct])
    release = np.zeros(phase.n, np.int64)
    np.maximum.at(release, owner[~direct], busy[phase.dst_tile[~direct]] - _LATENCY)
    slot, rank = plan_hosts(phase, deps, levels, release)
    if (rank < 0).all():
        return None
    base = schedule.order
    n = phase.n
    place = np.empty(n, np.int64)
    place[base] = np.arange(n)
    key = place.astype(np.float64)
    gathered = np.flatnonzero((slot >= 0) & (levels == 0))
    host = np.zeros(n, np.int64)
    host[gathered] = phase.dst_tile[phase.dst_ptr[gathered]]
    _permute(key, place, gathered, host[gathered], slot[gathered])
    forwards = np.flatnonzero(rank >= 0)
    if not interleave:
        _permute(key, place, forwards, phase.source[forwards].astype(np.int64), rank[forwards])
        # on a base whose forwards sit among the gathers (the interleaved host plans'), a forward can take a place
        # before the gather it forwards: it then moves to just after it
        _after_predecessors(key, deps, levels)
        return np.lexsort((np.arange(n), key))
    last = np.full(n, -1.0)
    np.maximum.at(last, deps.succ, key[deps.pred])
    # the last gather place of each (host, block), looked up by each forward's (source, rank)
    blocks = int(max(slot.max(), rank.max())) + 1
    block_end = np.full(int(max(phase.dst_tile.max(), phase.source.max())) * blocks + blocks, -1.0)
    np.maximum.at(block_end, host[gathered] * blocks + slot[gathered], key[gathered])
    ends = block_end[phase.source[forwards].astype(np.int64) * blocks + rank[forwards]]
    key[forwards] = np.maximum(ends, last[forwards]) + 0.5 + 1e-6 * rank[forwards]
    key[levels > 1] += n  # everything deeper keeps its place after depth one
    _after_predecessors(key, deps, levels)
    return np.lexsort((np.arange(n), key))


def _after_predecessors(key: np.ndarray, deps: Dependencies, levels: np.ndarray) -> None:
    """Move every transfer listed before one of its predecessors to just after it, depth by depth."""
    for lv in range(1, int(levels.max(initial=0)) + 1):
        edge = levels[deps.succ] == lv
        np.maximum.at(key, deps.succ[edge], key[deps.pred[edge]] + 0.25)


def _permute(key: np.ndarray, place: np.ndarray, members: np.ndarray, group: np.ndarray,
             rank: np.ndarray) -> None:
    """Give each group's members the places they held, in (rank, place) order."""
    by_rank = members[np.lexsort((place[members], rank, group))]
    by_place = members[np.lexsort((place[members], group))]
    key[by_rank] = place[by_place]


def held_gathers(phase: Phase, forward: np.ndarray, rank: np.ndarray, later: np.ndarray, slot: np.ndarray
                 ) -> np.ndarray:
    """Which of the ``later`` gathers write an SRAM element that their host's forward of rank ``slot`` − 1 reads."""
    held = np.zeros(phase.n, bool)
    s_tr, s_key, entry, d_key = hazard_pairs(phase)
    reader = forward[s_tr] & (rank[s_tr] >= 0)
    if not reader.any():
        return held
    span = int(max(rank.max(), slot.max())) + 2
    read = unique(s_key[reader] * span + rank[s_tr[reader]])  # a key names its tile: the host
    t = phase.dst_transfer()[entry]
    mine = later[t]
    code = d_key[mine] * span + slot[t[mine]] - 1
    held[t[mine][isin(code, read)]] = True
    return held


__all__ = ["held_gathers", "host_order", "plan_hosts"]
