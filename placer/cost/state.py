"""Exact, incremental cost of one phase while transfers are removed from it and appended to it.

The relay rules (greedy and CP-SAT alike) ask "what does this phase cost if this group's multicasts are replaced by
these gathers and forwards?" hundreds of times per phase. Recosting a 200k-transfer phase each time would be
wasteful; only the tiles that send or receive the changed transfers can change, so only their counters are
recomputed, on their own receive sequences (pointer resets depend on the listed order of a tile's receives).
The rules are those of :mod:`placer.cost.model`; ``tests/selection/test_selection.py`` checks both agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.arrays import unique
from placer.capture.model import WORD_BYTES, Allocations, Phase, csr_gather
from placer.cost.model import allocation_bounds, tile_counters, tile_resets
from placer.machine import Machine


@dataclass(eq=False)
class TileCounters:
    """Counters of a set of tiles (parallel arrays)."""

    tiles: np.ndarray
    sends: np.ndarray
    long_sends: np.ndarray
    receives: np.ndarray
    resets: np.ndarray
    tx: np.ndarray
    rx: np.ndarray


class PhaseState:
    def __init__(self, phase: Phase, machine: Machine, tiles: int, allocations: Allocations | None = None) -> None:
        self.phase = phase
        self.machine = machine
        self.tiles = tiles
        self.bounds = allocation_bounds(allocations, phase.phase)  # allocation starts and ends: pointer resets
        # the cached counters of the program's cost (same machine, tiles and allocations), plus one phantom tile past
        # the last real one, with nothing on it: a placeholder host when only the other tiles matter
        pc = tile_counters(phase, machine, tiles, allocations)

        def padded(a: np.ndarray) -> np.ndarray:
            return np.append(a, np.zeros(1, a.dtype))

        self.sends = padded(pc.sends)
        self.long_sends = padded(pc.long_sends)
        self.receives = padded(pc.receives)
        self.resets = padded(pc.resets)
        self.tx = padded(pc.tx_bytes)
        self.rx = padded(pc.rx_bytes)
        self.scratch = np.zeros(tiles + 1, np.int64)
        self.removed = np.zeros(phase.n, bool)
        self.appended: list[Phase] = []
        # every tile's receive entries in listed order, as a CSR over tiles
        self._dst_transfer = phase.dst_transfer()
        order = phase.dst_order()
        self._entries = order
        self._entry_ptr = np.searchsorted(phase.dst_tile[order], np.arange(tiles + 2))
        self._dst_bytes = phase.nbytes[self._dst_transfer]
        self._app_recv: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}

    # -- derived per-tile figures ---------------------------------------------------------------------------
    def raw_table(self, c: TileCounters | None = None) -> np.ndarray:
        """Table bytes before rounding (the rounding is applied to a tile's phase total)."""
        src = self if c is None else c
        active = (src.sends + src.receives) > 0
        table: np.ndarray = self.machine.cost.raw_table(src.sends, src.long_sends, src.receives, src.resets, active)
        return table

    def table(self, c: TileCounters | None = None) -> np.ndarray:
        rounded: np.ndarray = self.machine.cost.rounded(self.raw_table(c))
        return rounded

    def controls(self, c: TileCounters | None = None) -> np.ndarray:
        src = self if c is None else c
        controls: np.ndarray = self.machine.cost.controls(src.sends, src.receives, src.resets)
        return controls

    def tile_cycles(self, c: TileCounters | None = None) -> np.ndarray:
        src = self if c is None else c
        cycles: np.ndarray = self.machine.exchange.tile_cycles(src.tx, src.rx, self.controls(c))
        return cycles

    def cycles(self) -> int:
        return int(self.tile_cycles()[: self.tiles].max(initial=0)) + self.machine.exchange.sync_cycles

    def used(self) -> np.ndarray:
        """Tiles that send or receive anything in the phase as it stands."""
        used: np.ndarray = (self.sends + self.receives) > 0
        return used

    # -- what-if ---------------------------------------------------------------------------------------------
    def evaluate(self, remove: np.ndarray, append: Phase) -> TileCounters:
        """Counters of every affected tile if ``remove`` (transfer indices) went and ``append`` was appended."""
        ph = self.phase
        remove = np.asarray(remove, np.int64)
        rm_entries = csr_gather(ph.dst_ptr, remove)
        tiles = unique(np.concatenate([
            ph.source[remove], ph.dst_tile[rm_entries], append.source, append.dst_tile,
        ]).astype(np.int64))
        sends = self.sends[tiles].copy()
        long_sends = self.long_sends[tiles].copy()
        tx = self.tx[tiles].copy()
        pos = {int(t): i for i, t in enumerate(tiles)}
        long_limit = self.machine.exchange.send_count_words
        # sends removed and appended
        for arr_src, arr_words, sign in ((ph.source[remove], ph.words[remove], -1), (append.source, append.words, +1)):
            if len(arr_src) == 0:
                continue
            idx = np.searchsorted(tiles, arr_src)
            np.add.at(sends, idx, sign)
            np.add.at(long_sends, idx, sign * (arr_words > long_limit))
            np.add.at(tx, idx, sign * arr_words.astype(np.int64) * WORD_BYTES)
        receives = np.zeros(len(tiles), np.int64)
        resets = np.zeros(len(tiles), np.int64)
        rx = np.zeros(len(tiles), np.int64)
        removed = self.removed.copy()
        removed[remove] = True
        app_tr = append.dst_transfer()
        app_bytes = append.nbytes[app_tr]
        for t in tiles.tolist():
            i = pos[t]
            a, e = self._receive_sequence(t, removed)
            sel = append.dst_tile == t
            if sel.any():
                a = np.concatenate([a, append.dst_addr[sel]])
                e = np.concatenate([e, append.dst_addr[sel] + app_bytes[sel]])
            receives[i] = a.shape[0]
            rx[i] = int((e - a).sum())
            resets[i] = tile_resets(a, e, t, self.bounds)
        return TileCounters(tiles, sends, long_sends, receives, resets, tx, rx)

    def _receive_sequence(self, t: int, removed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        ent = self._entries[self._entry_ptr[t] : self._entry_ptr[t + 1]]
        ent = ent[~removed[self._dst_transfer[ent]]]
        a = self.phase.dst_addr[ent]
        e = a + self._dst_bytes[ent]
        for aa, ee in self._app_recv.get(t, []):
            a = np.concatenate([a, aa])
            e = np.concatenate([e, ee])
        return a, e

    def commit(self, remove: np.ndarray, append: Phase, counters: TileCounters, scratch: dict[int, int]) -> None:
        t = counters.tiles
        self.sends[t] = counters.sends
        self.long_sends[t] = counters.long_sends
        self.receives[t] = counters.receives
        self.resets[t] = counters.resets
        self.tx[t] = counters.tx
        self.rx[t] = counters.rx
        self.removed[np.asarray(remove, np.int64)] = True
        self.appended.append(append)
        app_tr = append.dst_transfer()
        app_bytes = append.nbytes[app_tr]
        for tile in unique(append.dst_tile).tolist():
            sel = append.dst_tile == tile
            self._app_recv.setdefault(tile, []).append((append.dst_addr[sel], append.dst_addr[sel] + app_bytes[sel]))
        for tile, nbytes in scratch.items():
            self.scratch[tile] += nbytes

    def with_counters(self, c: TileCounters) -> tuple[np.ndarray, np.ndarray]:
        """Whole-phase (table, tile cycles) arrays with the affected tiles replaced by ``c``."""
        table = self.table().copy()
        cyc = self.tile_cycles().copy()
        table[c.tiles] = self.table(c)
        cyc[c.tiles] = self.tile_cycles(c)
        return table, cyc

    def result(self) -> Phase:
        """The rewritten phase: kept transfers in order, then everything appended, in order."""
        kept = self.phase.take(np.flatnonzero(~self.removed))
        return Phase.concat(self.phase.phase, [kept, *self.appended], extra=self.phase.extra)
