"""The relay-host bound (``placer.refschedule.hostbound``): its program on a host laid out as the CP-SAT plan's phase
60 hosts are (worked by hand), and on generated hosts whose segments share SRAM elements it is never above a
schedule the reference's rules give, from any order."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.ordering.check import check_reference_schedule
from placer.refschedule.hostbound import _host_program
from placer.refschedule.reference import materialize, reference_bound, reference_schedule
from placer.streams.dependencies import transfer_dependencies, transfer_levels
from tests.ordering.test_improve import MACHINE, TILES, _search, host_phase

A, B, C = 29, 30, 31  # three SRAM elements
BIG, SMALL = 1, 2  # two forwards: 4,148 words over A|B, 2,508 over B|C
READS = {BIG: frozenset({A, B}), SMALL: frozenset({B, C})}
CLASSES = {(frozenset({BIG}), frozenset({A})): 928, (frozenset({BIG}), frozenset({B})): 3216,
           (frozenset({SMALL}), frozenset({B})): 880, (frozenset({SMALL}), frozenset({C})): 1632}
SEND = {BIG: 4148, SMALL: 2508}


def test_a_phase_60_host_is_bound_by_how_its_elements_interlock() -> None:
    # big first: its 4,144 words (and none of small's B part, which may not land during its send) before it,
    # small's C part during it, small's B part after it: 4,144 + 4,148 + 880 + 2,508
    assert _host_program((BIG, SMALL), CLASSES, SEND, {BIG: 0, SMALL: 0}, READS, {BIG: 0, SMALL: 0}, 0) == 11_680
    # small first: all of B is gathered before it or between the sends, only A during it: 2,512 + 3,216 +
    # 2,508 + 4,148 (the busiest element alone, B: 4,096 + both sends = 10,752)
    assert _host_program((SMALL, BIG), CLASSES, SEND, {BIG: 0, SMALL: 0}, READS, {BIG: 0, SMALL: 0}, 0) == 12_384
    # the first gather lands at 100 at the earliest, and each payload lands 60 (big) or 70 (small) after its send
    late = {BIG: 100, SMALL: 100}
    assert _host_program((BIG, SMALL), CLASSES, SEND, {BIG: 60, SMALL: 70}, READS, late, 100) == 11_850


def test_the_host_bound_is_above_the_memory_bound_on_hosts_whose_segments_share_elements() -> None:
    phase = host_phase()  # three segments, every forward reads element 2
    bound = reference_bound(phase, MACHINE, tiles=TILES)
    assert bound.host > bound.memory > max(bound.port, bound.lane, bound.chain)
    assert bound.kind == "host"
    search = _search(phase, TILES)
    assert bound.host <= search.best.horizon <= 1.01 * bound.host


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from([0x3000, 0x3800, 0x4000, 0x5000, 0x7800, 0x8000, 0x8800, 0x9800, 0xB000]),
                min_size=1, max_size=3, unique=True),
       st.integers(2, 10), st.integers(0, 3), st.integers(0, 10_000))
def test_no_order_beats_the_host_bound(bases: list[int], fragments: int, direct: int, seed: int) -> None:
    phase = host_phase(bases, fragments=fragments, direct=direct)
    deps = transfer_dependencies(phase)
    levels = transfer_levels(phase.n, deps)
    bound = reference_bound(phase, MACHINE, tiles=TILES, deps=deps)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        order = np.lexsort((rng.permutation(phase.n), levels))
        schedule = materialize(phase, order, deps, MACHINE, TILES)
        assert check_reference_schedule(phase, schedule.tx_start, schedule.rx_start, schedule.horizon, MACHINE) == []
        assert schedule.horizon >= bound.host
    assert reference_schedule(phase, MACHINE, tiles=TILES, deps=deps).horizon >= bound.host
    assert _search(phase, TILES, polish=False).best.horizon >= bound.host
