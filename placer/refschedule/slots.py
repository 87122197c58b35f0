"""Aligned slots: a relayed phase whose relay hosts are also direct senders (weight homes multicasting to their
column), listed slot by slot so that every column's multicasts follow one another and each host gathers while
it sends.

The structure (SigLIP's and PE's QKV and MLP-up phases under any relay plan): the direct senders form *columns*,
each sender multicasting to the rest of its column, so a column's multicasts are sequential (every two share
receivers) and each waits for every receiver's port. A relay host is one of those receivers, and its port is
also where its gathers land: the one window in which they hold up nothing is its own multicast (a tile does not
receive its own send). So each sender gets a slot, its turn in its column, and slot r lists the gathers into the
hosts of slot r, then their direct sends. Ranking the senders from the top of their column (an earlier step,
"host slots", ranked the hosts so and listed the other senders after every slot) leaves two losses, measured on
SigLIP b2:

- *Slots chosen, not ranked.* A sender's gathers to other hosts leave its lane while those hosts' slots run; if
  its own slot is the same, its multicast waits for the gathers (or they for it) and its column falls behind (the
  production rule's phase 16: 2,567 gathers from a sender in its host's slot, slot starts drifting about 100
  cycles a slot). A local search swaps slots inside each column to minimise the gathered words whose sender and
  host share a slot (2,567 → 0 on that phase; the CP-SAT plan's 1,844 → 18); a column's slots then follow one
  another everywhere, and the columns stay aligned.
- *Spare hosts planned.* A host that sends nothing direct (a spare tile holding a whole group's segment, which
  the CP-SAT selection chooses) can gather at any time; its gathers go first, in the blocks of its host plan
  (``placer.refschedule.hosts``: which forward it sends first, and which gathers each waits for under the memory
  rule), and its forwards in the plan's order; a second order paces its gathers against the first one's schedule
  (``_paced``).

Everything else (each slot's direct sends, the other forwards) keeps the order of the schedule it starts from.
"""

from __future__ import annotations

import numpy as np

from placer.arrays import unique
from placer.capture.model import Phase
from placer.refschedule.hosts import plan_hosts
from placer.refschedule.reference import ReferenceSchedule
from placer.streams.dependencies import Dependencies

_PASSES = 20  # swap passes over every column; each pass keeps only strict gains, so the search ends sooner
_COLUMNAR = 0.9  # the share of direct multicasts that must reach the rest of their column


def sender_slots(phase: Phase, deps: Dependencies, levels: np.ndarray, *, swaps: bool = True
                 ) -> np.ndarray | None:
    """Per tile: the slot in which it sends its direct multicasts (-1: no direct send); None unless the direct
    traffic is in columns (nearly every multicast reaching the rest of its column).

    Starts from each sender's rank in its column (how many direct senders above it receive one of its sends) and,
    with ``swaps``, swaps slots inside a column while that lowers the words gathered from a sender in its host's
    slot."""
    n = phase.n
    src = phase.source.astype(np.int64)
    dst = phase.dst_tile.astype(np.int64)
    owner = phase.dst_transfer()
    tiles = int(max(src.max(initial=0), dst.max(initial=0))) + 1
    relay = np.zeros(n, bool)
    relay[deps.pred] = True
    relay[deps.succ] = True
    direct = ~relay & (levels == 0)
    sender = np.zeros(tiles, bool)
    sender[src[direct]] = True
    entry = np.flatnonzero(direct[owner] & sender[dst] & (dst > src[owner]))
    above = np.bincount(owner[entry], minlength=n)
    slot = np.full(tiles, -1, np.int64)
    np.maximum.at(slot, src[direct], above[direct])
    # columns: tiles joined by a direct multicast (connected components, labelled by their smallest tile)
    edge = np.flatnonzero(direct[owner])
    a, b = src[owner[edge]], dst[edge]
    label = np.arange(tiles)
    while True:
        low = np.minimum(label[a], label[b])
        before = label.copy()
        np.minimum.at(label, a, low)
        np.minimum.at(label, b, low)
        label = label[label]
        if np.array_equal(label, before):
            break
    # the slots mean something only where a sender's multicasts reach the rest of its column
    size = np.bincount(label[unique(np.concatenate([a, b]))], minlength=tiles)
    fan = np.diff(phase.dst_ptr)[direct]
    if not len(fan) or np.mean(fan == size[label[src[direct]]] - 1) < _COLUMNAR:
        return None
    columns: dict[int, list[int]] = {}
    for t in np.flatnonzero(sender).tolist():
        columns.setdefault(int(label[t]), []).append(t)
    # gathered words between two senders, either way (a clash costs the same whichever is the host)
    gather = np.zeros(n, bool)
    gather[deps.pred] = True
    g = np.flatnonzero(gather & (levels == 0))
    x, h = src[g], dst[phase.dst_ptr[g]]
    keep = sender[x] & sender[h] & (x != h)
    pair = np.minimum(x[keep], h[keep]) * tiles + np.maximum(x[keep], h[keep])
    key, inv = np.unique(pair, return_inverse=True)
    weight = np.bincount(inv, weights=phase.words[g[keep]], minlength=len(key))
    near: dict[int, list[tuple[int, int]]] = {}
    for k, wt in zip(key.tolist(), weight.astype(np.int64).tolist(), strict=True):
        u, v = divmod(k, tiles)
        near.setdefault(u, []).append((v, wt))
        near.setdefault(v, []).append((u, wt))
    # clash[t][s]: words t gathers from or into senders of slot s
    slots = int(slot.max(initial=-1)) + 1
    clash = [[0] * slots for _ in range(tiles)]
    for t, ns in near.items():
        for u, wt in ns:
            clash[t][slot[u]] += wt
    mutual = {(u, v): wt for u, ns in near.items() for v, wt in ns}

    def move(t: int, old: int, new: int) -> None:
        slot[t] = new
        for u, wt in near.get(t, ()):
            clash[u][old] -= wt
            clash[u][new] += wt

    for _ in range(_PASSES if swaps else 0):
        gained = False
        for members in columns.values():
            for i, p in enumerate(members):
                for q in members[i + 1:]:
                    sp, sq = int(slot[p]), int(slot[q])
                    # after the swap p sits in slot sq, which q leaves (and q in sp, which p leaves)
                    pq = mutual.get((p, q), 0)
                    if clash[p][sq] + clash[q][sp] - 2 * pq < clash[p][sp] + clash[q][sq]:
                        move(p, sp, sq)
                        move(q, sq, sp)
                        gained = True
        if not gained:
            break
    return slot


def aligned_slots(phase: Phase, deps: Dependencies, levels: np.ndarray, schedule: ReferenceSchedule, *,
                  paced: ReferenceSchedule | None = None, slot: np.ndarray | None = None) -> np.ndarray | None:
    """``schedule``'s order with the depth-0 traffic in slots (module docstring): slot r lists the gathers into
    the senders of slot r, then their direct sends; the gathers into hosts without a direct send come first, in
    their host plans' blocks (in list order, or with ``paced``, a schedule of this order, paced against the
    senders' direct sends and forwards there: ``_paced``); the forwards of a planned host in its plan's order.
    ``slot``: each tile's slot (default ``sender_slots``). None without columns or without direct senders among
    the relay hosts."""
    n = phase.n
    if not len(deps):
        return None
    src = phase.source.astype(np.int64)
    dst = phase.dst_tile.astype(np.int64)
    owner = phase.dst_transfer()
    slot = sender_slots(phase, deps, levels) if slot is None else slot
    if slot is None:
        return None
    forward = np.zeros(n, bool)
    forward[deps.succ] = True
    gather = np.zeros(n, bool)
    gather[deps.pred] = True
    if not (slot[unique(src[forward])] >= 0).any():
        return None
    place = np.empty(n, np.int64)
    place[schedule.order] = np.arange(n)
    direct = ~gather & ~forward & (levels == 0)
    # a forward's replicas are busy with their direct receives for at least those words
    load = np.bincount(dst[direct[owner]], weights=phase.words[owner[direct[owner]]],
                       minlength=len(slot)).astype(np.int64)
    release = np.zeros(n, np.int64)
    np.maximum.at(release, owner[forward[owner]], load[dst[forward[owner]]])
    block, rank = plan_hosts(phase, deps, levels, release)
    key = np.full(n, 2 * int(slot.max()) + 2, np.int64)  # direct traffic of a tile in no slot: after every slot
    key[direct & (slot[src] >= 0)] = 2 * slot[src[direct & (slot[src] >= 0)]]
    into = dst[phase.dst_ptr[:-1]]  # a gather's (first) receiver: its host
    feeds = gather & (levels == 0)
    key[feeds] = np.where(slot[into[feeds]] >= 0, 2 * slot[into[feeds]] - 1, -3)
    first = np.flatnonzero(levels == 0)
    # within a slot by source from the top; a spare host's gathers in list order, so that its senders change at
    # every gather instead of sweeping the tiles in step with the slots' hosts
    top = np.where(key == -3, 0, -src)
    within = place.copy()
    if paced is not None:
        spare = np.flatnonzero(key == -3)
        within[spare] = _paced(phase, spare, np.maximum(block[spare], 0),
                               [np.flatnonzero(direct), np.flatnonzero(forward)], paced)
    first = first[np.lexsort((within[first], top[first], np.maximum(block[first], 0), key[first]))]
    # a planned host's forwards take the places its forwards held, in the plan's order
    later = place.copy()
    planned = np.flatnonzero(rank >= 0)
    by_rank = planned[np.lexsort((place[planned], rank[planned], src[planned]))]
    by_place = planned[np.lexsort((place[planned], src[planned]))]
    later[by_rank] = place[by_place]
    rest = np.flatnonzero(levels > 0)
    return np.concatenate([first, rest[np.lexsort((later[rest], levels[rest]))]])


def _paced(phase: Phase, gathers: np.ndarray, block: np.ndarray, busy: list[np.ndarray],
           schedule: ReferenceSchedule) -> np.ndarray:
    """A rank for each of ``gathers`` (into hosts without a direct send): host by host, block by block, the order
    in which its port can take them one after another while each sender's lane is clear of its other sends (the
    span of each of the ``busy`` sets of transfers per sender, in ``schedule``): at each step the gather whose
    sender is free now and next busy soonest, else the one whose sender frees first.

    Why: listed first, these gathers are timed before everything else and take their senders' lanes at whatever
    time the port reaches them; a sender whose multicast or forward is due then has it pushed back (on the CP-SAT
    plan's phase 16, the spare host's gathers into its last segment broke up its senders' lanes while they were
    to send their forwards, and a replica set's forwards waited 568 cycles for one of them)."""
    src = phase.source.astype(np.int64)
    words = phase.words.astype(np.int64)
    tiles = int(max(src.max(initial=0), phase.dst_tile.max(initial=0))) + 1
    never = np.iinfo(np.int64).max // 4
    spans = []
    for sends in busy:
        start = np.full(tiles, never)
        end = np.zeros(tiles, np.int64)
        np.minimum.at(start, src[sends], schedule.tx_start[sends])
        np.maximum.at(end, src[sends], schedule.tx_start[sends] + words[sends])
        spans.append((start, end))
    host = phase.dst_tile[phase.dst_ptr[gathers]].astype(np.int64)
    rank = np.empty(len(gathers), np.int64)
    step = 0
    for h in unique(host).tolist():
        t = 0
        for b in unique(block[host == h]).tolist():
            left = np.flatnonzero((host == h) & (block == b))
            left = left[np.argsort(schedule.tx_start[gathers[left]], kind="stable")]
            while len(left):
                x = src[gathers[left]]
                w = words[gathers[left]]
                free = np.ones(len(left), bool)
                soon = np.full(len(left), never)
                frees = np.zeros(len(left), np.int64)
                for start, end in spans:
                    a, z = start[x], end[x]
                    inside = (t + w > a) & (t < z)
                    free &= ~inside
                    soon = np.minimum(soon, np.where(a > t, a, never))  # a span already passed: no hurry
                    frees = np.maximum(frees, np.where(inside, z, 0))
                if free.any():
                    i = int(np.flatnonzero(free)[np.argmin(soon[free])])
                else:
                    i = int(np.argmin(frees))
                    t = int(frees[i])
                rank[left[i]] = step
                step += 1
                t += int(w[i])
                left = np.delete(left, i)
    return rank


__all__ = ["aligned_slots", "sender_slots"]
