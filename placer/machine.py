"""The machine description: a TOML file of model constants (docs/reference.md §1, §3), bundled ``ipu21``/``mk1``."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import asdict, dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from placer.errors import InputError
from placer.fileio import parse_toml, read_text
from placer.units import ceil_div, round_up


@dataclass(frozen=True)
class Memory:
    base: int
    end: int
    loader_limit: int
    region0_end: int
    region0_element: int
    region1_element: int


@dataclass(frozen=True)
class Exchange:
    bytes_per_cycle: int
    max_transfer_words: int
    send_count_words: int
    sync_cycles: int
    pair_xor: int

    def tile_cycles(self, tx_bytes: Any, rx_bytes: Any, controls: Any) -> Any:
        """Per tile, the cycles of its part of a phase (docs/reference.md §3): max(⌈tx / bpc⌉, ⌈rx / bpc⌉, controls)."""
        bpc = self.bytes_per_cycle
        return np.maximum(np.maximum(ceil_div(tx_bytes, bpc), ceil_div(rx_bytes, bpc)), controls)


@dataclass(frozen=True)
class Budget:
    table_bytes: int
    fragments: int


@dataclass(frozen=True)
class CostConstants:
    phase_entry_bytes: int
    table_rounding: int
    send_bytes: int
    long_send_extra_bytes: int
    receive_bytes: int
    pointer_reset_extra_bytes: int
    send_control_cycles: int
    receive_control_cycles: int
    pointer_reset_cycles: int
    share_phase_tables: int  # 1: identical rows of two phases on a tile share a table (docs/reference.md §3); 0: no
    shared_second_patch_bytes: int
    shared_later_patch_bytes: int

    # The cost formula of docs/reference.md §3, written once: every stage that costs rows (the cost model, the
    # incremental phase state, the selection's option effects, the stream schedule's timed rows) calls these. The
    # validator keeps an independent copy on purpose (placer/validation/table.py).
    def raw_table(self, sends: Any, long_sends: Any, receives: Any, resets: Any, active: Any) -> Any:
        """A tile's table bytes in one phase before rounding: entry and return when ``active``, per send (+ its
        long-send extra), per receive (+ its pointer-reset extra). Integers or integer arrays."""
        return (self.phase_entry_bytes * active + self.send_bytes * sends + self.long_send_extra_bytes * long_sends
                + self.receive_bytes * receives + self.pointer_reset_extra_bytes * resets)

    def rounded(self, raw: Any) -> Any:
        """A tile's phase total rounded up to the table granule (``table_rounding``)."""
        return round_up(raw, self.table_rounding)

    def controls(self, sends: Any, receives: Any, resets: Any) -> Any:
        """A tile's control cycles in one phase: per send, per receive, per pointer reset."""
        return (self.send_control_cycles * sends + self.receive_control_cycles * receives
                + self.pointer_reset_cycles * resets)


@dataclass(frozen=True)
class Geometry:
    rows: int
    row_stride: int
    block_stride: int
    lane_stride: int
    latency_base: int
    latency_per_row: int


@dataclass(frozen=True)
class PackKernel:
    """Measured local-pack kernel cycles against bytes per relay segment (sorted by bytes)."""

    segment_bytes: tuple[int, ...]
    cycles: tuple[int, ...]

    def estimate(self, nbytes: int | npt.NDArray[np.integer[Any]]) -> npt.NDArray[np.int64]:
        x = np.asarray(self.segment_bytes, float)
        y = np.asarray(self.cycles, float)
        b = np.asarray(nbytes, float)
        inside = np.interp(b, x, y)
        below = b * y[0] / x[0]
        above = b * y[-1] / x[-1]
        cycles: npt.NDArray[np.int64] = np.ceil(
            np.where(b < x[0], below, np.where(b > x[-1], above, inside))).astype(np.int64)
        return cycles


@dataclass(frozen=True)
class Machine:
    name: str
    tiles: int
    clock_hz: float
    memory: Memory
    exchange: Exchange
    budget: Budget
    cost: CostConstants
    geometry: Geometry
    local_pack: PackKernel

    def row(self, tiles: npt.NDArray[np.integer[Any]] | int) -> npt.NDArray[np.int64]:
        """Geometric row of each logical tile (reversed on odd blocks); latency grows with it."""
        t = np.asarray(tiles, dtype=np.int64)
        if t.size >= _ROUTE_LOOKUP_MIN and t.min() >= 0 and t.max() < self.tiles:
            return self._table("rows")[t]  # a gather: a timing asks for the row of every destination entry
        return self._row(t)

    def _row(self, t: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        pair = t // 2
        block = pair // self.geometry.rows
        row = pair % self.geometry.rows
        return np.where(block & 1, self.geometry.rows - 1 - row, row)

    def physical(self, tiles: npt.NDArray[np.integer[Any]] | int) -> npt.NDArray[np.int64]:
        t = np.asarray(tiles, dtype=np.int64)
        g = self.geometry
        block = (t // 2) // g.rows
        address: npt.NDArray[np.int64] = (g.row_stride * self._row(t) + g.block_stride * (block // 2) + (block & 1)
                               + g.lane_stride * (t & 1))
        return address

    def latency(self, destination_tiles: npt.NDArray[np.integer[Any]] | int) -> npt.NDArray[np.int64]:
        """Cycles from a receiver selecting its source to the payload arriving."""
        return self.geometry.latency_base + self.geometry.latency_per_row * self.row(destination_tiles)

    def mux_time(self, source_tiles: npt.NDArray[np.integer[Any]] | int,
                 destination_tiles: npt.NDArray[np.integer[Any]] | int) -> npt.NDArray[np.int64]:
        """Cycles from a sender's first payload word to the receiver's source select, by route (the reference
        compiler's ``time_to_mux`` for the C600 exchange: column crossings, the turn at the spine and twice the
        row distance). It is negative where the receiver must select before the sender starts (-77..+108 on
        IPU21); the payload then arrives ``latency(destination)`` cycles after the select. Route constants of
        IPU21's fabric, applied to the physical ids of any geometry."""
        s = np.asarray(source_tiles, np.int64)
        d = np.asarray(destination_tiles, np.int64)
        n = self.tiles
        # every timing of a phase routes each of its destination entries (millions at batch four): looked up in a
        # table of every pair, built once per geometry (half a second for 1,472 tiles, so only for calls of at
        # least an eighth of its size), the route costs a gather instead of thirty array passes
        if max(s.size, d.size) >= max(_ROUTE_LOOKUP_MIN, n * n // 8) and n <= _ROUTE_TABLE_TILES and s.size \
                and d.size and min(s.min(), d.min()) >= 0 and max(s.max(), d.max()) < n:
            routes: npt.NDArray[np.int64] = self._table("routes")[s * n + d].astype(np.int64)
            return routes
        return self._route(s, d)

    def _table(self, kind: str) -> npt.NDArray[Any]:
        """Every tile's row, or every (source, destination) pair's route (int16), built once per geometry."""
        key = (self.geometry, self.tiles, kind)
        table = _TABLES.get(key)
        if table is None:
            with _TABLES_LOCK:
                table = _TABLES.get(key)
                if table is None:
                    every = np.arange(self.tiles, dtype=np.int64)
                    if kind == "rows":
                        table = self._row(every)
                    else:
                        hops = self._route(np.repeat(every, self.tiles), np.tile(every, self.tiles))
                        table = hops.astype(np.int16)
                        if not np.array_equal(table, hops):
                            raise ValueError(f"machine {self.name}: a route outside ±32,767 cycles")
                    _TABLES[key] = table
        return table

    def _route(self, source_tiles: npt.NDArray[np.int64], destination_tiles: npt.NDArray[np.int64]
               ) -> npt.NDArray[np.int64]:
        s = self.physical(source_tiles)
        d = self.physical(destination_tiles)
        s_col, d_col = (s >> 2) & 15, (d >> 2) & 15
        s_fold = np.where(s_col > 7, s_col ^ 15, s_col)
        d_fold = np.where(d_col > 7, d_col ^ 15, d_col)
        s_mux = s_fold + ((s_col >> 3) ^ (s & 1))
        across = (d_fold - s_mux) * 6
        d_lane, d_side = d & 3, d_col >> 3
        across = across + np.where(d_lane > 1, np.where(d_side == (d & 1), 2, 4), np.where(d_side == d_lane, 1, 5))
        s_edge = np.where(s_col > 7, (s_col * 4) ^ 60, s_col * 4)
        d_edge = np.where(d_col > 7, (d_col * 4) ^ 60, d_col * 4)
        s_low = (s >> 2) & 7
        crossing = (((s >> 2) & 8) | ((s >> 3) & 3)) - d_col + ((s_low >> 1) ^ 3)
        turn = np.where(((s ^ d) & 0x20) == 0, s_low + 1, 16 - s_low)
        rows = (((s >> 6) & 31) - ((d >> 6) & 31)) * 2
        hops: npt.NDArray[np.int64] = (crossing + s_edge + turn - d_edge + rows + np.abs(across) - 34).astype(np.int64)
        return hops

    def cycles_to_ms(self, cycles: float) -> float:
        return cycles / self.clock_hz * 1e3

    def digest(self) -> str:
        """SHA-256 of every constant (not the name): a plan records it, validate compares it."""
        consts = {k: v for k, v in asdict(self).items() if k != "name"}
        return hashlib.sha256(repr(sorted(consts.items())).encode()).hexdigest()


_ROUTE_LOOKUP_MIN = 1 << 14  # rows and routes computed directly below this many (the tables are not worth building)
_ROUTE_TABLE_TILES = 4096  # the largest machine whose pair table is kept (4096² int16: 32 MiB)
_TABLES: dict[tuple[Geometry, int, str], npt.NDArray[Any]] = {}
_TABLES_LOCK = threading.Lock()

_SECTIONS = {"memory": Memory, "exchange": Exchange, "budget": Budget, "cost": CostConstants, "geometry": Geometry}
BUNDLED = ("ipu21", "mk1")


_INT_MAX = 2**31 - 1
_ADDRESS_MAX = 2**32
# (minimum, maximum) of the fields that need more than "a non-negative integer below 2^31"
_RANGES: dict[str, tuple[int, int]] = {
    "tiles": (2, 1 << 20),
    "memory.base": (0, _ADDRESS_MAX), "memory.end": (1, _ADDRESS_MAX), "memory.loader_limit": (1, _ADDRESS_MAX),
    "memory.region0_end": (1, _ADDRESS_MAX), "memory.region0_element": (1, _INT_MAX),
    "memory.region1_element": (1, _INT_MAX),
    "exchange.bytes_per_cycle": (1, 1 << 16), "exchange.max_transfer_words": (1, 4148),
    "exchange.send_count_words": (1, 4148),
    "budget.table_bytes": (1, _INT_MAX), "budget.fragments": (1, _INT_MAX),
    "cost.table_rounding": (1, 1 << 16), "cost.share_phase_tables": (0, 1),
    "geometry.rows": (1, 1 << 20), "geometry.row_stride": (1, _INT_MAX),
}
_TOP_KEYS = {"name", "tiles", "clock_hz", "local_pack", *_SECTIONS}
# fields a machine file may leave out (added after machine files existed): the reference's values
_DEFAULTS = {"cost.share_phase_tables": 1, "cost.shared_second_patch_bytes": 12, "cost.shared_later_patch_bytes": 4}


def load_machine(spec: str | Path | None = None) -> Machine:
    """Load a bundled machine by name (``ipu21``, ``mk1``) or a user's TOML file; ``None`` is ``ipu21``."""
    spec = "ipu21" if spec is None else spec
    if str(spec) in BUNDLED:
        where = f"placer/machines/{spec}.toml"
        text = resources.files("placer.machines").joinpath(f"{spec}.toml").read_text(encoding="utf-8")
    else:
        where = str(spec)
        if not Path(spec).exists():
            raise InputError(f"no such machine file (bundled machines: {', '.join(BUNDLED)})", path=where)
        text = read_text(spec)
    data = parse_toml(text, where)
    return _machine_from_dict(data, where)


def _machine_from_dict(data: dict[str, Any], where: str) -> Machine:
    def need(table: dict[str, Any], key: str, section: str) -> int:
        field = f"{section}{key}"
        if key not in table and field in _DEFAULTS:
            return _DEFAULTS[field]
        if key not in table:
            raise InputError("missing field", path=where, where=field)
        value = table[key]
        lo, hi = _RANGES.get(field, (0, _INT_MAX))
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise InputError(f"must be an integer in {lo}..{hi:,}, got {value!r}", path=where, where=field)
        return value

    def known(table: dict[str, Any], names: set[str], section: str) -> None:
        for key in table:
            if key not in names:
                raise InputError(f"unknown field (known: {', '.join(sorted(names))})", path=where,
                                 where=f"{section}{key}")

    known(data, _TOP_KEYS, "")
    parts: dict[str, Any] = {}
    for section, cls in _SECTIONS.items():
        table = data.get(section)
        if not isinstance(table, dict):
            raise InputError("missing section", path=where, where=f"[{section}]")
        known(table, {f.name for f in fields(cls)}, f"{section}.")
        parts[section] = cls(**{f.name: need(table, f.name, f"{section}.") for f in fields(cls)})
    tiles = need(data, "tiles", "")
    clock = data.get("clock_hz")
    if isinstance(clock, bool) or not isinstance(clock, int | float) or not 0 < clock < 1e12:
        raise InputError(f"must be a positive frequency in Hz, got {clock!r}", path=where, where="clock_hz")
    name = data.get("name", Path(where).stem)
    if not isinstance(name, str) or not name:
        raise InputError(f"must be a non-empty string, got {name!r}", path=where, where="name")
    mem: Memory = parts["memory"]
    if not mem.base < mem.region0_end <= mem.end:
        raise InputError(f"need base < region0_end <= end, got {mem.base:#x}, {mem.region0_end:#x}, "
                         f"{mem.end:#x}", path=where, where="memory")
    if not mem.base < mem.loader_limit <= mem.end:
        raise InputError(f"need base < loader_limit <= end, got {mem.loader_limit:#x}", path=where,
                         where="memory.loader_limit")
    budget: Budget = parts["budget"]
    if budget.table_bytes > mem.end - mem.base:
        raise InputError(f"{budget.table_bytes:,} bytes exceed the tile's memory ({mem.end - mem.base:,} bytes)",
                         path=where, where="budget.table_bytes")
    return Machine(
        name=name,
        tiles=tiles,
        clock_hz=float(clock),
        local_pack=_pack_kernel(data.get("local_pack"), where),
        **parts,
    )


def _pack_kernel(table: Any, where: str) -> PackKernel:
    if not isinstance(table, dict):
        raise InputError("missing section", path=where, where="[local_pack]")
    for key in table:
        if key not in ("segment_bytes", "cycles"):
            raise InputError("unknown field (known: cycles, segment_bytes)", path=where, where=f"local_pack.{key}")
    xs, ys = table.get("segment_bytes"), table.get("cycles")
    if not isinstance(xs, list) or not isinstance(ys, list) or len(xs) != len(ys) or not xs:
        raise InputError("segment_bytes and cycles must be lists of equal, non-zero length", path=where,
                         where="local_pack")
    for name, values in (("segment_bytes", xs), ("cycles", ys)):
        for k, v in enumerate(values):
            if isinstance(v, bool) or not isinstance(v, int) or not 0 < v <= _INT_MAX:
                raise InputError(f"must be a positive integer below 2^31, got {v!r}", path=where,
                                 where=f"local_pack.{name}[{k}]")
    if len(set(xs)) != len(xs):
        raise InputError("segment sizes must be distinct (one measured point per size)", path=where,
                         where="local_pack.segment_bytes")
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    return PackKernel(tuple(xs[i] for i in order), tuple(ys[i] for i in order))
