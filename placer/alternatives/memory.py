"""Where a relay buffer may go on a tile during a phase.

A relay's staging buffer must avoid every live allocation of its tile in that phase and every address the tile
reads or writes in that phase (for every Repeat iteration), must lie in SRAM below the loader limit, and may not
cross the region boundary (standard memory lies in one region). The buffer is placed by the placement engine
(``placer.placement``) against those busy ranges; ``largest_gaps`` gives the model each tile's room without
running it.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from placer.capture.model import Capture, Phase, interval_runs, tile_order
from placer.machine import Machine
from placer.placement.api import place_requests, tile_problem
from placer.placement.greedy import greedy_place
from placer.placement.model import PlacementProblem
from placer.solver import SolverParams
from placer.units import round_up

BUFFER_ALIGNMENT = 8  # Paired64 forwards need 8-byte aligned sources
# one buffer among fixed ranges: the engine's first-fit mirror settles it at once; the limit only bounds the
# exact fallback, which a single request never needs
_PLACEMENT_PARAMS = SolverParams(time_limit=5.0, workers=1)


@dataclass(eq=False)
class _Busy:
    """One phase's busy intervals on every tile, sorted by (tile, start), and the free gaps between them (both as
    arrays with a per-tile pointer): computed once per (phase, allocations, machine) and shared, read-only."""

    tile: np.ndarray
    start: np.ndarray
    end: np.ndarray
    ptr: np.ndarray
    gap_ptr: np.ndarray
    gap_start: np.ndarray
    gap_end: np.ndarray
    largest: np.ndarray | None = None  # each tile's largest aligned gap, filled on first use


_BUSY: weakref.WeakKeyDictionary[Phase, dict[tuple[object, Machine, int], _Busy]] = weakref.WeakKeyDictionary()


def _busy(capture: Capture, phase: Phase, machine: Machine) -> _Busy:
    per = _BUSY.get(phase)
    if per is None:
        per = _BUSY.setdefault(phase, {})
    key = (capture.allocations, machine, capture.tile_count)
    if key not in per:
        per[key] = _build_busy(capture, phase, machine)
    return per[key]


def _build_busy(capture: Capture, phase: Phase, machine: Machine) -> _Busy:
    src_rows = np.repeat(np.arange(phase.n), np.diff(phase.src_ptr))
    nb = phase.nbytes
    alloc = capture.allocations
    live = (alloc.first <= phase.phase) & (alloc.last >= phase.phase)
    src_tile = phase.source[src_rows]
    # one source address per transfer (a read that does not vary per iteration): the phase's cached order holds.
    # Back-to-back intervals merged (the same busy bytes): the sort below then has about a thousandth to do
    s_order = phase.source_order() if src_rows.size == phase.n else tile_order(src_tile)
    sends = interval_runs(src_tile, phase.src_addr, phase.src_addr + nb[src_rows], s_order)
    receives = phase.dst_runs()
    # an empty interval at the region boundary on every tile splits any gap that would straddle it
    boundary = np.arange(capture.tile_count, dtype=np.int64)
    edge = np.full(capture.tile_count, machine.memory.region0_end, np.int64)
    tile = np.concatenate([sends[0], receives[0], alloc.tile[live], boundary]).astype(np.int64)
    start = np.concatenate([sends[1], receives[1], alloc.start[live], edge])
    end = np.concatenate([sends[2], receives[2], alloc.end[live], edge])
    order = np.argsort((tile << 33) | start)  # addresses < 2^32: one key sorts by (tile, start)
    tile, start, end = tile[order], start[order], end[order]
    ptr = np.searchsorted(tile, np.arange(capture.tile_count + 1))
    # free gaps, as ``PhaseMemory.gaps`` walks them: from the running end of the busy intervals before each one (the
    # base for a tile's first) to its start, and from the last running end to the top, inside [base, top)
    mem = machine.memory
    lo, hi = mem.base, min(mem.end, mem.loader_limit)
    band = np.int64(1) << 40
    run_end = np.maximum.accumulate(end + tile * band) - tile * band
    first = np.r_[True, tile[1:] != tile[:-1]] if tile.size else np.zeros(0, bool)
    before = np.where(first, lo, np.r_[lo, run_end[:-1]]) if tile.size else np.zeros(0, np.int64)
    before = np.maximum(before, lo)
    g_lo, g_hi, g_tile = before, np.minimum(start, hi), tile
    last = np.r_[tile[1:] != tile[:-1], True] if tile.size else np.zeros(0, bool)
    t_lo = np.maximum(run_end[last], lo)
    t_tile = tile[last]
    gs = np.concatenate([g_lo, t_lo])
    ge = np.concatenate([g_hi, np.full(t_lo.shape[0], hi, np.int64)])
    gt = np.concatenate([g_tile, t_tile])
    keep = ge > gs
    gs, ge, gt = gs[keep], ge[keep], gt[keep]
    o = np.lexsort((gs, gt))
    gs, ge, gt = gs[o], ge[o], gt[o]
    gptr = np.searchsorted(gt, np.arange(capture.tile_count + 1))
    for a in (tile, start, end, ptr, gs, ge, gptr):
        a.flags.writeable = False
    return _Busy(tile, start, end, ptr, gptr, gs, ge)


class PhaseMemory:
    """Busy byte intervals of every tile during one phase, and this user's reservations on top of them."""

    def __init__(self, capture: Capture, phase: Phase, machine: Machine) -> None:
        self.machine = machine
        busy = _busy(capture, phase, machine)
        self._busy = busy
        self.tile, self.start, self.end, self.ptr = busy.tile, busy.start, busy.end, busy.ptr
        self.extra: dict[int, list[tuple[int, int]]] = {}

    def reserve(self, tile: int, start: int, nbytes: int) -> None:
        self.extra.setdefault(tile, []).append((start, start + nbytes))

    def gaps(self, tile: int) -> list[tuple[int, int]]:
        a, b = self.ptr[tile], self.ptr[tile + 1]
        s = self.start[a:b].tolist()
        e = self.end[a:b].tolist()
        for x, y in self.extra.get(tile, []):
            s.append(x)
            e.append(y)
        busy = sorted(zip(s, e, strict=True))
        mem = self.machine.memory
        lo, hi = mem.base, min(mem.end, mem.loader_limit)
        out = []
        cursor = lo
        for x, y in busy:
            if x > cursor:
                out.append((cursor, min(x, hi)))
            cursor = max(cursor, y)
            if cursor >= hi:
                break
        if cursor < hi:
            out.append((cursor, hi))
        return [(x, y) for x, y in out if y > x]

    def first_fit(self, tile: int, nbytes: int, align: int = BUFFER_ALIGNMENT) -> int | None:
        """Lowest aligned address of a free gap that holds ``nbytes`` -- for one request among fixed ranges this
        is exactly what the engine's first-fit mirror answers, at a fraction of the cost (the greedy asks it
        thousands of times)."""
        if tile not in self.extra:  # the precomputed gaps
            b = self._busy
            a, z = b.gap_ptr[tile], b.gap_ptr[tile + 1]
            starts = round_up(b.gap_start[a:z], align)
            fits = np.flatnonzero(starts + nbytes <= b.gap_end[a:z])
            return int(starts[fits[0]]) if fits.size else None
        for x, y in self.gaps(tile):
            start = round_up(x, align)
            if start + nbytes <= y:
                return int(start)
        return None

    def _one_buffer(self, tile: int, nbytes: int, align: int) -> PlacementProblem:
        """One buffer to place on ``tile`` around its busy bytes in the phase and this user's reservations."""
        a, b = self.ptr[tile], self.ptr[tile + 1]
        busy = [(int(s), int(e), 0, 0) for s, e in zip(self.start[a:b], self.end[a:b], strict=True) if e > s]
        busy += [(s, e, 0, 0) for s, e in self.extra.get(tile, [])]
        mem = self.machine.memory
        return tile_problem([(mem.base, min(mem.end, mem.loader_limit))], busy, [(nbytes, align, 0, 0)],
                            name=f"tile {tile}")

    def place(self, tile: int, nbytes: int, align: int = BUFFER_ALIGNMENT) -> int | None:
        """Place one buffer on ``tile`` with the placement engine; None when it proves there is no room."""
        result = place_requests(self._one_buffer(tile, nbytes, align), _PLACEMENT_PARAMS)
        return int(result.addresses[0]) if result.placed and result.addresses is not None else None

    def allocate(self, tile: int, nbytes: int, align: int = BUFFER_ALIGNMENT) -> int | None:
        """Place one relay buffer on ``tile`` with the production allocator (``placer.placement``'s mirror of it:
        online first fit, then the offline retry) around the tile's busy bytes in the phase and this user's
        reservations, as the reference places its relay staging buffers after selection; None when it does not
        fit. For one request among fixed ranges this is the lowest aligned address of a gap that holds it
        (``first_fit``), and a failure is a proof that no gap does."""
        out = greedy_place(self._one_buffer(tile, nbytes, align))
        return int(out.addresses[0]) if out.addresses is not None else None

    def busy_bytes(self, tile: int) -> int:
        """Bytes of the tile's memory that are busy in the phase (allocations, reads and writes; overlaps once)."""
        mem = self.machine.memory
        top = min(mem.end, mem.loader_limit)
        return top - mem.base - sum(y - x for x, y in self.gaps(tile))

    def largest_gaps(self, tiles: int) -> np.ndarray:
        """Largest aligned free gap of every tile at once (reservations ignored): the widest of the phase's
        precomputed gaps, worked out once per phase."""
        b = self._busy
        if b.largest is None:
            room = np.maximum(b.gap_end - round_up(b.gap_start, BUFFER_ALIGNMENT), 0)
            largest = np.zeros(len(b.gap_ptr) - 1, np.int64)
            has = np.diff(b.gap_ptr) > 0
            largest[has] = np.maximum.reduceat(room, b.gap_ptr[:-1][has]) if room.size else 0
            largest.flags.writeable = False
            b.largest = largest
        out = np.zeros(tiles, np.int64)
        n = min(tiles, len(b.largest))
        out[:n] = b.largest[:n]
        return out
