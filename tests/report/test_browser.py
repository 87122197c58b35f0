"""The report in a real browser: headless Chromium (installed by .ci/run from the system's packages) loads the page,
no console error is raised, and every figure drew the marks it should."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .browser import chromium, selftest
from .report_cli import Built


def test_report_renders_in_chromium(demo_report: Built, tmp_path: Path) -> None:
    if chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is missing: .ci/run installs it")
        pytest.skip("no chromium on this machine (apt-get install chromium)")
    result = selftest(demo_report.html, tmp_path)
    assert result["errors"] == []
    figures = {f["id"]: f for f in result["figures"]}
    assert set(figures) == {f"fig-{k}" for k in ("heatmap", "phases", "compare", "schedule", "sram")}
    for fid, f in figures.items():
        for kind, count in f["expect"].items():
            assert f[kind] == count, (fid, kind, f)
        assert sum(f["expect"].values()) > 0, fid
        assert f["pixels"] > 2_000, (fid, f["pixels"])  # the figure's picture is not blank
    assert figures["fig-schedule"]["canvases"] > 0  # the schedule is drawn with WebGL
