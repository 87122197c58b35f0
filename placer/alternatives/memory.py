"""Where a relay buffer may go on a tile during a phase.

A relay's staging buffer must avoid every live allocation of its tile in that phase and every address the tile
reads or writes in that phase (for every Repeat iteration), must lie in SRAM below the loader limit, and may not
cross the region boundary (standard memory lies in one region). The buffer is placed by the placement engine
(``placer.placement``) against those busy ranges; ``largest_gaps`` gives the model each tile's room without
running it.
"""

from __future__ import annotations

import numpy as np

from placer.capture.model import Capture, Phase
from placer.machine import Machine
from placer.placement.api import place_requests, tile_problem
from placer.solver import SolverParams

BUFFER_ALIGNMENT = 8  # Paired64 forwards need 8-byte aligned sources
# one buffer among fixed ranges: the engine's first-fit mirror settles it at once; the limit only bounds the
# exact fallback, which a single request never needs
_PLACEMENT_PARAMS = SolverParams(time_limit=5.0, workers=1)


class PhaseMemory:
    """Busy byte intervals of every tile during one phase."""

    def __init__(self, capture: Capture, phase: Phase, machine: Machine) -> None:
        self.machine = machine
        src_rows = np.repeat(np.arange(phase.n), np.diff(phase.src_ptr))
        nb = phase.nbytes
        dst_rows = phase.dst_transfer()
        alloc = capture.allocations
        live = (alloc.first <= phase.phase) & (alloc.last >= phase.phase)
        # an empty interval at the region boundary on every tile splits any gap that would straddle it
        boundary = np.arange(capture.tile_count, dtype=np.int64)
        edge = np.full(capture.tile_count, machine.memory.region0_end, np.int64)
        tile = np.concatenate([phase.source[src_rows], phase.dst_tile, alloc.tile[live], boundary]).astype(np.int64)
        start = np.concatenate([phase.src_addr, phase.dst_addr, alloc.start[live], edge])
        end = np.concatenate([phase.src_addr + nb[src_rows], phase.dst_addr + nb[dst_rows], alloc.end[live], edge])
        order = np.lexsort((start, tile))
        self.tile, self.start, self.end = tile[order], start[order], end[order]
        self.ptr = np.searchsorted(self.tile, np.arange(capture.tile_count + 1))
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
        for x, y in self.gaps(tile):
            start = -(-x // align) * align
            if start + nbytes <= y:
                return start
        return None

    def place(self, tile: int, nbytes: int, align: int = BUFFER_ALIGNMENT) -> int | None:
        """Place one buffer on ``tile`` with the placement engine; None when it proves there is no room."""
        a, b = self.ptr[tile], self.ptr[tile + 1]
        busy = [(int(s), int(e), 0, 0) for s, e in zip(self.start[a:b], self.end[a:b], strict=True) if e > s]
        busy += [(s, e, 0, 0) for s, e in self.extra.get(tile, [])]
        mem = self.machine.memory
        problem = tile_problem([(mem.base, min(mem.end, mem.loader_limit))], busy, [(nbytes, align, 0, 0)],
                               name=f"tile {tile}")
        result = place_requests(problem, _PLACEMENT_PARAMS)
        return int(result.addresses[0]) if result.placed else None

    def largest_gaps(self, tiles: int) -> np.ndarray:
        """Largest aligned free gap of every tile at once (reservations ignored), vectorised."""
        mem = self.machine.memory
        lo, hi = mem.base, min(mem.end, mem.loader_limit)
        t, s, e = self.tile, np.clip(self.start, lo, hi), np.clip(self.end, lo, hi)
        # running maximum of interval ends within each tile: offset every tile into its own address band
        band = np.int64(1) << 40
        cummax = np.maximum.accumulate(e + t * band) - t * band
        prev_end = np.full(len(t), lo, np.int64)
        same = np.zeros(len(t), bool)
        same[1:] = t[1:] == t[:-1]
        prev_end[1:] = np.where(same[1:], cummax[:-1], lo)
        align = BUFFER_ALIGNMENT
        gap = s - (-(-prev_end // align) * align)
        best = np.full(tiles, 0, np.int64)
        np.maximum.at(best, t[t < tiles], gap[t < tiles])
        last = np.ones(len(t), bool)
        last[:-1] = t[1:] != t[:-1]
        tail = hi - (-(-cummax[last] // align) * align)
        np.maximum.at(best, t[last][t[last] < tiles], tail[t[last] < tiles])
        empty = np.ones(tiles, bool)
        empty[t[t < tiles]] = False
        best[empty] = hi - (-(-lo // align) * align)
        return np.maximum(best, 0)
