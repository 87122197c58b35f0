"""The balancing heap of the reference's B1024 order (docs/reference.md §7), which both schedulers use.

Each item is a wave of one stream (the reference's order balances ``(wave, stream)`` items, placer's chunk model
its chunks); wave by wave, the items are taken by (the latest ready time among the item's endpoints, then the
larger remaining endpoint work, then the stream id), and every endpoint the item uses (its source's transmit lane,
each receiver's port) then becomes ready at the pick time + the item's words. :func:`balanced_picks` returns when
each item was taken; ``placer.refschedule.reference.reference_order`` and ``placer.chunkmodel.greedy.balanced_order``
sort by it.

The heap is compiled (``_balance.cpp``: the rank and the endpoints' work prepared here with numpy, the simulation
ported line by line from ``_balanced_picks_python``, which stays here as the test oracle: the same picks, compared
on random items). CP-S phase 60 (133,442 transfers): the reference's order takes 6 s with the Python heap, 0.3 s
compiled (``benchmarks/bench_balance.py``).

One step is not ported line by line when every item's words are positive (``tiered``, the default then). The
items parked on an endpoint all use it, so each one's key is the larger of that endpoint's remaining work and the
largest of its other endpoints'; the Python heap keys them by the whole and, as every pick lowers the endpoint's
work, re-keys them one by one as they surface (on SigLIP b4's relayed phases, 108k items, 4.8M re-keyings). The
compiled heap keeps them in two heaps, by their other endpoints' work and by (stream, item): while the first's best
is not above the endpoint's own work, every item ties on it and the second orders them, and nothing is re-keyed.
The choice is the same; what differs is which blocked items a search meets and re-parks on the way, which cannot
change what competes at any time once every pick makes its endpoints ready strictly later (with a zero-word item it
can: ``tests/ordering/test_balance_compiled.py`` has such a case). Compared with the Python heap on random items
and phases, and with the line queues on every phase a solve measures (docs/ordering.md).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from placer import native
from placer.streams import _balance

native.require(_balance)

# the compiled heap takes words that sum below this: its times and work are int64 (it checks 2^62 exactly; the
# margin covers the rounding of the float sum that decides here)
_MAX_WORDS = 2.0**61

# any integer dtype: the compiled heap takes int64, and ``balanced_picks`` converts (or refuses) what it is given
Ints: TypeAlias = "npt.NDArray[np.integer[Any]]"


def balanced_picks(tiles: int, words: Ints, stream: Ints, wave: Ints, stream_total: Ints, source: Ints, dset: Ints,
                   set_tiles: Sequence[Ints], *, tiered: bool | None = None) -> npt.NDArray[np.int64]:
    """When each item (a wave of one stream, sending ``words`` from ``source`` to the tiles of set ``dset``) is
    taken by the balancing heap (see :func:`_balanced_picks_python`, the same heap in Python); returns the pick
    number of every item. ``tiered``: each endpoint's parked items in two heaps (the module docstring; positive
    words only) or in one, as the Python heap has them; None: tiered when every item's words are positive.

    Raises ValueError on items the heap cannot take: columns that are not integers within int64, an endpoint
    outside ``[0, 2·tiles)``, a destination set that does not exist, negative words (times would go back) or words
    summing to 2^61 or more (the heap's times are int64), and a zero when ``tiered`` is True."""
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
    positive = int(words64.min(initial=1)) > 0
    if tiered and not positive:
        raise ValueError("balanced_picks: the tiered queues take positive words only")
    # the Python heap's own rank and work (same numpy calls, so the same values even where a float sum rounds)
    rank = np.lexsort((np.arange(count), stream, -stream_total, wave))
    item, inc = incidence(tiles, source, dset, set_tiles)
    work = np.bincount(inc, weights=words[item], minlength=endpoints).astype(np.int64)
    picked = np.zeros(count, np.int64)
    n_picked = _balance.picks(rank=np.ascontiguousarray(rank, np.int64), wave=wave64, words=words64,
                              stream=stream64, source=source64, dset=dset64, set_ptr=set_ptr,
                              set_res=np.ascontiguousarray(set_res, np.int64), work=work, picked=picked,
                              tiered=positive if tiered is None else tiered)
    if n_picked != count:  # unreachable: every parked item's endpoint has an event
        raise RuntimeError(f"balanced order took {n_picked} of {count} items")
    return picked


def _int64(values: Ints, size: int) -> npt.NDArray[np.int64] | None:
    """``values`` as a contiguous int64 array of ``size`` entries, or None if they are not integers that int64
    holds."""
    if values.ndim != 1 or values.shape[0] != size or values.dtype.kind not in "iu":
        return None
    if values.dtype == np.uint64 and values.size and int(values.max()) >= 1 << 63:
        return None
    return np.ascontiguousarray(values, np.int64)


def _within(values: Ints, top: int) -> bool:
    return values.size == 0 or (int(values.min()) >= 0 and int(values.max()) < top)


def _balanced_picks_python(tiles: int, words: Ints, stream: Ints, wave: Ints, stream_total: Ints, source: Ints,
                           dset: Ints, set_tiles: Sequence[Ints]) -> npt.NDArray[np.int64]:
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
    item of its endpoint compete. Same picks as :func:`placer.chunkmodel.greedy.balanced_order_heap`, without
    re-keying every waiting item at each pick."""
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


def incidence(tiles: int, source: Ints, dset: Ints,
              set_tiles: Sequence[Ints]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(item, resource) pairs of items that each send from ``source`` to the tiles of destination set ``dset``:
    resource ``s`` is tile s's transmit lane, ``tiles + d`` tile d's receive port."""
    count = int(source.shape[0])
    sizes = np.array([len(t) for t in set_tiles], np.int64)
    fan = sizes[dset]
    item = np.concatenate([np.arange(count), np.repeat(np.arange(count), fan)])
    flat = np.concatenate(set_tiles) if set_tiles else np.zeros(0, np.int64)
    set_ptr = np.zeros(len(sizes) + 1, np.int64)
    np.cumsum(sizes, out=set_ptr[1:])
    starts = set_ptr[dset]
    idx = np.repeat(starts - (np.cumsum(fan) - fan), fan) + np.arange(int(fan.sum()))
    res = np.concatenate([source, tiles + flat[idx].astype(np.int64)])
    return item, res
