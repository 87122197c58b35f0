"""Problem data for per-tile buffer placement (docs/reference.md §6): free ranges, requests, fixed allocations.

Everything here is a validated frozen dataclass; the readers in :mod:`placer.placement.formats` build them and every
engine (greedy mirror, canonical search, CP-SAT) and the checker read them. The address rules that every engine must
agree on live here too (:meth:`PlacementProblem.domains`, :meth:`PlacementProblem.element_span`), so that the checker
and the solvers cannot drift apart on what "region", "element" or "host scratch" mean.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from placer.errors import InputError

END_OF_PROGRAM = 2**32 - 1
"""A lifetime whose ``last`` is this is live to the end of the program (and across runs)."""

REGION_BOUNDARY = 0x80000
REGION0_ELEMENT = 16 * 1024
REGION1_ELEMENT = 32 * 1024
HOST_SCRATCH = (0x50000, 0x58000)
"""The reference compiler lends its host exchange window to data only between host phases: a request live at step 0
or to the end may not be placed in a free range lying inside it."""


class MemoryClass(enum.StrEnum):
    STANDARD = "Ipu21Standard"  # either region, region 0 preferred
    INTERLEAVED = "Ipu21Interleaved"  # region 1 only, at or above the boundary plus the tile's interleaved offset


@dataclass(frozen=True)
class Request:
    """One allocation to place. ``aliases`` are (root id, offset) pairs placed together with the request."""

    bytes: int
    alignment: int
    first: int
    last: int  # inclusive; END_OF_PROGRAM = live to the end
    klass: MemoryClass = MemoryClass.STANDARD
    aliases: tuple[tuple[int, int], ...] = ()
    conflicts: tuple[int, ...] = ()  # root ids that may not share a memory element with this request
    region1_stride: int | None = None  # a sequence placed in region 1 advances by this stride per alias
    name: str = ""

    def __post_init__(self) -> None:
        where = self.name or "request"
        if self.bytes <= 0:
            raise InputError(f"bytes must be positive, got {self.bytes}", where=f"{where}.bytes")
        if self.alignment <= 0 or self.alignment & (self.alignment - 1):
            raise InputError(f"alignment must be a power of two, got {self.alignment}", where=f"{where}.alignment")
        if not 0 <= self.first <= self.last <= END_OF_PROGRAM:
            raise InputError(
                f"lifetime must satisfy 0 <= first <= last <= 2^32-1, got [{self.first}, {self.last}]",
                where=f"{where}.lifetime",
            )
        if self.region1_stride is not None and self.region1_stride <= 0:
            raise InputError(f"region1_stride must be positive, got {self.region1_stride}", where=where)

    def overlaps_in_time(self, first: int, last: int) -> bool:
        return self.first <= last and first <= self.last


@dataclass(frozen=True)
class FixedAllocation:
    """Memory already taken for a lifetime (a live allocation of the tile): no request may overlap it then."""

    start: int
    end: int
    first: int = 0
    last: int = END_OF_PROGRAM
    root: int | None = None  # lets requests name it in ``conflicts``
    name: str = ""

    def __post_init__(self) -> None:
        where = self.name or "fixed allocation"
        if not 0 <= self.start < self.end:
            raise InputError(f"address range must satisfy 0 <= start < end, got [{self.start}, {self.end})",
                             where=where)
        if not 0 <= self.first <= self.last <= END_OF_PROGRAM:
            raise InputError(f"lifetime must satisfy first <= last, got [{self.first}, {self.last}]", where=where)


@dataclass(frozen=True)
class Domain:
    """Aligned start addresses ``first, first+alignment, ..., last`` for a request inside one range and region."""

    first: int
    last: int
    alignment: int
    bytes: int  # the span placed there (a region-1 sequence may be wider than in region 0)
    region: int  # 0 or 1; -1 when the problem has no regions
    range_index: int


@dataclass(frozen=True)
class PlacementProblem:
    """One tile's placement problem. ``region_boundary=None`` means a flat address space (MiniMalloc problems)."""

    ranges: tuple[tuple[int, int], ...]
    requests: tuple[Request, ...]
    fixed: tuple[FixedAllocation, ...] = ()
    interleaved_offset: int = 0
    region_boundary: int | None = REGION_BOUNDARY
    region0_element: int = REGION0_ELEMENT
    region1_element: int = REGION1_ELEMENT
    host_scratch: tuple[int, int] | None = HOST_SCRATCH
    name: str = ""
    tile: int | None = None
    source_format: str = "ipu"  # "ipu" or "minimalloc": how to write the solution back
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)  # e.g. the CSV ids and columns

    def __post_init__(self) -> None:
        where = self.name or None
        prev_end = -1
        for k, (start, end) in enumerate(self.ranges):
            if not 0 <= start < end:
                raise InputError(f"range must satisfy 0 <= start < end, got [{start}, {end})", path=where,
                                 where=f"ranges[{k}]")
            if start < prev_end:
                raise InputError(f"ranges must be sorted and disjoint, got [{start}, {end}) after end {prev_end}",
                                 path=where, where=f"ranges[{k}]")
            prev_end = end
        if self.interleaved_offset < 0:
            raise InputError(f"interleaved_offset must be >= 0, got {self.interleaved_offset}", path=where,
                             where="interleaved_offset")
        roots: dict[int, int] = {}
        for i, r in enumerate(self.requests):
            for root, _ in r.aliases:
                if root in roots:
                    raise InputError(f"root id {root} appears in requests {roots[root]} and {i}", path=where,
                                     where=f"requests[{i}].assignments")
                roots[root] = i

    # ----------------------------------------------------------------------------------------- derived facts
    @property
    def n(self) -> int:
        return len(self.requests)

    @cached_property
    def owner(self) -> dict[int, int]:
        """Root id -> request index (fixed allocations with a root map to ``-1 - k``)."""
        out = {root: i for i, r in enumerate(self.requests) for root, _ in r.aliases}
        for k, f in enumerate(self.fixed):
            if f.root is not None:
                out.setdefault(f.root, -1 - k)
        return out

    @cached_property
    def conflict_pairs(self) -> tuple[tuple[int, int], ...]:
        """Symmetric request–request conflicts as sorted pairs (i < j); a conflict named on either side counts."""
        pairs = set()
        for i, r in enumerate(self.requests):
            for root in r.conflicts:
                j = self.owner.get(root)
                if j is not None and j >= 0 and j != i:
                    pairs.add((min(i, j), max(i, j)))
        return tuple(sorted(pairs))

    @cached_property
    def fixed_conflicts(self) -> tuple[tuple[int, int], ...]:
        """(request index, fixed index) pairs that may not share a memory element."""
        out = set()
        for i, r in enumerate(self.requests):
            for root in r.conflicts:
                j = self.owner.get(root)
                if j is not None and j < 0:
                    out.add((i, -1 - j))
        return tuple(sorted(out))

    @property
    def capacity(self) -> int:
        return sum(end - start for start, end in self.ranges)

    def time_overlap(self, i: int, j: int) -> bool:
        a, b = self.requests[i], self.requests[j]
        return a.first <= b.last and b.first <= a.last

    def region_of(self, address: int) -> int:
        if self.region_boundary is None:
            return -1
        return 1 if address >= self.region_boundary else 0

    def element_span(self, start: int, end: int) -> tuple[int, int]:
        """The memory elements touched by ``[start, end)`` as an address range (region 1 elements are pairs)."""
        if self.region_boundary is None:
            return start, end
        size = self.region1_element if start >= self.region_boundary else self.region0_element
        return start // size * size, -(-end // size) * size

    def span_bytes(self, i: int, address: int) -> int:
        r = self.requests[i]
        if r.region1_stride is not None and self.region_of(address) == 1:
            return r.region1_stride * max(1, len(r.aliases))
        return r.bytes

    def alias_addresses(self, i: int, address: int) -> list[tuple[int, int]]:
        r = self.requests[i]
        if r.region1_stride is not None and self.region_of(address) == 1:
            return [(root, address + r.region1_stride * k) for k, (root, _) in enumerate(r.aliases)]
        return [(root, address + offset) for root, offset in r.aliases]

    def domains(self, i: int, ranges: Sequence[tuple[int, int]] | None = None) -> list[Domain]:
        """Every (range, region) piece where request ``i`` may start, in address order."""
        r = self.requests[i]
        out: list[Domain] = []
        for index, (base, limit) in enumerate(self.ranges if ranges is None else ranges):
            if (
                self.host_scratch is not None
                and self.host_scratch[0] <= base
                and limit <= self.host_scratch[1]
                and (r.first == 0 or r.last == END_OF_PROGRAM)
            ):
                continue
            if self.region_boundary is None:
                pieces = [(-1, base, limit, 1)]
            else:
                pieces = []
                if r.klass is MemoryClass.STANDARD:
                    pieces.append((0, base, min(limit, self.region_boundary), self.region0_element))
                offset = self.interleaved_offset if r.klass is MemoryClass.INTERLEAVED else 0
                pieces.append((1, max(base, self.region_boundary + offset), limit, self.region1_element))
            for region, lo, hi, element in pieces:
                alignment = max(r.alignment, element if r.region1_stride is not None else 1)
                size = r.bytes
                if region == 1 and r.region1_stride is not None:
                    size = r.region1_stride * max(1, len(r.aliases))
                first = -(-lo // alignment) * alignment
                if hi - size < 0:
                    continue
                last = (hi - size) // alignment * alignment
                if first <= last:
                    out.append(Domain(first, last, alignment, size, region, index))
        return out

    @cached_property
    def all_domains(self) -> tuple[tuple[Domain, ...], ...]:
        return tuple(tuple(self.domains(i)) for i in range(self.n))

    @cached_property
    def is_flat(self) -> bool:
        """True when the MiniMalloc canonical search applies exactly: one address interval shared by every request,
        no regions, conflicts, strides or fixed allocations, and the base aligned for every request."""
        if self.fixed or self.conflict_pairs or len(self.ranges) != 1:
            return False
        if any(r.region1_stride is not None for r in self.requests):
            return False
        base, limit = self.ranges[0]
        if any(base % r.alignment for r in self.requests):
            return False
        for i in range(self.n):
            doms = self.all_domains[i]
            if len(doms) != 1:
                return False
            d = doms[0]
            if d.first != base or d.last != (limit - d.bytes) // d.alignment * d.alignment:
                return False
            if self.region_boundary is not None and d.region == 0 and limit > self.region_boundary:
                return False
        return True
