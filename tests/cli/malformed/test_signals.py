"""SIGINT and SIGTERM during a CP-SAT solve of the small demo: exit 130 / 143, one line saying so with the status,
the best plan so far written only if it validates, and no temporary file left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest

from placer.capture.io import read_capture
from placer.machine import load_machine
from placer.validation.plan import bind_plan, parse_plan
from placer.validation.validator import validate

ROOT = Path(__file__).parents[3]
DEMO = ROOT / "examples" / "relay-demo.json"


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["INT", "TERM"])
def test_signal_during_cpsat(sig: signal.Signals, code: int, tmp_path: Path) -> None:
    out = tmp_path / "plan.json"
    script = Path(sys.executable).parent / "placer"
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "placer.cli"]
    # a long limit: the search is still running when the signal comes; the progress lines announce the stage
    proc = subprocess.Popen([*argv, "solve", str(DEMO), "--budget", "700", "--time-limit", "120", "-o", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PLACER_PROGRESS_SECONDS": "0"})
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + 120
    for line in proc.stderr:  # wait until CP-SAT runs (the line before its first stage)
        lines.append(line)
        if "cost incumbent candidates" in line or "cp-sat stage" in line or time.monotonic() > deadline:
            break
    time.sleep(0.2)  # into the search, which on the demo lasts about a second in all: a longer wait can miss it
    started = time.monotonic()
    proc.send_signal(sig)
    stdout, err_rest = proc.communicate(timeout=60)
    stopped_in = time.monotonic() - started
    err = "".join(lines) + err_rest
    assert proc.returncode == code, (proc.returncode, err, stdout)
    assert "Traceback" not in err
    # about 0.2 s (the best plan so far validated, then written); generous for a busy machine: a command that
    # ignored the signal would search on to its 120 s limit
    assert stopped_in < 30, f"took {stopped_in:.1f} s to stop"
    last = [line for line in err.splitlines() if line.startswith("interrupted by")]
    assert len(last) == 1, err
    assert sig.name in last[0], err
    assert "cp-sat" in last[0], err
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    if out.exists():  # written only when valid: check it independently
        cap = read_capture(DEMO)
        plan = parse_plan(orjson.loads(out.read_bytes()), str(out))
        bind_plan(plan, cap, str(out))
        assert validate(cap, plan, load_machine()).valid
        assert "written to" in last[0]
    else:
        assert "nothing written" in last[0]


def test_a_signal_inside_a_finaliser_still_ends_the_command() -> None:
    """A signal handled where Python can only print the exception (here a ``__del__``) is raised again at the next
    point where it can end the command: no "Exception ignored" lines, and the command stops."""
    code = ("import signal, time\n"
            "from placer import interrupt\n"
            "interrupt.install()\n"
            "class Finalised:\n"
            "    def __del__(self) -> None:\n"
            "        signal.raise_signal(signal.SIGINT)\n"
            "try:\n"
            "    Finalised()\n"
            "    time.sleep(30)\n"
            "    print('carried on')\n"
            "except interrupt.Interrupted as exc:\n"
            "    print('stopped by', exc.name)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert res.stdout.strip() == "stopped by SIGINT", res.stdout + res.stderr
    assert res.stderr == ""


def test_a_signal_during_an_import_waits_for_its_end() -> None:
    """A signal while a module is being imported (ortools, say, on its first use inside a command) is delivered
    again when the import is over: raised inside a native module's initialisation, the exception crashed the
    interpreter (orjson's, SIGSEGV). The import completes, then the command stops, within milliseconds."""
    code = ("import pathlib, signal, sys, tempfile, time\n"
            "from placer import interrupt\n"
            "interrupt.install()\n"
            "folder = tempfile.mkdtemp()\n"
            "pathlib.Path(folder, 'slow_module.py').write_text(\n"
            "    'import signal, time\\nsignal.raise_signal(signal.SIGINT)\\ntime.sleep(0.1)\\nDONE = True\\n')\n"
            "sys.path.insert(0, folder)\n"
            "began = time.perf_counter()\n"
            "try:\n"
            "    import slow_module\n"
            "    time.sleep(30)\n"
            "    print('carried on')\n"
            "except interrupt.Interrupted as exc:\n"
            "    done = 'imported' if getattr(sys.modules.get('slow_module'), 'DONE', False) else 'mid-import'\n"
            "    print('stopped by', exc.name, done, time.perf_counter() - began)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    words = res.stdout.split()
    assert words[:4] == ["stopped", "by", "SIGINT", "imported"], res.stdout + res.stderr
    assert float(words[4]) < 5.0  # not the 30 s sleep after the import
    assert res.stderr == ""

