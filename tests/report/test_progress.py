"""Progress: plain timestamped lines when stderr is not a terminal, nothing with -q, one protocol for every stage."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from placer import progress

from .report_cli import DEMO, placer

LINE = re.compile(r"^\d\d:\d\d:\d\d \S.*$")


def test_solve_progress_is_plain_timestamped_lines_when_piped(tmp_path: Path) -> None:
    # PLACER_PROGRESS_SECONDS=0: every step leaves its line, however quick, so the format is checked on all of them
    res = placer("solve", DEMO, "--budget", "640", "--time-limit", "60", "-o", tmp_path / "plan.json",
                 env={"PLACER_PROGRESS_SECONDS": "0"})
    assert res.returncode == 0, res.stderr
    err = res.stderr
    assert err.endswith("\n")
    assert "\r" not in err
    assert "\x1b" not in err
    lines = err.splitlines()
    assert all(LINE.match(line) for line in lines), lines
    names = [line.split(" ", 1)[1].split(":", 1)[0] for line in lines]
    for step in ("load relay-demo.json", "scan replica groups", "production rule", "option effects"):
        assert step in names, (step, names)
    # CP-SAT's stages are named and carry objective and bound (a busy machine may leave no time for them: the
    # command's limit includes loading)
    stages = [line for line in lines if re.search(r"cp-sat stage \d/4 \(\w+\): done", line)]
    if "CP-SAT work 0.0 of" not in res.stdout:
        assert stages, lines
    assert all("objective" in line and "bound" in line for line in stages)
    assert "plan written" in res.stdout


def test_quiet_silences_progress(tmp_path: Path) -> None:
    res = placer("solve", DEMO, "--budget", "640", "--mode", "greedy", "-q", "-o", tmp_path / "plan.json",
                 env={"PLACER_PROGRESS_SECONDS": "0"})
    assert res.returncode in (0, 4)
    assert res.stderr == ""  # 4: the production rule does not fit 640 B


def test_short_steps_leave_no_line_by_default() -> None:
    res = placer("validate", DEMO, DEMO)  # malformed plan: the error is the only line
    assert res.returncode == 2, res.stderr
    assert res.stderr.count("\n") == 1, res.stderr


def test_plain_reporter_lines_and_solver_detail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACER_PROGRESS_SECONDS", "0")
    out = io.StringIO()
    with progress.using(progress.plain(out)):
        for _ in progress.track(range(3), "count", unit="items"):
            pass
        with progress.task("solve") as t:
            t.solver(0.1, 120.0, None)
            t.solver(0.2, None, 100.0)
        for k in progress.track(range(10), "stop early"):
            if k == 2:
                break
    lines = out.getvalue().splitlines()
    assert all(LINE.match(x) for x in lines)
    assert out.getvalue().endswith("\n")
    assert lines[0].endswith("count: done in 0.0 s")
    assert lines[1].endswith("solve: done in 0.0 s, objective 120 bound 100 (gap 16.67%)")
    assert lines[2].endswith("stop early: done in 0.0 s")


def test_failed_long_step_says_stopped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLACER_PROGRESS_SECONDS", "0")
    out = io.StringIO()
    try:
        with progress.using(progress.plain(out)), progress.task("doomed"):
            raise ValueError("x")
    except ValueError:
        pass
    assert out.getvalue().split(" ", 1)[1].startswith("doomed: stopped in")


def test_library_use_is_silent(capsys: pytest.CaptureFixture[str]) -> None:
    with progress.task("quiet by default") as t:
        t.advance()
    assert capsys.readouterr().err == ""
