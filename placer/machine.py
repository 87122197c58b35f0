"""The machine description: a TOML file of model constants (BRIEF §1 and §3), bundled defaults ``ipu21``/``mk1``."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from placer.errors import InputError


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

    def estimate(self, nbytes: int | np.ndarray) -> np.ndarray:
        x = np.asarray(self.segment_bytes, float)
        y = np.asarray(self.cycles, float)
        b = np.asarray(nbytes, float)
        inside = np.interp(b, x, y)
        below = b * y[0] / x[0]
        above = b * y[-1] / x[-1]
        return np.ceil(np.where(b < x[0], below, np.where(b > x[-1], above, inside))).astype(np.int64)


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

    def row(self, tiles: np.ndarray | int) -> np.ndarray:
        """Geometric row of each logical tile (reversed on odd blocks); latency grows with it."""
        t = np.asarray(tiles, dtype=np.int64)
        pair = t // 2
        block = pair // self.geometry.rows
        row = pair % self.geometry.rows
        return np.where(block & 1, self.geometry.rows - 1 - row, row)

    def physical(self, tiles: np.ndarray | int) -> np.ndarray:
        t = np.asarray(tiles, dtype=np.int64)
        g = self.geometry
        block = (t // 2) // g.rows
        return g.row_stride * self.row(t) + g.block_stride * (block // 2) + (block & 1) + g.lane_stride * (t & 1)

    def latency(self, destination_tiles: np.ndarray | int) -> np.ndarray:
        """Cycles from a receiver selecting its source to the payload arriving."""
        return self.geometry.latency_base + self.geometry.latency_per_row * self.row(destination_tiles)

    def cycles_to_ms(self, cycles: float) -> float:
        return cycles / self.clock_hz * 1e3


_SECTIONS = {"memory": Memory, "exchange": Exchange, "budget": Budget, "cost": CostConstants, "geometry": Geometry}
BUNDLED = ("ipu21", "mk1")


def load_machine(spec: str | Path | None = None) -> Machine:
    """Load a bundled machine by name (``ipu21``, ``mk1``) or a user's TOML file; ``None`` is ``ipu21``."""
    spec = "ipu21" if spec is None else spec
    if str(spec) in BUNDLED:
        where = f"placer/machines/{spec}.toml"
        text = resources.files("placer.machines").joinpath(f"{spec}.toml").read_text()
    else:
        where = str(spec)
        try:
            text = Path(spec).read_text()
        except OSError as exc:
            raise InputError(f"cannot read machine file ({exc.strerror}); bundled: {', '.join(BUNDLED)}",
                             path=where) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"invalid TOML: {exc}", path=where) from None
    return _machine_from_dict(data, where)


def _machine_from_dict(data: dict[str, Any], where: str) -> Machine:
    def need(table: dict[str, Any], key: str, section: str) -> Any:
        if key not in table:
            raise InputError("missing field", path=where, where=f"{section}{key}")
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InputError(f"must be a non-negative number, got {value!r}", path=where, where=f"{section}{key}")
        return value

    parts: dict[str, Any] = {}
    for section, cls in _SECTIONS.items():
        table = data.get(section)
        if not isinstance(table, dict):
            raise InputError("missing section", path=where, where=f"[{section}]")
        parts[section] = cls(**{f.name: int(need(table, f.name, f"{section}.")) for f in fields(cls)})
    tiles = int(need(data, "tiles", ""))
    if tiles < 2:
        raise InputError(f"a machine needs at least 2 tiles, got {tiles}", path=where, where="tiles")
    mem: Memory = parts["memory"]
    if not mem.base < mem.region0_end <= mem.end:
        raise InputError("need base < region0_end <= end", path=where, where="memory")
    return Machine(
        name=str(data.get("name", Path(where).stem)),
        tiles=tiles,
        clock_hz=float(need(data, "clock_hz", "")),
        local_pack=_pack_kernel(data.get("local_pack"), where),
        **parts,
    )


def _pack_kernel(table: Any, where: str) -> PackKernel:
    if not isinstance(table, dict):
        raise InputError("missing section", path=where, where="[local_pack]")
    xs, ys = table.get("segment_bytes"), table.get("cycles")
    if not isinstance(xs, list) or not isinstance(ys, list) or len(xs) != len(ys) or not xs:
        raise InputError("segment_bytes and cycles must be lists of equal, non-zero length", path=where,
                         where="local_pack")
    if any(not isinstance(v, int) or v <= 0 for v in xs + ys):
        raise InputError("entries must be positive integers", path=where, where="local_pack")
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    return PackKernel(tuple(xs[i] for i in order), tuple(ys[i] for i in order))
