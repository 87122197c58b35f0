"""Tile-memory headroom: how much SRAM the fullest tile has left, in its fullest phase, with or without relay buffers.

A capture's ``allocations`` say what is live on every tile in every phase (they never overlap while both are live:
the validator checks it). A tile's free bytes in a phase are the bytes below the loader limit that no live
allocation holds; a relay plan's staging buffers take more, on their hosts, in their phases. The headroom is the
least of those over every tile and phase -- where a full-depth program binds (docs/workloads.md, "Memory").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placer.capture.model import Capture
from placer.machine import Machine

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Buffers:
    """Extra per-tile buffers, each live in one phase (a relay plan's staging buffers)."""

    tile: IntArray
    phase: IntArray
    start: IntArray
    end: IntArray

    @staticmethod
    def empty() -> Buffers:
        z = np.zeros(0, np.int64)
        return Buffers(z, z, z, z)


@dataclass(frozen=True)
class Headroom:
    """The fullest (tile, phase): its free bytes in all and per region, and the buffers counted on top."""

    free: int  # the least free bytes of any tile in any phase
    tile: int
    phase: int
    region0_free: int  # that tile's free bytes in region 0, then
    region1_free: int
    capacity: int  # bytes a tile can hold (base to the loader limit)
    buffer_bytes: int  # extra buffer bytes counted (a plan's relay buffers)
    hosts_free: int | None  # the least free bytes of a tile in a phase where it holds an extra buffer

    def to_json(self) -> dict[str, int | None]:
        return {"free_bytes": self.free, "tile": self.tile, "phase": self.phase,
                "region0_free_bytes": self.region0_free, "region1_free_bytes": self.region1_free,
                "capacity_bytes": self.capacity, "buffer_bytes": self.buffer_bytes,
                "hosts_free_bytes": self.hosts_free}

    def describe(self) -> str:
        hosts = "" if self.hosts_free is None else f"; fullest relay host {self.hosts_free:,} B free"
        return (f"memory headroom {self.free:,} B (tile {self.tile}, phase {self.phase}: region 0 "
                f"{self.region0_free:,} B, region 1 {self.region1_free:,} B free of {self.capacity:,}){hosts}")


def _in_region(start: IntArray, end: IntArray, lo: int, hi: int) -> IntArray:
    overlap: IntArray = np.maximum(np.minimum(end, hi) - np.maximum(start, lo), 0)
    return overlap


def headroom(capture: Capture, machine: Machine, buffers: Buffers | None = None) -> Headroom | None:
    """The headroom of ``capture`` with ``buffers`` on top; None when the capture has no allocations (nothing is
    known of its memory)."""
    alloc = capture.allocations
    if len(alloc) == 0:
        return None
    buffers = buffers if buffers is not None else Buffers.empty()
    mem = machine.memory
    top = min(mem.end, mem.loader_limit)
    bounds = ((mem.base, mem.region0_end), (mem.region0_end, top))
    tiles = capture.tile_count
    a_start, a_end = alloc.start.astype(np.int64), alloc.end.astype(np.int64)
    a_used = [_in_region(a_start, a_end, lo, hi) for lo, hi in bounds]
    b_used = [_in_region(buffers.start, buffers.end, lo, hi) for lo, hi in bounds]
    best: tuple[int, int, int, int, int] | None = None  # (free, tile, phase, region 0 free, region 1 free)
    hosts_free: int | None = None
    for pid in capture.phase_ids():
        live = (alloc.first <= pid) & (alloc.last >= pid)
        mine = buffers.phase == pid
        free = []
        for r, (lo, hi) in enumerate(bounds):
            used = np.bincount(alloc.tile[live], weights=a_used[r][live], minlength=tiles)
            used += np.bincount(buffers.tile[mine], weights=b_used[r][mine], minlength=tiles)
            free.append((hi - lo) - used[:tiles].astype(np.int64))
        total = free[0] + free[1]
        t = int(np.argmin(total))
        if best is None or int(total[t]) < best[0]:
            best = (int(total[t]), t, pid, int(free[0][t]), int(free[1][t]))
        if mine.any():
            h = int(total[buffers.tile[mine]].min())
            hosts_free = h if hosts_free is None else min(hosts_free, h)
    assert best is not None
    return Headroom(best[0], best[1], best[2], best[3], best[4], top - mem.base,
                    int((buffers.end - buffers.start).sum()), hosts_free)
