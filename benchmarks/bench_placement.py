"""Placement benchmark: every input of ../shared/data/ (reference dumps and MiniMalloc instances).

Prints, per instance: the production mirror's result (and for flat problems the capacity it would need), the exact
mode's status, engine and wall time, the CPU seconds of the canonical search that answered (its critical path: what
the wall time would be on an idle machine, minus process start-up), and for the MiniMalloc challenging instances
the ratio of wall time to MiniMalloc's published time. Every placement is verified by the independent checker.

    python benchmarks/bench_placement.py [--time-limit 60] [--workers 2] [--only A,B] [--json out.json]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from placer.fileio import write_json  # noqa: E402
from placer.placement import check_placement, greedy_summary, read_problem, solve_placement  # noqa: E402
from placer.solver import SolverParams  # noqa: E402

DATA = ROOT / ".." / "shared" / "data"
MINIMALLOC_SECONDS = {"A": 4.5, "B": 3.4, "C": 0.6, "D": 2.4, "E": 3.5, "F": 5.2}


def instances(only: set[str] | None) -> list[Path]:
    files = sorted((DATA / "ipu-placement-dumps").glob("*.json")) + sorted((DATA / "minimalloc").glob("*.csv"))
    if only:
        files = [f for f in files if f.name.split(".")[0] in only or f.name in only]
    return files


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", default="", help="comma-separated instance names (A,B,fragmented.json, ...)")
    ap.add_argument("--json", type=Path, default=None, help="also write the rows as JSON")
    args = ap.parse_args()
    if not DATA.is_dir():
        print(f"no data at {DATA}", file=sys.stderr)
        return 1
    params = SolverParams(time_limit=args.time_limit, workers=args.workers, seed=args.seed)
    only = {s.strip() for s in args.only.split(",") if s.strip()} or None
    rows = []
    header = (f"{'instance':22} {'n':>4} {'status':10} {'engine':14} {'time s':>8} {'cpu s':>6} {'MiniMalloc s':>12} "
              f"{'ratio':>6}  greedy")
    print(header)
    print("-" * len(header))
    for path in instances(only):
        problem = read_problem(path)
        t0 = time.perf_counter()
        result = solve_placement(problem, params)
        wall = time.perf_counter() - t0
        verified = result.addresses is not None and not check_placement(problem, result.addresses)
        status = ("placed" if verified else "INVALID") if result.addresses is not None else result.status.value
        key = path.name.split(".")[0]
        ref = MINIMALLOC_SECONDS.get(key) if path.suffix == ".csv" else None
        ratio = f"{wall / ref:6.2f}" if ref else "     -"
        greedy = greedy_summary(problem)
        cpu = f"{result.search_cpu:6.2f}" if result.search_cpu is not None else "     -"
        print(f"{path.name:22} {problem.n:4d} {status:10} {result.engine:14} {wall:8.2f} {cpu} "
              f"{(f'{ref:.1f}' if ref else '-'):>12} {ratio}  {greedy}", flush=True)
        rows.append({"instance": path.name, "requests": problem.n, "status": status, "engine": result.engine,
                     "seconds": round(wall, 3), "search_cpu_seconds": result.search_cpu,
                     "minimalloc_seconds": ref, "nodes": result.nodes,
                     "reason": result.reason, "greedy": greedy, "peak_address": result.objective})
    if args.json:
        write_json(args.json, rows, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
