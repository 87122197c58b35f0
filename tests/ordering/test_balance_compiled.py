"""The compiled balancing heap (``placer/ordering/_balance.cpp``) against the Python heap it ports: the same picks on
random items (few tiles, multicast sets, waves, ties in work and in stream ids), the same ``reference_order`` on
synthetic and random phases; where it declines, the Python heap runs and what it does is what ``balanced_picks``
does. Also the destination lists' ids of ``reference_order``, numbered with numpy, against the sorted tuples. The
comparisons skip when the extension is not built."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.model import Phase
from placer.machine import load_machine
from placer.ordering import greedy, reference
from placer.ordering.greedy import balanced_order, balanced_picks
from placer.ordering.reference import reference_order
from placer.ordering.streams import build_chunks, transfer_dependencies, transfer_levels
from placer.ordering.synthetic import relay_phase, replica_phase

from .helpers import TILES, small_phases

CHIP = load_machine().tiles

# the comparisons call both heaps directly, whatever set_native says
compiled = pytest.mark.skipif(greedy._native is None, reason="the compiled balancing heap is not built")


@pytest.fixture
def enabled() -> Iterator[None]:
    before = greedy.set_native(True)
    yield
    greedy.set_native(before)


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

    def call(self, fn: Callable[..., np.ndarray | None]) -> np.ndarray | None:
        return fn(self.tiles, self.words, self.stream, self.wave, self.stream_total, self.source, self.dset,
                  self.set_tiles)


@st.composite
def items(draw: st.DrawFn, max_items: int = 40, max_tiles: int = 6) -> Items:
    """Items on few tiles, so endpoints are shared and heaps are long: equal words, totals and stream ids
    (the heaps' ties), sets that overlap, hold the source's own tile, repeat a tile or are empty, several waves."""
    tiles = draw(st.integers(1, max_tiles))
    count = draw(st.integers(0, max_items))
    tile = st.integers(0, tiles - 1)
    sets = draw(st.lists(st.one_of(st.lists(tile, min_size=1, max_size=tiles, unique=True),
                                   st.lists(tile, max_size=3)), min_size=1, max_size=6))

    def column(values: st.SearchStrategy[int]) -> np.ndarray:
        return np.asarray(draw(st.lists(values, min_size=count, max_size=count)), np.int64)

    return Items(tiles, column(st.one_of(st.integers(0, 4), st.integers(0, 3000))),
                 column(st.integers(0, 5)), column(st.integers(0, 2)), column(st.integers(0, 3)), column(tile),
                 column(st.integers(0, len(sets) - 1)), [np.asarray(s, np.int64) for s in sets])


def _both(it: Items) -> np.ndarray:
    """Picks of both heaps; the compiled one must not decline (it did the work) and must agree."""
    python = it.call(greedy._balanced_picks_python)
    native = it.call(greedy._balanced_picks_native)
    assert native is not None and python is not None
    assert native.dtype == python.dtype == np.int64
    assert np.array_equal(native, python)
    return python


@compiled
@settings(max_examples=150, deadline=None)
@given(items())
def test_the_heaps_agree_on_random_items(it: Items) -> None:
    picks = _both(it)
    assert sorted(picks.tolist()) == list(range(len(picks)))


@compiled
@settings(max_examples=50, deadline=None)
@given(items(max_items=120, max_tiles=3))
def test_the_heaps_agree_on_crowded_endpoints(it: Items) -> None:
    # items parked many to an endpoint, re-parked on another and back, their work gone down while waiting
    _both(it)


@compiled
def test_the_heaps_agree_on_one_item_and_on_none() -> None:
    one = Items(3, np.array([7]), np.array([0]), np.array([0]), np.array([7]), np.array([2]), np.array([0]),
                [np.array([0, 1])])
    assert _both(one).tolist() == [0]
    z = np.zeros(0, np.int64)
    assert _both(Items(3, z, z, z, z, z, z, [])).tolist() == []
    assert _both(Items(0, z, z, z, z, z, z, [])).tolist() == []


@compiled
def test_larger_work_goes_first_then_the_smaller_stream() -> None:
    # items 0-2 send a word each from lanes 0-2 to tile 3; item 3 sends 10 from lane 1 to tile 2, so items 1 and 3
    # (on lane 1: 11 words left) outweigh items 0 and 2 (tile 3's port: 3). At 0, item 1 (stream 4) goes before
    # item 3 (stream 5) on their lane, and before items 0 and 2 despite its larger stream id; item 3 follows when
    # the lane is free, at 1, before item 2, then item 0 (equal work, stream 1 before 2)
    it = Items(4, np.array([1, 1, 1, 10]), np.array([2, 4, 1, 5]), np.zeros(4, np.int64), np.zeros(4, np.int64),
               np.array([0, 1, 2, 1]), np.array([0, 0, 0, 1]), [np.array([3]), np.array([2])])
    assert _both(it).tolist() == [3, 0, 2, 1]


@compiled
@settings(max_examples=40, deadline=None)
@given(small_phases(max_transfers=12), st.sampled_from([64, 1024]))
def test_reference_order_and_chunk_order_are_unchanged_by_the_switch(phase: Phase, wave: int) -> None:
    levels = transfer_levels(phase.n, transfer_dependencies(phase))
    chunks = build_chunks(phase, load_machine(), wave_words=wave)
    before = greedy.set_native(True)
    try:
        native = reference_order(phase, levels, wave_words=wave, tiles=TILES), balanced_order(chunks)
        greedy.set_native(False)
        python = reference_order(phase, levels, wave_words=wave, tiles=TILES), balanced_order(chunks)
    finally:
        greedy.set_native(before)
    assert np.array_equal(native[0], python[0])
    assert native[1] == python[1]


def _orders_agree(phase: Phase) -> None:
    levels = transfer_levels(phase.n, transfer_dependencies(phase))
    before = greedy.set_native(True)
    try:
        native = reference_order(phase, levels, tiles=CHIP)
        greedy.set_native(False)
        python = reference_order(phase, levels, tiles=CHIP)
    finally:
        greedy.set_native(before)
    assert np.array_equal(native, python)


@compiled
@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 3))
def test_reference_order_is_unchanged_on_relayed_phases(seed: int, segments: int) -> None:
    _orders_agree(relay_phase(groups=3, replicas=5, fragments=60, segments=segments, seed=seed))


@compiled
@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0, 300, 5000]))
def test_reference_order_is_unchanged_on_replica_phases(seed: int, weight_words: int) -> None:
    # many waves of long multicast streams, and weights from a per-layer address (moving: first)
    _orders_agree(replica_phase(groups=4, replicas=6, fragments=240, sources=8, weight_words=weight_words,
                                layers=4, seed=seed))


@compiled
def test_balanced_picks_takes_the_compiled_heap_unless_told_not_to(enabled: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    it = Items(4, np.array([3, 3, 9]), np.array([0, 1, 2]), np.zeros(3, np.int64), np.array([3, 3, 9]),
               np.array([0, 1, 0]), np.array([0, 0, 1]), [np.array([2, 3]), np.array([1])])
    assert greedy.native_available()
    calls: list[int] = []
    native = greedy._balanced_picks_native
    monkeypatch.setattr(greedy, "_balanced_picks_native", lambda *a: calls.append(1) or native(*a))
    compiled_picks = it.call(balanced_picks)
    assert calls == [1]
    assert greedy.set_native(False) is True
    assert not greedy.native_available()
    assert np.array_equal(it.call(balanced_picks), compiled_picks)
    assert calls == [1]


@compiled
def test_the_environment_turns_the_compiled_heap_off() -> None:
    probe = "from placer.ordering import greedy; print(greedy.native_available())"
    for value, expect in (("python", "False"), ("native", "True")):
        env = {**os.environ, "PLACER_BALANCE": value}
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
        assert out.stdout.strip() == expect


@compiled
def test_where_the_compiled_heap_declines_the_python_heap_runs(enabled: None) -> None:
    def items_with(**change: object) -> Items:
        it = Items(4, np.array([3, 5]), np.array([0, 1]), np.zeros(2, np.int64), np.array([3, 5]),
                   np.array([0, 1]), np.array([0, 1]), [np.array([2]), np.array([2, 3])])
        for k, v in change.items():
            setattr(it, k, v)
        return it

    # a source or a destination set the Python heap reads from its lists' ends (-1), an endpoint past them
    # (IndexError), a set that does not exist, float words, negative words, words whose times could leave int64
    cases = [items_with(source=np.array([0, -1])), items_with(dset=np.array([0, -1])),
             items_with(set_tiles=[np.array([2]), np.array([2, 4])]), items_with(dset=np.array([0, 2])),
             items_with(words=np.array([3.0, 5.0])), items_with(words=np.array([3, -5])),
             items_with(words=np.array([3, 1 << 62]))]
    for it in cases:
        assert it.call(greedy._balanced_picks_native) is None
        try:
            expect: object = it.call(greedy._balanced_picks_python)
        except Exception as exc:
            with pytest.raises(type(exc)):
                it.call(balanced_picks)
            continue
        got = it.call(balanced_picks)
        assert isinstance(expect, np.ndarray) and got is not None and np.array_equal(got, expect)


@compiled
def test_the_compiled_heap_checks_its_arguments() -> None:
    n = np.zeros(2, np.int64)
    one = np.ones(2, np.int64)
    args = [np.array([0, 1]), n, one, n, n, n, np.array([0, 1]), np.array([1]), np.zeros(2, np.int64), n.copy()]
    assert greedy._native.picks(*args) == 2
    with pytest.raises(TypeError, match="rank must be a contiguous int64 array"):
        greedy._native.picks(np.array([0, 1], np.int32), *args[1:])
    for k, value, message in ((0, np.array([1, 1]), "rank is not a permutation"),
                              (4, np.array([0, 2]), "source endpoint out of range"),
                              (5, one, "destination set out of range"),
                              (7, np.array([2]), "set endpoint out of range"),
                              (2, np.array([1, -1]), "words out of range"),
                              (2, np.array([1, 1 << 62]), "words out of range")):
        bad = [*args[:k], value, *args[k + 1:]]
        with pytest.raises(ValueError, match=message):
            greedy._native.picks(*bad)


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
