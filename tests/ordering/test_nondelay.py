"""The non-delay list order (``placer.refschedule.nondelay``): its definition (against a plain lazily re-keyed heap),
the compiled loop against the Python one (its test oracle), and a miniature of the phase it was built for."""

from __future__ import annotations

import heapq
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.model import Phase
from placer.machine import load_machine
from placer.ordering.check import check_reference_schedule
from placer.refschedule.improve import OrderSearch
from placer.refschedule.nondelay import _nondelay_python, _successors, nondelay_order
from placer.refschedule.reference import materialize, reference_bound, reference_schedule
from placer.streams.dependencies import Dependencies, transfer_dependencies, transfer_levels
from tests.ordering.synthetic import relay_phase

from .helpers import TILES, small_phases

MACHINE = load_machine()


def definition(phase: Phase, deps: Dependencies, rank: np.ndarray, lag: int, tiles: int) -> list[int]:
    """The definition, plainly: each step lists the transfer of least (earliest start, rank) among those whose
    predecessors are listed, every eligible transfer in one heap, re-keyed when popped out of date."""
    n = phase.n
    preds = np.bincount(deps.succ, minlength=n).tolist()
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(deps.pred.tolist(), deps.succ.tolist(), strict=True):
        succs[a].append(b)
    lane, port, ready = [0] * tiles, [0] * tiles, [0] * n
    src, w, ptr, dst = (phase.source.tolist(), phase.words.tolist(), phase.dst_ptr.tolist(),
                        phase.dst_tile.tolist())

    def start(x: int) -> int:
        return int(max([ready[x], lane[src[x]]] + [port[dst[k]] for k in range(ptr[x], ptr[x + 1])]))

    heap = [(0, int(rank[x]), x) for x in range(n) if preds[x] == 0]
    heapq.heapify(heap)
    order = []
    while heap:
        t, r, x = heapq.heappop(heap)
        s = start(x)
        if s > t:
            heapq.heappush(heap, (s, r, x))
            continue
        order.append(x)
        lane[src[x]] = s + w[x]
        for k in range(ptr[x], ptr[x + 1]):
            port[dst[k]] = s + w[x]
        for y in succs[x]:
            ready[y] = max(ready[y], s + w[x] + lag)
            preds[y] -= 1
            if preds[y] == 0:
                heapq.heappush(heap, (start(y), int(rank[y]), y))
    return order


def _python(phase: Phase, deps: Dependencies, rank: np.ndarray, lag: int, tiles: int) -> np.ndarray:
    order, placed = _nondelay_python(phase, rank, *_successors(phase.n, deps), lag, tiles)
    assert placed == phase.n
    return order


def _compiled(phase: Phase, deps: Dependencies, rank: np.ndarray, lag: int, tiles: int) -> np.ndarray:
    return nondelay_order(phase, deps, rank, tiles=tiles, lag=lag)


# small random phases, a random rank per transfer, and a dependency lag of none, a little or the default
RANDOM_PHASES = given(phase=small_phases(max_transfers=14, max_words=64), seed=st.integers(0, 2**32 - 1),
                      lag=st.sampled_from([0, 3, 150]))


def _topological(order: np.ndarray, deps: Dependencies) -> bool:
    at = np.empty(len(order), np.int64)
    at[order] = np.arange(len(order))
    return bool((at[deps.pred] < at[deps.succ]).all())


@settings(max_examples=150, deadline=None)
@RANDOM_PHASES
def test_the_loop_lists_by_least_start_then_rank(phase: Phase, seed: int, lag: int) -> None:
    deps = transfer_dependencies(phase)
    rank = np.random.default_rng(seed).permutation(phase.n)
    order = _python(phase, deps, rank, lag, TILES)
    assert order.tolist() == definition(phase, deps, rank, lag, TILES)
    assert sorted(order.tolist()) == list(range(phase.n))
    assert _topological(order, deps)


@settings(max_examples=150, deadline=None)
@RANDOM_PHASES
def test_the_compiled_loop_lists_what_the_python_loop_lists(phase: Phase, seed: int, lag: int) -> None:
    deps = transfer_dependencies(phase)
    rank = np.random.default_rng(seed).permutation(phase.n)
    assert _compiled(phase, deps, rank, lag, TILES).tolist() == _python(phase, deps, rank, lag, TILES).tolist()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_loops_agree_on_relayed_phases(seed: int) -> None:
    """Hundreds of transfers crowding few ports, so transfers park, wake and re-park many times."""
    phase = relay_phase(seed=seed, segments=6)
    deps = transfer_dependencies(phase)
    rank = np.random.default_rng(seed).permutation(phase.n)
    tiles = MACHINE.tiles
    expected = definition(phase, deps, rank, 150, tiles)
    assert _python(phase, deps, rank, 150, tiles).tolist() == expected
    assert _compiled(phase, deps, rank, 150, tiles).tolist() == expected


def test_a_dependency_cycle_is_an_error() -> None:
    phase = Phase.build(0, source=[1, 2], words=[8, 8], dst_counts=[1, 1], dst_tile=[2, 1], dst_addr=[0, 0],
                        src_addr=[0, 0])
    cycle = Dependencies(np.array([0, 1]), np.array([1, 0]))
    with pytest.raises(ValueError, match="cycle"):
        nondelay_order(phase, cycle, np.arange(2), tiles=4)


def allgather_phase(column: tuple[int, ...] = (8, 24, 40), slice_words: int = 512, received: int = 4,
                    received_words: int = 128) -> Phase:
    """A miniature of PE b2's QKV phase: the tiles of a grid column each multicast their weight slice (a moving
    read: two Repeat addresses) to the rest of the column, and each takes ``received`` activation transfers from
    tiles 50-55. B1024 lists the weights first, so each tile's receive stream starts with a slice that waits for
    the other slices' multicasts, while the tile's own slice goes out and its port idles."""
    rows: list[tuple[int, int, list[tuple[int, int]], list[int]]] = []
    for i, t in enumerate(column):
        rows.append((t, slice_words, [(o, 0x20000 + 4 * slice_words * i) for o in column if o != t],
                     [0x10000, 0x18000]))
    for i, t in enumerate(column):
        for j in range(received):
            n = i * received + j
            rows.append((50 + n % 6, received_words, [(t, 0x40000 + 4 * received_words * j)],
                         [0x60000 + 4 * received_words * n]))
    return Phase.build(0, source=[r[0] for r in rows], words=[r[1] for r in rows],
                       dst_counts=[len(r[2]) for r in rows], dst_tile=[t for r in rows for t, _ in r[2]],
                       dst_addr=[a for r in rows for _, a in r[2]], src_addr=[a for r in rows for a in r[3]],
                       src_counts=[len(r[3]) for r in rows])


def test_the_non_delay_list_takes_activations_while_a_tile_sends_its_slice() -> None:
    phase = allgather_phase()
    deps = transfer_dependencies(phase)
    greedy_schedule = reference_schedule(phase, MACHINE, tiles=64, deps=deps)
    rank = np.empty(phase.n, np.int64)
    rank[greedy_schedule.order] = np.arange(phase.n)
    order = nondelay_order(phase, deps, rank, tiles=64)
    schedule = materialize(phase, order, deps, MACHINE, 64)
    assert check_reference_schedule(phase, schedule.tx_start, schedule.rx_start, schedule.horizon, MACHINE) == []
    bound = reference_bound(phase, MACHINE, tiles=64, deps=deps).best
    # B1024: 2,274 cycles (each tile idles while its own slice goes out); the non-delay list reaches the bound
    assert greedy_schedule.horizon > 1.3 * bound
    assert schedule.horizon == bound
    # the first slice goes first, and its sender's activations right after it, before the next slice
    assert order[0] == 0
    assert set(order[1:5].tolist()) == {3, 4, 5, 6}


def test_the_order_search_offers_the_non_delay_list_on_a_phase_without_relays() -> None:
    phase = allgather_phase(column=(8, 24, 40, 56), received=6)
    deps = transfer_dependencies(phase)
    start = reference_schedule(phase, MACHINE, tiles=64, deps=deps)
    search = OrderSearch(phase, deps, transfer_levels(phase.n, deps),
                         lambda order: materialize(phase, order, deps, MACHINE, 64), start,
                         deadline=time.perf_counter() + 600, step_seconds=0.0)
    search.group()  # the relay steps do nothing here
    search.relay_tiles()
    assert search.best is start
    search.nondelay()
    assert search.found == "non-delay list"
    assert search.best.horizon < 0.85 * start.horizon
