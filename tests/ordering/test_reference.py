"""The reference's B1024 rules (``placer.refschedule.reference``): each rule on a hand-built phase, and every
schedule of random phases checked by the independent checker."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.model import Phase
from placer.machine import load_machine
from placer.ordering.check import check_reference_schedule
from placer.refschedule.reference import (
    materialize,
    moving_sources,
    reference_bound,
    reference_order,
    reference_schedule,
    reference_table_bytes,
)
from placer.streams.dependencies import transfer_dependencies, transfer_levels
from tests.ordering.synthetic import relay_phase

from .helpers import small_phases

MACHINE = load_machine()
TILES = 64
REGION1 = 0x90000  # interleaved memory: 32 KiB elements


def _phase(rows: list[tuple[int, int, list[tuple[int, int]], list[int]]]) -> Phase:
    """(source, words, [(destination tile, address)], source addresses (one per Repeat iteration)) per transfer."""
    return Phase.build(0, source=[r[0] for r in rows], words=[r[1] for r in rows],
                       dst_counts=[len(r[2]) for r in rows], dst_tile=[t for r in rows for t, _ in r[2]],
                       dst_addr=[a for r in rows for _, a in r[2]], src_addr=[a for r in rows for a in r[3]],
                       src_counts=[len(r[3]) for r in rows])


def _valid(phase: Phase, sched: object) -> None:
    assert check_reference_schedule(phase, sched.tx_start, sched.rx_start, sched.horizon,  # type: ignore[attr-defined]
                                    MACHINE) == []


def _in_order(phase: Phase, order: list[int]):  # type: ignore[no-untyped-def]
    return materialize(phase, np.asarray(order), transfer_dependencies(phase), MACHINE, TILES)


def test_back_to_back_pieces_are_spaced_by_their_words_alone() -> None:
    # one sender, five 576-word pieces to the same 19 receivers, contiguous on every receiver: no base write, no
    # hold, no pointer after the first, so each piece follows the previous one by exactly its words
    receivers = list(range(1, 20))
    phase = _phase([(0, 576, [(t, REGION1 + 2304 * k) for t in receivers], [0x4C000 + 2304 * k])
                    for k in range(5)])
    sched = reference_schedule(phase, MACHINE, tiles=TILES)
    assert np.diff(np.sort(sched.tx_start)).tolist() == [576] * 4
    assert sched.carries.reshape(5, 19)[1:].all()
    _valid(phase, sched)


def test_weights_go_before_activations_of_the_same_depth() -> None:
    # transfer 1 reads a per-layer address (moving) and is listed last; it is ordered first
    phase = _phase([(0, 8, [(1, REGION1)], [0x4C000]), (2, 8, [(3, REGION1)], [0x50000, 0x54000])])
    assert moving_sources(phase).tolist() == [False, True]
    levels = transfer_levels(phase.n, transfer_dependencies(phase))
    assert reference_order(phase, levels, tiles=TILES).tolist() == [1, 0]


def test_a_sender_fills_an_earlier_gap_on_its_lane() -> None:
    # tile 1 is busy receiving 1,000 words from tile 2, so tile 0's send to it waits; tile 0's next send (to
    # tile 3, later in the order) goes into the gap before it
    phase = _phase([(2, 1000, [(1, REGION1)], [0x4C000]), (0, 8, [(1, REGION1 + 0x8000)], [0x4C000]),
                    (0, 8, [(3, REGION1)], [0x4C100])])
    sched = _in_order(phase, [0, 1, 2])
    assert sched.tx_start[2] < sched.tx_start[1]
    _valid(phase, sched)


def test_independent_sends_to_one_receiver_pipeline() -> None:
    # the second sender starts before the first payload has landed; the two receives do not overlap
    phase = _phase([(0, 16, [(2, REGION1)], [0x4C000]), (4, 16, [(2, REGION1 + 0x100)], [0x4C000])])
    sched = reference_schedule(phase, MACHINE, tiles=TILES)
    first, second = np.argsort(sched.rx_start)
    assert sched.tx_start[second] < sched.rx_start[first] + 16
    assert sched.rx_start[second] >= sched.rx_start[first] + 16
    _valid(phase, sched)


def test_a_tile_does_not_send_from_an_element_it_is_receiving_into() -> None:
    # tile 1 receives 2,000 words into one 16 KiB element and sends 100 other words of that element to tile 2
    # (different bytes: no dependency): the send cannot overlap the receive window, so it waits for the payload
    # to land and its guard to pass
    phase = _phase([(0, 2000, [(1, 0x50000)], [0x4C000]), (1, 100, [(2, REGION1)], [0x50000 + 8000 + 64])])
    assert len(transfer_dependencies(phase)) == 0
    sched = _in_order(phase, [0, 1])
    assert sched.tx_start[1] >= sched.rx_start[0] + 2000 + 5
    _valid(phase, sched)
    # the same send from another element overlaps the receive freely
    phase = _phase([(0, 2000, [(1, 0x50000)], [0x4C000]), (1, 100, [(2, REGION1)], [0x58000])])
    sched = _in_order(phase, [0, 1])
    assert sched.tx_start[1] < sched.rx_start[0] + 100
    _valid(phase, sched)


def test_a_dependent_transfer_waits_for_every_arrival_of_its_predecessor() -> None:
    # tile 1 forwards what it received (RAW): its send starts after the payload landed on both receivers
    phase = _phase([(0, 64, [(1, 0x50000), (5, 0x50000)], [0x4C000]), (1, 64, [(2, REGION1)], [0x50000])])
    sched = reference_schedule(phase, MACHINE, tiles=TILES)
    assert sched.tx_start[1] >= int((sched.rx_start[:2] + 64).max())
    _valid(phase, sched)


def test_a_transfer_naming_one_tile_twice_is_refused() -> None:
    # the reader refuses this in a capture; a phase built in code must not time tile 5's two receives of the one
    # transfer on top of each other (a schedule its own checker rejects) but say which transfer and tile
    ok = (0, 8, [(5, REGION1)], [0x4C000])
    twice = (1, 8, [(6, REGION1), (5, REGION1 + 0x1000), (5, REGION1 + 0x2000)], [0x4C000])
    phase = _phase([ok, twice])
    with pytest.raises(ValueError, match=r"^phase 0, transfer 1: destination tile 5 appears twice in one transfer$"):
        reference_schedule(phase, MACHINE, tiles=TILES)
    with pytest.raises(ValueError, match="transfer 1: destination tile 5"):
        _in_order(phase, [1, 0])
    # tile 5 in two different transfers is fine
    once = _phase([ok, (1, 8, [(6, REGION1), (5, REGION1 + 0x1000)], [0x4C000])])
    _valid(once, reference_schedule(once, MACHINE, tiles=TILES))


def test_checker_finds_a_moved_send() -> None:
    phase = _phase([(0, 576, [(t, REGION1 + 2304 * k) for t in range(1, 6)], [0x4C000 + 2304 * k])
                    for k in range(3)])
    sched = reference_schedule(phase, MACHINE, tiles=TILES)
    tx = sched.tx_start.copy()
    tx[1] -= 1
    assert check_reference_schedule(phase, tx, sched.rx_start, sched.horizon, MACHINE) != []
    rx = sched.rx_start.copy()
    rx[5:] -= 300  # the second piece lands on top of the first: route, selects and pointer order all break
    assert check_reference_schedule(phase, sched.tx_start, rx, sched.horizon, MACHINE) != []
    assert check_reference_schedule(phase, sched.tx_start, sched.rx_start, sched.horizon + 1, MACHINE) != []


def test_timed_rows_count_cutovers_and_contiguous_receives_once() -> None:
    # five contiguous back-to-back receives: five selects, one pointer, one teardown; plus entry, delay, RETURN
    receivers = [1]
    phase = _phase([(0, 576, [(t, REGION1 + 2304 * k) for t in receivers], [0x4C000 + 2304 * k])
                    for k in range(5)])
    sched = reference_schedule(phase, MACHINE, tiles=TILES)
    table = reference_table_bytes(phase, sched, MACHINE, TILES)
    assert sched.cutover.tolist() == [False, True, True, True, True]
    # receiver: 5 selects + 1 pointer + 1 teardown + a delay before the first select? (it is at cycle < 4,096:
    # absorbed) + final delay (the guard) + RETURN = 9 words = 36 B -> 40 B rounded to 8
    assert int(table[1]) == 40
    # sender: 5 sends of 576 words (1 + 1 word each) + delay to its first send (the lead, if any) + RETURN
    lead_words = int(sched.tx_start.min() > 0)
    assert int(table[0]) == MACHINE.cost.rounded(4 * (10 + lead_words + 1))


@settings(max_examples=60, deadline=None)
@given(small_phases(max_transfers=10))
def test_every_schedule_of_a_random_phase_keeps_the_rules(phase: Phase) -> None:
    sched = reference_schedule(phase, MACHINE, tiles=TILES)
    _valid(phase, sched)
    assert sched.horizon >= max(reference_bound(phase, MACHINE, tiles=TILES))
    again = reference_schedule(phase, MACHINE, tiles=TILES)
    assert np.array_equal(sched.tx_start, again.tx_start)
    assert np.array_equal(sched.rx_start, again.rx_start)


@settings(max_examples=40, deadline=None)
@given(small_phases(max_transfers=8))
def test_any_topological_order_gives_a_valid_schedule(phase: Phase) -> None:
    deps = transfer_dependencies(phase)
    order = np.lexsort((-np.arange(phase.n), transfer_levels(phase.n, deps)))  # reversed within each depth
    sched = materialize(phase, order, deps, MACHINE, TILES)
    _valid(phase, sched)
    assert sched.horizon >= max(reference_bound(phase, MACHINE, tiles=TILES, deps=deps))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_relay_bound_follows_the_gathers_onto_the_host_and_holds(seed: int) -> None:
    phase = relay_phase(groups=2, replicas=4, fragments=30, seed=seed)
    deps = transfer_dependencies(phase)
    port, lane, chain, memory, host = reference_bound(phase, MACHINE, deps=deps)
    # a forward waits for its gathers, which land on the host one after another, and then sends its own words
    words = phase.words.astype(np.int64)
    gathered = np.bincount(deps.succ, weights=words[deps.pred], minlength=phase.n)
    forward = gathered > 0
    assert chain >= int((gathered + words)[forward].max()) + 52
    order = np.lexsort((np.random.default_rng(seed).permutation(phase.n), transfer_levels(phase.n, deps)))
    sched = materialize(phase, order, deps, MACHINE, MACHINE.tiles)
    assert sched.horizon >= max(port, lane, chain, memory, host)
    assert check_reference_schedule(phase, sched.tx_start, sched.rx_start, sched.horizon, MACHINE) == []
