"""The capture data model.

A phase's transfers are held column-wise; the two variable-length lists of a transfer (its per-iteration source
addresses and its destinations) are stored in CSR form: ``dst_ptr[i]:dst_ptr[i+1]`` indexes transfer ``i``'s
destinations in ``dst_tile``/``dst_addr``. No Python object exists per transfer, so a phase of a million transfers
costs a few tens of MB and every cost rule is a numpy expression.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias, TypeVar

import numpy as np
import numpy.typing as npt

SCHEMA_VERSION = 1
WORD32 = 0
PAIRED64 = 1
WIDTH_NAMES = ("Word32", "Paired64")
WORD_BYTES = 4

# The version of placer's own optional extensions, stored under the top-level key "placer".
EXTENSION_VERSION = 1

_Array = TypeVar("_Array", bound="npt.NDArray[Any]")
Runs: TypeAlias = "tuple[npt.NDArray[np.int32], npt.NDArray[np.int64], npt.NDArray[np.int64]]"  # tile, start, end


@dataclass(eq=False)
class Phase:
    """One exchange phase: ``n`` transfers in listed order (the order pointer resets are counted in)."""

    phase: int
    source: npt.NDArray[np.int32]  # (n,)
    words: npt.NDArray[np.int32]  # (n,)
    width: npt.NDArray[np.uint8]  # (n,): WORD32 or PAIRED64
    src_ptr: npt.NDArray[np.int64]  # (n+1,) CSR into src_addr
    src_addr: npt.NDArray[np.int64]  # one source address per Repeat iteration (or one if the read does not vary)
    dst_ptr: npt.NDArray[np.int64]  # (n+1,) CSR into dst_tile/dst_addr
    dst_tile: npt.NDArray[np.int32]
    dst_addr: npt.NDArray[np.int64]
    extra: dict[str, Any] = field(default_factory=dict)  # unknown per-phase keys, kept for a lossless round trip

    @property
    def n(self) -> int:
        return int(self.source.shape[0])

    @property
    def nbytes(self) -> npt.NDArray[np.int64]:
        return self.words.astype(np.int64) * WORD_BYTES

    @property
    def fanout(self) -> npt.NDArray[np.int64]:
        return np.diff(self.dst_ptr)

    def dst_transfer(self) -> npt.NDArray[np.int64]:
        """For every destination entry, the index of its transfer (the CSR row expanded; cached, read-only)."""
        return _cached(_DST_TRANSFER, self, lambda: np.repeat(np.arange(self.n, dtype=np.int64), self.fanout))

    def dst_set_ids(self) -> npt.NDArray[np.int64]:
        """A dense id per transfer such that equal ids mean equal destination tile sets.

        Two independent 64-bit random signatures per tile are summed over each set (order-free); a collision of
        both sums between two different sets has probability about 2^-128, so this is exact in practice and stays
        O(destinations) for any fan-out.
        """
        if self.n == 0:
            return np.zeros(0, np.int64)
        cached = _SET_IDS.get(self)
        if cached is not None:
            return cached
        rng = np.random.default_rng(0x5EED)
        top = int(self.dst_tile.max()) + 1
        sig_a = rng.integers(0, 2**63, size=top, dtype=np.int64).view(np.uint64)
        sig_b = rng.integers(0, 2**63, size=top, dtype=np.int64).view(np.uint64)
        starts = self.dst_ptr[:-1]
        with np.errstate(over="ignore"):
            ha = np.add.reduceat(sig_a[self.dst_tile], starts)
            hb = np.add.reduceat(sig_b[self.dst_tile], starts)
        # one sort on the first signature; the second and the fan-out only confirm it (they differ inside a run
        # of equal first signatures with probability about 2^-64, and then the exact three-key sort decides)
        key = ha.view(np.int64)  # the same order as the exact sort's first key, so ids keep their old values
        order = np.argsort(key, kind="stable")
        a_s = key[order]
        new = np.r_[True, a_s[1:] != a_s[:-1]]
        run = np.cumsum(new) - 1
        head = order[np.flatnonzero(new)][run]
        if (hb[order] == hb[head]).all() and (self.fanout[order] == self.fanout[head]).all():
            ids = np.empty(self.n, np.int64)
            ids[order] = run
        else:
            keys = np.stack([ha.view(np.int64), hb.view(np.int64), self.fanout], axis=1)
            ids = np.unique(keys, axis=0, return_inverse=True)[1].reshape(-1).astype(np.int64)
        ids.flags.writeable = False
        _SET_IDS[self] = ids
        return ids

    def dst_order(self) -> npt.NDArray[np.intp]:
        """Destination entries sorted by tile, listed order kept within a tile (cached, read-only): the order
        pointer resets, table rows and busy memory are all read in."""
        return _cached(_DST_ORDER, self, lambda: tile_order(self.dst_tile))

    def dst_runs(self) -> Runs:
        """The bytes the phase writes, as (tile, start, end) intervals in tile order (cached, read-only): receive
        entries that follow each other on a tile in listed order, each starting where the one before ended, are
        one interval. The same bytes as the entries, about a thousandth of their number (a multicast's fragments
        land back to back), for the questions that need only the union: busy memory, reads of written bytes."""
        cached = _DST_RUNS.get(self)
        if cached is None:
            order = self.dst_order()
            cached = _DST_RUNS[self] = interval_runs(self.dst_tile, self.dst_addr,
                                                     self.dst_addr + self.nbytes[self.dst_transfer()], order)
            for a in cached:
                a.flags.writeable = False
        return cached

    def source_order(self) -> npt.NDArray[np.intp]:
        """Transfers sorted by source tile, listed order kept within a tile (cached, read-only)."""
        return _cached(_SOURCE_ORDER, self, lambda: tile_order(self.source))

    def first_src_addr(self) -> npt.NDArray[np.int64]:
        return self.src_addr[self.src_ptr[:-1]]

    def payload_bytes(self) -> int:
        """Receiver payload summed over every receiver (a multicast counts once per destination)."""
        return int((self.nbytes * self.fanout).sum())

    def destinations(self, i: int) -> list[tuple[int, int]]:
        a, b = int(self.dst_ptr[i]), int(self.dst_ptr[i + 1])
        return list(zip(self.dst_tile[a:b].tolist(), self.dst_addr[a:b].tolist(), strict=True))

    def source_addresses(self, i: int) -> list[int]:
        addresses: list[int] = self.src_addr[self.src_ptr[i] : self.src_ptr[i + 1]].tolist()
        return addresses

    def take(self, index: npt.NDArray[np.integer[Any]]) -> Phase:
        """A phase holding only the transfers ``index`` (in that order)."""
        index = np.asarray(index, dtype=np.int64)
        src_counts = np.diff(self.src_ptr)[index]
        dst_counts = self.fanout[index]
        return Phase(
            phase=self.phase,
            source=self.source[index],
            words=self.words[index],
            width=self.width[index],
            src_ptr=_ptr(src_counts),
            src_addr=self.src_addr[csr_gather(self.src_ptr, index)],
            dst_ptr=_ptr(dst_counts),
            dst_tile=self.dst_tile[csr_gather(self.dst_ptr, index)],
            dst_addr=self.dst_addr[csr_gather(self.dst_ptr, index)],
            extra=dict(self.extra),
        )

    @staticmethod
    def concat(phase: int, parts: list[Phase], extra: dict[str, Any] | None = None) -> Phase:
        parts = [p for p in parts if p.n] or parts[:1]
        if not parts:
            return Phase.empty(phase)
        return Phase(
            phase=phase,
            source=np.concatenate([p.source for p in parts]),
            words=np.concatenate([p.words for p in parts]),
            width=np.concatenate([p.width for p in parts]),
            src_ptr=_ptr(np.concatenate([np.diff(p.src_ptr) for p in parts])),
            src_addr=np.concatenate([p.src_addr for p in parts]),
            dst_ptr=_ptr(np.concatenate([p.fanout for p in parts])),
            dst_tile=np.concatenate([p.dst_tile for p in parts]),
            dst_addr=np.concatenate([p.dst_addr for p in parts]),
            extra=dict(extra if extra is not None else parts[0].extra),
        )

    @staticmethod
    def empty(phase: int) -> Phase:
        z32 = np.zeros(0, np.int32)
        z64 = np.zeros(0, np.int64)
        return Phase(phase, z32, z32.copy(), np.zeros(0, np.uint8), np.zeros(1, np.int64), z64, np.zeros(1, np.int64),
                     z32.copy(), z64.copy())

    @staticmethod
    def build(
        phase: int,
        source: Any,
        words: Any,
        dst_counts: Any,
        dst_tile: Any,
        dst_addr: Any,
        src_addr: Any,
        src_counts: Any | None = None,
        width: Any | None = None,
    ) -> Phase:
        """Assemble a phase from flat arrays (``src_counts`` defaults to one source address per transfer)."""
        source = np.asarray(source, dtype=np.int32)
        n = source.shape[0]
        src_counts = np.ones(n, np.int64) if src_counts is None else np.asarray(src_counts, np.int64)
        return Phase(
            phase=int(phase),
            source=source,
            words=np.asarray(words, dtype=np.int32),
            width=np.zeros(n, np.uint8) if width is None else np.asarray(width, np.uint8),
            src_ptr=_ptr(src_counts),
            src_addr=np.asarray(src_addr, dtype=np.int64),
            dst_ptr=_ptr(np.asarray(dst_counts, np.int64)),
            dst_tile=np.asarray(dst_tile, dtype=np.int32),
            dst_addr=np.asarray(dst_addr, dtype=np.int64),
        )

    def equals(self, other: Phase) -> bool:
        names = ("source", "words", "width", "src_ptr", "src_addr", "dst_ptr", "dst_tile", "dst_addr")
        return self.phase == other.phase and all(
            np.array_equal(getattr(self, k), getattr(other, k)) for k in names
        ) and self.extra == other.extra


# a phase is not changed once built, so its destination-set ids are computed once (read-only)
_SET_IDS: weakref.WeakKeyDictionary[Phase, npt.NDArray[np.int64]] = weakref.WeakKeyDictionary()
_DST_TRANSFER: weakref.WeakKeyDictionary[Phase, npt.NDArray[np.int64]] = weakref.WeakKeyDictionary()
_DST_ORDER: weakref.WeakKeyDictionary[Phase, npt.NDArray[np.intp]] = weakref.WeakKeyDictionary()
_SOURCE_ORDER: weakref.WeakKeyDictionary[Phase, npt.NDArray[np.intp]] = weakref.WeakKeyDictionary()
_DST_RUNS: weakref.WeakKeyDictionary[Phase, Runs] = weakref.WeakKeyDictionary()


def tile_order(tile: npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.intp]:
    """Indices that sort entries by tile, keeping listed order within a tile (a stable sort): on 16-bit keys numpy
    sorts by radix, seven times faster than on 32-bit ones, and every machine here has fewer than 2^15 tiles."""
    if tile.size and int(tile.min()) >= 0 and int(tile.max()) < 2**15:
        return np.argsort(tile.astype(np.int16), kind="stable")
    return np.argsort(tile, kind="stable")


def _cached(store: weakref.WeakKeyDictionary[Phase, _Array], phase: Phase, compute: Callable[[], _Array]) -> _Array:
    """``store[phase]``, computed on first use and made read-only (a phase is not changed once built)."""
    cached = store.get(phase)
    if cached is None:
        cached = store[phase] = compute()
        cached.flags.writeable = False
    return cached


def interval_runs(tile: np.ndarray, start: np.ndarray, end: np.ndarray,
                  order: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tile, start, end) intervals visited in ``order`` (``tile_order(tile)``), each run of consecutive ones on a
    tile that start where the one before ended merged into one: the same bytes, fewer intervals."""
    t, s, e = tile[order], start[order], end[order]
    if not t.size:
        return t, s, e
    first = np.flatnonzero(np.r_[True, (t[1:] != t[:-1]) | (s[1:] != e[:-1])])
    return t[first], s[first], e[np.r_[first[1:] - 1, t.size - 1]]


def _ptr(counts: np.ndarray) -> np.ndarray:
    ptr = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


def csr_gather(ptr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Flat indices of the CSR entries of ``rows``, row by row, without a Python loop."""
    starts = ptr[:-1][rows]
    counts = ptr[1:][rows] - starts
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    offsets = np.repeat(starts - _ptr(counts)[:-1], counts)
    flat: npt.NDArray[np.int64] = np.arange(total, dtype=np.int64) + offsets
    return flat


@dataclass(frozen=True)
class Repeat:
    """Extension: the phases that form the Repeat body (stored once, executed ``iterations`` times)."""

    phases: tuple[int, ...]
    iterations: int


@dataclass(eq=False)
class Allocations:
    """Extension: live allocations per tile, ``[start, end)`` bytes, live from phase ``first`` to ``last``.

    Lifetimes are inclusive phase ids; a relay buffer in phase p must avoid every allocation live in p.
    """

    tile: npt.NDArray[np.int32]
    start: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    first: npt.NDArray[np.int64]  # phase id
    last: npt.NDArray[np.int64]  # phase id
    name: list[str] = field(default_factory=list)  # optional label per allocation ("" when absent)

    @staticmethod
    def empty() -> Allocations:
        z = np.zeros(0, np.int64)
        return Allocations(np.zeros(0, np.int32), z, z.copy(), z.copy(), z.copy(), [])

    def __len__(self) -> int:
        return int(self.tile.shape[0])

    def live_on(self, tile: int, phase: int) -> npt.NDArray[np.intp]:
        """Indices of allocations on ``tile`` live during ``phase``."""
        return np.flatnonzero((self.tile == tile) & (self.first <= phase) & (self.last >= phase))

    def equals(self, other: Allocations) -> bool:
        names = ("tile", "start", "end", "first", "last")
        return all(np.array_equal(getattr(self, k), getattr(other, k)) for k in names) and self.name == other.name


@dataclass(frozen=True)
class PanelHint:
    """Extension: panel (native segment) boundaries of a replicated operand.

    Identifies the replica group by phase and sorted destination set; ``boundaries`` are byte offsets relative to the
    replicas' base address, strictly increasing, starting at 0 and ending at the extent. ``splits = False`` says
    the operand does *not* split into native panels on its replicas (e.g. row-major weights, whose column panels
    are strided): the production rule keeps such a group direct, and ``boundaries`` may then be empty.
    """

    phase: int
    tiles: tuple[int, ...]
    boundaries: tuple[int, ...]
    operand: str = ""
    splits: bool = True


@dataclass(eq=False)
class Capture:
    """A whole program: phases in listed order plus the optional extensions."""

    tile_count: int
    phases: list[Phase]
    schema_version: int = SCHEMA_VERSION
    phase_labels: dict[int, str] | None = None
    phase_traffic: Any = None  # kept verbatim: placer does not interpret it
    repeat: Repeat | None = None
    allocations: Allocations = field(default_factory=Allocations.empty)
    panels: list[PanelHint] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)  # unknown top-level keys, kept verbatim

    def phase_ids(self) -> list[int]:
        return [p.phase for p in self.phases]

    def phase_by_id(self, phase_id: int) -> Phase:
        for p in self.phases:
            if p.phase == phase_id:
                return p
        raise KeyError(phase_id)

    def label(self, phase_id: int) -> str:
        return (self.phase_labels or {}).get(phase_id, "")

    def iterations(self, phase_id: int) -> int:
        """How many times a stored phase executes (Repeat body phases run ``iterations`` times)."""
        if self.repeat is not None and phase_id in self.repeat.phases:
            return self.repeat.iterations
        return 1

    def transfer_count(self) -> int:
        return sum(p.n for p in self.phases)

    def with_phases(self, phases: list[Phase], allocations: Allocations | None = None) -> Capture:
        return Capture(
            tile_count=self.tile_count,
            phases=phases,
            schema_version=self.schema_version,
            phase_labels=self.phase_labels,
            phase_traffic=self.phase_traffic,
            repeat=self.repeat,
            allocations=self.allocations if allocations is None else allocations,
            panels=self.panels,
            extra=self.extra,
        )

    def equals(self, other: Capture) -> bool:
        return (
            self.tile_count == other.tile_count
            and self.schema_version == other.schema_version
            and len(self.phases) == len(other.phases)
            and all(a.equals(b) for a, b in zip(self.phases, other.phases, strict=True))
            and self.phase_labels == other.phase_labels
            and self.phase_traffic == other.phase_traffic
            and self.repeat == other.repeat
            and self.allocations.equals(other.allocations)
            and self.panels == other.panels
            and self.extra == other.extra
        )
