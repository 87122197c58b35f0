"""A tile's room for a relay buffer: the vectorised largest gap agrees with walking the tile's gaps one by one."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.alternatives.memory import BUFFER_ALIGNMENT, PhaseMemory
from placer.capture.model import Allocations, Capture, Phase
from placer.units import round_up
from tests.builders import excluding, small_machine

TILES = 6
M = small_machine(TILES)


@st.composite
def captures(draw: st.DrawFn) -> Capture:
    """One phase of a few transfers and some live allocations at random (possibly overlapping, unaligned, out of
    SRAM) addresses."""
    lo, hi = M.memory.base, M.memory.end
    addr = st.integers(lo - 64, hi + 64).map(lambda a: a - a % 4)
    n = draw(st.integers(0, 8))
    src = [draw(st.integers(0, TILES - 1)) for _ in range(n)]
    dst = [draw(st.integers(0, TILES - 1).filter(excluding([s]))) for s in src]
    phase = Phase.build(0, src, [draw(st.integers(1, 300)) for _ in range(n)], [1] * n, dst,
                        [draw(addr) for _ in range(n)], [draw(addr) for _ in range(n)])
    k = draw(st.integers(0, 6))
    starts = [draw(addr) for _ in range(k)]
    alloc = Allocations(np.asarray([draw(st.integers(0, TILES - 1)) for _ in range(k)], np.int32),
                        np.asarray(starts, np.int64),
                        np.asarray([s + draw(st.integers(0, 40000)) for s in starts], np.int64),
                        np.zeros(k, np.int64), np.zeros(k, np.int64))
    return Capture(tile_count=TILES, phases=[phase], allocations=alloc)


@settings(max_examples=200, deadline=None)
@given(captures())
def test_largest_gap_is_the_widest_aligned_gap_of_the_walk(cap: Capture) -> None:
    memory = PhaseMemory(cap, cap.phases[0], M)
    got = memory.largest_gaps(TILES)
    for t in range(TILES):
        widest = max((y - round_up(x, BUFFER_ALIGNMENT) for x, y in memory.gaps(t)), default=0)
        assert got[t] == max(widest, 0), t
        fits = memory.first_fit(t, int(got[t])) if got[t] > 0 else None
        assert got[t] == 0 or fits is not None  # a buffer of that size is placed
