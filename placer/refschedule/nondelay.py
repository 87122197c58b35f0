"""A non-delay list order of a phase: the parallel schedule-generation scheme on a simple resource model.

``materialize`` is a *serial* scheme: it takes the list as given and puts each transfer at its earliest offset, so
a tile whose first listed receive is a multicast that waits for a busy co-receiver idles until then, although
receives listed after it were ready long before (a tile takes its receives in list order). On PE b2's relayed QKV
phase the last tiles to finish took their first receive at cycle 900–1,235: the weight all-gather of a grid column
(each tile multicasting its slice to the other nine) held them up, in B1024's order and in every order derived
from it.

The parallel scheme builds the list instead: repeatedly, of the transfers whose predecessors are listed, take the
one that can start earliest on a model of the phase (each tile's lane and port free from the end of its last
listed transfer, a dependent ``lag`` cycles after its predecessor's end), ties by a priority (a position in
another order, B1024's); the list is then timed by the real rules. The model ignores latency, back-fill and the
control and memory rules, which is why its result is an order, not a schedule.

The loop is compiled (``_balance.cpp``, ``nondelay``): a line-by-line port of ``_nondelay_python`` here, which
stays as its test oracle (the same order, compared on random phases).
"""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import numpy.typing as npt

from placer import native
from placer.capture.model import Phase
from placer.streams import _balance
from placer.streams.dependencies import Dependencies

native.require(_balance)

# what a dependent waits after its predecessor's send ends, in the model: a payload lands 52 + 2·row cycles after
# its send starts (row ≤ 22 on IPU21), the route adds up to about a hundred more
LAG = 150

I64 = npt.NDArray[np.int64]  # the compiled loop's columns (``_balance.nondelay`` takes contiguous int64)


def nondelay_order(phase: Phase, deps: Dependencies, priority: npt.NDArray[np.integer[Any]], *, tiles: int,
                   lag: int = LAG) -> npt.NDArray[np.int64]:
    """The non-delay list order of ``phase`` (see the module docstring): a topological order of ``deps``.

    ``priority`` gives each transfer a distinct rank (lower first among transfers that can start at the same
    time), e.g. its position in another order. Raises ValueError on a dependency cycle."""
    n = phase.n
    succ_ptr, succ = _successors(n, deps)
    order = np.empty(n, np.int64)
    source, words, dst_ptr, dst_tile = _columns(phase)
    placed = _balance.nondelay(source=source, words=words, dst_ptr=dst_ptr, dst_tile=dst_tile,
                               rank=np.ascontiguousarray(priority, np.int64), succ_ptr=succ_ptr, succ=succ,
                               lag=int(lag), tiles=int(tiles), order=order)
    if placed != n:
        raise ValueError(f"nondelay_order: the dependencies have a cycle ({n - placed} transfers never ready)")
    return order


def _columns(phase: Phase) -> tuple[I64, I64, I64, I64]:
    return (np.ascontiguousarray(phase.source, np.int64), np.ascontiguousarray(phase.words, np.int64),
            np.ascontiguousarray(phase.dst_ptr, np.int64), np.ascontiguousarray(phase.dst_tile, np.int64))


def _successors(n: int, deps: Dependencies) -> tuple[I64, I64]:
    """Each transfer's dependents, as CSR (``succ_ptr``, ``succ``), in input order."""
    o = np.argsort(deps.pred, kind="stable")
    succ_ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(deps.pred, minlength=n), out=succ_ptr[1:])
    return succ_ptr, np.ascontiguousarray(deps.succ[o], np.int64)


def _nondelay_python(phase: Phase, priority: npt.NDArray[np.integer[Any]], succ_ptr: I64, succ: I64, lag: int,
                     tiles: int) -> tuple[I64, int]:
    """The loop of ``nondelay_order`` in Python, the test oracle of the compiled one; returns (order, how many
    transfers it placed).

    Each step lists the transfer of least (earliest start, rank) among those whose predecessors are listed; starts
    only grow as transfers are listed, so listing times never go back. Held as a time-ordered simulation: a
    transfer that cannot start when it becomes eligible *parks* on its blocker (the lane or port free last, the
    first one on ties), and each resource with parked transfers has one *wake* in the heap, keyed (its free time,
    its best parked rank): a lower bound on every key parked there. So a busy port's hundreds of waiting receives
    are not re-keyed each time one of them is listed; the heap pops the same transfers as a heap of every eligible
    transfer re-keyed lazily would (the tests check this)."""
    n = phase.n
    source = phase.source.tolist()
    words = phase.words.tolist()
    dptr = phase.dst_ptr.tolist()
    dest = [d + tiles for d in phase.dst_tile.tolist()]  # resources: lanes 0..tiles-1, ports tiles..2·tiles-1
    rank = priority.tolist()
    sp = succ_ptr.tolist()
    sc = succ.tolist()
    waiting = np.bincount(succ, minlength=n).tolist()  # unlisted predecessors
    free = [0] * (2 * tiles)
    ready = [0] * n
    parked: list[list[tuple[int, int]]] = [[] for _ in range(2 * tiles)]  # (rank, transfer)
    wake: list[tuple[int, int] | None] = [None] * (2 * tiles)  # the key of each resource's live wake
    heap: list[tuple[int, int, int]] = []  # (time, rank, transfer) or (time, rank, -1 - resource): a wake

    def enter(x: int, now: int) -> None:
        """x is eligible: into the heap at its start, or parked on its blocker if that is a resource busy after
        ``now``."""
        t, b = ready[x], -1
        if free[source[x]] > t:
            t, b = free[source[x]], source[x]
        for k in range(dptr[x], dptr[x + 1]):
            if free[dest[k]] > t:
                t, b = free[dest[k]], dest[k]
        if b < 0 or t <= now:
            heapq.heappush(heap, (t, rank[x], x))
            return
        queue = parked[b]
        heapq.heappush(queue, (rank[x], x))
        if queue[0][1] == x:  # the best parked here now: a wake at its key
            wake[b] = (t, rank[x])
            heapq.heappush(heap, (t, rank[x], -1 - b))

    for x in range(n):
        if waiting[x] == 0:
            enter(x, 0)
    order: list[int] = []
    while heap:
        t, r, x = heapq.heappop(heap)
        if x < 0:  # a wake of resource b
            b = -1 - x
            if wake[b] != (t, r):
                continue  # superseded
            if free[b] > t:  # the resource got busier since: wake later
                wake[b] = (free[b], r)
                heapq.heappush(heap, (free[b], r, x))
                continue
            wake[b] = None
            queue = parked[b]
            enter(heapq.heappop(queue)[1], t)
            if queue and wake[b] is None:
                wake[b] = (free[b], queue[0][0])
                heapq.heappush(heap, (free[b], queue[0][0], x))
            continue
        s = ready[x]
        s = max(s, free[source[x]], *(free[dest[k]] for k in range(dptr[x], dptr[x + 1])))
        if s > t:
            enter(x, t)
            continue
        order.append(x)
        end = s + words[x]
        free[source[x]] = end
        for k in range(dptr[x], dptr[x + 1]):
            free[dest[k]] = end
        for k in range(sp[x], sp[x + 1]):
            y = sc[k]
            ready[y] = max(ready[y], end + lag)
            waiting[y] -= 1
            if waiting[y] == 0:
                enter(y, s)
    return np.asarray(order, np.int64), len(order)


__all__ = ["LAG", "nondelay_order"]
