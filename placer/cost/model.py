"""The cost model of docs/reference.md §3, vectorised over a phase's columns.

Per tile and phase:
- table bytes: ``phase_entry_bytes`` if the tile takes part in the phase; per send fragment ``send_bytes`` (+
  ``long_send_extra_bytes`` above ``send_count_words``), paid once per multicast by the sender; per receive fragment
  ``receive_bytes`` (+ ``pointer_reset_extra_bytes`` when its address is not the end of the tile's previous receive
  in listed order, or, with the capture's allocations, is the start or end of an allocation live in the phase:
  two allocations are never contiguous -- the first receive of a phase always resets); the total rounded up to
  ``table_rounding``.
- fragments: sends + receives.
- cycles: max(⌈tx/4⌉, ⌈rx/4⌉, controls) with controls = 2·sends + 2·receives + 1·resets; the phase estimate is the
  max over tiles plus the sync. A transfer's bytes are all charged to its source tile, whatever its width: the
  reference's estimate runs before widths are chosen and has no Paired64 term (docs/reference.md §3), and the rule's
  ``cycles_after <= cycles_before`` test must compare what the reference compares.

Tiles idle in a phase (no send, no receive) pay nothing for it: their table holds no entry for that phase.
Whole program: table bytes and fragments sum over stored phases (a Repeat body is stored once), a tile's identical
phase rows sharing one table (``placer.cost.sharing``); cycles multiply each phase's estimate by the times it
executes. Two whole-program table figures: the per-tile worst (what the budget is checked against, sharing
included) and the reference's row estimate, Σ over stored phases of each phase's maximum (no sharing).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placer.capture.model import WORD_BYTES, Allocations, Capture, Phase, tile_order
from placer.cost.sharing import Sharing, share_tables
from placer.errors import InputError
from placer.machine import Machine
from placer.threads import ordered_map


@dataclass(eq=False)
class PhaseCost:
    """Per-tile counters of one phase (arrays of length ``tiles``) and the phase's cycle estimate."""

    phase: int
    sends: np.ndarray
    long_sends: np.ndarray
    receives: np.ndarray
    resets: np.ndarray
    tx_bytes: np.ndarray
    rx_bytes: np.ndarray
    table_bytes: np.ndarray  # rounded, including entry/return
    cycles: int  # estimate for one execution, including sync

    @property
    def fragments(self) -> np.ndarray:
        fragments: np.ndarray = self.sends + self.receives
        return fragments

    def worst_tile(self) -> int:
        return int(np.argmax(self.table_bytes))

    def worst_table(self) -> int:
        return int(self.table_bytes.max(initial=0))


BAND_SHIFT = 40  # a (tile, address) pair as one int64 key, tile << 40 | address: addresses stay far below 2^40

# per Allocations object, computed once (captures do not change them): its allocations sorted by (tile, start), as
# (first phase, last phase, start key, end key) columns
_SORTED: weakref.WeakKeyDictionary[Allocations, tuple[np.ndarray, ...]] = weakref.WeakKeyDictionary()


def allocation_bounds(allocations: Allocations | None, phase: int) -> np.ndarray | None:
    """The sorted (tile, address) keys (``BAND_SHIFT``) where an allocation live in ``phase`` starts or ends, or
    None without the ``allocations`` extension. A receive whose start is past such a key that the previous
    receive's start is not lies in another allocation (the one holding its first byte, or none): a pointer reset
    even if it continues the previous one, "two different allocations are never contiguous" (docs/reference.md §3)."""
    if allocations is None or not len(allocations):
        return None
    cols = _SORTED.get(allocations)
    if cols is None:
        order = np.lexsort((allocations.start, allocations.tile))
        band = allocations.tile[order].astype(np.int64) << BAND_SHIFT
        cols = _SORTED[allocations] = (allocations.first[order], allocations.last[order],
                                       band + allocations.start[order], band + allocations.end[order])
    first, last, start, end = cols
    live = (first <= phase) & (last >= phase)
    # live allocations of a tile share no bytes, so start, end, start, end ... in start order is already sorted
    keys = np.stack([start[live], end[live]], axis=1).reshape(-1)
    if keys.size > 1 and (keys[1:] < keys[:-1]).any():  # overlapping allocations (a malformed extension)
        keys = np.sort(keys)
    return keys


def receive_resets(dst_tile: np.ndarray, dst_addr: np.ndarray, dst_bytes: np.ndarray,
                   order: np.ndarray | None = None, bounds: np.ndarray | None = None) -> np.ndarray:
    """For each receive entry (listed order), 1 if it starts a new pointer run on its tile, else 0 (int8).
    ``order``: ``tile_order(dst_tile)``, when the caller has it; ``bounds``: ``allocation_bounds`` of the phase,
    when the capture has allocations (a receive into another allocation than the one before resets)."""
    order = tile_order(dst_tile) if order is None else order
    t = dst_tile[order]
    a = dst_addr[order]
    reset_sorted = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        end = a[:-1] + dst_bytes[order[:-1]]
        np.not_equal(a[1:], end, out=reset_sorted[1:])
        reset_sorted[1:] |= t[1:] != t[:-1]
        if bounds is not None and bounds.size:
            _split_at_bounds(reset_sorted, t, a, bounds)
    resets = np.empty(len(order), np.int8)
    resets[order] = reset_sorted
    return resets


def _split_at_bounds(reset: np.ndarray, t: np.ndarray, a: np.ndarray, bounds: np.ndarray) -> None:
    """Set ``reset`` (entries in tile order) where a receive continues the previous one but lies in another
    allocation: an allocation starts or ends in (previous start, its start] -- normally at its start; past it
    only if the previous receive ran over the end of its allocation. Only the runs of contiguous receives with a
    bound inside them are searched: a few among millions."""
    first = np.flatnonzero(reset)
    last = np.r_[first[1:] - 1, reset.size - 1]
    multi = first < last  # a run of one entry has nothing inside it
    first, last = first[multi], last[multi]
    base = t[first].astype(np.int64) << BAND_SHIFT
    # the run's entries after its first start in (a[first], a[last]]
    nxt = np.searchsorted(bounds, base + a[first], side="right")
    crossed = np.flatnonzero((nxt < bounds.size) & (bounds[np.minimum(nxt, bounds.size - 1)] <= base + a[last]))
    if not crossed.size:
        return
    # each bound inside a crossed run, searched among the run's entries (their starts increase: a run's entries
    # follow each other in memory) by a binary search run on all bounds at once, about log2(run length) steps: the
    # first entry starting at or past the bound is in another allocation than the entry before it
    hi = np.searchsorted(bounds, base[crossed] + a[last[crossed]], side="right")
    per = hi - nxt[crossed]
    want = bounds[_ranges(nxt[crossed], hi)] - np.repeat(base[crossed], per)
    lo, top = np.repeat(first[crossed] + 1, per), np.repeat(last[crossed] + 1, per)
    while (lo < top).any():
        mid = (lo + top) // 2
        below = (lo < top) & (a[np.minimum(mid, a.size - 1)] < want)
        lo, top = np.where(below, mid + 1, lo), np.where(below | (lo >= top), top, mid)
    reset[lo] = True


def _ranges(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """The concatenation of ``arange(start[i], stop[i])`` over i."""
    counts = stop - start
    ranges: npt.NDArray[np.int64] = (np.arange(int(counts.sum()), dtype=np.int64)
                                     + np.repeat(start - (np.cumsum(counts) - counts), counts))
    return ranges


def tile_resets(a: np.ndarray, e: np.ndarray, tile: int, bounds: np.ndarray | None) -> int:
    """Pointer resets of one tile's receive sequence (start and end addresses, listed order); ``bounds`` as in
    ``receive_resets``."""
    if not a.size:
        return 0
    cont = a[1:] == e[:-1]
    if bounds is not None and bounds.size and cont.any():
        lo, hi = np.searchsorted(bounds, [tile << BAND_SHIFT, (tile + 1) << BAND_SHIFT])
        mine = bounds[lo:hi] - (tile << BAND_SHIFT)
        # another allocation: a bound in (previous start, start]
        cont &= np.searchsorted(mine, a[:-1], side="right") == np.searchsorted(mine, a[1:], side="right")
    return 1 + int(cont.size - cont.sum())


def tile_counters(phase: Phase, machine: Machine, tiles: int, allocations: Allocations | None = None) -> PhaseCost:
    """Cost one phase: every counter of docs/reference.md §3 for every tile (``allocations``: the capture's extension,
    which makes a receive into another allocation a pointer reset)."""
    return _phase_counters(phase, machine, tiles, allocations)[0]


# Phases are not changed once built (a rewrite makes new Phase objects), so a phase's counters are computed once
# per (machine, tiles) and kept as long as the phase lives: the production rule, the incumbents' exact re-costs
# and the reports all cost the same unchanged phases again. The cached arrays are read-only.
_COUNTERS: weakref.WeakKeyDictionary[Phase, dict[tuple[Machine, int, Allocations | None],
                                                 tuple[PhaseCost, np.ndarray]]] = weakref.WeakKeyDictionary()


def _phase_counters(phase: Phase, machine: Machine, tiles: int,
                    allocations: Allocations | None = None) -> tuple[PhaseCost, np.ndarray]:
    """The phase's counters and the pointer-reset flag of each of its receive entries (cached, read-only)."""
    per = _COUNTERS.get(phase)
    if per is None:
        per = _COUNTERS.setdefault(phase, {})
    key = (machine, tiles, allocations if allocations is not None and len(allocations) else None)
    hit = per.get(key)
    if hit is None:
        hit = per[key] = _count(phase, machine, tiles, allocation_bounds(key[2], phase.phase))
        for a in (*(getattr(hit[0], f) for f in _ARRAYS), hit[1]):
            a.flags.writeable = False
    return hit


_ARRAYS = ("sends", "long_sends", "receives", "resets", "tx_bytes", "rx_bytes", "table_bytes")


def _count(phase: Phase, machine: Machine, tiles: int, bounds: np.ndarray | None) -> tuple[PhaseCost, np.ndarray]:
    c = machine.cost
    nbytes = phase.nbytes
    long = (phase.words > machine.exchange.send_count_words).astype(np.int64)
    sends = np.bincount(phase.source, minlength=tiles).astype(np.int64)
    long_sends = np.bincount(phase.source, weights=long, minlength=tiles).astype(np.int64)
    tx = np.bincount(phase.source, weights=nbytes, minlength=tiles)

    dst_transfer = phase.dst_transfer()
    dst_bytes = nbytes[dst_transfer]
    receives = np.bincount(phase.dst_tile, minlength=tiles).astype(np.int64)
    rx = np.bincount(phase.dst_tile, weights=dst_bytes, minlength=tiles)
    reset_flags = receive_resets(phase.dst_tile, phase.dst_addr, dst_bytes, phase.dst_order(), bounds)
    resets = np.bincount(phase.dst_tile[reset_flags.view(bool)], minlength=tiles).astype(np.int64)

    active = (sends + receives) > 0
    table = c.rounded(c.raw_table(sends, long_sends, receives, resets, active))
    tx_b = tx.astype(np.int64)
    rx_b = rx.astype(np.int64)
    controls = c.controls(sends, receives, resets)
    return PhaseCost(
        phase=phase.phase,
        sends=sends,
        long_sends=long_sends,
        receives=receives,
        resets=resets,
        tx_bytes=tx_b,
        rx_bytes=rx_b,
        table_bytes=table,
        cycles=phase_cycles(tx_b, rx_b, controls, machine) if phase.n else 0,
    ), reset_flags


def phase_cycles(tx_bytes: np.ndarray, rx_bytes: np.ndarray, controls: np.ndarray, machine: Machine) -> int:
    per_tile = machine.exchange.tile_cycles(tx_bytes, rx_bytes, controls)
    return int(per_tile.max(initial=0)) + machine.exchange.sync_cycles


@dataclass(eq=False)
class ProgramCost:
    """The whole program: per-phase costs and the per-tile totals over stored phases.

    ``table_bytes`` is each tile's table as the reference's per-tile estimator charges it, identical phase rows
    shared (``placer.cost.sharing``); ``PhaseCost.table_bytes`` is each phase's own rows, unshared, and
    ``charged`` (phases x tiles) what each phase's row is charged after sharing."""

    phases: list[PhaseCost]
    iterations: list[int]  # times each stored phase executes
    table_bytes: np.ndarray
    fragments: np.ndarray
    machine: Machine
    sharing: Sharing | None = None

    @property
    def charged(self) -> np.ndarray:
        if self.sharing is not None:
            return self.sharing.charged
        return np.stack([p.table_bytes for p in self.phases]) if self.phases else np.zeros((0, 0), np.int64)

    def shared_savings(self) -> int:
        """Bytes sharing saves on the worst tile (its unshared total minus its charged total)."""
        t = self.worst_tile()
        return int(sum(int(p.table_bytes[t]) for p in self.phases) - int(self.table_bytes[t]))

    @property
    def cycles(self) -> int:
        """Modelled exchange cycles of one run of the program (Repeat body phases times their iterations)."""
        return sum(p.cycles * k for p, k in zip(self.phases, self.iterations, strict=True))

    def worst_tile(self) -> int:
        return int(np.argmax(self.table_bytes))

    def worst_table(self) -> int:
        return int(self.table_bytes.max(initial=0))

    def worst_fragments(self) -> int:
        return int(self.fragments.max(initial=0))

    @property
    def row_estimate(self) -> int:
        """The reference's "detailed whole-program row estimate" (docs/reference.md §3): Σ over stored phases of each
        phase's maximum per-tile table bytes. A coarse upper bound on the worst tile (phases peak on different tiles);
        the budget is checked against ``worst_table``, not against this."""
        return sum(p.worst_table() for p in self.phases)

    def fits(self, table_budget: int | None = None, fragment_limit: int | None = None) -> bool:
        table_budget = self.machine.budget.table_bytes if table_budget is None else table_budget
        fragment_limit = self.machine.budget.fragments if fragment_limit is None else fragment_limit
        return self.worst_table() <= table_budget and self.worst_fragments() <= fragment_limit


def program_tiles(capture: Capture, machine: Machine) -> int:
    """The tiles a plan may use: the capture's, which the machine must have."""
    if capture.tile_count > machine.tiles:
        raise InputError(f"the capture has {capture.tile_count} tiles but machine {machine.name!r} has only "
                         f"{machine.tiles}", where="tile_count")
    return capture.tile_count


def program_cost(capture: Capture, machine: Machine, workers: int = 1) -> ProgramCost:
    """Every counter of every phase and the program's per-tile totals (phases counted on ``workers`` threads)."""
    tiles = program_tiles(capture, machine)
    counted = list(ordered_map(lambda p: _phase_counters(p, machine, tiles, capture.allocations), capture.phases,
                               workers))
    phases = [pc for pc, _ in counted]
    own = np.stack([pc.table_bytes for pc in phases]) if phases else np.zeros((0, tiles), np.int64)
    sharing = share_tables(capture.phases, own, [r for _, r in counted], machine, tiles, workers)
    frags = np.zeros(tiles, np.int64)
    for pc in phases:
        frags += pc.fragments
    return ProgramCost(
        phases=phases,
        iterations=[capture.iterations(p.phase) for p in capture.phases],
        table_bytes=sharing.charged.sum(axis=0) if phases else np.zeros(tiles, np.int64),
        fragments=frags,
        machine=machine,
        sharing=sharing,
    )


__all__ = ["WORD_BYTES", "PhaseCost", "ProgramCost", "allocation_bounds", "phase_cycles", "program_cost",
           "program_tiles", "receive_resets", "tile_counters", "tile_resets"]
