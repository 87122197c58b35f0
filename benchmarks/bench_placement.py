"""Placement benchmark: ../shared/data/ (reference dumps, MiniMalloc instances) and a fixed-seed perfect-packing set.

Per instance and worker count: status, engine, wall seconds of ``solve_placement`` and the CPU seconds it used
(this process plus the portfolio's worker processes: on a shared machine the fair comparison). With
``--minimalloc BINARY`` (a MiniMalloc build taking its usual ``--capacity --input --output --timeout`` flags) the
binary runs on every MiniMalloc-format instance right after placer, its placement is verified by our checker, and
the table shows placer / MiniMalloc ratios of wall and CPU time (MiniMalloc's are its whole process: start-up and
CSV parsing included, as a user runs it; placer's are ``solve_placement`` in this process, verification included,
reading excluded), and of placer's wall time to the solve time MiniMalloc reports itself; without it, the ratio
is to MiniMalloc's published time (A–F only). The perfect-packing set (``placer.placement.generate``: zero
slack, alignment, regions and conflicts in the dumps, infeasible twins one buffer 32 bytes larger; ``pph``: zero
slack at the peak step only) is written to a temporary folder each run.

    python benchmarks/bench_placement.py [--time-limit 60] [--workers 1,2] [--only A,B] [--set data,pp,pph]
                                         [--pp-sizes 50,100,200,300,500] [--pp-seeds 0] [--minimalloc BIN]
                                         [--repeat 1] [--startup] [--json out.json]

``--repeat K`` runs placer and MiniMalloc K times each, back to back, and keeps each one's fastest run (the
smallest instances take a few milliseconds, where one run measures mostly the machine's noise). ``--startup``
also times ``placer --version``, ``placer --help`` and ``placer place`` on a 100-buffer instance (best of five
processes). Every row carries the 1-minute load average at the time it was measured.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from placer.fileio import write_json  # noqa: E402
from placer.placement import check_placement, read_problem, solve_placement  # noqa: E402
from placer.placement.generate import write_set  # noqa: E402
from placer.placement.model import PlacementProblem  # noqa: E402
from placer.solver import SolverParams  # noqa: E402

DATA = ROOT / ".." / "shared" / "data"
HOLES = 0.4  # the pph set: zero slack at the peak step only
MINIMALLOC_SECONDS = {"A": 4.5, "B": 3.4, "C": 0.6, "D": 2.4, "E": 3.5, "F": 5.2}


def _cpu() -> float:
    """CPU seconds of this process and its reaped children (the portfolio's workers, MiniMalloc)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def instances(sets: set[str], only: set[str] | None, pp_dir: Path, sizes: list[int], seeds: list[int]) -> list[Path]:
    files: list[Path] = []
    if "data" in sets and DATA.is_dir():
        files += sorted((DATA / "ipu-placement-dumps").glob("*.json")) + sorted((DATA / "minimalloc").glob("*.csv"))
    if sets & {"pp", "pph"}:
        generated = write_set(pp_dir, sizes, seeds, ipu="pp" in sets, plain="pp" in sets,
                              holes=HOLES if "pph" in sets else None)
        files += sorted(generated, key=lambda p: (p.suffix, p.name.split("-")[0], _size_of(p), p.name))
    if only:
        files = [f for f in files if f.name.split(".")[0] in only or f.name in only]
    return files


def _size_of(path: Path) -> int:
    parts = path.name.split("-")
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0


def run_minimalloc(binary: str, path: Path, problem: PlacementProblem, time_limit: float,
                   repeat: int = 1) -> dict[str, Any]:
    """Run MiniMalloc on a CSV instance (``repeat`` times, keeping the fastest); verify its output with our
    checker."""
    best: dict[str, Any] | None = None
    for _ in range(max(repeat, 1)):
        out = _run_minimalloc_once(binary, path, problem, time_limit)
        if best is None:
            best = dict(out)
        else:
            best["cpu"] = min(best["cpu"], out["cpu"])
            if out["seconds"] < best["seconds"]:
                best.update(status=out["status"], seconds=out["seconds"])
            if out["solve"] is not None and (best["solve"] is None or out["solve"] < best["solve"]):
                best["solve"] = out["solve"]
        if out["status"] == "timeout":
            break
    assert best is not None
    return best


def _run_minimalloc_once(binary: str, path: Path, problem: PlacementProblem, time_limit: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.csv"
        cmd = [binary, f"--capacity={problem.capacity}", f"--input={path}", f"--output={out}",
               f"--timeout={time_limit}s"]
        cpu0, t0 = _cpu(), time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
        status = "not found"  # MiniMalloc's word for an exhausted search before its time limit
        if proc.returncode == 0 and out.exists():
            rows = list(csv.DictReader(out.read_text().splitlines()))
            offsets = {r["id"]: int(r["offset"]) for r in rows}
            base = problem.ranges[0][0]
            try:
                addresses = [base + offsets[_csv_id(r.name)] for r in problem.requests]
                status = "placed" if not check_placement(problem, addresses) else "INVALID"
            except KeyError:
                status = "INVALID"
        elif wall >= time_limit * 0.99:
            status = "timeout"
    # MiniMalloc prints the seconds its Solve() took (3 decimals) on stderr: the solver alone, without its process
    # start-up and CSV parsing, which the wall time includes
    match = re.match(r"\s*([0-9.]+)", proc.stderr)
    solve = float(match.group(1)) if match else None
    return {"status": status, "seconds": wall, "cpu": cpu, "solve": solve}


def startup_times() -> dict[str, float]:
    """Wall seconds (best of five processes) of ``placer --version``, ``placer --help`` and ``placer place`` on a
    100-buffer perfect packing with holes (MiniMalloc's format), as a user runs them."""
    script = Path(sys.executable).parent / "placer"  # the console script a user runs, where it is installed
    exe = [str(script)] if script.exists() else [sys.executable, "-c", "from placer.cli import main; main()"]
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = write_set(Path(tmp), [100], [1], ipu=False, plain=False, holes=HOLES)[0]
        for label, extra in (("--version", ["--version"]), ("--help", ["--help"]),
                             ("place 100 buffers", ["place", str(path), "--quiet"])):
            best = float("inf")
            for _ in range(5):
                t0 = time.perf_counter()
                subprocess.run(exe + extra, capture_output=True, check=False)
                best = min(best, time.perf_counter() - t0)
            out[label] = round(best, 4)
            print(f"# start-up: placer {label}: {best:.3f} s wall (best of 5, load {os.getloadavg()[0]:.2f})",
                  flush=True)
    return out


def _csv_id(request_name: str) -> str:
    # the CSV reader names requests "<file>: line <k> (id <id>)" (see placer.placement.formats)
    return request_name.rsplit("(id ", 1)[-1].rstrip(")")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", default="1,2", help="worker counts to run, e.g. 1,2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated instance names (A,B,pp-100-s0,fragmented.json, ...)")
    ap.add_argument("--set", default="data,pp,pph", help="data (../shared/data), pp (perfect packings: zero slack "
                    "everywhere, CSVs and dumps), pph (zero slack at the peak only)")
    ap.add_argument("--pp-sizes", default="50,100,200,300,500")
    ap.add_argument("--pp-seeds", default="0")
    ap.add_argument("--minimalloc", default=None, help="a MiniMalloc binary to run right after placer")
    ap.add_argument("--repeat", type=int, default=1, help="runs per solver and instance; the fastest is kept")
    ap.add_argument("--startup", action="store_true", help="also time placer --version / --help / place")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = ap.parse_args()
    workers = [int(w) for w in args.workers.split(",") if w]
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    sets = {s.strip() for s in args.set.split(",") if s.strip()}
    sizes = [int(s) for s in args.pp_sizes.split(",") if s]
    seeds = [int(s) for s in args.pp_seeds.split(",") if s]
    print(f"# load average {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} on "
          f"{os.cpu_count()} cores; time limit {args.time_limit} s", flush=True)
    ref_name = "MiniMalloc" if args.minimalloc else "published"
    header = (f"{'instance':30} {'n':>4} {'w':>2} {'status':10} {'engine':10} {'wall s':>8} {'cpu s':>7} "
              f"{'MM status':10} {'MM wall':>8} {'MM cpu':>7} {'MM solve':>8} {'wall ×':>7} {'cpu ×':>6} "
              f"{'solve ×':>7} {'load':>5}")
    print(f"# ratios are placer / {ref_name}")
    print(header)
    print("-" * len(header))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in instances(sets, only, Path(tmp), sizes, seeds):
            problem = read_problem(path)
            mm: dict[str, Any] | None = None
            for w in workers:
                params = SolverParams(time_limit=args.time_limit, workers=w, seed=args.seed)
                wall = cpu = float("inf")
                for _ in range(max(args.repeat, 1)):
                    cpu0, t0 = _cpu(), time.perf_counter()
                    result = solve_placement(problem, params)
                    wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, _cpu() - cpu0)
                    if result.status.value == "unknown":
                        break  # a time-out: repeating it measures the limit again
                verified = result.addresses is not None and not check_placement(problem, result.addresses)
                status = ("placed" if verified else "INVALID") if result.addresses is not None else result.status.value
                if path.suffix == ".csv" and mm is None:
                    if args.minimalloc:
                        mm = run_minimalloc(args.minimalloc, path, problem, args.time_limit, args.repeat)
                    elif path.name.split(".")[0] in MINIMALLOC_SECONDS:
                        mm = {"status": "published", "seconds": MINIMALLOC_SECONDS[path.name.split(".")[0]],
                              "cpu": None}
                mm_wall = f"{mm['seconds']:8.3f}" if mm else f"{'-':>8}"
                mm_cpu = f"{mm['cpu']:7.3f}" if mm and mm["cpu"] is not None else f"{'-':>7}"
                wall_ratio = f"{wall / mm['seconds']:7.3f}" if mm and mm["seconds"] > 0 else f"{'-':>7}"
                cpu_ratio = f"{cpu / mm['cpu']:6.3f}" if mm and mm["cpu"] else f"{'-':>6}"
                mm_solve = mm.get("solve") if mm else None
                solve_col = f"{mm_solve:8.3f}" if mm_solve is not None else f"{'-':>8}"
                solve_ratio = f"{wall / mm_solve:7.3f}" if mm_solve else f"{'-':>7}"
                load = os.getloadavg()[0]
                print(f"{path.name:30} {problem.n:4d} {w:2d} {status:10} {result.engine:10} {wall:8.3f} {cpu:7.3f} "
                      f"{(mm['status'] if mm else '-'):10} {mm_wall} {mm_cpu} {solve_col} {wall_ratio} {cpu_ratio} "
                      f"{solve_ratio} {load:5.2f}",
                      flush=True)
                rows.append({"instance": path.name, "requests": problem.n, "workers": w, "status": status,
                             "engine": result.engine, "seconds": round(wall, 4), "cpu_seconds": round(cpu, 4),
                             "nodes": result.nodes, "reason": result.reason, "load": round(load, 2),
                             "minimalloc": mm, "peak_address": result.objective})
    if args.startup:
        rows.append({"startup": startup_times()})
    print(f"# load average {os.getloadavg()[0]:.2f} at the end")
    if args.json:
        write_json(args.json, rows, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
