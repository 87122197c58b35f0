"""Inputs that are small on disk and large in effect, run under ``resource.setrlimit`` caps on address space and
CPU: each must end in a clean exit (2 bad input, 4 no answer within its limits; 0 where the work is legitimate),
with one stderr line, never 134 (abort), a kill by the cap, or a hang. docs/robustness.md lists the limits."""

from __future__ import annotations

import gzip
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builders import random_buffers_csv

ROOT = Path(__file__).parents[3]
DEMO = ROOT / "examples" / "relay-demo.json"
ADDRESS_SPACE = 4 << 30  # well above every legitimate case here, far below what the unbounded readers took
CPU_SECONDS = 120


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))


def _placer(args: list[str], cwd: Path, timeout: float = 150, **env: str) -> tuple[int, list[str], float]:
    """The command's exit code, its stderr lines and its CPU seconds (a busy machine stretches the wall time, not
    the CPU time; the ``timeout`` catches a hang)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    res = subprocess.run([sys.executable, "-m", "placer.cli", *args], cwd=cwd, capture_output=True, text=True,
                         timeout=timeout, preexec_fn=_limits,
                         env={**os.environ, "PLACER_PROGRESS_SECONDS": "3600", **env}, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert "Traceback" not in res.stderr, res.stderr
    return res.returncode, lines, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def test_gzip_bomb_stops_at_the_inflation_limit(tmp_path: Path) -> None:
    with gzip.open(tmp_path / "bomb.json.gz", "wb", compresslevel=9) as f:
        f.write(b'{"schema_version": 1, "tile_count": 4, "phases": [')
        for _ in range(256):
            f.write(b" " * (1 << 20))
        f.write(b"]}")
    code, lines, _ = _placer(["inspect", "bomb.json.gz"], tmp_path)
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert "PLACER_MAX_GZIP_RATIO" in lines[0], lines


@pytest.mark.parametrize("args", [["inspect", "/dev/zero"], ["inspect", "/dev/urandom"],
                                  ["inspect", "cap.json", "--machine", "/dev/zero"],
                                  ["solve", "cap.json", "--params", "/dev/zero"]])
def test_devices_are_refused_not_read(tmp_path: Path, args: list[str]) -> None:
    shutil.copy(DEMO, tmp_path / "cap.json")
    code, lines, cpu = _placer(args, tmp_path)
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert "/dev/" in lines[0], lines
    assert "regular file" in lines[0], lines
    assert cpu < 20  # about 0.5 s: refused before a byte is read


def test_large_csv_placement_is_bounded_in_time_and_memory(tmp_path: Path) -> None:
    text, peak = random_buffers_csv()
    (tmp_path / f"big.{peak}.csv").write_text(text)
    code, lines, cpu = _placer(["place", f"big.{peak}.csv", "--time-limit", "4", "--workers", "1"], tmp_path)
    # placed, or out of time / memory ceiling with a reason: never an abort under the cap
    assert code in (0, 4), (code, lines)
    # the limit bounds the command (start-up and the CSV read on top): one worker cannot spend more CPU seconds
    # than the wall-clock limit allows, however busy the machine; one that ignored its limit would
    assert cpu < 4 * 1.1 + 3, cpu


def test_generate_refuses_a_model_too_large_for_memory(tmp_path: Path) -> None:
    src = (ROOT / "models" / "siglip-so400m.toml").read_text(encoding="utf-8")
    (tmp_path / "big.toml").write_text(src.replace("grid = [27, 27]", "grid = [270, 270]"), encoding="utf-8")
    code, lines, cpu = _placer(["generate", "big.toml", "--batch", "1", "-o", "o.json.gz"], tmp_path)
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert "memory" in lines[0], lines
    assert cpu < 20, lines  # refused before lowering
    assert not (tmp_path / "o.json.gz").exists()


def test_sweep_guards_every_generated_workload_before_any_job(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text('budgets = [640]\nmodes = ["greedy"]\n[[workloads]]\nname = "big"\n'
                                     'model = "siglip-so400m"\nbatch = 100000\n')
    code, lines, _ = _placer(["sweep", "s.toml", "-o", "out", "--serial"], tmp_path)
    assert code == 2, lines
    assert "memory" in lines[-1], lines
    assert not list((tmp_path / "out").glob("jobs/*"))


def test_unreachable_ray_cluster_is_an_error_not_a_hang(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    shutil.copy(DEMO, tmp_path / "cap.json")
    # a hang would be waiting, not computing: the timeout is what catches it
    code, lines, cpu = _placer(["schedule", "cap.json", "--ray", "auto"], tmp_path, timeout=60,
                               RAY_ADDRESS="127.0.0.1:1")
    assert code == 2, lines
    assert len(lines) == 1, lines
    assert "127.0.0.1:1" in lines[0], lines
    assert cpu < 30, lines
