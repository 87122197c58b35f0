"""The capture reader -- the compiled scanner (placer.capture.scan) -- must agree exactly with the orjson path, or
decline (return None) so that the orjson path names the error."""

from __future__ import annotations

import gzip
import itertools
import json
import random
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture import read_capture, scan
from placer.capture.io import _SCAN_LIMITS, _read_fast, capture_from_json
from placer.capture.model import Capture
from placer.errors import InputError
from placer.fileio import read_bytes, read_json

FIXTURES = Path(__file__).parents[1] / "fixtures" / "captures"
COLUMNS = ("source", "words", "width", "src_ptr", "src_addr", "dst_ptr", "dst_tile", "dst_addr")

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
# what the strategies draw: (source, its addresses, (tile, address) per destination, words, width) per transfer, and
# a phase's transfers with its label
Transfer = tuple[int, list[int], list[tuple[int, int]], int, str]
PhaseCase = tuple[list[Transfer], str | None]


def _shuffled(d: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    items = list(d.items())
    rng.shuffle(items)
    return dict(items)


def _doc(phases: list[PhaseCase], labels: bool, seed: int) -> dict[str, Any]:
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


def _same_columns(fast: Capture, slow: Capture) -> None:
    assert fast.equals(slow)
    for a, b in zip(fast.phases, slow.phases, strict=True):
        for name in COLUMNS:
            col, ref = getattr(a, name), getattr(b, name)
            assert col.dtype == ref.dtype, name
            assert col.flags.c_contiguous, name
            assert col.flags.writeable, name


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phases=st.lists(phase_st, max_size=4), labels=st.booleans(), seed=st.integers(0, 2**16),
       style=st.integers(0, 4))
def test_the_scanner_matches_the_orjson_path(phases: list[PhaseCase], labels: bool, seed: int, style: int) -> None:
    doc = _doc(phases, labels, seed)
    raw = _dump(doc, style)
    slow = capture_from_json(orjson.loads(raw))
    assert scan.scan_bytes(raw, _SCAN_LIMITS) is not None  # every valid layout here is one the scanner reads
    fast = _read_fast(raw, "<capture>")
    assert fast is not None
    _same_columns(fast, slow)


def _outcome(path: Path, read: Callable[[Path], Capture]) -> Capture | str:
    try:
        return read(path)
    except InputError as exc:
        return str(exc)


def _slow_read(path: Path) -> Capture:
    return capture_from_json(read_json(path), str(path))


def _same(a: Capture | str, b: Capture | str) -> bool:
    return a == b if isinstance(a, str) or isinstance(b, str) else a.equals(b)


def _reads_as_before(path: Path, *, accepted: bool = False) -> None:
    """read_capture (the scanner, then orjson where it declines) gives what the orjson path alone gives: the same
    capture or message. With ``accepted``, a valid capture must also be one the scanner reads itself (declining it
    would be correct but slow, and invisible in the outcome)."""
    slow = _outcome(path, _slow_read)
    got = _outcome(path, read_capture)
    if accepted and not isinstance(slow, str):
        assert _read_fast(read_bytes(path), str(path)) is not None
    assert _same(got, slow), (got if isinstance(got, str) else "a capture", slow)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.name)
def test_fixtures_read_as_before(path: Path) -> None:
    _reads_as_before(path, accepted=True)


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.json")), ids=lambda p: p.name)
def test_gzipped_fixtures_read_as_before(path: Path, tmp_path: Path) -> None:
    gz = tmp_path / (path.name + ".gz")
    gz.write_bytes(gzip.compress(path.read_bytes()))
    _reads_as_before(gz, accepted=True)


# corruptions the scanner must never accept differently from the orjson path
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
    # whitespace inside a width: an earlier reader once stripped it and read Word32
    (b'"Word32"', b'"Word32 "'), (b'"Paired64"', b'"Paired64\t"'), (b'"Word32"', b'"Word 32"'),
]


@pytest.mark.parametrize(("old", "new"), MUTATIONS)
def test_corruptions_read_as_before(old: bytes, new: bytes, tmp_path: Path) -> None:
    raw = orjson.dumps(read_json(FIXTURES / "tiny.json"))
    assert old in raw
    path = tmp_path / "capture.json"
    path.write_bytes(raw.replace(old, new, 1))
    _reads_as_before(path)  # some are valid but outside the scanner's subset (an unknown key): orjson reads them


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
        _reads_as_before(path)


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
    assert fast is not None
    assert fast.equals(capture_from_json(doc))


# --- pieces, gzip streams, range checks, malformed captures --------------------------------------------------------


def _same_split(a: scan.NativeSplit | None, b: scan.NativeSplit | None) -> None:
    assert a is not None
    assert b is not None
    assert a.doc == b.doc
    assert (a.max_tile, a.bad) == (b.max_tile, b.bad)
    for ca, cb in zip(a.columns, b.columns, strict=True):
        xs: tuple[npt.NDArray[Any], ...] = ca  # the eight columns, each of its own dtype
        ys: tuple[npt.NDArray[Any], ...] = cb
        for x, y in zip(xs, ys, strict=True):
            assert x.dtype == y.dtype
            assert np.array_equal(x, y)


def _pieces(raw: bytes, cuts: list[int]) -> list[bytes]:
    at = sorted({c % (len(raw) + 1) for c in cuts})
    return [raw[a:b] for a, b in itertools.pairwise([0, *at, len(raw)])]


@pytest.mark.parametrize("indent", [False, True])
def test_every_piece_boundary_scans_alike(indent: bool) -> None:
    """A chunk may end anywhere: in a key, a number, whitespace, between two arrays or inside "transfers"."""
    raw = orjson.dumps(read_json(FIXTURES / "tiny.json"), option=orjson.OPT_INDENT_2 if indent else 0)
    whole = scan.scan_bytes(raw, _SCAN_LIMITS)
    for i in range(len(raw) + 1):
        _same_split(scan._scan_pieces(iter([raw[:i], raw[i:]]), _SCAN_LIMITS), whole)
    _same_split(scan._scan_pieces(iter([raw[i : i + 1] for i in range(len(raw))]), _SCAN_LIMITS), whole)
    _same_split(scan._scan_pieces(iter([b"", raw, b""]), _SCAN_LIMITS), whole)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phases=st.lists(phase_st, max_size=4), labels=st.booleans(), seed=st.integers(0, 2**16),
       style=st.integers(0, 4), cuts=st.lists(st.integers(0, 2**20), max_size=40))
def test_random_pieces_scan_alike(phases: list[PhaseCase], labels: bool, seed: int, style: int,
                                  cuts: list[int]) -> None:
    raw = _dump(_doc(phases, labels, seed), style)
    _same_split(scan._scan_pieces(iter(_pieces(raw, cuts)), _SCAN_LIMITS), scan.scan_bytes(raw, _SCAN_LIMITS))


def _gz_variants(raw: bytes) -> dict[str, bytes]:
    z = gzip.compress(raw)
    flipped = bytearray(z)
    flipped[len(z) // 2] ^= 0x10
    crc = bytearray(z)
    crc[-8] ^= 1
    size = bytearray(z)
    size[-1] ^= 1
    half = len(raw) // 2
    return {"plain": z, "level9": gzip.compress(raw, 9), "stored": gzip.compress(raw, 0),
            "members": gzip.compress(raw[:half]) + gzip.compress(raw[half:]),
            "zero-padded": z + b"\0" * 7,
            "padded-members": gzip.compress(raw[:half]) + b"\0\0" + gzip.compress(raw[half:]),
            "garbage-after": z + b"garbage", "magic-after": z + b"\x1f", "truncated": z[:-20], "no-trailer": z[:-8],
            "half": z[: len(z) // 2], "bit-flip": bytes(flipped), "bad-crc": bytes(crc), "bad-size": bytes(size),
            "header-only": z[:10], "empty": b"", "not-gzip": raw, "raw-deflate": zlib.compress(raw)}


@pytest.mark.parametrize("variant", list(_gz_variants(b"x")))
def test_gzip_streams_read_as_before(variant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The streaming reader inflates on a thread while it scans: every gzip oddity gives what read_bytes gives."""
    doc = read_json(FIXTURES / "tiny.json")
    doc["phases"] += [{"phase": k, "transfers": doc["phases"][0]["transfers"] * k} for k in range(1, 16)]
    raw = orjson.dumps(doc)
    # tiny pieces: many hand-overs between the two threads, a piece ending at every kind of place
    monkeypatch.setattr(scan, "_PIECE_IN", 61)
    monkeypatch.setattr(scan, "_PIECE_OUT", 97)
    monkeypatch.setattr(scan, "_IN_FLIGHT", 2)
    data = _gz_variants(raw)[variant]
    for name in ("c.json.gz", "c.json"):  # gzip by name, or by magic bytes
        path = tmp_path / name
        path.write_bytes(data)
        _reads_as_before(path, accepted=True)
        if variant in VALID_GZ and data[:2] == b"\x1f\x8b":  # streamed, not declined
            _same_split(scan.scan_file(path, _SCAN_LIMITS), scan.scan_bytes(raw, _SCAN_LIMITS))


VALID_GZ = ("plain", "level9", "stored", "members", "zero-padded", "padded-members")


# values around every limit the reader enforces (tile count 8): the compiled scanner checks them itself
edge_tile = st.sampled_from([0, 1, 6, 7, 8, 9, 2**20, 2**31, 2**32 + 1, 10**17])
edge_words = st.sampled_from([0, 1, 2, 4147, 4148, 4149, 2**31, 2**32 + 1])
edge_address = st.sampled_from([0, 2, 4, 393216, 2**32 - 4, 2**32 - 8, 2**32 - 4 * 4148, 2**32 - 4 * 4148 + 4,
                                2**32, 2**32 + 4, 2**40, 10**18 - 1])
edge_transfer = st.fixed_dictionaries({
    "source": st.one_of(st.integers(0, 7), edge_tile),
    "source_addresses": st.lists(st.one_of(address, edge_address), min_size=1, max_size=3),
    "destinations": st.lists(st.fixed_dictionaries({"tile": st.one_of(st.integers(0, 7), edge_tile),
                                                    "address": st.one_of(address, edge_address)}),
                             min_size=1, max_size=4),
    "words": st.one_of(st.integers(1, 4148), edge_words),
    "width": st.sampled_from(["Word32", "Paired64"]),
})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(phases=st.lists(st.lists(edge_transfer, max_size=4), min_size=1, max_size=3), indent=st.booleans())
def test_range_limits_read_as_before(phases: list[list[dict[str, Any]]], indent: bool) -> None:
    """A value at or past any limit (tile count, words, 2^32, alignment, address + bytes, own source, a tile
    twice): the scanner declines or agrees, and the message is the orjson path's."""
    doc = {"schema_version": 1, "tile_count": 8,
           "phases": [{"phase": k, "transfers": ts} for k, ts in enumerate(phases)]}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "capture.json"
        path.write_bytes(json.dumps(doc, indent=1 if indent else None).encode())
        _reads_as_before(path, accepted=True)


def test_values_at_the_limits_are_read_fast(tmp_path: Path) -> None:
    """The last valid value of every range: the scanner does not decline it."""
    top = 2**32
    ts = [{"source": 7, "source_addresses": [top - 4 * 4148, 0],
           "destinations": [{"tile": 0, "address": top - 4 * 4148}, {"tile": 6, "address": 0}],
           "words": 4148, "width": "Paired64"},
          {"source": 0, "source_addresses": [top - 4], "destinations": [{"tile": 7, "address": top - 4}], "words": 1,
           "width": "Word32"}]
    path = tmp_path / "capture.json"
    path.write_bytes(orjson.dumps({"schema_version": 1, "tile_count": 8, "phases": [{"phase": 0, "transfers": ts}]}))
    _reads_as_before(path, accepted=True)


def _malformed_capture_cases() -> list[Any]:
    from tests.cli.malformed.cases import CASES

    return [c for c in CASES if c.argv == "inspect {f}"]


@pytest.mark.parametrize("case", _malformed_capture_cases(), ids=lambda c: c.id)
def test_malformed_cases_read_as_before(case: Any, tmp_path: Path) -> None:
    """The malformed capture cases of tests/cli/malformed, in-process through the scanner."""
    demo = Path(__file__).parents[2] / "examples" / "relay-demo.json"
    path = tmp_path / case.name
    if case.text is not None:
        path.write_text(case.text)
    elif isinstance(case.data, bytes):
        path.write_bytes(case.data)
    elif getattr(case.data, "capture", False):
        path.write_bytes(json.dumps(case.data(read_json(demo))).encode())  # json: integers beyond 64 bits
    else:
        path.write_bytes(case.data(demo.read_bytes()))
    _reads_as_before(path)
