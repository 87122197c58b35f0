"""Calendar list: the traffic the relays wait for placed first, on a calendar of every lane and port.

``materialize`` takes a list as given and a tile takes its receives in list order, so which transfer a port takes
next is decided by the list, and no list rule so far says how the direct traffic a relay waits for should share
the ports it crosses. On the CP-SAT plan's phase 60 (docs/ordering.md) three kinds of it meet on ~200 tiles that
are neither hosts nor replicas: the 24-word multicasts of an all-to-all among the seven tiles of a "class" (four of
them replicas, which must have taken these before their host's forwards arrive), and the hosts' own 8-word rows
(sent before their forwards, since a forward holds the host's lane to the end). Such a tile must take 5,520 words
of both before the forwards can go; the list orders tried before packed them at about 83 % and the first forwards
went at ~6.1k cycles.

This builds the list by *serial schedule generation* on a simple model of the phase: transfers are taken in a
priority order, and each is placed at the earliest time at which its sender's lane and every receiver's port are
free for its whole length — in any gap, not only after the last placement (so a later, lower-priority transfer
fills the holes the earlier ones left); a transfer is taken only once its predecessors are placed (where the
priority puts it first, it waits for them) and goes ``lag`` cycles after they end. The priority:

0. the direct transfers into a replica (a receiver of some forward), sender by sender: each sender's run goes as
   one block, so the senders of an all-to-all take turns (slots) and every receiver's port is busy throughout;
1. the relay hosts' own direct sends, the hosts taking turns (``TURN`` sends each): they fill the slots in which
   a receiver sends rather than receives, and no host is left with all of its rows last;
2. the gathers, host by host, in each host's plan (``plan_hosts``): its first block, then the gathers its first
   forward must not overlap (``held_gathers``), then the rest; in each, those whose senders' tied sends (0 and
   1) end latest in the model first, so that the others are left to fill the host's port while those are busy;
3. the forwards, in their plans' order;
4. everything else, sender by sender, each no sooner than its receivers' last tied receive in the model (it
   would fill their gaps there, but the timed list has none to spare).

The list is the transfers by their start in the model (dependents start after their predecessors end, so it is a
topological order). The model leaves out latency, the control and memory rules and the reference's append order
(which is why the result is an order, not a schedule); ``materialize`` times it by the real rules. On phase 60:
12,996 → 12,518 cycles (host bound 11,935; 1.049 ×); on the phases where the replicas take little direct traffic the
orders already found are shorter, and the search keeps only a shorter schedule.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right

import numpy as np

from placer.arrays import isin, unique
from placer.capture.model import Phase
from placer.refschedule.hosts import held_gathers, plan_hosts
from placer.refschedule.reference import ReferenceSchedule
from placer.streams.dependencies import Dependencies

LAG = 100  # model cycles from a gather's end to its forward's send (a payload lands 52 + 2·row after its send)
# a host's own sends go in runs of this many: a port loses a few cycles whenever it switches senders (their routes'
# mux offsets differ); on phase 60, where each host sends 4 rows to each of 18 sets of receivers, runs of 1, 4, 8,
# 12, 16 and 24 gave 12,598, 12,546, 12,518, 12,515, 12,530 and 12,567 cycles
TURN = 8


class Calendar:
    """The busy intervals of one resource (a lane or a port), sorted and merged: ``starts[i] < ends[i] <=
    starts[i + 1]``."""

    __slots__ = ("ends", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []

    def earliest(self, t: int, words: int) -> int:
        """The earliest start >= ``t`` of a ``words``-long interval that overlaps no busy one."""
        starts, ends = self.starts, self.ends
        i = bisect_right(ends, t)
        while i < len(starts) and starts[i] < t + words:
            t = max(t, ends[i])
            i += 1
        return t

    def book(self, a: int, b: int) -> None:
        """Mark ``[a, b)`` busy (it must be free), merging it with a neighbour it touches."""
        starts, ends = self.starts, self.ends
        i = bisect_right(ends, a)
        joins_left = i > 0 and ends[i - 1] == a
        joins_right = i < len(starts) and starts[i] == b
        if joins_left and joins_right:
            ends[i - 1] = ends[i]
            del starts[i], ends[i]
        elif joins_left:
            ends[i - 1] = b
        elif joins_right:
            starts[i] = a
        else:
            starts.insert(i, a)
            ends.insert(i, b)


INTO_REPLICA, HOST_OWN, GATHER, FORWARD, REST = range(5)  # the priority classes (module docstring)


def relay_tiles(phase: Phase, deps: Dependencies) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per tile, whether it is a relay host (sends a forward: a transfer that waits for others) and whether it is a
    replica (receives one); per transfer, whether some receiver is a replica."""
    src = phase.source.astype(np.int64)
    dst = phase.dst_tile.astype(np.int64)
    owner = phase.dst_transfer()
    tiles = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    is_host = np.zeros(tiles, bool)
    is_host[src[deps.succ]] = True
    is_replica = np.zeros(tiles, bool)
    is_replica[dst[isin(owner, deps.succ)]] = True
    into_replica = np.zeros(phase.n, bool)
    into_replica[owner[is_replica[dst]]] = True
    return is_host, is_replica, into_replica


def kinds(phase: Phase, deps: Dependencies, levels: np.ndarray) -> np.ndarray:
    """Each transfer's priority class: ``INTO_REPLICA`` … ``REST``."""
    forward = np.zeros(phase.n, bool)
    forward[deps.succ] = True
    gather = np.zeros(phase.n, bool)
    gather[deps.pred] = True
    is_host, _, into_replica = relay_tiles(phase, deps)
    direct = (levels == 0) & ~gather
    return np.select([direct & into_replica, direct & is_host[phase.source], gather, forward],
                     [INTO_REPLICA, HOST_OWN, GATHER, FORWARD], REST)


def replicas_take_direct(phase: Phase, deps: Dependencies, levels: np.ndarray, share: float = 0.1) -> bool:
    """Do the replicas take direct traffic: the median replica at least ``share`` of the words its forwards bring?
    (Where they take none, the relays and the direct traffic barely meet, and the other steps order them.)"""
    owner = phase.dst_transfer()
    kind = kinds(phase, deps, levels)[owner]  # per receiver
    relayed = kind == FORWARD
    if not relayed.any():
        return False
    dst = phase.dst_tile.astype(np.int64)
    words = phase.words.astype(np.float64)[owner]
    replicas = unique(dst[relayed])
    direct = kind <= HOST_OWN  # on a replica, every direct receive is one of these two classes
    took = np.bincount(dst[direct], words[direct], minlength=int(dst.max()) + 1)[replicas]
    brought = np.bincount(dst[relayed], words[relayed], minlength=int(dst.max()) + 1)[replicas]
    return bool(np.median(took) >= share * np.median(brought))


def calendar_priority(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule, *,
                      plan: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The transfers in the priority order of the module docstring (a permutation of ``range(phase.n)``)."""
    return _priority(phase, deps, levels, schedule, plan)[0]


def _priority(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule,
              plan: tuple[np.ndarray, np.ndarray] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``calendar_priority``, each transfer's class (``kinds``) and its block: its part of its host (a gather's
    plan block, the gathers its first forward must not overlap, the rest; a forward's rank) and the host."""
    n = phase.n
    place = np.empty(n, np.int64)
    place[schedule.order] = np.arange(n)
    src = phase.source.astype(np.int64)
    kind = kinds(phase, deps, levels)
    forward, gather = kind == FORWARD, kind == GATHER
    slot, rank = plan if plan is not None else plan_hosts(phase, deps, levels, np.zeros(n, np.int64))
    held = held_gathers(phase, forward, rank, (slot > 0) & (levels == 0), slot)
    host = np.where(gather, phase.dst_tile[phase.dst_ptr[:-1]].astype(np.int64), src)  # a gather's host, or the sender
    part = np.where(gather, np.select([slot <= 0, held], [0, 1], 2), np.where(forward, rank, 0))
    # the hosts' own sends take turns of TURN sends each: a run's rank among its host's, then the host
    by_host = np.lexsort((place, host, kind))
    first = np.r_[True, (kind[by_host][1:] != kind[by_host][:-1]) | (host[by_host][1:] != host[by_host][:-1])]
    at = np.arange(n)
    turn = np.empty(n, np.int64)
    turn[by_host] = at - np.maximum.accumulate(np.where(first, at, 0))
    turns = kind == HOST_OWN
    order = np.lexsort((place, host, np.where(turns, turn // TURN, 0), part, kind))
    return order, kind, part * (int(host.max(initial=0)) + 1) + host


def calendar_order(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule, *,
                   plan: tuple[np.ndarray, np.ndarray] | None = None, lag: int = LAG) -> np.ndarray:
    """The calendar list of ``phase`` (module docstring): a topological order of ``deps``. ``plan``: the host plans
    (``plan_hosts``) if already made."""
    n = phase.n
    priority, kind, block = _priority(phase, deps, levels, schedule, plan)
    tied = (kind <= HOST_OWN).tolist()
    rest = (kind == REST).tolist()
    src = phase.source.tolist()
    dst = phase.dst_tile.tolist()
    ptr = phase.dst_ptr.tolist()
    words = phase.words.tolist()
    tiles = max(max(src, default=0), max(dst, default=0)) + 1
    lanes = [Calendar() for _ in range(tiles)]
    ports = [Calendar() for _ in range(tiles)]
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(deps.pred.tolist(), deps.succ.tolist(), strict=True):
        preds[b].append(a)
        succs[a].append(b)
    waiting = [len(p) for p in preds]  # predecessors not yet placed
    start = [0] * n
    end = [0] * n
    tied_end = [0] * tiles  # per tile, when its last tied receive ends in the model
    sent_until = [0] * tiles  # per tile, when its last tied send ends in the model

    def place(t: int) -> None:
        w = words[t]
        x = max((end[p] + lag for p in preds[t]), default=0)
        receivers = dst[ptr[t]:ptr[t + 1]]
        if rest[t]:
            # the rest waits, on each receiver, for the tied traffic: in the model it fills their gaps, but the
            # timed list has none to spare there (phase 60: 12,570 without this)
            x = max(x, max(tied_end[d] for d in receivers))  # noqa: PLW3301 - an empty `receivers` stays an error
        resources = [lanes[src[t]]] + [ports[d] for d in receivers]
        while True:  # each resource's earliest free start from x on, until all agree
            y = x
            for r in resources:
                y = r.earliest(y, w)
            if y == x:
                break
            x = y
        for r in resources:
            r.book(x, x + w)
        start[t], end[t] = x, x + w
        if tied[t]:
            sent_until[src[t]] = max(sent_until[src[t]], x + w)
            for d in receivers:
                tied_end[d] = max(tied_end[d], x + w)

    def place_ready(key: list[int], allowed: list[bool]) -> None:
        """Place every allowed transfer, each once its predecessors are placed, the lowest key first (the
        priority where it agrees with the dependencies: a transfer waits for a predecessor of a later class)."""
        ready = [(key[t], t) for t in range(n) if allowed[t] and waiting[t] == 0 and not placed[t]]
        heapq.heapify(ready)
        while ready:
            _, t = heapq.heappop(ready)
            place(t)
            placed[t] = True
            for u in succs[t]:
                waiting[u] -= 1
                if waiting[u] == 0 and allowed[u]:
                    heapq.heappush(ready, (key[u], u))

    rank = np.empty(n, np.int64)
    rank[priority] = np.arange(n)
    placed = [False] * n
    # first the tied traffic (and whatever it waits for)
    first = list(tied)
    stack = [t for t in range(n) if first[t]]
    while stack:
        for p in preds[stack.pop()]:
            if not first[p]:
                first[p] = True
                stack.append(p)
    place_ready(rank.tolist(), first)
    # then the rest, a host's gathers from the senders busy with tied sends latest first: placed in the first gap of
    # the host's port, the others are left to fill the port while those senders are busy (phase 60: a host
    # gathering from two levels of the classes idled through the later level's turn: 12,576 without this)
    gathers = priority[kind[priority] == GATHER]
    busy = np.asarray(sent_until, np.int64)[phase.source[gathers]]
    key = rank.copy()
    key[gathers[np.lexsort((np.arange(len(gathers)), -busy, block[gathers]))]] = rank[gathers]
    place_ready(key.tolist(), [True] * n)
    return np.lexsort((rank, np.asarray(start, np.int64)))


__all__ = ["Calendar", "calendar_order", "calendar_priority", "kinds", "relay_tiles", "replicas_take_direct"]
