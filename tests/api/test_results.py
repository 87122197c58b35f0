"""The API composes the stages and returns frozen results: no field filled on first use, JSON typed where it is
built, and every command's work reachable as one API call (place of several files, the report page)."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

import placer
from placer import api
from placer.errors import ExitCode

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "examples" / "relay-demo.json"
FIXTURES = ROOT / "tests" / "fixtures" / "placement"


def test_api_holds_no_untyped_documents() -> None:
    text = (ROOT / "placer" / "api.py").read_text()
    assert not re.search(r"dict\[str, Any\]|\bAny\b", text)
    assert not re.search(r"^(@dataclass|class )", text, re.M)  # the results live in placer/results.py


def test_a_selection_result_is_complete_when_returned() -> None:
    result = placer.solve(DEMO, budget="700", mode="greedy")
    assert result.summary is not None
    assert result.programs is None
    assert not result.interrupted
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.summary = None  # type: ignore[misc]
    doc = result.to_json()
    assert doc["summary"] is result.summary
    assert list(doc)[-1] == "time"
    assert result.plan_json()["summary"] is result.summary


def test_place_many_goes_through_the_api() -> None:
    files = [FIXTURES / "aligned.16.csv", FIXTURES / "tiny_dump.json"]
    result = placer.place_many(files)
    assert result.exit_code is ExitCode.OK
    docs = result.to_json()
    assert [d["file"] for d in docs] == [str(f) for f in files]
    assert all(d["verified"] for d in docs)
    assert [line.split(":")[0] for line in result.lines()] == [str(f) for f in files]
    one = placer.place(files[1], allocator=True)
    assert one.verified
    assert one.allocator
    assert one.to_json(placements=False).keys() < one.to_json().keys()


def test_write_capture_returns_the_size(tmp_path: Path) -> None:
    out = tmp_path / "demo.json"
    assert placer.write_capture(placer.read_capture(DEMO), out) == out.stat().st_size


@pytest.mark.skipif(importlib.util.find_spec("plotly") is None or importlib.util.find_spec("matplotlib") is None,
                    reason="needs the [report] extra")
def test_report_goes_through_the_api(tmp_path: Path) -> None:
    result = api.report(DEMO, output=tmp_path / "r.html", png=tmp_path / "png", budget=640)
    assert result.size == (tmp_path / "r.html").stat().st_size
    assert result.figures >= 4
    assert {p.name for p in result.pngs} >= {"heatmap.png", "sram.png"}
    assert all(p.exists() for p in result.pngs)
    assert result.lines()[0].startswith(f"{tmp_path / 'r.html'}: ")
    assert result.to_json()["figures"] == result.figures
