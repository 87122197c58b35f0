"""The numpy capture reader must agree exactly with the orjson path, or decline (return None)."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture import read_capture
from placer.capture.fastjson import fast_split
from placer.capture.io import _read_fast, capture_from_json
from placer.capture.model import Capture
from placer.errors import InputError
from placer.fileio import read_json

FIXTURES = Path(__file__).parents[1] / "fixtures" / "captures"

label_text = st.lists(st.sampled_from([*'ab{}[]",:\\ \n', "é", '"transfers":[1]', "\\u0022", "transfers"]),
                      max_size=8).map("".join)
# 32-bit word-aligned addresses (up to the last word that still fits a 4,148-word transfer below 2^32)
address = st.integers(0, 2**30 - 4148).map(lambda a: 4 * a)
transfer = st.tuples(
    st.integers(0, 7),  # source
    st.lists(address, min_size=1, max_size=4),  # source addresses (several: Repeat iterations)
    st.lists(st.tuples(st.integers(0, 7), address), min_size=1, max_size=8, unique_by=lambda d: d[0]),  # fan-out
    st.integers(1, 4148),
    st.sampled_from(["Word32", "Paired64"]),
).filter(lambda tr: all(t != tr[0] for t, _ in tr[2]))  # the reader refuses a tile sending to itself
phase_st = st.tuples(st.lists(transfer, max_size=8), st.one_of(st.none(), label_text))


def _shuffled(d: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    items = list(d.items())
    rng.shuffle(items)
    return dict(items)


def _doc(phases: list, labels: bool, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    out = []
    for pid, (ts, note) in enumerate(phases):
        ph: dict[str, Any] = {"phase": pid * 3, "transfers": [
            _shuffled({"source": s, "source_addresses": sa,
                       "destinations": [_shuffled({"tile": t, "address": a}, rng) for t, a in ds],
                       "words": w, "width": wd}, rng)
            for s, sa, ds, w, wd in ts]}
        if note is not None:
            ph["note"] = note
            ph["list_extra"] = [note, [1, 2]]
        out.append(_shuffled(ph, rng))
    doc: dict[str, Any] = {"schema_version": 1, "tile_count": 8, "phases": out}
    if labels:
        doc["phase_labels"] = {str(i * 3): f"{{[\"label\\ {i}]}}" for i in range(len(phases))}
        doc["compiler"] = {"transfers": "not a list", "x": [1, {"y": "]"}]}
    return _shuffled(doc, rng)


def _dump(doc: dict[str, Any], style: int) -> bytes:
    if style == 0:
        return orjson.dumps(doc)
    if style == 1:
        return json.dumps(doc).encode()  # ", " and ": " separators
    if style == 2:
        return json.dumps(doc, indent=1, ensure_ascii=False).encode()
    if style == 3:
        return json.dumps(doc, indent="\t", separators=(" ,", " : ")).encode()
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2).replace(b"\n", b"\r\n")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phases=st.lists(phase_st, max_size=4), labels=st.booleans(), seed=st.integers(0, 2**16),
       style=st.integers(0, 4))
def test_fast_path_matches_orjson_path(phases: list, labels: bool, seed: int, style: int) -> None:
    doc = _doc(phases, labels, seed)
    raw = _dump(doc, style)
    slow = capture_from_json(orjson.loads(raw))
    assert fast_split(raw) is not None  # every valid layout here is one the fast path understands
    fast = _read_fast(raw, "<capture>")
    assert fast is not None
    assert fast.equals(slow)
    for a, b in zip(fast.phases, slow.phases, strict=True):
        for name in ("source", "words", "width", "src_ptr", "src_addr", "dst_ptr", "dst_tile", "dst_addr"):
            assert getattr(a, name).dtype == getattr(b, name).dtype


def _outcome(path: Path, reader: Any) -> Capture | str:
    try:
        return reader(path)
    except InputError as exc:
        return str(exc)


def _slow_read(path: Path) -> Capture:
    return capture_from_json(read_json(path), str(path))


def _same(a: Capture | str, b: Capture | str) -> bool:
    return a == b if isinstance(a, str) or isinstance(b, str) else a.equals(b)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.name)
def test_fixtures_read_as_before(path: Path) -> None:
    assert _same(_outcome(path, read_capture), _outcome(path, _slow_read))


# corruptions the fast path must never accept differently from the orjson path
MUTATIONS = [
    (b'"words":8', b'"words":8.0'), (b'"words":8', b'"words":8e0'), (b'"words":8', b'"words":-8'),
    (b'"words":8', b'"words":08'), (b'"words":8', b'"words":true'), (b'"words":8', b'"words":null'),
    (b'"words":8', b'"words":"8"'), (b'"words":8', b'"words":8,"words":9'), (b'"words":8,', b""),
    (b'"words":8', b'"words":8,"extra":1'), (b'"Word32"', b'"Word16"'), (b'"Word32"', b'"Wo\\u0072d32"'),
    (b'"source_addresses":[327680]', b'"source_addresses":[]'), (b'"tile":1,', b'"tile":1,"tile":2,'),
    (b'"tile":1,', b""), (b'"tile":1', b'"tile":1 2'), (b'"tile":1', b'"ti le":1'), (b"[327680]", b"[327680,]"),
    (b'"address":393216}', b'"address":393216}}'), (b"}]}]", b"}]}"), (b'"source":0', b'"source":00'),
    (b'"source":0', b'"source":123456789012345678901'), (b'"source":0', b'"source":9'),
    (b'"transfers":[', b'"transfers":[,'), (b'"transfers":[', b'"transfers":{'), (b"[{", b"[[{"),
    (b'"phase":0', b'"phase":0.5'), (b'"phase":0', b'"phase":0,"transfers":[]'),
]


@pytest.mark.parametrize(("old", "new"), MUTATIONS)
def test_corruptions_read_as_before(old: bytes, new: bytes, tmp_path: Path) -> None:
    raw = orjson.dumps(read_json(FIXTURES / "tiny.json"))
    assert old in raw
    path = tmp_path / "capture.json"
    path.write_bytes(raw.replace(old, new, 1))
    assert _same(_outcome(path, read_capture), _outcome(path, _slow_read))


@settings(max_examples=150, deadline=None)
@given(pos=st.integers(0, 10**6), byte=st.sampled_from(list(b' -.0159e"\\{}[],:tx')), delete=st.booleans(),
       indent=st.booleans())
def test_byte_fuzz_reads_as_before(pos: int, byte: int, delete: bool, indent: bool) -> None:
    raw = orjson.dumps(read_json(FIXTURES / "tiny.json"), option=orjson.OPT_INDENT_2 if indent else 0)
    pos %= len(raw)
    raw = raw[:pos] + (b"" if delete else bytes([byte])) + raw[pos + 1 :]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.json"
        path.write_bytes(raw)
        assert _same(_outcome(path, read_capture), _outcome(path, _slow_read))


def test_large_phase_spans_several_chunks() -> None:
    rng = random.Random(1)
    sources = [rng.randrange(64) for _ in range(40_000)]
    ts = [{"source": s, "source_addresses": [4 * rng.randrange(2**18)],
           "destinations": [{"tile": t, "address": 4 * rng.randrange(2**18)}
                            for t in rng.sample([t for t in range(64) if t != s], rng.randrange(1, 30))],
           "words": 8, "width": "Word32"}
          for s in sources]  # ~9 MB: several 2 MB chunks, cut between transfers
    doc = {"schema_version": 1, "tile_count": 64, "phases": [{"phase": 0, "transfers": ts},
                                                            {"phase": 1, "transfers": ts[:3]}]}
    raw = orjson.dumps(doc)
    fast = _read_fast(raw, "<capture>")
    assert fast is not None and fast.equals(capture_from_json(doc))
