"""Allocations (inside SRAM, no overlap while both live, covering every address the traffic touches) and panel
hints (consistent with the replica groups they name)."""

from __future__ import annotations

import numpy as np

from placer.capture.model import Capture, PanelHint
from placer.machine import Machine


def test_allocations_inside_sram(siglip2: Capture, machine: Machine) -> None:
    a = siglip2.allocations
    assert len(a) > 0
    assert a.start.min() >= machine.memory.base
    assert a.end.max() <= machine.memory.loader_limit <= machine.memory.end
    assert (a.end > a.start).all()
    assert (a.last >= a.first).all()
    per_tile = np.bincount(a.tile, minlength=siglip2.tile_count)
    assert per_tile.max() <= 80  # tens per tile, not hundreds
    # no kind crosses the region boundary
    r0 = machine.memory.region0_end
    assert not ((a.start < r0) & (a.end > r0)).any()


def test_allocations_do_not_overlap_while_live(siglip2: Capture) -> None:
    a = siglip2.allocations
    order = np.lexsort((a.start, a.tile))
    t, s, e, f, la = a.tile[order], a.start[order], a.end[order], a.first[order], a.last[order]
    for tile in np.unique(t)[:: 37]:  # a spread sample keeps the test fast; the layout is per kind anyway
        sel = np.flatnonzero(t == tile)
        ss, ee, ff, ll = s[sel], e[sel], f[sel], la[sel]
        overlap = (ss[:, None] < ee[None, :]) & (ss[None, :] < ee[:, None])
        alive = (ff[:, None] <= ll[None, :]) & (ff[None, :] <= ll[:, None])
        clash = overlap & alive
        np.fill_diagonal(clash, False)
        assert not clash.any(), tile


def _inside_live(tiles: np.ndarray, lo: np.ndarray, hi: np.ndarray, cap: Capture, phase: int) -> bool:
    a = cap.allocations
    live = (a.first <= phase) & (a.last >= phase) & (np.array(a.name) != "workspace")
    key = a.tile[live].astype(np.int64) << 32 | a.start[live]
    order = np.argsort(key)
    key, end = key[order], a.end[live][order]
    q = tiles.astype(np.int64) << 32 | lo
    i = np.searchsorted(key, q, side="right") - 1
    ok = (i >= 0) & ((key[np.maximum(i, 0)] >> 32) == tiles) & (end[np.maximum(i, 0)] >= hi)
    return bool(ok.all())


def test_traffic_lands_in_live_allocations(siglip2: Capture) -> None:
    for p in siglip2.phases:
        nb = p.nbytes
        dst_bytes = nb[p.dst_transfer()]
        assert _inside_live(p.dst_tile, p.dst_addr, p.dst_addr + dst_bytes, siglip2, p.phase), p.phase
        src_t = np.repeat(p.source, np.diff(p.src_ptr))
        src_b = np.repeat(nb, np.diff(p.src_ptr))
        assert _inside_live(src_t, p.src_addr, p.src_addr + src_b, siglip2, p.phase), p.phase


def test_panel_hints_match_groups(siglip2: Capture) -> None:
    counts = {16: 40, 50: 27, 54: 240}
    native = {16: 18, 50: 24, 54: 6}
    by_phase: dict[int, list[PanelHint]] = {}
    for h in siglip2.panels:
        if h.splits:  # the weights' hints say they do not split (checked in test_weight_hints_do_not_split)
            by_phase.setdefault(h.phase, []).append(h)
    for phase, n in counts.items():
        hints = by_phase[phase]
        assert len(hints) == n
        p = siglip2.phase_by_id(phase)
        dt = p.dst_transfer()
        for h in hints[:: max(1, n // 8)]:
            tiles = np.array(h.tiles)
            # the group: transfers whose destination set is exactly h.tiles
            first = np.isin(p.dst_tile, tiles[:1])
            rows = np.unique(dt[first])
            rows = rows[p.fanout[rows] == len(tiles)]
            addr = p.dst_addr[p.dst_ptr[rows]]
            base = int(addr.min())
            start = addr - base
            end = start + p.nbytes[rows]
            extent = h.boundaries[-1]
            assert h.boundaries[0] == 0
            assert end.max() <= extent
            assert len(h.boundaries) - 1 == native[phase]
            # a fragment never straddles a native boundary
            b = np.array(h.boundaries)
            k = np.searchsorted(b, start, side="right")
            assert (end <= b[k]).all()
            # every replica receives at the same address (coordinate-preserving)
            for r in rows[:50]:
                assert len(set(p.dst_addr[p.dst_ptr[r]:p.dst_ptr[r + 1]].tolist())) == 1


def test_weight_hints_do_not_split(siglip2: Capture) -> None:
    """Every weight multicast carries a hint saying its operand has no native panels (row-major blocks)."""
    hints = {(h.phase, h.tiles): h for h in siglip2.panels if not h.splits}
    assert hints
    assert all(h.operand.endswith(".w") and not h.boundaries for h in hints.values())
    p = siglip2.phase_by_id(16)
    w = np.flatnonzero(p.fanout == 9)
    for i in w[:: len(w) // 20].tolist():
        tiles = tuple(sorted(p.dst_tile[p.dst_ptr[i]:p.dst_ptr[i + 1]].tolist()))
        assert (16, tiles) in hints


def test_first_fit_is_the_lowest_aligned_gap(siglip2: Capture, machine: Machine) -> None:
    """The precomputed gaps answer first_fit exactly as walking the tile's busy intervals does."""
    import random

    from placer.alternatives.memory import PhaseMemory

    rng = random.Random(7)
    for p in siglip2.phases[::9]:
        mem = PhaseMemory(siglip2, p, machine)
        for _ in range(200):
            t, nb = rng.randrange(siglip2.tile_count), rng.choice([8, 96, 2336, 20_000, 90_000])
            walked = next((-(-x // 8) * 8 for x, y in mem.gaps(t) if -(-x // 8) * 8 + nb <= y), None)
            assert mem.first_fit(t, nb) == walked, (p.phase, t, nb)
