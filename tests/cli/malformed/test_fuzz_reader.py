"""Generated captures, valid and mutated, fed to the capture reader: a Capture or one InputError, never anything
else (no traceback, no silent wrap-around). The ``nightly`` profile runs 10,000 examples per property."""

from __future__ import annotations

import gzip
import math
import tempfile
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.io import capture_from_json, read_capture
from placer.capture.model import Capture
from placer.errors import InputError
from placer.machine import _machine_from_dict
from placer.solver import SolverParams

TILES = 8


def _examples(ci: int) -> int:
    """``ci`` examples, unless the loaded profile asks for more (``--hypothesis-profile=nightly``: 10,000)."""
    loaded = settings.default
    return max(ci, loaded.max_examples) if loaded is not None and loaded.max_examples > 100 else ci
word_address = st.integers(0, 2**20).map(lambda a: 4 * a)


@st.composite
def transfers(draw: st.DrawFn) -> dict[str, Any]:
    source = draw(st.integers(0, TILES - 1))
    # never its own source: a tile does not exchange with itself (the reader refuses that)
    tiles = draw(st.lists(st.integers(0, TILES - 1).filter(lambda t: t != source), min_size=1, max_size=4,
                          unique=True))
    return {"source": source, "source_addresses": draw(st.lists(word_address, min_size=1, max_size=3)),
            "destinations": [{"tile": t, "address": draw(word_address)} for t in tiles],
            "words": draw(st.integers(1, 4148)), "width": draw(st.sampled_from(["Word32", "Paired64"]))}


@st.composite
def captures(draw: st.DrawFn) -> dict[str, Any]:
    ids = draw(st.lists(st.integers(0, 100), min_size=1, max_size=3, unique=True))
    doc: dict[str, Any] = {"schema_version": 1, "tile_count": TILES,
                           "phases": [{"phase": p, "transfers": draw(st.lists(transfers(), max_size=4))} for p in ids]}
    if draw(st.booleans()):
        doc["placer"] = {"version": 1, "repeat": {"phases": ids[:1], "iterations": draw(st.integers(1, 27))}}
    return doc


# values a hostile or broken producer writes: out of every range, wrong types, the float specials
nasty = st.one_of(
    st.integers(-(2**70), 2**70), st.sampled_from([2**31, 2**32, 2**63, 2**64, -1, -(2**31) - 1, 0]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5), st.none(), st.booleans(),
    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _mutate(doc: Any, path: tuple[Any, ...], value: Any, delete: bool) -> Any:
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if delete:
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return doc


def _read(raw: bytes, suffix: str) -> Capture | None:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / f"c{suffix}"
        f.write_bytes(gzip.compress(raw) if suffix.endswith(".gz") else raw)
        try:
            return read_capture(f)
        except InputError as exc:
            assert "\n" not in str(exc)
            assert str(f) in str(exc)  # one line naming the file
            return None


def _dump(doc: Any) -> bytes:
    try:
        return orjson.dumps(doc)
    except orjson.JSONEncodeError:  # NaN, 2**70: written as text the way a careless producer would
        import json

        return json.dumps(doc).encode()


def _sane(cap: Capture) -> None:
    """What an accepted capture guarantees downstream: every number in range, nothing wrapped."""
    for p in cap.phases:
        assert 0 <= p.phase < 2**31
        if p.n:
            assert p.source.min() >= 0
            assert p.source.max() < cap.tile_count
            assert p.words.min() >= 1
            assert p.words.max() <= 4148
            assert p.dst_tile.min() >= 0
            assert p.dst_tile.max() < cap.tile_count
            assert not (p.dst_tile == p.source[p.dst_transfer()]).any()
            assert p.dst_addr.min() >= 0
            assert p.dst_addr.max() < 2**32
            assert (p.dst_addr % 4 == 0).all()
            assert p.src_addr.min() >= 0
            assert p.src_addr.max() < 2**32
            assert (p.src_addr % 4 == 0).all()
    if cap.repeat is not None:
        assert 1 <= cap.repeat.iterations <= 2**20


@settings(max_examples=_examples(60), deadline=None)
@given(doc=captures(), suffix=st.sampled_from([".json", ".json.gz"]))
def test_valid_captures_are_read(doc: dict[str, Any], suffix: str) -> None:
    cap = _read(_dump(doc), suffix)
    assert cap is not None
    _sane(cap)
    assert cap.equals(capture_from_json(doc))


@settings(max_examples=_examples(150), deadline=None)
@given(doc=captures(), data=st.data(), suffix=st.sampled_from([".json", ".json.gz"]))
def test_mutated_captures_never_escape(doc: dict[str, Any], data: st.DataObject, suffix: str) -> None:
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        delete = bool(path) and data.draw(st.booleans())
        doc = _mutate(doc, path, data.draw(nasty), delete)
    cap = _read(_dump(doc), suffix)
    if cap is not None:
        _sane(cap)


@settings(max_examples=_examples(150), deadline=None)
@given(doc=captures(), data=st.data(), suffix=st.sampled_from([".json", ".json.gz"]))
def test_corrupted_bytes_never_escape(doc: dict[str, Any], data: st.DataObject, suffix: str) -> None:
    raw = bytearray(_dump(doc))
    if suffix.endswith(".gz"):
        raw = bytearray(gzip.compress(bytes(raw)))
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["flip", "truncate", "insert"]))
        at = data.draw(st.integers(0, max(0, len(raw) - 1)))
        if action == "flip" and raw:
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "truncate":
            del raw[at:]
        else:
            raw[at:at] = data.draw(st.sampled_from([b"-", b"9" * 20, b".5", b"e9", b"\"", b"{", b"]", b",", b"\x00"]))
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / f"c{suffix}"
        f.write_bytes(bytes(raw))
        try:
            _sane(read_capture(f))
        except InputError as exc:
            assert "\n" not in str(exc)


@settings(max_examples=_examples(100), deadline=None)
@given(data=st.data())
def test_mutated_machine_files_never_escape(data: st.DataObject) -> None:

    from placer.machine import BUNDLED  # noqa: F401 - the bundled file is the starting point

    doc = tomllib.loads(resources.files("placer.machines").joinpath("ipu21.toml").read_text())
    path = data.draw(st.sampled_from([p for p in _paths(doc) if p]))
    doc = _mutate(doc, path, data.draw(nasty), data.draw(st.booleans()))
    try:
        m = _machine_from_dict(doc, "m.toml")
    except InputError as exc:
        assert "m.toml" in str(exc)
        assert "\n" not in str(exc)
        return
    assert m.tiles >= 2
    assert m.exchange.bytes_per_cycle >= 1
    assert m.budget.table_bytes >= 1
    assert m.exchange.max_transfer_words >= 1
    assert math.isfinite(m.clock_hz)
    assert m.clock_hz > 0


@settings(max_examples=_examples(100), deadline=None)
@given(key=st.sampled_from(["time_limit", "workers", "seed", "relative_gap", "log", "deterministic",
                            "work_per_second", "bogus"]), value=nasty)
def test_params_files_never_escape(key: str, value: Any) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "p.toml"
        f.write_text(f"{key} = {_toml(value)}\n")
        try:
            p = SolverParams.from_toml(f)
        except InputError as exc:
            assert "\n" not in str(exc)
            return
    assert 1 <= p.workers <= 256
    assert 0 <= p.seed < 2**31
    assert p.time_limit > 0
    assert math.isfinite(p.time_limit)
    assert 0 <= p.relative_gap <= 1


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {math.inf: "inf", -math.inf: "-inf"}.get(value, "nan" if math.isnan(value) else repr(value))
    if value is None:
        return '""'
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{orjson.dumps(k).decode()} = {v}" for k, v in value.items()) + " }"
    return str(value).replace("'", '"') if not isinstance(value, list) else "[" + ", ".join(map(str, value)) + "]"
