"""Readers and writers: the reference compiler's placement dump ("version 1") and MiniMalloc's CSV.

Both inputs are read unchanged. The dump may carry the optional fields the reference compiler writes
(``region_boundary``, ``region0_element_bytes``, ``region1_element_bytes``, ``host_scratch_range``) and our own
extension ``fixed`` (live allocations: ``{start, end, first, last, root}``). MiniMalloc lifetimes are half-open
``[lower, upper)`` and are stored inclusive (``last = upper - 1``); the capacity comes from ``--capacity`` or from the
number in the file name (``A.1048576.csv``).
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from placer.errors import InputError
from placer.fileio import atomic_write_text, read_bytes, read_json, write_json
from placer.placement.model import (
    END_OF_PROGRAM,
    HOST_SCRATCH,
    REGION0_ELEMENT,
    REGION1_ELEMENT,
    REGION_BOUNDARY,
    FixedAllocation,
    MemoryClass,
    PlacementProblem,
    Request,
)
from placer.placement.result import PlacementResult, PlacementResultDoc
from placer.units import MAX_ADDRESS, size_option

_CLASSES = {c.value: c for c in MemoryClass} | {
    "standard": MemoryClass.STANDARD,
    "interleaved": MemoryClass.INTERLEAVED,
}


def read_problem(path: str | Path, *, capacity: int | None = None) -> PlacementProblem:
    """Read a dump (``.json``) or a MiniMalloc CSV (``.csv``), choosing by content, not only by suffix."""
    p = Path(path)
    raw = read_bytes(p)
    head = raw.lstrip()[:1]
    if head in (b"{", b"["):
        if capacity is not None:
            raise InputError("--capacity applies to MiniMalloc CSV files only; a dump carries its ranges", path=str(p))
        return parse_dump(read_json(p), str(p))
    return parse_minimalloc_csv(raw.decode("utf-8", errors="replace"), str(p), capacity=capacity)


# ------------------------------------------------------------------------------------------------------- dump
def _int(value: Any, path: str, where: str, *, minimum: int = 0, maximum: int | None = MAX_ADDRESS) -> int:
    # the default maximum: a 32-bit tile's addresses and sizes (larger values would overflow the engines' int64
    # arithmetic in places, and are nonsense for one tile)
    if isinstance(value, bool) or not isinstance(value, int):
        raise InputError(f"expected an integer, got {value!r}", path=path, where=where)
    if value < minimum or (maximum is not None and value > maximum):
        bounds = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
        raise InputError(f"expected an integer {bounds}, got {value}", path=path, where=where)
    return value


def _pair(value: Any, path: str, where: str) -> tuple[int, int]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise InputError(f"expected a pair [a, b], got {value!r}", path=path, where=where)
    return _int(value[0], path, f"{where}[0]"), _int(value[1], path, f"{where}[1]")


def _list(value: Any, path: str, where: str) -> list[Any]:
    """An optional list field: absent or null is empty; anything else but a list is refused."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InputError(f"expected a list, got {value!r}"[:120], path=path, where=where)
    return value


def parse_dump(data: Any, path: str) -> PlacementProblem:
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object at top level, got {type(data).__name__}", path=path)
    version = data.get("version", 1)
    if version != 1:
        raise InputError(f"unsupported dump version {version!r} (only 1 is known)", path=path, where="version")
    for key in ("ranges", "requests"):
        if key not in data:
            raise InputError(f"missing field {key!r}", path=path, where=key)
    if not isinstance(data["ranges"], list):
        raise InputError(f"expected a list, got {data['ranges']!r}", path=path, where="ranges")
    ranges = tuple(_pair(r, path, f"ranges[{k}]") for k, r in enumerate(data["ranges"]))
    for k, (start, end) in enumerate(ranges):
        if start >= end:
            raise InputError(f"empty or reversed range [{start}, {end})", path=path, where=f"ranges[{k}]")
    if any(a[1] > b[0] for a, b in itertools.pairwise(ranges)):
        raise InputError(f"ranges must be sorted and disjoint, got {list(ranges)}", path=path, where="ranges")
    if not isinstance(data["requests"], list):
        raise InputError(f"expected a list, got {type(data['requests']).__name__}", path=path, where="requests")
    requests = tuple(_request(r, path, f"requests[{i}]") for i, r in enumerate(data["requests"]))
    fixed = tuple(_fixed(f, path, f"fixed[{k}]") for k, f in enumerate(_list(data.get("fixed"), path, "fixed")))
    host = data.get("host_scratch_range", HOST_SCRATCH)
    host_range = None if host is None else _pair(host, path, "host_scratch_range")
    tile = data.get("tile")
    problem_args: dict[str, Any] = dict(
        ranges=ranges,
        requests=requests,
        fixed=fixed,
        interleaved_offset=_int(data.get("interleaved_offset", 0), path, "interleaved_offset"),
        region_boundary=_int(data.get("region_boundary", REGION_BOUNDARY), path, "region_boundary"),
        region0_element=_int(data.get("region0_element_bytes", REGION0_ELEMENT), path, "region0_element_bytes",
                             minimum=1),
        region1_element=_int(data.get("region1_element_bytes", REGION1_ELEMENT), path, "region1_element_bytes",
                             minimum=1),
        host_scratch=host_range,
        name=path,
        tile=_int(tile, path, "tile") if tile is not None else None,
        source_format="ipu",
    )
    return PlacementProblem(**problem_args)


def _request(r: Any, path: str, where: str) -> Request:
    if not isinstance(r, dict):
        raise InputError(f"expected an object, got {r!r}", path=path, where=where)
    for key in ("bytes", "alignment", "class", "lifetime"):
        if key not in r:
            raise InputError(f"missing field {key!r}", path=path, where=where)
    klass = _CLASSES.get(r["class"]) if isinstance(r["class"], str) else None
    if klass is None:
        raise InputError(f"unknown memory class {r['class']!r} (known: Ipu21Standard, Ipu21Interleaved)",
                         path=path, where=f"{where}.class")
    life = r["lifetime"]
    if not isinstance(life, dict) or "first" not in life or "last" not in life:
        raise InputError(f"expected {{first, last}}, got {life!r}", path=path, where=f"{where}.lifetime")
    first = _int(life["first"], path, f"{where}.lifetime.first", maximum=END_OF_PROGRAM)
    last = _int(life["last"], path, f"{where}.lifetime.last", maximum=END_OF_PROGRAM)
    if first > last:
        raise InputError(f"first {first} is after last {last}", path=path, where=f"{where}.lifetime")
    alignment = _int(r["alignment"], path, f"{where}.alignment", minimum=1)
    if alignment & (alignment - 1):
        raise InputError(f"alignment must be a power of two, got {alignment}", path=path, where=f"{where}.alignment")
    aliases = tuple(_pair(a, path, f"{where}.assignments[{k}]") for k, a in enumerate(
        _list(r.get("assignments"), path, f"{where}.assignments")))
    # root ids are opaque 64-bit handles
    conflicts_raw = _list(r.get("conflicts"), path, f"{where}.conflicts")
    conflicts = tuple(_int(c, path, f"{where}.conflicts[{k}]", maximum=2**63 - 1) for k, c in enumerate(conflicts_raw))
    stride = r.get("region1_stride")
    return Request(
        bytes=_int(r["bytes"], path, f"{where}.bytes", minimum=1),
        alignment=alignment,
        first=first,
        last=last,
        klass=klass,
        aliases=aliases,
        conflicts=conflicts,
        region1_stride=None if stride is None else _int(stride, path, f"{where}.region1_stride", minimum=1),
        name=where,
    )


def _fixed(f: Any, path: str, where: str) -> FixedAllocation:
    if not isinstance(f, dict) or "start" not in f or "end" not in f:
        raise InputError(f"expected {{start, end, first, last, root}}, got {f!r}", path=path, where=where)
    start, end = _int(f["start"], path, f"{where}.start"), _int(f["end"], path, f"{where}.end")
    if start >= end:
        raise InputError(f"empty or reversed range [{start}, {end})", path=path, where=where)
    first = _int(f.get("first", 0), path, f"{where}.first", maximum=END_OF_PROGRAM)
    last = _int(f.get("last", END_OF_PROGRAM), path, f"{where}.last", maximum=END_OF_PROGRAM)
    if first > last:
        raise InputError(f"first {first} is after last {last}", path=path, where=where)
    root = f.get("root")
    return FixedAllocation(start, end, first, last, None if root is None else _int(root, path, f"{where}.root"),
                           name=where)


# ------------------------------------------------------------------------------------------------ MiniMalloc
_CAPACITY_IN_NAME = re.compile(r"\.(\d+)\.csv$")
_MM_COLUMNS = ("id", "lower", "upper", "size")


def capacity_from_name(path: str) -> int | None:
    m = _CAPACITY_IN_NAME.search(Path(path).name)
    if m is None:
        return None
    # the same check and limit as --capacity: a name is an input like any other
    return size_option(m.group(1)[:40], "capacity (from the file name)", maximum=MAX_ADDRESS, path=path)


def parse_minimalloc_csv(text: str, path: str, *, capacity: int | None = None) -> PlacementProblem:
    if capacity is None:
        capacity = capacity_from_name(path)
        if capacity is None:
            raise InputError("no capacity: give --capacity N or name the file like NAME.<capacity>.csv", path=path)
    if capacity <= 0:
        raise InputError(f"capacity must be positive, got {capacity}", path=path, where="capacity")
    reader = csv.reader(io.StringIO(text))
    try:
        rows = [row for row in reader if row and any(cell.strip() for cell in row)]
    except csv.Error as exc:  # a lone carriage return, a field past the csv module's size limit
        raise InputError(f"not a CSV file the reader accepts ({exc})", path=path,
                         where=f"line {reader.line_num}") from None
    if not rows:
        raise InputError("empty file: expected a header id,lower,upper,size", path=path)
    header = [h.strip() for h in rows[0]]
    missing = [c for c in _MM_COLUMNS if c not in header]
    if missing:
        raise InputError(f"missing column(s) {', '.join(missing)} in header {','.join(header)}", path=path,
                         where="line 1")
    unknown = [c for c in header if c not in (*_MM_COLUMNS, "alignment", "offset")]
    if unknown:
        # gaps and the like would loosen the problem; ignoring them would make "infeasible" unsound
        raise InputError(f"unsupported column(s) {', '.join(unknown)}", path=path, where="line 1")
    if len(set(header)) != len(header):
        raise InputError(f"a column appears twice in header {','.join(header)}", path=path, where="line 1")
    if len(rows) == 1:
        raise InputError("no buffers: the file has a header and no rows", path=path, where="line 2")
    col = {name: header.index(name) for name in header}
    requests: list[Request] = []
    ids = []
    seen: dict[str, int] = {}
    for lineno, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise InputError(f"expected {len(header)} fields, got {len(row)}: {','.join(row)}", path=path,
                             where=f"line {lineno}")

        def num(name: str, row: list[str] = row, lineno: int = lineno) -> int:
            cell = row[col[name]].strip()
            if len(cell) > 40:
                raise InputError(f"{name} {cell[:40]!r}… is far too long for a number", path=path,
                                 where=f"line {lineno}")
            try:
                value = int(cell)
            except ValueError:
                raise InputError(f"{name} must be an integer, got {cell!r}", path=path,
                                 where=f"line {lineno}") from None
            if abs(value) > MAX_ADDRESS:
                raise InputError(f"{name} must be at most {MAX_ADDRESS:,} (a 32-bit tile), got {value:,}", path=path,
                                 where=f"line {lineno}")
            return value

        bid = row[col["id"]].strip()
        if bid in seen:
            raise InputError(f"id {bid!r} already on line {seen[bid]}", path=path, where=f"line {lineno}")
        seen[bid] = lineno
        lower, upper, size = num("lower"), num("upper"), num("size")
        alignment = num("alignment") if "alignment" in col else 1
        if lower < 0 or upper <= lower:
            raise InputError(f"lifetime [lower, upper) must be non-empty, got [{lower}, {upper})", path=path,
                             where=f"line {lineno} (id {bid})")
        if size <= 0:
            raise InputError(f"size must be positive, got {size}", path=path, where=f"line {lineno} (id {bid})")
        if alignment <= 0 or alignment & (alignment - 1):
            raise InputError(f"alignment must be a power of two, got {alignment}", path=path,
                             where=f"line {lineno} (id {bid})")
        ids.append(bid)
        requests.append(Request(bytes=size, alignment=alignment, first=lower, last=upper - 1,
                                aliases=((len(requests), 0),), name=f"{path}: line {lineno} (id {bid})"))
    return PlacementProblem(
        ranges=((0, capacity),),
        requests=tuple(requests),
        region_boundary=None,
        host_scratch=None,
        name=path,
        source_format="minimalloc",
        extra={"ids": ids, "has_alignment": "alignment" in col},
    )


# ---------------------------------------------------------------------------------------------------- writers
class PlacedDoc(TypedDict):
    """One request placed: its address and end; a MiniMalloc buffer's ``id``, or a dump's region and aliases."""

    request: int
    address: int
    end: int
    id: NotRequired[str]
    region: NotRequired[int]
    assignments: NotRequired[list[list[int]]]


class SolutionDoc(PlacementResultDoc):
    """``placer place -o X.json``: the problem's name, the outcome and (placed) every request's address."""

    problem: str
    placements: NotRequired[list[PlacedDoc]]


class _Placements(TypedDict, total=False):
    placements: list[PlacedDoc]


def solution_json(problem: PlacementProblem, result: PlacementResult, *, placements: bool = True) -> SolutionDoc:
    """The JSON written by ``placer place -o X.json``: status, proof or placement, per request and alias
    (``placements=False``: the status alone)."""
    placed: _Placements = {}
    if result.addresses is not None and placements:
        ids = problem.extra.get("ids")
        rows = []
        for i, address in enumerate(result.addresses):
            span = problem.span_bytes(i, address)
            entry: PlacedDoc = {"request": i, "address": address, "end": address + span}
            if ids is not None:
                entry["id"] = ids[i]
            else:
                entry["region"] = problem.region_of(address)
                entry["assignments"] = [[root, a] for root, a in problem.alias_addresses(i, address)]
            rows.append(entry)
        placed["placements"] = rows
    return {"problem": problem.name, **result.to_json(), **placed}


def minimalloc_csv(problem: PlacementProblem, addresses: list[int] | tuple[int, ...]) -> str:
    """MiniMalloc's CSV with an ``offset`` column (offsets relative to the first range's start)."""
    ids = problem.extra.get("ids") or [str(i) for i in range(problem.n)]
    has_alignment = problem.extra.get("has_alignment", False)
    base = problem.ranges[0][0] if problem.ranges else 0
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "lower", "upper", "size", *(["alignment"] if has_alignment else []), "offset"])
    for i, r in enumerate(problem.requests):
        upper = r.last + 1
        row = [ids[i], r.first, upper, r.bytes, *([r.alignment] if has_alignment else []), addresses[i] - base]
        w.writerow(row)
    return buf.getvalue()


def write_solution(path: str | Path, problem: PlacementProblem, result: Any) -> None:
    p = Path(path)
    if p.suffix.lower() == ".csv":
        if result.addresses is None:
            raise InputError("no placement to write as CSV (status is not placed); use a .json output", path=str(p))
        atomic_write_text(p, minimalloc_csv(problem, result.addresses))
    else:
        write_json(p, solution_json(problem, result), indent=2)
