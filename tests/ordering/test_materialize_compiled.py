"""The compiled timing loop (``placer/refschedule/_materialize.cpp``) against the Python loop it ports (its test
oracle, ``reference._materialize_python``): the same schedule, array for array, on random phases (memory-element
hazards, Repeat source addresses, relays, multicast replicas) in random orders; inputs it cannot time are refused
with ValueError."""

from __future__ import annotations

import heapq
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.model import PAIRED64, WORD32, Phase
from placer.machine import load_machine
from placer.refschedule import _materialize, reference
from placer.refschedule.reference import ReferenceSchedule, materialize, reference_order
from placer.streams.dependencies import Dependencies, transfer_dependencies, transfer_levels
from tests.ordering.synthetic import relay_phase, replica_phase

from .helpers import small_phases
from .test_improve import homes_phase, host_phase

MACHINE = load_machine()
TILES = 64
CHIP = MACHINE.tiles
FIELDS = ("order", "tx_start", "rx_start", "cutover", "carries", "tile_horizon")
# addresses around the SRAM elements' edges, below and above the interleaved boundary (16 KiB and 32 KiB elements)
EDGES = (0x3F00, 0x4000, 0x7F00, 0x7FF00, 0x80000, 0x87F00, 0x88000)


def _same(a: ReferenceSchedule, b: ReferenceSchedule) -> None:
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert x.dtype == y.dtype, f
        assert np.array_equal(x, y), f
    assert a.horizon == b.horizon
    assert type(a.horizon) is type(b.horizon) is int


def _both(phase: Phase, order: np.ndarray, deps: Dependencies, tiles: int = TILES) -> ReferenceSchedule:
    """Time ``order`` with both loops, which must agree."""
    python = reference._materialize_python(phase, order, deps, MACHINE, tiles)
    _same(materialize(phase, order, deps, MACHINE, tiles), python)
    return python


def _random_topological(n: int, deps: Dependencies, seed: int) -> np.ndarray:
    """Kahn's algorithm with random priorities: any topological order, depths interleaved."""
    rng = np.random.default_rng(seed)
    prio = rng.permutation(n).tolist()
    succs: list[list[int]] = [[] for _ in range(n)]
    waiting = [0] * n
    for a, b in zip(deps.pred.tolist(), deps.succ.tolist(), strict=True):
        succs[a].append(b)
        waiting[b] += 1
    ready = [(prio[i], i) for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, i = heapq.heappop(ready)
        order.append(i)
        for j in succs[i]:
            waiting[j] -= 1
            if waiting[j] == 0:
                heapq.heappush(ready, (prio[j], j))
    assert len(order) == n
    return np.asarray(order, np.int64)


@st.composite
def hazard_phases(draw: st.DrawFn, max_transfers: int = 24, max_tiles: int = 16) -> Phase:
    """Multicasts on few tiles whose sends (over several Repeat addresses) and receives share SRAM elements on
    both sides of the interleaved boundary; 52-word and point-to-point transfers, receives that continue the
    previous transfer's, a tile sometimes among its own receivers."""
    # tiles anywhere on the chip: near ones select well before the sender starts (a lead of 14 or more), far ones
    # after it (a lead under 6, where the lane's hold outlasts the send)
    pool = draw(st.lists(st.integers(0, CHIP - 1), min_size=2, max_size=max_tiles, unique=True))
    n = draw(st.integers(1, max_transfers))
    source: list[int] = []
    words: list[int] = []
    counts: list[int] = []
    dtile: list[int] = []
    daddr: list[int] = []
    saddr: list[int] = []
    scount: list[int] = []
    width: list[int] = []
    for k in range(n):
        source.append(draw(st.sampled_from(pool)))
        words.append(draw(st.one_of(st.integers(1, 6), st.sampled_from([52, 64]), st.integers(1, 600))))
        if k and draw(st.booleans()):  # continues the previous transfer's receives (no pointer when timed next)
            dests = dtile[-counts[-1]:]
            daddr += [a + 4 * words[-2] for a in daddr[-counts[-1]:]]
        else:
            dests = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=min(len(pool), 6), unique=True))
            daddr += [draw(st.sampled_from(EDGES)) + 16 * draw(st.integers(0, 24)) for _ in dests]
        counts.append(len(dests))
        dtile += dests
        iters = draw(st.integers(1, 3))
        saddr += [draw(st.sampled_from(EDGES)) + 16 * draw(st.integers(0, 24)) for _ in range(iters)]
        scount.append(iters)
        width.append(draw(st.sampled_from([WORD32, WORD32, PAIRED64])))
    return Phase.build(0, source, words, counts, dtile, daddr, saddr, src_counts=scount, width=width)


@settings(max_examples=150, deadline=None)
@given(hazard_phases(), st.integers(0, 2**32 - 1))
def test_the_loops_agree_on_phases_with_memory_hazards(phase: Phase, seed: int) -> None:
    deps = transfer_dependencies(phase)
    levels = transfer_levels(phase.n, deps)
    _both(phase, reference_order(phase, levels, tiles=CHIP), deps, CHIP)
    _both(phase, _random_topological(phase.n, deps, seed), deps, CHIP)


@settings(max_examples=100, deadline=None)
@given(hazard_phases(max_transfers=48, max_tiles=4), st.integers(0, 2**32 - 1))
def test_the_loops_agree_on_crowded_tiles(phase: Phase, seed: int) -> None:
    # many sends per lane and element: gaps back-filled, intervals recorded out of time order, hazard delays
    deps = transfer_dependencies(phase)
    _both(phase, _random_topological(phase.n, deps, seed), deps, CHIP)


@settings(max_examples=80, deadline=None)
@given(small_phases(max_transfers=12), st.integers(0, 2**32 - 1))
def test_the_loops_agree_on_small_random_phases(phase: Phase, seed: int) -> None:
    deps = transfer_dependencies(phase)
    _both(phase, _random_topological(phase.n, deps, seed), deps)


@settings(max_examples=60, deadline=None)
@given(hazard_phases(max_transfers=12), st.data())
def test_the_loops_agree_on_any_list_of_transfers(phase: Phase, data: st.DataObject) -> None:
    # not only topological orders: transfers listed twice or left out, predecessors timed after their successors
    order = data.draw(st.lists(st.integers(0, phase.n - 1), max_size=2 * phase.n))
    _both(phase, np.asarray(order, np.int64), transfer_dependencies(phase), CHIP)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3), st.integers(0, 2**32 - 1))
def test_the_loops_agree_on_relayed_phases(seed: int, segments: int, order_seed: int) -> None:
    phase = relay_phase(groups=2, replicas=4, fragments=40, segments=segments, seed=seed)
    deps = transfer_dependencies(phase)
    assert len(deps)  # forwards wait for their gathers
    _both(phase, reference_order(phase, transfer_levels(phase.n, deps), tiles=CHIP), deps, CHIP)
    _both(phase, _random_topological(phase.n, deps, order_seed), deps, CHIP)


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0, 300, 5000]))
def test_the_loops_agree_on_replica_phases_with_moving_weights(seed: int, weight_words: int) -> None:
    # weights read from a per-layer address (Repeat sources that differ) go first; 5,000 words split in pieces
    phase = replica_phase(groups=3, replicas=6, fragments=120, sources=8, weight_words=weight_words, layers=4,
                          seed=seed)
    deps = transfer_dependencies(phase)
    _both(phase, reference_order(phase, transfer_levels(phase.n, deps), tiles=CHIP), deps, CHIP)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(4, 32), min_size=2, max_size=4), st.integers(0, 60), st.integers(0, 6),
       st.integers(0, 2**32 - 1))
def test_the_loops_agree_on_relay_hosts_whose_forwards_read_what_they_gather(sizes: list[int], start: int,
                                                                            direct: int, seed: int) -> None:
    bases = [0x6000 + 256 * (start + sum(sizes[:k])) for k in range(len(sizes))]
    phase = host_phase(bases, fragments=max(sizes), direct=direct)
    deps = transfer_dependencies(phase)
    assert reference.hazard_pairs(phase)[0].size  # the host sends from elements it receives into
    _both(phase, reference_order(phase, transfer_levels(phase.n, deps), tiles=TILES), deps)
    _both(phase, _random_topological(phase.n, deps, seed), deps)


def test_the_loops_agree_on_a_relayed_qkv_miniature() -> None:
    phase = homes_phase()
    deps = transfer_dependencies(phase)
    for seed in range(5):
        _both(phase, _random_topological(phase.n, deps, seed), deps)


def test_the_prepared_arrays_of_the_last_phase_give_the_same_schedule() -> None:
    phase = host_phase(direct=3)
    deps = transfer_dependencies(phase)
    order = reference_order(phase, transfer_levels(phase.n, deps), tiles=TILES)
    python = reference._materialize_python(phase, order, deps, MACHINE, TILES)
    _same(materialize(phase, order, deps, MACHINE, TILES), python)
    # the prepared arrays are kept for the last phase: a second call on it gives the same schedule
    _same(materialize(phase, order, deps, MACHINE, TILES), python)
    _same(materialize(phase, order, deps, MACHINE, 2 * TILES), reference._materialize_python(
        phase, order, deps, MACHINE, 2 * TILES))


def test_each_thread_keeps_its_own_last_phase() -> None:
    # measurements bound and schedule two phases at a time: another thread's phase must not take this one's slot
    mine, theirs = host_phase(direct=3), host_phase(direct=1)
    deps = transfer_dependencies(mine)
    order = reference_order(mine, transfer_levels(mine.n, deps), tiles=TILES)
    first = materialize(mine, order, deps, MACHINE, TILES)
    kept = reference._SLOTS.prepared, reference.hazard_pairs(mine), reference._plan(mine, MACHINE, TILES)
    with ThreadPoolExecutor(1) as other:
        other.submit(lambda: materialize(theirs, np.arange(theirs.n), transfer_dependencies(theirs), MACHINE,
                                         TILES)).result()
    assert reference._SLOTS.prepared is kept[0]
    assert reference.hazard_pairs(mine) is kept[1]
    assert reference._plan(mine, MACHINE, TILES) is kept[2]
    _same(materialize(mine, order, deps, MACHINE, TILES), first)


def test_a_transfer_naming_one_tile_twice_is_refused() -> None:
    phase = Phase.build(0, source=[0, 1], words=[8, 8], dst_counts=[1, 3], dst_tile=[5, 6, 5, 5],
                        dst_addr=[0x90000, 0x90000, 0x91000, 0x92000], src_addr=[0x4C000, 0x4C000])
    deps = transfer_dependencies(phase)
    with pytest.raises(ValueError,
                       match=r"^phase 0, transfer 1: destination tile 5 appears twice in one transfer$"):
        materialize(phase, np.arange(2), deps, MACHINE, TILES)


def test_inputs_the_loop_cannot_time_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    phase = Phase.build(0, source=[0, 1], words=[8, 8], dst_counts=[1, 1], dst_tile=[2, 3],
                        dst_addr=[0x90000, 0x90000], src_addr=[0x4C000, 0x4C000])
    deps = transfer_dependencies(phase)
    with pytest.raises(ValueError, match="an order or a dependency names no transfer"):
        materialize(phase, np.array([0, 2]), deps, MACHINE, TILES)
    with pytest.raises(ValueError, match=r"names a tile outside \[0, 3\)"):
        materialize(phase, np.arange(2), deps, MACHINE, 3)
    # negative words, an address whose continuation could leave int64
    for words, addr in (([-8, 8], 0x90000), ([8, 8], 1 << 62)):
        odd = Phase.build(0, source=[0, 1], words=words, dst_counts=[1, 1], dst_tile=[2, 3], dst_addr=[addr, 0x90000],
                          src_addr=[0x4C000, 0x4C000])
        with pytest.raises(ValueError, match="negative words or an address beyond"):
            materialize(odd, np.arange(2), deps, MACHINE, TILES)

    # a plan whose lead runs outside the event rows (no bundled machine's routes give one): past the rows' end the
    # Python loop raises IndexError, before their start it reads and writes the rows' end
    def plan(lead: int) -> reference._Plan:
        one = np.ones(2, np.int64)
        return reference._Plan(lead * one, one, 60 * one, 5 * one)

    for lead in (5000, -3):
        monkeypatch.setattr(reference, "_plan", lambda *_, lead=lead: plan(lead))
        fresh = Phase.build(0, source=[0, 1], words=[8, 8], dst_counts=[1, 1], dst_tile=[2, 3],
                            dst_addr=[0x90000, 0x90000], src_addr=[0x4C000, 0x4C000])
        with pytest.raises(ValueError, match="outside its event rows"):
            materialize(fresh, np.arange(2), deps, MACHINE, TILES)


def test_the_compiled_loop_checks_its_arguments() -> None:
    phase = host_phase(direct=1)
    deps = transfer_dependencies(phase)
    order = reference_order(phase, transfer_levels(phase.n, deps), tiles=TILES)
    materialize(phase, order, deps, MACHINE, TILES)  # prepares the phase
    p = reference._SLOTS.prepared
    assert p is not None
    n, entries = phase.n, int(phase.dst_tile.shape[0])
    pred_ptr = np.zeros(n + 1, np.int64)
    args: dict[str, Any] = dict(order=order.astype(np.int64), source=p.source, words=p.words, dst_ptr=p.dst_ptr,
                dst_tile=p.dst_tile, dst_addr=p.dst_addr, select=p.plan.select, pointer=p.plan.pointer,
                lead=p.plan.lead, guard=p.plan.guard, pred_ptr=pred_ptr, pred=np.zeros(0, np.int64),
                src_key_ptr=p.src_key_ptr, src_key=p.src_key, dst_key_ptr=p.dst_key_ptr,
                dst_key_entry=p.dst_key_entry, dst_key=p.dst_key, keys=p.keys, tx=np.zeros(n, np.int64),
                rx=np.zeros(entries, np.int64), cutover=np.zeros(entries, bool), carries=np.zeros(entries, bool),
                horizon=np.zeros(TILES, np.int64))
    assert _materialize.materialize(**args)
    # the types, checked by nanobind: int64 (bool for two outputs), one dimension, C order; nothing converted
    for name, value in (("order", order.astype(np.int32)), ("cutover", np.zeros(entries, np.int64)),
                        ("tx", np.zeros(2 * n, np.int64)[::2]), ("keys", 1.5)):
        with pytest.raises(TypeError, match="incompatible function arguments"):
            _materialize.materialize(**{**args, name: value})
    bad_order = order.astype(np.int64).copy()
    bad_order[0] = n
    for name, value, message in (("order", bad_order, "order names no transfer"),
                                 ("words", np.zeros(n + 1, np.int64), "array lengths do not match"),
                                 ("keys", -1, "array lengths do not match"),
                                 ("pred", np.zeros(1, np.int64), "length does not match its pointers")):
        with pytest.raises(ValueError, match=message):
            _materialize.materialize(**{**args, name: value})
