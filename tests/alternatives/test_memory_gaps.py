"""A relay buffer's room on a tile (``placer.alternatives.memory.PhaseMemory``) on one hand-built phase, against
gaps worked out by hand: live allocations, the bytes the tile sends and receives (in every Repeat iteration), the
loader limit and the region boundary all close memory; reservations close it for later requests."""

from __future__ import annotations

import numpy as np

from placer.alternatives.memory import BUFFER_ALIGNMENT, PhaseMemory
from placer.capture.model import Allocations, Capture, Phase
from tests.builders import small_machine

M = small_machine(8)
LO, HI, EDGE = 0x4C000, 0xE7BB0, 0x80000  # SRAM base, loader limit (below the end), region boundary
assert (M.memory.base, min(M.memory.end, M.memory.loader_limit), M.memory.region0_end) == (LO, HI, EDGE)

# phase 1 of a three-phase program: tile 5 sends [0x50000, 0x50044) (17 words) to tile 3 at [0x60000, 0x60044);
# tile 3 sends [0x70000, 0x70020) and, from another address in each of two Repeat iterations, [0x72000, 0x72010)
# and [0x74000, 0x74010), to tile 6
PHASE = Phase.build(1, source=[5, 3, 3], words=[17, 8, 4], dst_counts=[1, 1, 1], dst_tile=[3, 6, 6],
                    dst_addr=[0x60000, 0x60000, 0x61000], src_addr=[0x50000, 0x70000, 0x72000, 0x74000],
                    src_counts=[1, 1, 2])
# tile 3's allocations: two live in phase 1, one only before it (not busy), one straddling the region boundary
ALLOCATIONS = Allocations(tile=np.array([3, 3, 3, 3], np.int32),
                          start=np.array([0x50000, 0x90000, 0x4C000, 0x7F000], np.int64),
                          end=np.array([0x51000, 0xE0000, 0x60000, 0x80100], np.int64),
                          first=np.array([0, 1, 0, 2], np.int64), last=np.array([2, 1, 0, 2], np.int64))
CAPTURE = Capture(tile_count=8, phases=[Phase.build(0, [], [], [], [], [], []), PHASE,
                                        Phase.build(2, [], [], [], [], [], [])], allocations=ALLOCATIONS)

TILE3_GAPS = [(LO, 0x50000), (0x51000, 0x60000), (0x60044, 0x70000), (0x70020, 0x72000), (0x72010, 0x74000),
              (0x74010, EDGE), (EDGE, 0x90000), (0xE0000, HI)]
TILE5_GAPS = [(LO, 0x50000), (0x50044, EDGE), (EDGE, HI)]


def memory() -> PhaseMemory:
    return PhaseMemory(CAPTURE, PHASE, M)


def test_gaps_are_what_the_phase_leaves_free() -> None:
    mem = memory()
    assert mem.gaps(3) == TILE3_GAPS
    assert mem.gaps(5) == TILE5_GAPS
    assert mem.gaps(0) == [(LO, EDGE), (EDGE, HI)]  # an idle tile: split at the region boundary only
    assert mem.gaps(6) == [(LO, 0x60000), (0x60020, 0x61000), (0x61010, EDGE), (EDGE, HI)]


def test_first_fit_is_the_lowest_aligned_gap_that_holds_the_buffer() -> None:
    mem = memory()
    assert mem.first_fit(3, 0x4000) == LO  # [0x4c000, 0x50000) exactly
    assert mem.first_fit(3, 0x4008) == 0x51000
    assert mem.first_fit(3, 0xF000) == 0x51000
    # [0x60044, 0x70000): the buffer starts at the next multiple of 8, 0x60048, and so holds 0xffb8 bytes
    assert mem.first_fit(3, 0xFFB8) == 0x60048
    # never across the region boundary: [0x74010, 0x90000) is free but for it
    assert mem.first_fit(3, 0xFFC0) == EDGE
    assert mem.first_fit(3, 0x10000) == EDGE  # [0x80000, 0x90000): the widest; [0xe0000, HI) holds 0x7bb0
    assert mem.first_fit(3, 0x10008) is None
    assert mem.first_fit(5, EDGE - 0x50048) == 0x50048  # aligned up from the end of what tile 5 sends
    assert mem.first_fit(5, EDGE - 0x50040) == EDGE


def test_first_fit_with_a_coarser_alignment() -> None:
    mem = memory()
    assert mem.first_fit(3, 0x100, align=0x1000) == LO
    assert mem.first_fit(3, 0x4001, align=0x1000) == 0x51000
    # 64 KiB alignment: in region 0 the aligned starts (0x50000, 0x60000, 0x70000) are busy; 0x80000 is the first
    assert mem.first_fit(3, 0x8000, align=0x10000) == EDGE


def test_largest_gaps_is_each_tiles_widest_aligned_room() -> None:
    largest = memory().largest_gaps(8)
    idle = HI - EDGE  # 0x67bb0
    assert largest.tolist() == [idle, idle, idle, 0x10000, idle, idle, idle, idle]
    assert largest[3] == max(y - (x + (-x) % BUFFER_ALIGNMENT) for x, y in TILE3_GAPS)
    assert memory().largest_gaps(10).tolist()[8:] == [0, 0]  # tiles beyond the capture's: no room known


def test_reservations_close_memory_for_the_next_buffer() -> None:
    mem = memory()
    mem.reserve(3, LO, 0x100)
    mem.reserve(3, 0x51000, 0x2000)
    assert mem.first_fit(3, 0x100) == LO + 0x100
    assert mem.first_fit(3, 0x4000) == 0x53000
    assert mem.gaps(3)[:2] == [(LO + 0x100, 0x50000), (0x53000, 0x60000)]
    assert mem.first_fit(5, 0x4000) == LO  # another tile's room is untouched
    assert memory().first_fit(3, 0x100) == LO  # and so is a new user's: reservations are this user's own


def test_the_placement_engine_places_a_single_buffer_where_first_fit_does() -> None:
    mem = memory()
    for tile, nbytes in ((3, 0x4000), (3, 0xFFB8), (3, 0xFFC0), (5, 0x4008), (6, 0x1000)):
        assert mem.place(tile, nbytes) == mem.first_fit(tile, nbytes), (tile, nbytes)
    assert mem.place(3, 0x10008) is None
