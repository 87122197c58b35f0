"""`placer report`: one self-contained page with every figure, the same figures as PNG, and its numbers."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np
import pytest

from placer.capture import read_capture
from placer.machine import load_machine
from placer.report.data import gather, tile_grid
from placer.report.figures import busy_runs

from .report_cli import DEMO, Built, placer

FIGURES = ("heatmap", "phases", "compare", "schedule", "sram")


def _data(page: str) -> dict[str, Any]:
    found = re.search(r'<script id="placer-data" type="application/json">(.*?)</script>', page, re.S)
    assert found is not None
    data: dict[str, Any] = json.loads(found.group(1).replace("<\\/", "</"))
    return data


def test_page_is_self_contained_with_every_figure(demo_report: Built) -> None:
    page = demo_report.html.read_text()
    assert "4 figures" not in demo_report.stdout
    assert "5 figures" in demo_report.stdout
    # no network: no external script, stylesheet or image; plotly.js embedded exactly once
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=", page)
    assert page.count("Plotly=") + page.count("plotly.js v") >= 1
    assert page.count("<script>") == 2  # plotly.js, then the page's own script
    data = _data(page)
    assert set(data["figures"]) == set(FIGURES)
    for key in FIGURES:
        assert f'id="fig-{key}"' in page, key
        assert data["figures"][key]["data"], key


def test_heatmap_numbers_match_the_plans(demo_report: Built) -> None:
    heat = _data(demo_report.html.read_text())["heatmap"]
    capture = read_capture(DEMO)
    plan = json.loads(demo_report.cpsat.read_text())
    # the summed "after" rows are the plan's own whole-program worst tile, as `placer solve` reported it
    cpsat = heat["plans"][1]  # in the order given: the production rule's, then the CP-SAT run's
    after = np.array(cpsat["after"]).sum(axis=0)
    assert int(after.max()) == plan["summary"]["program"]["worst_table_after"]
    before = np.array(heat["before"]).sum(axis=0)
    assert int(before.max()) == plan["summary"]["program"]["worst_table_before"]
    hosts = {s["tile"] for r in plan["relays"] for s in r["segments"]}
    assert {t for ts in cpsat["hosts"].values() for t in ts} == hosts
    assert len(heat["grid"]["row"]) == capture.tile_count == len(before)


def test_tile_grid_follows_the_machine_geometry() -> None:
    machine = load_machine("ipu21")
    rows, cols, nrows, ncols = tile_grid(machine, machine.tiles)
    assert (nrows, ncols) == (23, 64)
    cells = set(zip(rows.tolist(), cols.tolist(), strict=True))
    assert len(cells) == machine.tiles  # one tile per cell
    # docs/reference.md §1: logical 0 and 1 are a pair two columns apart in row 0; block 1 runs its rows reversed
    assert (rows[0], cols[0], rows[1], cols[1]) == (0, 0, 0, 2)
    assert (rows[46], cols[46]) == (22, 1)


def test_busy_runs_merge_touching_intervals_per_port() -> None:
    port = np.array([1, 0, 0, 0, 1])
    start = np.array([0, 0, 10, 30, 5])
    length = np.array([5, 10, 5, 5, 5])
    p, s, e, b, n = busy_runs(port, start, length, length * 4, merge_gap=0)
    assert p.tolist() == [0, 0, 1]
    assert s.tolist() == [0, 30, 0]
    assert e.tolist() == [15, 35, 10]
    assert b.tolist() == [60, 20, 40]
    assert n.tolist() == [2, 1, 2]
    p, s, e, _, n = busy_runs(port, start, length, length * 4, merge_gap=15)
    assert s.tolist() == [0, 0]
    assert e.tolist() == [35, 10]
    assert n.tolist() == [3, 2]


def test_pngs_written(demo_report: Built) -> None:
    names = sorted(p.name for p in demo_report.png.iterdir())
    assert names == sorted(f"{k}.png" for k in FIGURES)
    for p in demo_report.png.iterdir():
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert p.stat().st_size > 5_000


def test_gather_rejects_three_plans_and_bad_phase(demo_report: Built) -> None:
    from placer.errors import InputError

    capture = read_capture(DEMO)
    with pytest.raises(InputError, match="at most two plans"):
        gather(capture, load_machine("ipu21"), [demo_report.greedy] * 3, None, None)
    res = placer("report", DEMO, demo_report.cpsat, "-o", demo_report.html.parent / "x.html", "--phase", "99")
    assert res.returncode == 2
    assert res.stderr.count("\n") == 1
    assert "--phase" in res.stderr
    assert not (demo_report.html.parent / "x.html").exists()
