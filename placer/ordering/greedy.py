"""The production scheduler mirrored (docs/reference.md §7, "B1024"): a balanced order, then the row builder times it.

Order. Each chunk (one stream's transfers of one wave, see ``streams``) is ranked by (wave, larger stream total
first, stream id, position); wave by wave, the chunks are taken from a heap keyed by (the latest ready time among
the chunk's endpoints, then the larger remaining endpoint work, then the stream id). Every endpoint the chunk uses
(its source's transmit lane, each receiver's port) then becomes ready at the pick time + the chunk's cycles;
remaining work counts the chunks of every wave not yet taken, and a chunk's work is its busiest endpoint's. The
final order sorts by dependency depth (a relay's gathers, depth 0, before its forwards, depth 1), then wave, then
pick order; a chunk's transfers keep their stream positions.

Row builder. The chunks are timed in that order, each as early as its lane, its ports and its predecessors allow
(a predecessor's payload must have landed at all its receivers; no fixed lag): a later chunk may start earlier in
time than an earlier one whose endpoints are busy. A chunk's send and receive controls may not fall on a cycle
where one of its tiles already has a control event (a tile issues one control per cycle): a conflicting chunk is
pushed one cycle at a time. Availability is never back-filled, as in the production rule.

Keys only get worse as chunks are taken (ready times grow, remaining work shrinks), so the heap is lazy: a popped
chunk whose key changed is pushed back with its new key, and a popped chunk whose key is current is the minimum.

The balancing heap (``balanced_picks``, shared with the reference's order in ``reference``) is compiled
(``_balance.cpp``: the rank and the endpoints' work prepared here with numpy, the simulation ported line by line
from ``_balanced_picks_python``, which stays here as the test oracle: the same picks, compared on random items).
CP-S phase 60 (133,442 transfers): the reference's order takes 6 s with the Python heap, 0.3 s compiled
(``benchmarks/bench_balance.py``).
"""

from __future__ import annotations

import heapq

import numpy as np

from placer import native
from placer.ordering import _balance
from placer.ordering.streams import Chunks, incidence

native.require(_balance)

RULES = ("b1024", "nowave")
"""``b1024`` is the production rule; ``nowave`` balances all chunks in one wave (stream order and dependencies
remain) and is used only as an extra incumbent for CP-SAT."""

# the compiled heap takes words that sum below this: its times and work are int64 (it checks 2^62 exactly; the
# margin covers the rounding of the float sum that decides here)
_MAX_WORDS = 2.0**61


def balanced_order(chunks: Chunks, rule: str = "b1024") -> list[int]:
    """The B1024 final order of the chunks (see the module docstring)."""
    if chunks.count == 0:
        return []
    wave = chunks.wave if rule == "b1024" else np.zeros(chunks.count, np.int64)
    picked = balanced_picks(chunks.tiles, chunks.words, chunks.stream, wave, chunks.stream_total, chunks.source,
                            chunks.dset, chunks.set_tiles)
    order: list[int] = np.lexsort((picked, wave, chunks.level)).tolist()
    return order


def balanced_picks(tiles: int, words: np.ndarray, stream: np.ndarray, wave: np.ndarray, stream_total: np.ndarray,
                   source: np.ndarray, dset: np.ndarray, set_tiles: list[np.ndarray]) -> np.ndarray:
    """When each item (a wave of one stream, sending ``words`` from ``source`` to the tiles of set ``dset``) is
    taken by the balancing heap (see :func:`_balanced_picks_python`, the same heap in Python); returns the pick
    number of every item.

    Raises ValueError on items the heap cannot take: columns that are not integers within int64, an endpoint
    outside ``[0, 2·tiles)``, a destination set that does not exist, negative words (times would go back) or words
    summing to 2^61 or more (the heap's times are int64)."""
    count = int(words.shape[0])
    columns = [_int64(a, count) for a in (words, stream, wave, source, dset)]
    tile_sets = [_int64(t, int(t.shape[0]) if t.ndim == 1 else -1) for t in set_tiles]
    if tiles < 0 or any(a is None for a in columns) or any(t is None for t in tile_sets):
        raise ValueError("balanced_picks: the items' columns and destination sets must be one-dimensional integer "
                         "arrays within int64, one entry per item")
    words64, stream64, wave64, source64, dset64 = (a for a in columns if a is not None)
    sizes = np.array([t.shape[0] for t in set_tiles], np.int64)
    set_ptr = np.zeros(len(set_tiles) + 1, np.int64)
    np.cumsum(sizes, out=set_ptr[1:])
    set_res = tiles + (np.concatenate([t for t in tile_sets if t is not None]) if set_tiles
                       else np.zeros(0, np.int64))
    endpoints = 2 * tiles
    if not (_within(source64, endpoints) and _within(set_res, endpoints)):
        raise ValueError("balanced_picks: a source or a destination tile out of range")
    if not _within(dset64, len(set_tiles)):
        raise ValueError("balanced_picks: a destination set that does not exist")
    if int(words64.min(initial=0)) < 0 or float(words64.sum(dtype=np.float64)) >= _MAX_WORDS:
        raise ValueError("balanced_picks: negative words, or words summing to 2^61 or more")
    # the Python heap's own rank and work (same numpy calls, so the same values even where a float sum rounds)
    rank = np.lexsort((np.arange(count), stream, -stream_total, wave))
    item, inc = incidence(tiles, source, dset, set_tiles)
    work = np.bincount(inc, weights=words[item], minlength=endpoints).astype(np.int64)
    picked = np.zeros(count, np.int64)
    n_picked = _balance.picks(rank=np.ascontiguousarray(rank, np.int64), wave=wave64, words=words64,
                              stream=stream64, source=source64, dset=dset64, set_ptr=set_ptr,
                              set_res=np.ascontiguousarray(set_res, np.int64), work=work, picked=picked)
    if n_picked != count:  # unreachable: every parked item's endpoint has an event
        raise RuntimeError(f"balanced order took {n_picked} of {count} items")
    return picked


def _int64(values: np.ndarray, size: int) -> np.ndarray | None:
    """``values`` as a contiguous int64 array of ``size`` entries, or None if they are not integers that int64
    holds."""
    if values.ndim != 1 or values.shape[0] != size or values.dtype.kind not in "iu":
        return None
    if values.dtype == np.uint64 and values.size and int(values.max()) >= 1 << 63:
        return None
    return np.ascontiguousarray(values, np.int64)


def _within(values: np.ndarray, top: int) -> bool:
    return values.size == 0 or (int(values.min()) >= 0 and int(values.max()) < top)


def _balanced_picks_python(tiles: int, words: np.ndarray, stream: np.ndarray, wave: np.ndarray,
                           stream_total: np.ndarray, source: np.ndarray, dset: np.ndarray,
                           set_tiles: list[np.ndarray]) -> np.ndarray:
    """The balancing heap in Python: the test oracle of the compiled one (``_balance.cpp``, a line-by-line port
    that :func:`balanced_picks` runs). When each item (a wave of one stream, sending ``words`` from ``source`` to
    the tiles of set ``dset``) is taken by the balancing heap: wave by wave, by (latest ready endpoint, larger
    remaining endpoint work, stream id), each endpoint then ready at the pick time + the item's words. Returns the
    pick number of every item.

    Picks happen in non-decreasing time (a pick makes its endpoints ready later; keys only grow), so the heap is
    run as a time-ordered simulation: an item waits ("parks") on its blocker, the endpoint that is ready last; when
    an endpoint becomes ready, only its best parked item competes at that time (every other item parked there
    needs the same endpoint, so at most one of them can be taken then). The competitors at one time are taken by
    (larger remaining endpoint work, stream id); one that lost an endpoint meanwhile parks on it and lets the next
    item of its endpoint compete. Same picks as :func:`balanced_order_heap`, without re-keying every waiting
    item at each pick."""
    count = int(words.shape[0])
    words_l = words.tolist()
    stream_l = stream.tolist()
    wave_l = wave.tolist()
    set_res = [(t + tiles).tolist() for t in set_tiles]
    res = [[s, *set_res[d]] for s, d in zip(source.tolist(), dset.tolist(), strict=True)]
    ready = [0] * (2 * tiles)
    item, inc = incidence(tiles, source, dset, set_tiles)
    work = np.bincount(inc, weights=words[item], minlength=2 * tiles).astype(np.int64).tolist()
    parked: list[list[tuple[int, int, int]]] = [[] for _ in range(2 * tiles)]  # (-work, stream, item)
    queued = [False] * (2 * tiles)
    events: list[tuple[int, int]] = []

    def blocker(c: int) -> tuple[int, int, int]:
        """(latest ready, its endpoint (the first one on ties), largest remaining work) of chunk c."""
        t = -1
        b = 0
        w = 0
        for r in res[c]:
            if ready[r] > t:
                t = ready[r]
                b = r
            if work[r] > w:
                w = work[r]
        return t, b, w

    def park(c: int) -> None:
        _, b, w = blocker(c)
        heapq.heappush(parked[b], (-w, stream_l[c], c))
        if not queued[b]:
            queued[b] = True
            heapq.heappush(events, (ready[b], b))

    def best_of(e: int, now: int, compete: list[tuple[int, int, int, int]]) -> None:
        """Move endpoint e's best chunk that can start at ``now`` into ``compete``; re-park the others met."""
        queue = parked[e]
        while queue:
            neg_w, st, c = heapq.heappop(queue)
            t, b, w = blocker(c)
            if t > now:  # blocked elsewhere (or here, later)
                heapq.heappush(parked[b], (-w, st, c))
                if not queued[b]:
                    queued[b] = True
                    heapq.heappush(events, (ready[b], b))
                continue
            if -w != neg_w:  # its work went down: back in line with the current value
                heapq.heappush(queue, (-w, st, c))
                continue
            heapq.heappush(compete, (-w, st, c, e))
            return

    rank = np.lexsort((np.arange(count), stream, -stream_total, wave))
    by_wave: dict[int, list[int]] = {}
    for c in rank.tolist():
        by_wave.setdefault(wave_l[c], []).append(c)
    picked = [0] * count
    n_picked = 0
    for k in sorted(by_wave):
        for c in by_wave[k]:
            park(c)
        while events:
            now = events[0][0]
            compete: list[tuple[int, int, int, int]] = []
            while events and events[0][0] == now:
                _, e = heapq.heappop(events)
                queued[e] = False
                if ready[e] > now:  # used meanwhile: wait for its new time
                    if parked[e]:
                        queued[e] = True
                        heapq.heappush(events, (ready[e], e))
                    continue
                best_of(e, now, compete)
            while compete:
                neg_w, st, c, e = heapq.heappop(compete)
                t, b, w = blocker(c)
                if t > now:  # lost an endpoint to a better chunk at this time
                    heapq.heappush(parked[b], (-w, st, c))
                    if not queued[b]:
                        queued[b] = True
                        heapq.heappush(events, (ready[b], b))
                    if ready[e] <= now:
                        best_of(e, now, compete)
                    continue
                if -w != neg_w:
                    heapq.heappush(compete, (-w, st, c, e))
                    continue
                end = now + words_l[c]
                for r in res[c]:
                    ready[r] = end
                    work[r] -= words_l[c]
                    if parked[r] and not queued[r]:
                        queued[r] = True
                        heapq.heappush(events, (end, r))
                picked[c] = n_picked
                n_picked += 1
    if n_picked != count:  # unreachable: every parked item's endpoint has an event
        raise RuntimeError(f"balanced order took {n_picked} of {count} items")
    return np.asarray(picked, np.int64)


def balanced_order_heap(chunks: Chunks, rule: str = "b1024") -> list[int]:
    """The same order as :func:`balanced_order`, with one lazy heap over every chunk of a wave: the literal
    reading of the rule, quadratic where many chunks share a port; kept to test the fast version against."""
    count = chunks.count
    if count == 0:
        return []
    tiles = chunks.tiles
    words = chunks.words.tolist()
    stream = chunks.stream.tolist()
    source = chunks.source.tolist()
    dset = chunks.dset.tolist()
    wave = chunks.wave.tolist() if rule == "b1024" else [0] * count
    set_ports = [t.tolist() for t in chunks.set_tiles]
    lane_ready = [0] * tiles
    port_ready = [0] * tiles
    lane_work = np.bincount(chunks.source, weights=chunks.words, minlength=tiles).astype(np.int64).tolist()
    chunk, res = chunks.resources()
    on_port = res >= tiles
    port_work = np.bincount(res[on_port] - tiles, weights=chunks.words[chunk[on_port]],
                            minlength=tiles).astype(np.int64).tolist()
    # a destination set's (latest ready, largest remaining work) over its ports, recomputed only when one of its
    # ports changed: multicast chunks share their set's ports, so this is most of the key
    sets_of_port: list[list[int]] = [[] for _ in range(tiles)]
    for sid, ports in enumerate(set_ports):
        for d in ports:
            sets_of_port[d].append(sid)
    nsets = len(set_ports)
    set_ready = [0] * nsets
    set_work = [0] * nsets
    dirty = [True] * nsets

    def key(c: int) -> tuple[int, int, int, int]:
        sid = dset[c]
        if dirty[sid]:
            t = w = 0
            for d in set_ports[sid]:
                if port_ready[d] > t:
                    t = port_ready[d]
                if port_work[d] > w:
                    w = port_work[d]
            set_ready[sid], set_work[sid], dirty[sid] = t, w, False
        s = source[c]
        return max(lane_ready[s], set_ready[sid]), -max(lane_work[s], set_work[sid]), stream[c], c

    # rank: (wave, larger stream total first, stream id, position); the heap is filled in rank order
    rank = np.lexsort((chunks.wave, chunks.stream, -chunks.stream_total, np.asarray(wave)))
    by_wave: dict[int, list[int]] = {}
    for c in rank.tolist():
        by_wave.setdefault(wave[c], []).append(c)
    picked = [0] * count
    n_picked = 0
    for k in sorted(by_wave):
        heap = [key(c) for c in by_wave[k]]
        heapq.heapify(heap)
        entry = heapq.heappop(heap) if heap else None
        while entry is not None:
            c = entry[3]
            now = key(c)
            if now != entry:  # stale: re-enter with the current key (taken at once if still the smallest)
                entry = heapq.heappushpop(heap, now)
                continue
            end = now[0] + words[c]
            s = source[c]
            lane_ready[s] = end
            lane_work[s] -= words[c]
            for d in set_ports[dset[c]]:
                port_ready[d] = end
                port_work[d] -= words[c]
                for sid in sets_of_port[d]:
                    dirty[sid] = True
            picked[c] = n_picked
            n_picked += 1
            entry = heapq.heappop(heap) if heap else None
    order: list[int] = np.lexsort((np.asarray(picked), np.asarray(wave), chunks.level)).tolist()
    return order


def row_builder(chunks: Chunks, order: list[int]) -> np.ndarray:
    """Time the chunks in ``order`` (predecessors first): each at the earliest cycle its lane, ports and
    dependencies allow, then pushed one cycle at a time past control-event conflicts on its tiles."""
    count = chunks.count
    tiles = chunks.tiles
    words = chunks.words.tolist()
    lane_words = chunks.lane_words.tolist()
    tail = chunks.tail.tolist()
    source = chunks.source.tolist()
    set_tiles = [t.tolist() for t in chunks.set_tiles]
    dset = chunks.dset.tolist()
    ptr = chunks.ptr.tolist()
    offsets = chunks.offset.tolist()
    succs: list[list[int]] = [[] for _ in range(count)]
    for a, b in zip(chunks.dep_pred.tolist(), chunks.dep_succ.tolist(), strict=True):
        succs[a].append(b)
    lane = [0] * tiles
    port = [0] * tiles
    used: list[set[int]] = [set() for _ in range(tiles)]  # control-event cycles per tile
    ready = [0] * count
    start = [-1] * count
    for c in order:
        s = source[c]
        dests = set_tiles[dset[c]]
        t = max(ready[c], lane[s])
        for d in dests:
            if port[d] > t:
                t = port[d]
        offs = offsets[ptr[c]:ptr[c + 1]]
        who = [used[s], *(used[d] for d in dests)]
        while any(t + o in u for u in who for o in offs):
            t += 1
        start[c] = t
        events = [t + o for o in offs]
        for u in who:
            u.update(events)
        lane[s] = t + lane_words[c]
        for d in dests:
            port[d] = t + words[c]
        landed = t + words[c] + tail[c]
        for b in succs[c]:
            if landed > ready[b]:
                ready[b] = landed
    if min(start, default=0) < 0:  # unreachable when ``order`` lists every chunk once
        raise RuntimeError("row builder: a chunk was not placed")
    return np.asarray(start, np.int64)


def retime(chunks: Chunks, starts: np.ndarray) -> np.ndarray:
    """Re-run the row builder in the order of an existing schedule: compacts it and resolves control-event
    conflicts (the CP-SAT models do not see control cycles). Start order is a topological order of every
    dependency and stream edge (each has a positive lag), so the result is valid."""
    order = np.lexsort((np.arange(chunks.count), starts)).tolist()
    return row_builder(chunks, order)


def greedy_starts(chunks: Chunks, rule: str = "b1024") -> np.ndarray:
    """Start cycle (transmit frame) of every chunk under the mirrored B1024 rule (or ``nowave``)."""
    if chunks.count == 0:
        return np.zeros(0, np.int64)
    return row_builder(chunks, balanced_order(chunks, rule))
