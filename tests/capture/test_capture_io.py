from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture import read_capture, write_capture
from placer.capture.io import capture_from_json, capture_to_json
from placer.capture.model import Allocations, PanelHint, Phase, Repeat
from placer.errors import InputError
from placer.fileio import read_json

FIXTURES = Path(__file__).parents[1] / "fixtures" / "captures"

# each malformed capture and a fragment of the one-line error it must produce
MALFORMED = {
    "bad_missing_words.json": "phase 0, transfer 1: missing field 'words'",
    "bad_words_zero.json": "phase 0, transfer 0: field 'words' = 0 is outside 1..4148",
    "bad_words_too_many.json": "phase 0, transfer 1: field 'words' = 4149",
    "bad_tile_out_of_range.json": "phase 0, transfer 1: field 'destinations.tile' = 8 is outside 0..7",
    "bad_source_out_of_range.json": "phase 0, transfer 0: field 'source' = -1",
    "bad_negative_address.json": "phase 0, transfer 1: field 'source_addresses' has address -4 outside 0..2^32-1",
    "bad_unknown_width.json": "phase 0, transfer 0: field 'width' has unknown value 'Word16'",
    "bad_schema_version.json": "schema_version: unsupported schema version 2",
    "bad_missing_phases.json": "phases: missing field",
    "bad_float_words.json": "phase 0, transfer 0: field 'words' must be an integer, got 8.5",
    "bad_empty_destinations.json": "phase 0, transfer 0: field 'destinations' must be a non-empty list",
    "bad_duplicate_phase.json": "duplicate phase id 0",
    "bad_tile_count.json": "tile_count: must be an integer in 1..1,048,576",
    "bad_repeat_unknown_phase.json": "placer.repeat.phases: phase 5 is not a phase of this capture",
    "bad_syntax.json": "invalid JSON at line 3",
}


@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_capture_names_file_field_and_value(name: str, gz: bool, tmp_path: Path) -> None:
    path = FIXTURES / name
    if gz:  # the compiled scanner streams a .gz through its own inflating thread, then declines: same messages
        path = tmp_path / (name + ".gz")
        path.write_bytes(gzip.compress((FIXTURES / name).read_bytes()))
    with pytest.raises(InputError) as info:
        read_capture(path)
    message = str(info.value)
    assert path.name in message
    assert MALFORMED[name] in message
    assert "\n" not in message


def test_missing_file() -> None:
    with pytest.raises(InputError, match="no such file"):
        read_capture(FIXTURES / "nope.json")


def test_reads_reference_layout_and_round_trips_exactly(tmp_path: Path) -> None:
    cap = read_capture(FIXTURES / "tiny.json")
    assert cap.tile_count == 8
    assert cap.phase_ids() == [0]
    p = cap.phases[0]
    assert p.destinations(0) == [(1, 393216), (2, 393216)]
    assert p.source_addresses(1) == [327680, 327712]
    assert p.width.tolist() == [0, 1]
    assert capture_to_json(cap) == read_json(FIXTURES / "tiny.json")
    for name in ("out.json", "out.json.gz"):
        write_capture(cap, tmp_path / name)
        assert read_capture(tmp_path / name).equals(cap)
    assert (tmp_path / "out.json.gz").read_bytes()[:2] == b"\x1f\x8b"


def test_extensions_round_trip(tmp_path: Path) -> None:
    cap = read_capture(FIXTURES / "tiny.json")
    cap.repeat = Repeat((0,), 27)
    cap.allocations = Allocations(np.array([1], np.int32), np.array([0x60000]), np.array([0x61000]),
                                  np.array([0]), np.array([0]), ["act"])
    cap.panels = [PanelHint(0, (1, 2), (0, 16, 32), "x")]
    cap.extra = {"compiler": "ref"}
    write_capture(cap, tmp_path / "ext.json")
    back = read_capture(tmp_path / "ext.json")
    assert back.equals(cap)
    assert back.iterations(0) == 27


def test_no_partial_file_on_failure(tmp_path: Path) -> None:
    cap = read_capture(FIXTURES / "tiny.json")
    target = tmp_path / "out.json"

    bad = capture_to_json(cap)
    bad["phases"][0]["transfers"][0]["source"] = object()  # not serialisable
    from placer.fileio import write_json

    with pytest.raises(TypeError):
        write_json(target, bad)
    assert list(tmp_path.iterdir()) == []


phases = st.lists(
    st.tuples(
        st.integers(0, 7),  # source
        st.lists(st.integers(0, 2**18).map(lambda a: 4 * a), min_size=1, max_size=3),  # source addresses
        st.lists(st.tuples(st.integers(0, 7), st.integers(0, 2**18).map(lambda a: 4 * a)), min_size=1, max_size=4,
                 unique_by=lambda d: d[0]),  # the reader refuses a tile twice in one transfer
        st.integers(1, 4148),
        st.sampled_from(["Word32", "Paired64"]),
    ).filter(lambda tr: all(t != tr[0] for t, _ in tr[2])),  # nor its own source
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(transfers=phases)
def test_round_trip_property(transfers: list[tuple[int, list[int], list[tuple[int, int]], int, str]]) -> None:
    doc = {"schema_version": 1, "tile_count": 8, "phases": [{"phase": 3, "transfers": [
        {"source": s, "source_addresses": sa, "destinations": [{"tile": t, "address": a} for t, a in ds],
         "words": w, "width": wd} for s, sa, ds, w, wd in transfers]}]}
    cap = capture_from_json(doc)
    assert capture_to_json(cap) == doc
    p = cap.phases[0]
    assert p.n == len(transfers)
    if p.n:
        sub = p.take(np.arange(p.n)[::-1])
        assert sub.source.tolist() == p.source.tolist()[::-1]
        assert Phase.concat(3, [p.take(np.arange(p.n))]).equals(p)


alloc_value = st.one_of(st.integers(0, 40), st.integers(-3, 2**70), st.booleans(), st.floats(0, 9), st.none(),
                        st.text(max_size=2))
allocation = st.one_of(
    st.fixed_dictionaries({"tile": st.integers(0, 9), "start": st.integers(0, 99), "end": st.integers(0, 99),
                           "first": st.integers(0, 9), "last": st.integers(0, 9)},
                          optional={"name": st.one_of(st.text(max_size=3), st.integers())}),
    st.dictionaries(st.sampled_from(["tile", "start", "end", "first", "last", "name"]), alloc_value),
    st.lists(st.integers(), max_size=2), st.none(), st.text(max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(raw=st.lists(allocation, max_size=6))
def test_allocations_column_wise_as_the_loop(raw: list[Any]) -> None:
    """The column-wise reading of the allocations gives the loop's result, or declines and the loop names the
    error."""
    from placer.capture import io

    def outcome(fast: bool) -> Allocations | str:
        with pytest.MonkeyPatch.context() as m:
            if not fast:
                m.setattr(io, "_allocations_fast", lambda _raw, _tiles: None)
            try:
                return io._allocations(raw, 8, "c.json")
            except InputError as exc:
                return str(exc)

    fast, loop = outcome(True), outcome(False)
    if isinstance(loop, str):
        assert fast == loop
    else:
        assert isinstance(fast, Allocations)
        assert fast.equals(loop)
        assert [getattr(fast, k).dtype for k in ("tile", "start", "end", "first", "last")] == \
            [getattr(loop, k).dtype for k in ("tile", "start", "end", "first", "last")]
