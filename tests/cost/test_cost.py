"""Every cost rule of docs/reference.md §3 on a hand-computed example."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.model import PAIRED64, Capture, Phase, Repeat
from placer.cost.model import program_cost, receive_resets, tile_counters
from placer.machine import Machine, load_machine
from placer.validation.table import phase_table
from tests.builders import striped_allocations

M = load_machine()
T = 8


def phase(rows: list[tuple[int, list[tuple[int, int]], int]], pid: int = 0, width: list[int] | None = None) -> Phase:
    """rows: (source, [(dst tile, dst address)], words)."""
    return Phase.build(pid, [r[0] for r in rows], [r[2] for r in rows], [len(r[1]) for r in rows],
                       [t for r in rows for t, _ in r[1]], [a for r in rows for _, a in r[1]], [0] * len(rows),
                       width=width)


def test_entry_bytes_and_rounding() -> None:
    # one short unicast: sender 8 entry + 8 send = 16; receiver 8 + 8 + 4 (first receive resets) = 20 -> 24
    pc = tile_counters(phase([(0, [(1, 100)], 8)]), M, T)
    assert pc.table_bytes[:3].tolist() == [16, 24, 0]  # idle tile 2 pays nothing


def test_long_send_surcharge_is_above_64_words() -> None:
    pc = tile_counters(phase([(0, [(1, 0)], 64), (0, [(2, 0)], 65)]), M, T)
    # sender: 8 + 8 + (8 + 4) = 28 -> 32
    assert pc.sends[0] == 2
    assert pc.long_sends[0] == 1
    assert pc.table_bytes[0] == 32


def test_multicast_paid_once_by_sender_each_receiver_pays_own_row() -> None:
    pc = tile_counters(phase([(0, [(1, 0), (2, 0), (3, 0)], 8)]), M, T)
    assert pc.sends[0] == 1
    assert pc.table_bytes[0] == 16
    assert pc.receives[1:4].tolist() == [1, 1, 1]
    assert pc.tx_bytes[0] == 32
    assert pc.rx_bytes[1:4].tolist() == [32, 32, 32]


def test_pointer_reset_only_when_not_contiguous_in_listed_order() -> None:
    rows = [(0, [(1, 0)], 8), (0, [(1, 32)], 8), (0, [(1, 128)], 8), (0, [(1, 160)], 8), (0, [(1, 0)], 8)]
    pc = tile_counters(phase(rows), M, T)
    # resets: first, then 32 == 0+32 no, 128 != 64 yes, 160 == 160 no, 0 != 192 yes
    assert pc.resets[1] == 3
    assert 8 + 5 * 8 + 3 * 4 == 60
    assert pc.table_bytes[1] == 64  # rounded up to a multiple of 8


def test_receive_resets_follow_listed_order_per_tile() -> None:
    tiles = np.array([1, 2, 1, 2])
    addr = np.array([0, 0, 32, 100])
    nbytes = np.array([32, 32, 32, 32])
    assert receive_resets(tiles, addr, nbytes).tolist() == [1, 1, 0, 1]


def test_cycles_estimate() -> None:
    rows = [(0, [(1, 0), (2, 0)], 1000), (3, [(1, 4000)], 10)]
    pc = tile_counters(phase(rows), M, T)
    # tile 1 receives 4000 + 40 bytes = 1010 cycles; tile 0 sends 4000 bytes = 1000; controls tiny
    assert pc.cycles == 1010 + 600
    ctrl = tile_counters(phase([(0, [(1, 8 * i)], 1) for i in range(0, 400, 2)]), M, T)
    # 200 one-word receives at non-contiguous addresses: controls 2*200 + 200 resets = 600 > 200 words
    assert ctrl.cycles == 600 + 600


def test_a_receive_into_another_allocation_resets_even_when_contiguous() -> None:
    # tile 1 receives [0x100, 0x120), [0x120, 0x140), [0x140, 0x160): contiguous, one run without allocations
    rows = [(0, [(1, 0x100)], 8), (0, [(1, 0x120)], 8), (0, [(1, 0x140)], 8)]
    assert tile_counters(phase(rows), M, T).resets[1] == 1
    three = striped_allocations(T, 0x100, 0x160, 0x20)  # each receive in its own allocation
    assert tile_counters(phase(rows), M, T, three).resets[1] == 3
    assert tile_counters(phase(rows), M, T, striped_allocations(T, 0x100, 0x160, 0x40)).resets[1] == 2
    # allocations not live in the phase do not count; the validator's own count agrees each time
    idle = striped_allocations(T, 0x100, 0x160, 0x20, first=1, last=3)
    assert tile_counters(phase(rows), M, T, idle).resets[1] == 1
    for allocs, table in ((three, 48), (idle, 40)):  # 8 + 3 * 8 + 4 per reset, rounded up to 8
        assert tile_counters(phase(rows), M, T, allocs).table_bytes[1] == table
        assert phase_table(phase(rows), T, M, allocs)[0][1] == table


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), stripe=st.sampled_from([8, 32, 48, 96, 4096]))
def test_allocation_resets_agree_with_the_validator(seed: int, stripe: int) -> None:
    """Random receive runs over striped allocations, some receives running past their allocation's end: the cost
    model's vectorised count (allocation bounds searched by bisection within runs) and the validator's lookup of
    each receive's allocation (the one holding its first byte) give the same rows."""
    rng = np.random.default_rng(seed)
    top = 0x1000 + 16 * stripe
    rows = []
    for _ in range(int(rng.integers(1, 60))):
        t, addr = int(rng.integers(0, T)), 0x1000 + 8 * int(rng.integers(0, 2 * stripe))
        for _ in range(int(rng.integers(1, 12))):  # a run of contiguous receives, sometimes past the stripes
            nbytes = 8 * int(rng.integers(1, 12))
            if addr < top and rng.integers(0, 2):  # most receives stop at their stripe's end, some run past it
                nbytes = min(nbytes, stripe - (addr - 0x1000) % stripe)
            rows.append((int(rng.integers(0, T)), [(t, addr)], nbytes // 4))
            addr += nbytes
    rng.shuffle(rows)  # runs interleave across tiles; some stay contiguous within a tile
    rows.sort(key=lambda r: r[1][0][0])
    ph = phase(rows)
    allocs = striped_allocations(T, 0x1000, 0x1000 + 16 * stripe, stripe)
    mine = tile_counters(ph, M, T, allocs)
    assert np.array_equal(mine.table_bytes, phase_table(ph, T, M, allocs)[0])
    assert (mine.resets >= tile_counters(ph, M, T).resets).all()


def test_paired64_bytes_all_charged_to_the_source() -> None:
    # no Paired64 term (docs/reference.md §3): the partner lane (tile 5) carries nothing in the estimate
    pc = tile_counters(phase([(4, [(1, 0)], 100)], width=[PAIRED64]), M, T)
    assert pc.tx_bytes[4] == 400
    assert pc.tx_bytes[5] == 0
    assert pc.cycles == 100 + 600


def test_program_totals_repeat_body_stored_once_cycles_per_iteration() -> None:
    a = phase([(0, [(1, 0)], 8)], pid=0)
    b = phase([(0, [(1, 0)], 9)], pid=1)  # not the same row as a's (9 words), so nothing is shared
    cap = Capture(tile_count=T, phases=[a, b], repeat=Repeat((1,), 27))
    cost = program_cost(cap, M)
    assert cost.table_bytes[0] == 16 + 16  # each stored phase once
    assert cost.fragments[1] == 2
    assert cost.cycles == cost.phases[0].cycles + 27 * cost.phases[1].cycles
    assert cost.worst_tile() == 1
    assert cost.worst_table() == 48
    assert cost.fits(48)
    assert not cost.fits(47)
    assert not cost.fits(None, 1)


def test_row_estimate_sums_phase_maxima_not_one_tile() -> None:
    # phase 0 peaks on tile 1 (24 B), phase 1 on tile 3 (24 B): the worst tile carries 24 + 16 at most, while the
    # reference's row estimate adds both maxima regardless of where they fall
    cap = Capture(tile_count=T, phases=[phase([(0, [(1, 100)], 8)], 0), phase([(2, [(3, 100)], 8)], 1)])
    cost = program_cost(cap, M)
    assert cost.worst_table() == 24
    assert cost.row_estimate == 48


# -- shared phase tables (docs/reference.md §3, the finer per-tile estimator) ------------------------------------

def sharing_program(*phases: Phase, machine: Machine = M) -> tuple[np.ndarray, np.ndarray]:
    cost = program_cost(Capture(tile_count=T, phases=list(phases)), machine)
    return cost.table_bytes, cost.charged


def test_identical_rows_share_one_table_for_free() -> None:
    # same instructions, same addresses: the second phase patches nothing and costs nothing on either tile
    total, charged = sharing_program(phase([(0, [(1, 100)], 8)], 0), phase([(0, [(1, 100)], 8)], 1))
    assert charged[:, :2].tolist() == [[16, 24], [0, 0]]
    assert total[:2].tolist() == [16, 24]


def test_second_use_pays_12_per_patch_later_uses_4() -> None:
    # the receive lands elsewhere each time: one patched address (the pointer reset); the sender patches nothing
    rows = [phase([(0, [(1, 100 + 64 * i)], 8)], i) for i in range(4)]
    total, charged = sharing_program(*rows)
    assert charged[:, 1].tolist() == [24, 16, 8, 8]  # 12 -> 16 (rounded to 8), then 4 -> 8
    assert charged[:, 0].tolist() == [16, 0, 0, 0]
    assert total[1] == 56


def test_sharing_dearer_than_own_rows_is_not_taken() -> None:
    # three sends from three new source addresses: 3 patches x 12 = 36 -> 40 bytes, above the row's own 32
    def three(pid: int, base: int) -> Phase:
        return Phase.build(pid, [0, 0, 0], [8, 8, 8], [1, 1, 1], [1, 2, 3], [0, 0, 0], [base, base + 64, base + 128])

    _, charged = sharing_program(three(0, 0), three(1, 1024))
    assert charged[:, 0].tolist() == [32, 32]
    assert charged[1, 1:4].tolist() == [0, 0, 0]  # the receivers' rows are the same as before: shared for free


def test_different_rows_are_not_shared() -> None:
    # a different word count, a different source, an extra receive: each is another row
    base = phase([(0, [(1, 100)], 8)], 0)
    for other in (phase([(0, [(1, 100)], 9)], 1), phase([(2, [(1, 100)], 8)], 1),
                  phase([(0, [(1, 100)], 8), (0, [(1, 132)], 8)], 1)):
        _, charged = sharing_program(base, other)
        assert charged[1, 1] == tile_counters(other, M, T).table_bytes[1]


def test_a_phase_reading_per_iteration_addresses_is_never_shared() -> None:
    a = phase([(0, [(1, 100)], 8)], 0)
    per_layer = Phase.build(1, [0], [8], [1], [1], [100], [0, 4096], src_counts=[2])
    _, charged = sharing_program(a, per_layer)
    assert charged[1, :2].tolist() == [16, 24]
    same_address = Phase.build(1, [0], [8], [1], [1], [100], [0, 0], src_counts=[2])  # listed twice, never varies
    _, charged = sharing_program(a, same_address)
    assert charged[1, :2].tolist() == [0, 0]


def test_sharing_can_be_switched_off_in_the_machine_file() -> None:
    off = replace(M, cost=replace(M.cost, share_phase_tables=0))
    total, charged = sharing_program(phase([(0, [(1, 100)], 8)], 0), phase([(0, [(1, 100)], 8)], 1), machine=off)
    assert charged[:, :2].tolist() == [[16, 24], [16, 24]]
    assert total[1] == 48


def test_pinned_rows_are_every_saving_use_and_its_first_use() -> None:
    cost = program_cost(Capture(tile_count=T, phases=[phase([(0, [(1, 100)], 8)], 0), phase([(2, [(3, 0)], 8)], 1),
                                                      phase([(0, [(1, 100)], 8)], 2)]), M)
    assert cost.sharing is not None
    pinned = cost.sharing.pinned()
    assert np.flatnonzero(pinned[0]).tolist() == [0, 1]
    assert not pinned[1].any()
    assert np.flatnonzero(pinned[2]).tolist() == [0, 1]
    assert cost.sharing.shared_phases() == {0, 2}
    # the row estimate (Σ of phase maxima) is the reference's coarse figure: no sharing in it
    assert cost.row_estimate == 24 + 24 + 24
