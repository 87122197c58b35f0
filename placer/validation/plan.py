"""Reading and checking the structure of a plan file (docs/plan.md), independently of the code that writes it.

Two layers: :func:`parse_plan` checks what can be checked from the plan alone (fields, types, version);
:func:`bind_plan` checks it against the capture it claims to rewrite (phase ids, transfer indices, tile ids)
and parses the appended transfers with the capture reader, so they obey exactly the capture's own format
rules. Every failure is an :class:`InputError` naming the file, the field and the value.
"""

from __future__ import annotations

import builtins
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from placer.capture.io import capture_from_json
from placer.capture.model import Capture, Phase
from placer.errors import InputError
from placer.fileio import read_json

PLAN_VERSION = 1
PLAN_KIND = "placer-plan"
VARIANTS = ("direct-receive", "local-pack")


@dataclass
class Segment:
    start: int
    end: int
    tile: int
    buffer: int
    phase: int

    @property
    def buffer_end(self) -> int:
        return self.buffer + self.end - self.start


@dataclass
class Relay:
    index: int
    phase: int
    group: Any
    variant: str
    replicas: tuple[int, ...]
    bases: tuple[int, ...]
    extent: int
    segments: list[Segment]


@dataclass
class DeltaEntry:
    index: int
    phase: int
    remove: np.ndarray  # int64, sorted unique
    append_raw: list[Any]
    append: Phase | None = None  # filled by bind_plan


@dataclass
class InsertedPhase:
    index: int
    after: int
    phase: int
    label: str
    transfers_raw: list[Any]
    transfers: Phase | None = None  # filled by bind_plan


@dataclass
class Kernel:
    index: int
    after: int
    tile: int
    copies: np.ndarray  # int64 (m, 3): from, to, bytes


@dataclass
class Plan:
    table_bytes: int
    fragments: int
    relays: list[Relay] = field(default_factory=list)
    delta: list[DeltaEntry] = field(default_factory=list)
    inserted: list[InsertedPhase] = field(default_factory=list)
    kernels: list[Kernel] = field(default_factory=list)


def load_plan(path: str | Path, capture: Capture | None = None) -> dict[str, Any]:
    """Read a plan file (``.json`` or ``.json.gz``) and check its structure; with ``capture``, also its
    references."""
    doc: dict[str, Any] = read_json(path)
    plan = parse_plan(doc, str(path))
    if capture is not None:
        bind_plan(plan, capture, str(path))
    return doc


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


class _Fields:
    """Typed access to one JSON object, raising InputError that names the field path and the bad value."""

    def __init__(self, obj: Any, path: str, where: str) -> None:
        if not isinstance(obj, dict):
            raise InputError(f"must be an object, got {_show(obj)}", path=path, where=where or None)
        self.obj, self.path, self.where = obj, path, where

    def _at(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def get(self, name: str, default: Any = ...) -> Any:
        if name not in self.obj:
            if default is ...:
                raise InputError("missing field", path=self.path, where=self._at(name))
            return default
        return self.obj[name]

    def int(self, name: str, *, lo: int | None = 0, hi: int = 2**63 - 1, default: Any = ...) -> int:
        v = self.get(name, default)
        if not _is_int(v) or (lo is not None and v < lo) or v > hi:
            need = "an integer" if lo is None else f"an integer in {lo}..{hi:,}"
            raise InputError(f"must be {need}, got {_show(v)}", path=self.path, where=self._at(name))
        return int(v)

    def list(self, name: str, default: Any = ...) -> list[Any]:
        v = self.get(name, default)
        if not isinstance(v, list):
            raise InputError(f"must be a list, got {_show(v)}", path=self.path, where=self._at(name))
        return v

    def int_list(self, name: str, *, lo: builtins.int = 0,
                 hi: builtins.int = 2**32 - 1) -> builtins.list[builtins.int]:  # int, list: methods here
        # hi (inclusive): transfer indices, tiles and addresses all fit 32 bits unsigned
        v = self.list(name)
        for k, x in enumerate(v):
            if not _is_int(x) or not lo <= x <= hi:
                raise InputError(
                    f"must be an integer in {lo}..{hi:,}, got {_show(x)}",
                    path=self.path,
                    where=f"{self._at(name)}[{k}]",
                )
        return [int(x) for x in v]


def _show(v: Any) -> str:
    s = repr(v)
    return s if len(s) <= 60 else s[:57] + "..."


def parse_plan(doc: Any, path: str = "<plan>") -> Plan:
    top = _Fields(doc, path, "")
    version = top.get("plan_version")
    if version != PLAN_VERSION:
        raise InputError(
            f"unsupported plan_version {_show(version)} (this placer reads {PLAN_VERSION})",
            path=path,
            where="plan_version",
        )
    kind = top.get("kind")
    if kind != PLAN_KIND:
        raise InputError(f"must be {PLAN_KIND!r}, got {_show(kind)}", path=path, where="kind")
    budget = _Fields(top.get("budget"), path, "budget")
    plan = Plan(table_bytes=budget.int("table_bytes", lo=1, hi=2**31 - 1),
                fragments=budget.int("fragments", lo=1, hi=2**31 - 1))
    for i, raw in enumerate(top.list("relays", [])):
        plan.relays.append(_relay(raw, i, path))
    seen: set[int] = set()
    for i, raw in enumerate(top.list("delta", [])):
        f = _Fields(raw, path, f"delta[{i}]")
        pid = f.int("phase", lo=None)
        if pid in seen:
            raise InputError(f"phase {pid} appears twice in the delta", path=path, where=f"delta[{i}].phase")
        seen.add(pid)
        remove = f.int_list("remove") if "remove" in raw else []
        arr = np.array(sorted(set(remove)), np.int64)
        if len(arr) != len(remove):
            raise InputError("lists an index twice", path=path, where=f"delta[{i}].remove")
        plan.delta.append(DeltaEntry(i, pid, arr, f.list("append", [])))
    for i, raw in enumerate(top.list("inserted_phases", [])):
        f = _Fields(raw, path, f"inserted_phases[{i}]")
        label = f.get("label", "")
        plan.inserted.append(
            InsertedPhase(
                i, f.int("after", lo=None), f.int("phase", lo=None), str(label), f.list("transfers")
            )
        )
    for i, raw in enumerate(top.list("kernels", [])):
        f = _Fields(raw, path, f"kernels[{i}]")
        copies = f.list("copies")
        for k, c in enumerate(copies):
            if (
                not isinstance(c, list)
                or len(c) != 3
                or not all(_is_int(x) and x >= 0 for x in c)
                or c[2] < 1
            ):
                raise InputError(
                    f"must be [from_address, to_address, bytes >= 1], got {_show(c)}",
                    path=path,
                    where=f"kernels[{i}].copies[{k}]",
                )
        arr = np.array(copies, np.int64).reshape(-1, 3)
        plan.kernels.append(Kernel(i, f.int("after", lo=None), f.int("tile"), arr))
    return plan


def _relay(raw: Any, i: int, path: str) -> Relay:
    where = f"relays[{i}]"
    f = _Fields(raw, path, where)
    variant = f.get("variant")
    if variant not in VARIANTS:
        raise InputError(
            f"must be one of {', '.join(VARIANTS)}, got {_show(variant)}", path=path, where=f"{where}.variant"
        )
    replicas = f.int_list("replicas")
    if len(replicas) < 2 or any(b <= a for a, b in itertools.pairwise(replicas)):
        raise InputError(
            f"must list at least 2 tiles, sorted and distinct, got {_show(replicas)}",
            path=path,
            where=f"{where}.replicas",
        )
    bases = f.int_list("bases")
    if len(bases) != len(replicas):
        raise InputError(
            f"has {len(bases)} entries for {len(replicas)} replicas", path=path, where=f"{where}.bases"
        )
    extent = f.int("extent", lo=1)
    segments = []
    for k, s in enumerate(f.list("segments")):
        sf = _Fields(s, path, f"{where}.segments[{k}]")
        seg = Segment(
            sf.int("start"), sf.int("end"), sf.int("tile"), sf.int("buffer"), sf.int("phase", lo=None)
        )
        if not seg.start < seg.end <= extent:
            raise InputError(
                f"[start, end) = [{seg.start}, {seg.end}) is not a non-empty range inside the extent "
                f"[0, {extent})",
                path=path,
                where=f"{where}.segments[{k}]",
            )
        segments.append(seg)
    if not segments:
        raise InputError("must not be empty", path=path, where=f"{where}.segments")
    ordered = sorted(segments, key=lambda s: s.start)
    for a, b in itertools.pairwise(ordered):
        if b.start < a.end:
            raise InputError(
                f"segments [{a.start}, {a.end}) and [{b.start}, {b.end}) overlap",
                path=path,
                where=f"{where}.segments",
            )
    return Relay(
        i, f.int("phase", lo=None), raw.get("group"), variant, tuple(replicas), tuple(bases), extent, segments
    )


def _transfers(raw: list[Any], pid: int, capture: Capture, path: str, where: str) -> Phase:
    """Parse plan transfers with the capture reader, re-labelling its errors with the plan's field path."""
    mini = {
        "schema_version": capture.schema_version,
        "tile_count": capture.tile_count,
        "phases": [{"phase": pid, "transfers": raw}],
    }
    try:
        return capture_from_json(mini, path, self_sends=True).phases[0]  # the validator reports those itself
    except InputError as exc:
        prefix = ": ".join(p for p in (exc.path, exc.where) if p)
        msg = str(exc)[len(prefix) + 2 :] if prefix else str(exc)
        inner = (exc.where or "").replace(f"phase {pid}", "").lstrip(", ")
        raise InputError(msg, path=path, where=f"{where}{', ' + inner if inner else ''}") from None


def bind_plan(plan: Plan, capture: Capture, path: str = "<plan>") -> None:
    """Check the plan's references against ``capture`` and parse its transfers (in place)."""
    ids = {p.phase: p for p in capture.phases}
    tiles = capture.tile_count

    def tile_ok(t: int, where: str) -> None:
        if t >= tiles:
            raise InputError(f"tile {t} is outside 0..{tiles - 1}", path=path, where=where)

    inserted_ids: dict[int, int] = {}
    for ins in plan.inserted:
        where = f"inserted_phases[{ins.index}]"
        if ins.after not in ids:
            raise InputError(f"'after' = {ins.after} is not a phase of the capture", path=path, where=where)
        if ins.phase in ids or ins.phase in inserted_ids:
            raise InputError(f"phase id {ins.phase} is already used", path=path, where=f"{where}.phase")
        inserted_ids[ins.phase] = ins.after
        ins.transfers = _transfers(ins.transfers_raw, ins.phase, capture, path, f"{where}.transfers")
    for d in plan.delta:
        where = f"delta[{d.index}]"
        if d.phase not in ids:
            raise InputError(
                f"phase {d.phase} is not a phase of the capture", path=path, where=f"{where}.phase"
            )
        n = ids[d.phase].n
        if len(d.remove) and d.remove[-1] >= n:
            raise InputError(
                f"index {int(d.remove[-1])} is out of range (phase {d.phase} has {n} transfers)",
                path=path,
                where=f"{where}.remove",
            )
        d.append = _transfers(d.append_raw, d.phase, capture, path, f"{where}.append")
    for r in plan.relays:
        where = f"relays[{r.index}]"
        if r.phase not in ids:
            raise InputError(
                f"phase {r.phase} is not a phase of the capture", path=path, where=f"{where}.phase"
            )
        for t in r.replicas:
            tile_ok(t, f"{where}.replicas")
        for k, s in enumerate(r.segments):
            tile_ok(s.tile, f"{where}.segments[{k}].tile")
            if s.phase != r.phase and inserted_ids.get(s.phase) != r.phase:
                raise InputError(
                    f"phase {s.phase} is neither the relay's phase {r.phase} nor a phase inserted after it",
                    path=path,
                    where=f"{where}.segments[{k}].phase",
                )
    for kern in plan.kernels:
        where = f"kernels[{kern.index}]"
        if kern.after not in ids:
            raise InputError(f"'after' = {kern.after} is not a phase of the capture", path=path, where=where)
        tile_ok(kern.tile, f"{where}.tile")
