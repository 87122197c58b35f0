"""Each rule of the reference scheduler (docs/reference.md §7) pinned on a small hand-built phase."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.model import Phase
from placer.chunkmodel.chunks import build_chunks
from placer.chunkmodel.greedy import balanced_order, balanced_order_heap, greedy_starts, row_builder
from placer.chunkmodel.rows import expand, timed_rows
from placer.machine import load_machine
from placer.modes import OrderingRules
from placer.ordering.check import check_schedule
from placer.ordering.schedule import OrderingParams, schedule_phase
from tests.ordering.synthetic import relay_phase, replica_phase

from .helpers import small_phases

MACHINE = load_machine()
MODEL = OrderingParams(rules=OrderingRules.MODEL)  # placer's chunk model (these tests pin its rules)
TILES = 64


def _phase(rows: list[tuple[int, int, list[tuple[int, int]], int]]) -> Phase:
    """(source, words, [(destination tile, address)], source address) per transfer."""
    return Phase.build(0, source=[r[0] for r in rows], words=[r[1] for r in rows],
                       dst_counts=[len(r[2]) for r in rows], dst_tile=[t for r in rows for t, _ in r[2]],
                       dst_addr=[a for r in rows for _, a in r[2]], src_addr=[r[3] for r in rows])


def _valid(phase: Phase, tx: np.ndarray, rx: np.ndarray, horizon: int) -> None:
    assert check_schedule(phase, tx, rx, horizon, MACHINE) == []


def test_stream_key_is_source_and_destination_set() -> None:
    phase = _phase([(0, 8, [(1, 0)], 0), (0, 8, [(2, 0)], 32), (0, 8, [(1, 32)], 64), (3, 8, [(1, 64)], 0)])
    ch = build_chunks(phase, MACHINE)
    stream_of = np.empty(phase.n, np.int64)
    stream_of[ch.order] = np.repeat(ch.stream, np.diff(ch.ptr))
    assert stream_of[0] == stream_of[2]
    assert len({int(stream_of[0]), int(stream_of[1]), int(stream_of[3])}) == 3


def test_in_stream_order_is_destination_then_source_address() -> None:
    # listed order 0, 1, 2; destination addresses 96, 0, 0 (ties broken by source address 64 < 128)
    phase = _phase([(0, 8, [(1, 96)], 0), (0, 8, [(1, 0)], 128), (0, 8, [(1, 0 + 32)], 64)])
    # transfers 1 and 2 overlap at the destination? no: 0..32 and 32..64
    ch = build_chunks(phase, MACHINE)
    assert ch.order.tolist() == [1, 2, 0]


def test_wave_is_stream_words_before_over_1024() -> None:
    # one stream of 5 × 300 words: words before = 0, 300, 600, 900, 1200 → waves 0, 0, 0, 0, 1
    phase = _phase([(0, 300, [(1, 1200 * k)], 1200 * k) for k in range(5)])
    ch = build_chunks(phase, MACHINE)
    assert ch.wave.tolist() == [0, 1]
    assert np.diff(ch.ptr).tolist() == [4, 1]


def test_heap_takes_earliest_ready_then_larger_remaining_work() -> None:
    # wave 0: stream A (tile 0 → 1, 100 words), stream B (tile 2 → 3, 40 words); tile 2 also has a wave-1
    # chunk, so B's remaining endpoint work (40 + 1100) is larger: B is taken first although A has more words
    rows = [(0, 100, [(1, 0)], 0), (2, 40, [(3, 0)], 0)]
    rows += [(2, 1000, [(3, 160)], 160), (2, 100, [(3, 4160)], 4160)]
    phase = _phase(rows)
    ch = build_chunks(phase, MACHINE)
    order = balanced_order(ch)
    src_of = ch.source[order].tolist()
    wave_of = ch.wave[order].tolist()
    assert wave_of == sorted(wave_of)
    assert src_of[:2] == [2, 0]
    # then: a chunk whose endpoints are ready earlier beats one whose endpoints were just used
    phase = _phase([(0, 64, [(1, 0)], 0), (2, 64, [(1, 256)], 0), (4, 8, [(5, 0)], 0)])
    ch = build_chunks(phase, MACHINE)
    first_two = ch.source[balanced_order(ch)].tolist()
    assert first_two.index(4) < max(first_two.index(0), first_two.index(2))


def test_dependency_depth_before_rank_and_no_fixed_lag() -> None:
    # gather 0 → relay 5 (depth 0), forward 5 → 6, 7 reads what arrived (depth 1)
    phase = _phase([(0, 16, [(5, 0)], 0), (5, 16, [(6, 0), (7, 0)], 0)])
    ch = build_chunks(phase, MACHINE)
    assert ch.level.tolist() == [0, 1] or sorted(ch.level.tolist()) == [0, 1]
    order = balanced_order(ch)
    assert ch.level[order].tolist() == [0, 1]
    ps = schedule_phase(phase, MACHINE, ordering=MODEL)
    s = ps.schedule
    landed = int(s.rx_start[0] + 16)
    # the forward's first send is its base write (13 cycles) after the earliest cycle its data has landed
    assert int(s.tx_start[1]) == landed + 13
    _valid(phase, s.tx_start, s.rx_start, s.horizon)


def test_latency_is_52_plus_twice_the_row() -> None:
    # logical tile 46 = pair 23 = block 1 (odd: row reversed) row 0 → 22; physical id >> 6 is the row
    phase = _phase([(0, 100, [(46, 0), (2, 0)], 0)])
    ps = schedule_phase(phase, MACHINE, ordering=MODEL)
    rows = MACHINE.physical(np.array([46, 2])) >> 6
    assert rows.tolist() == [22, 1]
    tx = int(ps.schedule.tx_start[0])
    assert (ps.schedule.rx_start - tx).tolist() == [52 + 2 * 22, 52 + 2 * 1]


def test_short_receive_holds_its_port_five_cycles() -> None:
    # two sources send 8 words each to tile 1 at non-adjacent addresses: the second waits 8 + 5 cycles
    phase = _phase([(0, 8, [(1, 0)], 0), (2, 8, [(1, 256)], 0)])
    s = schedule_phase(phase, MACHINE, ordering=MODEL).schedule
    gap = abs(int(s.rx_start[1] - s.rx_start[0]))
    assert gap == 13
    # 52 words are not short: back to back
    phase = _phase([(0, 52, [(1, 0)], 0), (2, 52, [(1, 256)], 0)])
    s = schedule_phase(phase, MACHINE, ordering=MODEL).schedule
    assert abs(int(s.rx_start[1] - s.rx_start[0])) == 52
    # the checker refuses a short receive followed at once by another one
    tx = np.array([13, 21], np.int64)
    lat = int(MACHINE.latency(1))
    problems = check_schedule(phase.take(np.array([0, 1])), tx, tx + lat, int(tx[1] + lat + 52), MACHINE)
    assert any("receive port" in p for p in problems)
    short = _phase([(0, 8, [(1, 0)], 0), (2, 8, [(1, 256)], 0)])
    tx = np.array([13, 21], np.int64)
    problems = check_schedule(short, tx, tx + lat, int(tx[1] + lat + 8), MACHINE)
    assert any("receive port" in p for p in problems)


def test_outgoing_base_write_costs_13_lane_cycles() -> None:
    # one source, two transfers to different tiles (two streams), source addresses not contiguous
    phase = _phase([(0, 20, [(1, 0)], 0), (0, 20, [(2, 0)], 400)])
    s = schedule_phase(phase, MACHINE, ordering=MODEL).schedule
    tx = sorted(s.tx_start.tolist())
    assert tx[0] == 13
    assert tx[1] == tx[0] + 20 + 13
    _valid(phase, s.tx_start, s.rx_start, s.horizon)
    # contiguous source addresses inside one stream: no second base write, back to back
    phase = _phase([(0, 60, [(1, 0)], 0), (0, 60, [(1, 240)], 240)])
    s = schedule_phase(phase, MACHINE, ordering=MODEL).schedule
    assert sorted(s.tx_start.tolist()) == [13, 73]
    _valid(phase, s.tx_start, s.rx_start, s.horizon)
    # the checker wants the 13 idle lane cycles
    bad = _phase([(0, 20, [(1, 0)], 0), (0, 20, [(2, 0)], 400)])
    sends = np.array([13, 33], np.int64)
    receives = sends + MACHINE.latency(np.array([1, 2]))
    assert any("lane" in p for p in check_schedule(bad, sends, receives, int(receives.max() + 20), MACHINE))


def test_control_conflicts_pushed_one_cycle() -> None:
    # tile 1 receives from tile 0 while sending to tile 2: the two chunks' controls would share cycle 13
    phase = _phase([(0, 60, [(1, 0)], 0), (1, 60, [(2, 0)], 4096)])
    ch = build_chunks(phase, MACHINE)
    starts = row_builder(ch, [0, 1])
    assert sorted(starts.tolist()) == [0, 1]
    s = expand(phase, ch, starts)
    _valid(phase, s.tx_start, s.rx_start, s.horizon)
    lat = MACHINE.latency(np.array([1, 2]))
    clash = check_schedule(phase, np.array([13, 13]), np.array([13, 13]) + lat, int(13 + 60 + lat.max()), MACHINE)
    assert any("control events" in p for p in clash)


def test_timed_rows_words_delays_and_return() -> None:
    # tile 0 sends 100 words (base + 2 send words) then, after an idle gap, 10 more (base + 1)
    phase = _phase([(0, 100, [(1, 0)], 0), (0, 10, [(2, 0)], 4000)])
    ch = build_chunks(phase, MACHINE)
    late = np.where(ch.words == ch.words.max(), 0, 1000).astype(np.int64)  # the 100-word chunk first
    sched = expand(phase, ch, late)
    _valid(phase, sched.tx_start, sched.rx_start, sched.horizon)
    rows = timed_rows(phase, sched, MACHINE, TILES)
    # sender: base 1 + send 2 | DELAY 1 + base 1 + send 1 | DELAY + RETURN 2 = 8 words → 32 bytes
    assert rows.base_writes[0] == 2
    assert rows.table_bytes[0] == 32
    # each receiver: receive control 2 + base (reset: the first receive) 1, and a DELAY for the lead-in (the
    # receive has a base write, so its gap is not absorbed), + 2 → 6 words → 24 bytes
    assert rows.resets[1] == 1
    assert rows.table_bytes[1] == 24
    # a lone receive control absorbs a gap up to 128 cycles, not more
    phase = _phase([(0, 8, [(1, 0)], 0), (2, 8, [(1, 32)], 0)])
    ch = build_chunks(phase, MACHINE)
    for gap, delays in ((100, 0), (200, 1)):
        st = np.array([0, 0], np.int64)
        st[ch.source == 2] = 13 + 8 + gap  # second chunk after the first receive and its hold ... plus the gap
        st[ch.source == 2] += 5
        sched = expand(phase, ch, st)
        _valid(phase, sched.tx_start, sched.rx_start, sched.horizon)
        rows = timed_rows(phase, sched, MACHINE, TILES, OrderingParams())
        # the second receive is contiguous (no reset): a lone receive control; the first pays for its lead-in
        assert rows.resets[1] == 1
        assert rows.delay_words[1] == 1 + delays


def test_greedy_is_deterministic() -> None:
    phase = _phase([(k % 5, 8 + k, [(10 + k % 3, 64 * k), (20, 64 * k)], 64 * k) for k in range(30)])
    ch = build_chunks(phase, MACHINE)
    assert greedy_starts(ch).tolist() == greedy_starts(build_chunks(phase, MACHINE)).tolist()


@settings(max_examples=60, deadline=None)
@given(small_phases(max_transfers=10, max_words=400), st.sampled_from([64, 1024]))
def test_fast_balancing_takes_the_heap_picks(phase: Phase, wave: int) -> None:
    ch = build_chunks(phase, MACHINE, wave_words=wave)
    for rule in ("b1024", "nowave"):
        assert balanced_order(ch, rule) == balanced_order_heap(ch, rule)


def test_fast_balancing_on_a_multicast_phase() -> None:
    phase = replica_phase(groups=5, replicas=6, fragments=90, sources=9, weight_words=1500, tiles=96)
    ch = build_chunks(phase, MACHINE)
    assert balanced_order(ch) == balanced_order_heap(ch)
    relay = relay_phase(groups=3, replicas=5, fragments=40, segments=2)
    ch = build_chunks(relay, MACHINE)
    assert balanced_order(ch) == balanced_order_heap(ch)
