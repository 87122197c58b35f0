"""The compiled balancing heap (``placer/streams/_balance.cpp``) against the Python heap it ports (its test
oracle, ``balance._balanced_picks_python``): the same picks on random items (few tiles, multicast sets, waves, ties in
work and in stream ids), the same ``reference_order`` on synthetic and random phases; items the heap cannot take
are refused with ValueError. Also the destination lists' ids of ``reference_order``, numbered with numpy, against
the sorted tuples."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.model import Phase
from placer.chunkmodel import greedy
from placer.chunkmodel.chunks import build_chunks
from placer.chunkmodel.greedy import balanced_order
from placer.machine import load_machine
from placer.refschedule import reference
from placer.refschedule.reference import reference_order
from placer.streams import _balance, balance
from placer.streams.balance import balanced_picks
from placer.streams.dependencies import transfer_dependencies, transfer_levels
from tests.ordering.synthetic import relay_phase, replica_phase

from .helpers import TILES, small_phases

CHIP = load_machine().tiles


@dataclass
class Items:
    """``balanced_picks``'s arguments."""

    tiles: int
    words: np.ndarray
    stream: np.ndarray
    wave: np.ndarray
    stream_total: np.ndarray
    source: np.ndarray
    dset: np.ndarray
    set_tiles: list[np.ndarray]

    def call(self, fn: Callable[..., np.ndarray]) -> np.ndarray:
        return fn(self.tiles, self.words, self.stream, self.wave, self.stream_total, self.source, self.dset,
                  self.set_tiles)


@st.composite
def items(draw: st.DrawFn, max_items: int = 40, max_tiles: int = 6, positive: bool = False) -> Items:
    """Items on few tiles, so endpoints are shared and heaps are long: equal words, totals and stream ids
    (the heaps' ties), sets that overlap, hold the source's own tile, repeat a tile or are empty, several waves.
    ``positive``: every item's words at least 1 (the compiled heap's tiered queues; with a zero, its line ones)."""
    tiles = draw(st.integers(1, max_tiles))
    count = draw(st.integers(0, max_items))
    tile = st.integers(0, tiles - 1)
    sets = draw(st.lists(st.one_of(st.lists(tile, min_size=1, max_size=tiles, unique=True),
                                   st.lists(tile, max_size=3)), min_size=1, max_size=6))

    def column(values: st.SearchStrategy[int]) -> np.ndarray:
        return np.asarray(draw(st.lists(values, min_size=count, max_size=count)), np.int64)

    low = 1 if positive else 0
    return Items(tiles, column(st.one_of(st.integers(low, 4), st.integers(low, 3000))),
                 column(st.integers(0, 5)), column(st.integers(0, 2)), column(st.integers(0, 3)), column(tile),
                 column(st.integers(0, len(sets) - 1)), [np.asarray(s, np.int64) for s in sets])


def _both(it: Items) -> np.ndarray:
    """Picks of both heaps, which must agree."""
    python = it.call(balance._balanced_picks_python)
    compiled = it.call(balanced_picks)
    assert compiled.dtype == python.dtype == np.int64
    assert np.array_equal(compiled, python)
    return python


@settings(max_examples=150, deadline=None)
@given(items())
def test_the_heaps_agree_on_random_items(it: Items) -> None:
    picks = _both(it)
    assert sorted(picks.tolist()) == list(range(len(picks)))


@settings(max_examples=50, deadline=None)
@given(items(max_items=120, max_tiles=3))
def test_the_heaps_agree_on_crowded_endpoints(it: Items) -> None:
    # items parked many to an endpoint, re-parked on another and back, their work gone down while waiting
    _both(it)


@settings(max_examples=150, deadline=None)
@given(st.one_of(items(max_items=120, max_tiles=3, positive=True), items(max_items=200, max_tiles=8, positive=True)))
def test_the_tiered_queues_pick_as_the_python_heap(it: Items) -> None:
    # every word positive: the compiled heap orders each endpoint's items by their other endpoints' work, then
    # by (stream, item), instead of re-keying them as the Python heap does
    assert np.array_equal(it.call(partial(balanced_picks, tiered=True)), it.call(balance._balanced_picks_python))


def test_an_item_of_zero_words_keeps_the_line_queues() -> None:
    # with the tiered queues these picks differ in the last two: items 13 and 14 (zero words) end when they start,
    # so what a search re-parks on the way decides which of them competes first
    source = np.zeros(15, np.int64)
    source[4] = 1
    dset = np.zeros(15, np.int64)
    dset[[4, 14]] = 1
    words = np.zeros(15, np.int64)
    words[4], words[10], words[11] = 2, 1, 1
    z = np.zeros(15, np.int64)
    it = Items(2, words, z, z, z, source, dset, [np.array([0]), np.array([1])])
    assert _both(it).tolist() == [0, 2, 3, 4, 1, 5, 6, 7, 8, 9, 10, 11, 12, 14, 13]
    with pytest.raises(ValueError, match="positive words only"):
        it.call(partial(balanced_picks, tiered=True))


def test_the_heaps_agree_on_one_item_and_on_none() -> None:
    one = Items(3, np.array([7]), np.array([0]), np.array([0]), np.array([7]), np.array([2]), np.array([0]),
                [np.array([0, 1])])
    assert _both(one).tolist() == [0]
    z = np.zeros(0, np.int64)
    assert _both(Items(3, z, z, z, z, z, z, [])).tolist() == []
    assert _both(Items(0, z, z, z, z, z, z, [])).tolist() == []


def test_larger_work_goes_first_then_the_smaller_stream() -> None:
    # items 0-2 send a word each from lanes 0-2 to tile 3; item 3 sends 10 from lane 1 to tile 2, so items 1 and 3
    # (on lane 1: 11 words left) outweigh items 0 and 2 (tile 3's port: 3). At 0, item 1 (stream 4) goes before
    # item 3 (stream 5) on their lane, and before items 0 and 2 despite its larger stream id; item 3 follows when
    # the lane is free, at 1, before item 2, then item 0 (equal work, stream 1 before 2)
    it = Items(4, np.array([1, 1, 1, 10]), np.array([2, 4, 1, 5]), np.zeros(4, np.int64), np.zeros(4, np.int64),
               np.array([0, 1, 2, 1]), np.array([0, 0, 0, 1]), [np.array([3]), np.array([2])])
    assert _both(it).tolist() == [3, 0, 2, 1]


@settings(max_examples=40, deadline=None)
@given(small_phases(max_transfers=12), st.sampled_from([64, 1024]))
def test_reference_order_and_chunk_order_are_those_of_the_python_heap(phase: Phase, wave: int) -> None:
    levels = transfer_levels(phase.n, transfer_dependencies(phase))
    chunks = build_chunks(phase, load_machine(), wave_words=wave)
    compiled = reference_order(phase, levels, wave_words=wave, tiles=TILES), balanced_order(chunks)
    with pytest.MonkeyPatch.context() as m:
        _with_the_python_heap(m)
        python = reference_order(phase, levels, wave_words=wave, tiles=TILES), balanced_order(chunks)
    assert np.array_equal(compiled[0], python[0])
    assert compiled[1] == python[1]


def _with_the_python_heap(m: pytest.MonkeyPatch) -> None:
    """``balanced_picks`` replaced by the Python heap, where ``greedy`` and ``reference`` call it."""
    m.setattr(greedy, "balanced_picks", balance._balanced_picks_python)
    m.setattr(reference, "balanced_picks", balance._balanced_picks_python)


def _orders_agree(phase: Phase) -> None:
    levels = transfer_levels(phase.n, transfer_dependencies(phase))
    compiled = reference_order(phase, levels, tiles=CHIP)
    with pytest.MonkeyPatch.context() as m:
        _with_the_python_heap(m)
        python = reference_order(phase, levels, tiles=CHIP)
    assert np.array_equal(compiled, python)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 40), st.sampled_from([10, 3000]))
def test_the_tiered_and_the_line_queues_agree_on_many_items(seed: int, tiles: int, most: int) -> None:
    # thousands of items, hundreds parked on one endpoint, words alike or not: what the Python heap is too slow
    # for; the compiled heap with one queue per endpoint is its line-by-line port
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1000, 6000))
    sets = [rng.choice(tiles, int(rng.integers(1, min(tiles, 6) + 1)), replace=False) for _ in range(30)]
    it = Items(tiles, rng.integers(1, most + 1, count), rng.integers(0, count, count), rng.integers(0, 3, count),
               rng.integers(0, 50, count), rng.integers(0, tiles, count), rng.integers(0, len(sets), count), sets)
    assert np.array_equal(it.call(partial(balanced_picks, tiered=True)), it.call(partial(balanced_picks,
                                                                                         tiered=False)))


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0, 300, 5000]))
def test_the_tiered_and_the_line_queues_give_the_same_orders_on_phases(seed: int, weight_words: int) -> None:
    phase = replica_phase(groups=12, replicas=16, fragments=600, sources=24, weight_words=weight_words, layers=4,
                          seed=seed)
    relayed = relay_phase(groups=8, replicas=12, fragments=400, segments=1 + seed % 3, seed=seed)
    for p in (phase, relayed):
        levels = transfer_levels(p.n, transfer_dependencies(p))
        tiered = reference_order(p, levels, tiles=CHIP)
        with pytest.MonkeyPatch.context() as m:
            m.setattr(reference, "balanced_picks", partial(balanced_picks, tiered=False))
            line = reference_order(p, levels, tiles=CHIP)
        assert np.array_equal(tiered, line)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3))
def test_reference_order_is_unchanged_on_relayed_phases(seed: int, segments: int) -> None:
    _orders_agree(relay_phase(groups=3, replicas=5, fragments=60, segments=segments, seed=seed))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0, 300, 5000]))
def test_reference_order_is_unchanged_on_replica_phases(seed: int, weight_words: int) -> None:
    # many waves of long multicast streams, and weights from a per-layer address (moving: first)
    _orders_agree(replica_phase(groups=4, replicas=6, fragments=240, sources=8, weight_words=weight_words,
                                layers=4, seed=seed))


def test_items_the_heap_cannot_take_are_refused() -> None:
    def items_with(**change: object) -> Items:
        it = Items(4, np.array([3, 5]), np.array([0, 1]), np.zeros(2, np.int64), np.array([3, 5]),
                   np.array([0, 1]), np.array([0, 1]), [np.array([2]), np.array([2, 3])])
        for k, v in change.items():
            setattr(it, k, v)
        return it

    # a source or a destination tile out of range (the Python heap would read its lists from the end, or raise
    # IndexError), a set that does not exist, float words, negative words (the Python heap may not end), words
    # whose times could leave int64
    cases = [(items_with(source=np.array([0, -1])), "tile out of range"),
             (items_with(set_tiles=[np.array([2]), np.array([2, 4])]), "tile out of range"),
             (items_with(dset=np.array([0, -1])), "set that does not exist"),
             (items_with(dset=np.array([0, 2])), "set that does not exist"),
             (items_with(words=np.array([3.0, 5.0])), "integer arrays"),
             (items_with(set_tiles=[np.array([[2]]), np.array([2, 3])]), "integer arrays"),
             (items_with(words=np.array([3, -5])), "negative words"),
             (items_with(words=np.array([3, 1 << 62])), "2\\^61")]
    for it, message in cases:
        with pytest.raises(ValueError, match=message):
            it.call(balanced_picks)


def test_the_compiled_heap_checks_its_arguments() -> None:
    n = np.zeros(2, np.int64)
    one = np.ones(2, np.int64)
    names = ("rank", "wave", "words", "stream", "source", "dset", "set_ptr", "set_res", "work", "picked")
    args: dict[str, Any] = dict(zip(names, [np.array([0, 1]), n, one, n, n, n, np.array([0, 1]), np.array([1]),
                            np.zeros(2, np.int64), n.copy()], strict=True))
    args["tiered"] = True
    assert _balance.picks(**args) == 2
    # the types, checked by nanobind: int64, one dimension, C order; nothing converted
    for name, value in (("rank", np.array([0, 1], np.int32)), ("words", np.ones((2, 1), np.int64)),
                        ("work", np.zeros(4, np.int64)[::2]), ("picked", [0, 0])):
        with pytest.raises(TypeError, match="incompatible function arguments"):
            _balance.picks(**{**args, name: value})
    for name, value, message in (("rank", np.array([1, 1]), "rank is not a permutation"),
                                 ("source", np.array([0, 2]), "source endpoint out of range"),
                                 ("dset", one, "destination set out of range"),
                                 ("set_res", np.array([2]), "set endpoint out of range"),
                                 ("words", np.array([1, -1]), "words out of range"),
                                 ("words", np.array([1, 1 << 62]), "words out of range"),
                                 ("words", np.array([1, 0]), "positive words only"),
                                 ("wave", np.array([0, 0, 0]), "array lengths do not match")):
        with pytest.raises(ValueError, match=message):
            _balance.picks(**{**args, name: value})


def _tuple_ids(ptr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """The ids as ``reference_order`` numbered them before: every row as a tuple, sorted."""
    rows = [tuple(values[a:b].tolist()) for a, b in zip(ptr[:-1].tolist(), ptr[1:].tolist(), strict=True)]
    ids = {key: k for k, key in enumerate(sorted(set(rows)))}
    return np.array([ids[r] for r in rows], np.int64)


@st.composite
def csr_rows(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray]:
    """Rows that repeat, extend one another (prefixes) or are empty, over values close together (several
    columns packed per pass), far apart (one) or too far apart to pack (their ranks instead)."""
    bound = draw(st.sampled_from([3, 1500, 1 << 40, 1 << 62]))
    value = st.integers(-min(bound, 1 << 20), bound)
    base = draw(st.lists(st.lists(value, max_size=9), min_size=1, max_size=6))
    rows = draw(st.lists(st.tuples(st.sampled_from(base), st.integers(0, 9), st.lists(value, max_size=2)),
                         max_size=40))
    picked = [b[:cut] + extra for b, cut, extra in rows]
    ptr = np.zeros(len(picked) + 1, np.int64)
    np.cumsum([len(r) for r in picked], out=ptr[1:])
    return ptr, np.asarray([v for r in picked for v in r], np.int64)


@settings(max_examples=200, deadline=None)
@given(csr_rows())
def test_destination_list_ids_are_the_sorted_tuples(rows: tuple[np.ndarray, np.ndarray]) -> None:
    ptr, values = rows
    assert np.array_equal(reference._row_ids(ptr, values), _tuple_ids(ptr, values))
    assert np.array_equal(reference._row_ids(ptr, values.astype(np.int32) if np.abs(values).max(initial=0) < 1 << 31
                                             else values), _tuple_ids(ptr, values))


def test_destination_list_ids_of_a_relayed_phase() -> None:
    phase = relay_phase(groups=3, replicas=5, fragments=60, segments=3)
    ids = reference._row_ids(phase.dst_ptr, phase.dst_tile)
    assert np.array_equal(ids, _tuple_ids(phase.dst_ptr, phase.dst_tile))
    assert ids.max() > 3  # gathers to several relays, forwards to several groups
