"""Aligned slots (``placer.refschedule.slots``): slots chosen so that no sender gathers into a host of its own slot,
every column's multicasts in slots, spare hosts' gathers first; every schedule keeps the rules (independent
checker), and the search with them repeats itself."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.model import Phase
from placer.machine import load_machine
from placer.ordering.check import check_reference_schedule
from placer.refschedule.improve import OrderSearch
from placer.refschedule.reference import materialize, reference_bound, reference_schedule
from placer.refschedule.slots import aligned_slots, sender_slots
from placer.streams.dependencies import transfer_dependencies, transfer_levels
from tests.ordering.synthetic import relay_phase

MACHINE = load_machine()
TILES = 64


def clash_phase(columns: int = 3, rows: int = 4, fragments: int = 24, slice_words: int = 256,
                spare: bool = False) -> Phase:
    """A miniature of a relayed QKV phase whose owners are the weight homes: tile (m, c) = m * columns + c; every
    tile of rows 1.. multicasts its two-piece slice to the rest of its column (row 0 holds none); every home is a
    relay host gathering ``fragments`` 8-word fragments from the homes of its own row in the other columns (the
    same rank in theirs) and forwarding them to row 0. With ``spare``, tile 60 (no slice) also gathers
    ``fragments`` from every home and forwards them to row 0."""
    out: list[tuple[int, int, list[tuple[int, int]], list[int]]] = []
    homes = [(m, c) for m in range(1, rows) for c in range(columns)]
    for m, c in homes:
        for p in range(2):
            out.append((m * columns + c, slice_words,
                        [(o * columns + c, 0x20000 + 4 * slice_words * (2 * m + p)) for o in range(rows) if o != m],
                        [0x10000 + 4 * slice_words * p]))
    hosts = [m * columns + c for m, c in homes] + ([60] if spare else [])
    for h, host in enumerate(hosts):
        m, c = divmod(host, columns)
        senders = ([m * columns + o for o in range(columns) if o != c] if host != 60
                   else [a * columns + b for a, b in homes])
        for f in range(fragments):
            out.append((senders[f % len(senders)], 8, [(host, 0x40000 + 32 * f)], [0x60000 + 32 * (h * fragments + f)]))
    for h, host in enumerate(hosts):
        out.append((host, 8 * fragments, [(c, 0x50000 + 32 * fragments * h) for c in range(columns)], [0x40000]))
    return Phase.build(0, source=[r[0] for r in out], words=[r[1] for r in out],
                       dst_counts=[len(r[2]) for r in out], dst_tile=[t for r in out for t, _ in r[2]],
                       dst_addr=[a for r in out for _, a in r[2]], src_addr=[a for r in out for a in r[3]],
                       src_counts=[len(r[3]) for r in out])


def _clashes(phase: Phase, slot: np.ndarray) -> int:
    """Words gathered from a sender of the host's own slot."""
    deps = transfer_dependencies(phase)
    g = np.unique(deps.pred)
    x, h = phase.source[g].astype(np.int64), phase.dst_tile[phase.dst_ptr[g]].astype(np.int64)
    same = (slot[x] >= 0) & (slot[x] == slot[h]) & (x != h)
    return int(phase.words[g][same].sum())


def _rank_slots(phase: Phase, columns: int, rows: int) -> np.ndarray:
    """Each home's rank from the top of its column."""
    slot = np.full(int(max(phase.source.max(), phase.dst_tile.max())) + 1, -1, np.int64)
    for m in range(1, rows):
        for c in range(columns):
            slot[m * columns + c] = rows - 1 - m
    return slot


def _valid(phase: Phase, schedule: object) -> None:
    assert check_reference_schedule(phase, schedule.tx_start, schedule.rx_start,  # type: ignore[attr-defined]
                                    schedule.horizon, MACHINE) == []  # type: ignore[attr-defined]


def test_slots_are_chosen_so_that_no_sender_gathers_into_a_host_of_its_own_slot() -> None:
    phase = clash_phase()
    deps = transfer_dependencies(phase)
    slot = sender_slots(phase, deps, transfer_levels(phase.n, deps))
    assert slot is not None
    for c in range(3):  # each column's homes take its slots once each
        assert sorted(slot[[m * 3 + c for m in range(1, 4)]].tolist()) == [0, 1, 2]
    assert (slot[[0, 1, 2]] == -1).all()  # row 0 sends nothing direct
    ranked = sender_slots(phase, deps, transfer_levels(phase.n, deps), swaps=False)
    assert ranked is not None
    assert np.array_equal(ranked, _rank_slots(phase, 3, 4))
    assert _clashes(phase, ranked) == 9 * 24 * 8  # ranked from the top, every gather clashes
    assert _clashes(phase, slot) == 0


def test_aligned_slots_list_each_slot_s_gathers_before_its_sends_and_a_spare_host_s_first() -> None:
    phase = clash_phase(spare=True)
    deps = transfer_dependencies(phase)
    levels = transfer_levels(phase.n, deps)
    slot = sender_slots(phase, deps, levels)
    assert slot is not None
    order = aligned_slots(phase, deps, levels, reference_schedule(phase, MACHINE, tiles=TILES, deps=deps))
    assert order is not None
    assert sorted(order.tolist()) == list(range(phase.n))
    place = np.empty(phase.n, np.int64)
    place[order] = np.arange(phase.n)
    assert (place[deps.pred] < place[deps.succ]).all()
    gathers = np.unique(deps.pred)
    host = phase.dst_tile[phase.dst_ptr[gathers]].astype(np.int64)
    spare = gathers[host == 60]
    assert set(order[:len(spare)].tolist()) == set(spare.tolist())
    sends = np.arange(18)  # the homes' slices
    for r in range(3):
        into = gathers[(host != 60) & (slot[host] == r)]
        mine = sends[slot[phase.source[sends]] == r]
        later = sends[slot[phase.source[sends]] > r]
        assert place[into].max() < place[mine].min()
        assert place[mine].max() < place[later].min(initial=phase.n)


def test_chosen_slots_beat_ranked_slots_where_senders_gather_into_their_own_round() -> None:
    phase = clash_phase()
    deps = transfer_dependencies(phase)
    levels = transfer_levels(phase.n, deps)
    greedy = reference_schedule(phase, MACHINE, tiles=TILES, deps=deps)
    by_rank = aligned_slots(phase, deps, levels, greedy, slot=sender_slots(phase, deps, levels, swaps=False))
    order = aligned_slots(phase, deps, levels, greedy)
    assert by_rank is not None
    assert order is not None
    ranked = materialize(phase, by_rank, deps, MACHINE, TILES)
    aligned = materialize(phase, order, deps, MACHINE, TILES)
    bound = reference_bound(phase, MACHINE, tiles=TILES, deps=deps)
    _valid(phase, aligned)
    assert aligned.horizon < ranked.horizon
    assert aligned.horizon <= 1.05 * bound.best


def test_phases_not_in_columns_get_no_slots() -> None:
    phase = relay_phase(groups=2, replicas=4, fragments=24, segments=2, tiles=TILES, seed=3)
    deps = transfer_dependencies(phase)
    levels = transfer_levels(phase.n, deps)
    assert sender_slots(phase, deps, levels) is None
    assert aligned_slots(phase, deps, levels, reference_schedule(phase, MACHINE, tiles=TILES, deps=deps)) is None


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 4), st.integers(3, 5), st.integers(2, 24), st.sampled_from([64, 256]), st.booleans())
def test_aligned_slots_keep_the_rules_on_random_columns(columns: int, rows: int, fragments: int, slice_words: int,
                                                        spare: bool) -> None:
    phase = clash_phase(columns, rows, fragments, slice_words, spare)
    deps = transfer_dependencies(phase)
    levels = transfer_levels(phase.n, deps)
    slot = sender_slots(phase, deps, levels)
    assert slot is not None
    assert _clashes(phase, slot) <= _clashes(phase, _rank_slots(phase, columns, rows))
    greedy = reference_schedule(phase, MACHINE, tiles=TILES, deps=deps)
    search = OrderSearch(phase, deps, levels, lambda order: materialize(phase, order, deps, MACHINE, TILES),
                         greedy, deadline=float("inf"), step_seconds=0.0)
    search.aligned()
    assert greedy.horizon >= search.best.horizon >= reference_bound(phase, MACHINE, tiles=TILES).best
    _valid(phase, search.best)
    again = aligned_slots(phase, deps, levels, greedy)
    third = aligned_slots(phase, deps, levels, greedy)
    assert again is not None
    assert third is not None
    assert np.array_equal(again, third)
