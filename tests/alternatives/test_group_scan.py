"""The vectorised replica-group scan gives exactly what the one-group-at-a-time reading gives."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.alternatives.groups import scan_phase, scan_phase_reference
from placer.capture.model import PanelHint, Phase
from tests.builders import excluding

TILES = 12
Hints = dict[tuple[int, tuple[int, ...]], PanelHint]  # the panel hints by (phase, destination tiles)


@st.composite
def phases(draw: st.DrawFn) -> tuple[Phase, Hints]:
    """A few replica groups (random destination sets and offsets, some skewed, overlapping or repeating a tile)
    plus unicasts, listed in a random order."""
    rows: list[tuple[int, list[tuple[int, int]], int]] = []
    hints: Hints = {}
    for _ in range(draw(st.integers(0, 4))):
        dests = sorted(draw(st.lists(st.integers(0, TILES - 1), min_size=2, max_size=5, unique=True)))
        bases = [0x60000 + 0x1000 * draw(st.integers(0, 3)) for _ in dests]
        for _ in range(draw(st.integers(1, 6))):
            off = 8 * draw(st.integers(0, 12))
            words = draw(st.integers(1, 4))
            src = draw(st.integers(0, TILES - 1).filter(excluding(dests)))
            skew = draw(st.integers(0, 9)) == 0
            shuffled = draw(st.permutations(list(zip(dests, bases, strict=True))))
            rows.append((src, [(t, b + off + (4 if skew and i == 0 else 0)) for i, (t, b) in enumerate(shuffled)],
                         words))
        if draw(st.booleans()):
            hints[(0, tuple(dests))] = PanelHint(0, tuple(dests), (0, 32, 256), splits=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 3))):
        rows.append((0, [(draw(st.integers(1, TILES - 1)), 0x70000)], 2))
    order = draw(st.permutations(list(range(len(rows)))))
    rows = [rows[i] for i in order]
    phase = Phase.build(0, [r[0] for r in rows], [r[2] for r in rows], [len(r[1]) for r in rows],
                        [t for r in rows for t, _ in r[1]], [a for r in rows for _, a in r[1]], [0] * len(rows))
    return phase, hints


@settings(max_examples=150, deadline=None)
@given(case=phases())
def test_vectorised_scan_matches_the_reference(case: tuple[Phase, Hints]) -> None:
    phase, hints = case
    fast = scan_phase(phase, hints, gainful_only=False)
    slow = scan_phase_reference(phase, hints)
    assert fast.rejected == slow.rejected
    assert [g.index for g in fast.groups] == [g.index for g in slow.groups]
    for a, b in zip(fast.groups, slow.groups, strict=True):
        assert (a.extent, a.runs, a.hint) == (b.extent, b.runs, b.hint)
        for name in ("transfers", "replicas", "bases", "offsets", "nbytes", "sources"):
            x, y = getattr(a, name), getattr(b, name)
            assert np.array_equal(x, y), name
            assert x.dtype == y.dtype, name
