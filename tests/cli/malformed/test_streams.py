"""The process's surroundings (docs/robustness.md, "Pipes, standard streams and the environment" and "Signals"):
a signal at any moment of start-up, a reader that leaves the pipe, a closed or full standard output, the C
locale. Each ends with its documented exit code and at most one line, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]
DEMO = ROOT / "examples" / "relay-demo.json"
PLACER = f"{sys.executable} -m placer.cli"
ENV = {**os.environ, "PLACER_PROGRESS_SECONDS": "3600"}


def _shell(command: str, cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env={**ENV, **env}, check=False)


def _catches_sigterm(pid: int) -> bool:
    """Whether the process has installed a SIGTERM handler (Python does not by default; placer's start-up does,
    as its first import): read from /proc, so the test does not guess how long the interpreter takes to start."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    mask = next((int(line.split()[1], 16) for line in status.splitlines() if line.startswith("SigCgt:")), 0)
    return bool(mask & (1 << (signal.SIGTERM - 1)))


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc")
@pytest.mark.parametrize("after", [0.0, 0.005, 0.02, 0.05, 0.1, 0.2, 0.4])
def test_a_signal_at_any_moment_after_placer_starts_is_one_line(after: float) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "placer.cli", "inspect", str(DEMO)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV)
    began = time.perf_counter()
    while not _catches_sigterm(proc.pid) and proc.poll() is None and time.perf_counter() - began < 30:
        time.sleep(0.0005)
    time.sleep(after)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err
    assert "KeyboardInterrupt" not in err, err
    # 130: placer's handlers; -2: killed by the signal while the interpreter shuts down (a shell shows 130 too);
    # 0: it had finished before the signal
    assert proc.returncode in (0, 130, -signal.SIGINT), (proc.returncode, err)
    assert len(err.strip().splitlines()) <= 1, err


def test_a_broken_pipe_exits_141_and_the_plan_is_complete(tmp_path: Path) -> None:
    # `true` leaves before placer's first line: every write to the pipe after that fails
    res = _shell(f"set -o pipefail; {PLACER} solve {DEMO} --mode greedy --budget 700 -o plan.json | true", tmp_path)
    assert res.returncode == 141, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    check = _shell(f"{PLACER} validate {DEMO} plan.json --budget 700", tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("redirect", [">&-", "> /dev/full"])
def test_a_closed_or_full_standard_output_is_exit_2(tmp_path: Path, redirect: str) -> None:
    res = _shell(f"{PLACER} inspect {DEMO} {redirect}", tmp_path)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, res.stderr
    assert len(lines) == 1, res.stderr
    assert "standard output" in lines[0], res.stderr


C_LOCALE = {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0", "PYTHONIOENCODING": ""}


def test_the_c_locale_reads_every_bundled_file_as_utf8(tmp_path: Path) -> None:
    """Every file placer ships (models, machines, the run configuration; each holds UTF-8 beyond ASCII), by name
    and by path, read in the C locale; and a command's report, which holds such characters too, printed there."""
    code = ("from pathlib import Path\n"
            "from placer.machine import BUNDLED, load_machine\n"
            "from placer.solver import RunConfig\n"
            "from placer.workloads.spec import BUNDLED_MODELS, load_model\n"
            f"root = Path({str(ROOT)!r})\n"
            "def shapes(spec):\n"
            "    return {k: v for k, v in vars(spec).items() if k != 'path'}\n"
            "for m in BUNDLED_MODELS:\n"
            "    assert shapes(load_model(m)) == shapes(load_model(root / 'models' / f'{m}.toml'))\n"
            "for m in BUNDLED:\n"
            "    assert load_machine(m) == load_machine(root / 'placer' / 'machines' / f'{m}.toml')\n"
            "assert RunConfig.load() == RunConfig.load(root / 'placer' / 'params' / 'default.toml')\n"
            "print(len(BUNDLED_MODELS) + len(BUNDLED) + 1, 'files')\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**ENV, **C_LOCALE}, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.strip() == "5 files", res.stdout + res.stderr
    res = _shell(f"{PLACER} inspect {DEMO} --machine {ROOT / 'placer' / 'machines' / 'mk1.toml'}", tmp_path,
                 **C_LOCALE)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    assert "4×4" in res.stdout
    assert "Σ" in res.stdout# the report's own characters, written in the C locale


@pytest.mark.slow
def test_the_c_locale_generates_and_inspects_a_program(tmp_path: Path) -> None:
    """The whole round in the C locale: a bundled model generated to a capture (38 MiB of gzip), then inspected."""
    res = _shell(f"{PLACER} generate siglip-so400m --batch 1 -o o.json.gz && {PLACER} inspect o.json.gz "
                 "--machine ipu21", tmp_path, **C_LOCALE)
    assert res.returncode in (0, 4), res.stderr
    assert "Traceback" not in res.stderr, res.stderr  # 4: it does not fit 80 KiB
