"""Hostile inputs and environments, as a person trying to break placer would try them: every case's command, exit
code, first stderr line that is not a progress line (the error or warning), wall seconds and peak memory (the
largest resident set of the process).

    python benchmarks/bench_hostile.py                 # every case
    python benchmarks/bench_hostile.py --only bomb,place
    python benchmarks/bench_hostile.py --markdown      # the table for a closing note

Each case runs in a fresh temporary directory with its own files (a gzip bomb, a 20,000-buffer MiniMalloc CSV,
model and sweep files, a capture with a huge allocation, ...), under an address-space cap (--memory, default
6 GiB: a case that needs more fails inside its cap rather than taking the machine) and a wall-clock timeout
(--timeout, default 120 s: a case still running then is a hang, killed with its process group). What to expect of
each is in tests/cli/malformed and docs/robustness.md; this program only measures.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the test builders' instances
from tests.builders import random_buffers_csv  # noqa: E402

DEMO = ROOT / "examples" / "relay-demo.json"
PLACER = [sys.executable, "-m", "placer.cli"]


@dataclass
class Case:
    id: str
    command: str  # shell command (placer is $P); files are made in the case's directory
    setup: Callable[[Path], None] = lambda _d: None
    env: dict[str, str] = field(default_factory=dict)
    signal_after: float | None = None  # send SIGINT this many seconds after the start


def _bomb(d: Path) -> None:
    """1 MiB of gzip that inflates to 1 GiB: a capture whose phases list is a gigabyte of blanks."""
    with gzip.open(d / "bomb.json.gz", "wb", compresslevel=9) as f:
        f.write(b'{"schema_version": 1, "tile_count": 4, "phases": [')
        chunk = b" " * (1 << 20)
        for _ in range(1024):
            f.write(chunk)
        f.write(b"]}")


def _plan_bomb(d: Path) -> None:
    shutil.copy(DEMO, d / "cap.json")
    with gzip.open(d / "plan.json.gz", "wb", compresslevel=9) as f:
        f.write(b'{"plan_version": 1, "kind": "placer-plan", "relays": [' + b" " * (600 << 20) + b"]}")


def _csv20k(d: Path) -> None:
    """20,000 buffers, the peak live memory at the capacity: a tight instance no engine solves at once."""
    text, peak = random_buffers_csv()
    (d / f"big.{peak}.csv").write_text(text)


def _big_grid(d: Path) -> None:
    """SigLIP with ten times the patch grid per side: a hundred times the tokens."""
    src = (ROOT / "models" / "siglip-so400m.toml").read_text(encoding="utf-8")
    (d / "big.toml").write_text(src.replace("grid = [27, 27]", "grid = [270, 270]"), encoding="utf-8")


def _sweep(extra: str) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        shutil.copy(DEMO, d / "cap.json")
        (d / "s.toml").write_text(f'budgets = [640]\nmodes = ["greedy"]\n{extra}\n[[workloads]]\nname = "demo"\n'
                                  'capture = "cap.json"\n')
    return make


def _sweep_model(d: Path) -> None:
    (d / "s.toml").write_text('budgets = [640]\nmodes = ["greedy"]\n[[workloads]]\nname = "big"\n'
                              'model = "siglip-so400m"\nbatch = 100000\n')


def _sweep_many(d: Path) -> None:
    """Two thousand jobs from a few lines: one greedy job per budget."""
    shutil.copy(DEMO, d / "cap.json")
    budgets = ", ".join(str(600 + b) for b in range(2000))
    (d / "s.toml").write_text(f'budgets = [{budgets}]\nmodes = ["greedy"]\n[[workloads]]\nname = "demo"\n'
                              'capture = "cap.json"\n')


def _demo(d: Path) -> None:
    shutil.copy(DEMO, d / "cap.json")


def _sweep_huge_budget(d: Path) -> None:
    _sweep("")(d)
    (d / "s.toml").write_text((d / "s.toml").read_text().replace("budgets = [640]", f"budgets = [{2**63 - 1}]"))


def _deep_params(d: Path) -> None:
    _demo(d)
    (d / "deep.toml").write_text("a = " + "[" * 5000 + "]" * 5000)


def _alloc_huge(d: Path) -> None:
    doc = json.loads(DEMO.read_text())
    doc["placer"]["allocations"][0].update(start=2**63, end=2**63 + 16)
    (d / "cap.json").write_text(json.dumps(doc))


def _csv(name: str, text: str) -> Callable[[Path], None]:
    def make(d: Path) -> None:
        (d / name).write_text(text)
    return make


def _file(d: Path) -> None:
    _demo(d)
    (d / "afile").write_text("x")


CASES = [
    Case("bomb-inspect", "$P inspect bomb.json.gz", _bomb),
    Case("bomb-plan-validate", "$P validate cap.json plan.json.gz", _plan_bomb),
    Case("place-20000-6s", "$P place big.*.csv --time-limit 6", _csv20k),
    Case("place-20000-60s", "$P place big.*.csv --time-limit 60", _csv20k),
    Case("devzero-capture", "$P inspect /dev/zero"),
    Case("urandom-capture", "$P inspect /dev/urandom"),
    Case("devzero-machine", "$P inspect cap.json --machine /dev/zero", _demo),
    Case("devzero-params", "$P solve cap.json --params /dev/zero", _demo),
    Case("generate-big-grid", "$P generate big.toml --batch 1 -o o.json.gz", _big_grid),
    Case("sweep-batch-huge", "$P sweep s.toml -o out --serial", _sweep_model),
    Case("ray-unreachable", "$P schedule cap.json --ray auto", _demo, env={"RAY_ADDRESS": "127.0.0.1:1"}),
    Case("out-stdout-pipe", "$P solve cap.json --budget 640 -o /dev/stdout | cat > /dev/null", _demo),
    Case("report-png-file", "$P report cap.json -o r.html --png afile", _file),
    Case("report-png-devnull", "$P report cap.json -o r.html --png /dev/null", _demo),
    Case("report-png-under-file", "$P report cap.json -o r.html --png afile/png", _file),
    Case("report-budget-0", "$P report cap.json -o r.html --budget 0", _demo),
    Case("report-budget-1000GiB", "$P report cap.json -o r.html --budget 1000GiB", _demo),
    Case("report-budget-huge", "$P report cap.json -o r.html --budget 99999999999999999999999", _demo),
    Case("sweep-time-nan", "$P sweep s.toml -o out --serial", _sweep("[solver]\ntime_limit = nan")),
    Case("sweep-time-inf", "$P sweep s.toml -o out --serial", _sweep("[solver]\ntime_limit = inf")),
    Case("sweep-gap-nan", "$P sweep s.toml -o out --serial", _sweep("[solver]\nrelative_gap = nan")),
    Case("sweep-workers-huge", "$P sweep s.toml -o out --serial", _sweep("[solver]\nworkers = 100000")),
    Case("sweep-budget-2^63-1", "$P sweep s.toml -o out --serial", _sweep_huge_budget),
    Case("sweep-seed-2^63-1", "$P sweep s.toml -o out --serial", _sweep(f"seeds = [{2**63 - 1}]")),
    Case("sweep-2000-jobs", "$P sweep s.toml -o out --serial", _sweep_many),
    Case("params-nested-deep", "$P solve cap.json --params deep.toml", _deep_params),
    Case("capture-alloc-2^63", "$P inspect cap.json", _alloc_huge),
    Case("csv-capacity-2^64", "$P place x.18446744073709551616.csv",
         _csv("x.18446744073709551616.csv", "id,lower,upper,size\nb1,0,3,4\n")),
    Case("csv-size-2^61", "$P place x.4096.csv", _csv("x.4096.csv", f"id,lower,upper,size\nb1,0,3,{2**61}\n")),
    Case("sigint-at-30ms", "$P inspect cap.json", _demo, signal_after=0.03),
    Case("sigint-at-60ms", "$P inspect cap.json", _demo, signal_after=0.06),
    Case("sigint-at-150ms", "$P inspect cap.json", _demo, signal_after=0.15),
    Case("broken-pipe", "$P solve cap.json --budget 640 -o o.json | head -1", _demo),
    Case("locale-c", "$P generate siglip-so400m --batch 1 -o o.json.gz", env={"LC_ALL": "C", "LANG": "C",
                                                                             "PYTHONUTF8": "0"}),
    Case("stdout-closed", "$P inspect cap.json >&-", _demo),
    Case("stdout-full", "$P inspect cap.json > /dev/full", _demo),
]


_PROGRESS = re.compile(r"^\d\d:\d\d:\d\d ")  # a progress line in a log: "HH:MM:SS step: ..."


def _verdict(lines: list[str]) -> str:
    """The first stderr line that is not a progress line (the error, the warning), else the first line."""
    return next((x for x in lines if not _PROGRESS.match(x)), lines[0] if lines else "")


def run(case: Case, timeout: float, memory: int) -> dict[str, object]:
    d = Path(tempfile.mkdtemp(prefix=f"hostile-{case.id}-"))
    try:
        case.setup(d)
        placer = " ".join(PLACER)
        cmd = f"set -o pipefail; exec {case.command.replace('$P', placer)}" if "|" not in case.command else \
            f"set -o pipefail; {case.command.replace('$P', placer)}"
        env = {**os.environ, **case.env, "PYTHONPATH": str(ROOT)}

        def limit() -> None:
            os.setsid()
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

        began = time.perf_counter()
        proc = subprocess.Popen(["/usr/bin/time", "-f", "%M", "bash", "-c", cmd], cwd=d, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit)  # noqa: PLW1509 - rlimit
        hung = False
        if case.signal_after is not None:
            time.sleep(case.signal_after)
            os.killpg(proc.pid, signal.SIGINT)
        try:
            _out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            hung = True
            os.killpg(proc.pid, signal.SIGKILL)
            _out, err = proc.communicate()
        wall = time.perf_counter() - began
        lines = err.decode(errors="replace").strip().splitlines()
        rss_kb = int(lines[-1]) if lines and lines[-1].isdigit() else 0
        # /usr/bin/time's own lines (the peak, "Command exited with ...") are not the command's
        lines = [x for x in (lines[:-1] if rss_kb else lines)
                 if x.strip() and not x.startswith(("Command exited with", "Command terminated by"))]
        tb = any("Traceback" in x for x in lines)
        return {"case": case.id, "command": case.command.replace("$P", "placer"),
                "exit": "hang" if hung else proc.returncode, "wall_s": round(wall, 1), "rss_mb": rss_kb // 1024,
                "stderr_lines": len(lines), "traceback": tb, "first": _verdict(lines)[:150]}
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated substrings of case ids")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--memory", type=float, default=6.0, help="address-space cap per case, GiB")
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    picked = [c for c in CASES if not args.only or any(s in c.id for s in args.only.split(","))]
    rows = [run(c, args.timeout, int(args.memory * 2**30)) for c in picked]
    for r in rows:
        if args.markdown:
            def cell(text: object) -> str:
                return str(text).replace("|", "\\|")  # a shell pipe inside a table cell

            print(f"| {r['case']} | `{cell(r['command'])}` | {r['exit']} | {r['wall_s']} | {r['rss_mb']} | "
                  f"{'traceback, ' if r['traceback'] else ''}{cell(r['first'])} |")
        else:
            print(json.dumps(r), flush=True)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", file=sys.stderr)


if __name__ == "__main__":
    main()
