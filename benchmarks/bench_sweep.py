"""Benchmark of `placer sweep` and the Ray fan-outs on this machine: wall time serial vs on a local Ray instance.

    python benchmarks/bench_sweep.py [--time-limit 10] [--workers 1] [--out DIR] [--skip-sweep] [--skip-schedule]
                                     [--schedule-mode greedy] [--json out.json]

1. Ray's own costs: starting (and stopping) a local instance; the per-task overhead (trivial tasks, all submitted at
   once, and one at a time); putting a SigLIP b2 capture in the object store and handing it to a task.
2. The sweep of the issue: SigLIP So400m and PE-core L/14, batch 2, one layer, at 64/72/80/96 KiB, greedy and CP-SAT
   (16 jobs), run by the CLI with `--serial` and on local Ray, each into a fresh results folder; the two tables are
   compared job by job (timing and plan bytes aside).
3. `placer schedule` on SigLIP b2, every phase, serial vs `--ray auto`; the outputs are compared phase by phase.

Every wall time includes the CLI's start-up and, for Ray, starting and stopping the instance (given apart in 1).
The machine's load average is printed before and after: on a shared machine the figures move with it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placer.report.table import render

BUDGETS = ("64KiB", "72KiB", "80KiB", "96KiB")


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min) on {os.cpu_count()} cores"


def placer(*args: str | Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    clock = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "placer.cli", *map(str, args)], capture_output=True, text=True,
                         check=False)
    return time.perf_counter() - clock, res


def ray_costs(tasks: int) -> dict[str, float]:
    from placer.sweep.cluster import ray_session
    from placer.workloads.generate import generate

    def noop(x: int) -> int:
        return x

    def touch(capture: Any) -> int:
        return len(capture.phases)

    out: dict[str, float] = {}
    clock = time.perf_counter()
    with ray_session(None) as ray:
        out["start_s"] = time.perf_counter() - clock
        remote = ray.remote(noop)
        ray.get([remote.remote(i) for i in range(20)])  # warm the worker pool
        clock = time.perf_counter()
        ray.get([remote.remote(i) for i in range(tasks)])
        out["trivial_batch_ms"] = 1000 * (time.perf_counter() - clock) / tasks
        clock = time.perf_counter()
        for i in range(200):
            ray.get(remote.remote(i))
        out["trivial_roundtrip_ms"] = 1000 * (time.perf_counter() - clock) / 200
        cap = generate("siglip-so400m", batch=2)
        clock = time.perf_counter()
        ref = ray.put(cap)
        out["put_siglip_b2_s"] = time.perf_counter() - clock
        toucher = ray.remote(touch)
        ray.get(toucher.remote(ref))
        clock = time.perf_counter()
        for _ in range(10):
            ray.get(toucher.remote(ref))
        out["task_with_capture_ms"] = 1000 * (time.perf_counter() - clock) / 10
        clock = time.perf_counter()
    out["shutdown_s"] = time.perf_counter() - clock
    return out


def sweep_file(folder: Path, time_limit: float, workers: int) -> Path:
    path = folder / "sweep.toml"
    budgets = ", ".join(f'"{b}"' for b in BUDGETS)
    path.write_text(f"""budgets = [{budgets}]
modes = ["greedy", "cpsat"]
[solver]
time_limit = {time_limit}
workers = {workers}
[[workloads]]
name = "siglip-b2"
model = "siglip-so400m"
batch = 2
layers = 1
[[workloads]]
name = "pe-core-b2"
model = "pe-core-l14"
batch = 2
layers = 1
""")
    return path


def run_sweeps(folder: Path, time_limit: float, workers: int) -> dict[str, Any]:
    spec = sweep_file(folder, time_limit, workers)
    result: dict[str, Any] = {}
    for name, extra in (("serial", ["--serial"]), ("ray", [])):
        print(f"sweep {name} ... ({load()})", file=sys.stderr, flush=True)
        wall, res = placer("sweep", spec, "-o", folder / name, "--json", *extra)
        if res.returncode not in (0, 1):
            raise SystemExit(f"sweep {name} failed: {res.stderr[-2000:]}")
        rows = orjson.loads(res.stdout)
        result[name] = {"wall_s": wall, "rows": rows, "exit": res.returncode}
    stable = [{k: v for k, v in r.items() if k not in ("seconds", "plan_sha256")} for r in result["serial"]["rows"]]
    other = [{k: v for k, v in r.items() if k not in ("seconds", "plan_sha256")} for r in result["ray"]["rows"]]
    result["equal_rows"] = sum(a == b for a, b in zip(stable, other, strict=True))
    result["equal_plans"] = sum(a["plan_sha256"] == b["plan_sha256"] for a, b in
                                zip(result["serial"]["rows"], result["ray"]["rows"], strict=True))
    return result


def run_schedule(folder: Path, mode: str, time_limit: float) -> dict[str, Any]:
    from placer.capture import write_capture
    from placer.workloads.generate import generate

    capture = folder / "siglip-b2.json"
    write_capture(generate("siglip-so400m", batch=2), capture)
    args: list[str | Path] = ["schedule", capture, "--json", "--mode", mode, "--time-limit", str(time_limit),
                              "--workers", "1"]
    out: dict[str, Any] = {}
    for name, extra in (("serial", []), ("ray", ["--ray", "auto"])):
        print(f"schedule {name} ... ({load()})", file=sys.stderr, flush=True)
        wall, res = placer(*args, *extra)
        if res.returncode != 0:
            raise SystemExit(f"schedule {name} failed: {res.stderr[-2000:]}")
        out[name] = {"wall_s": wall, "phases": orjson.loads(res.stdout)["phases"]}

    def strip(p: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in p.items() if "seconds" not in k and k != "cpsat"}

    out["equal_phases"] = sum(strip(a) == strip(b) for a, b in zip(out["serial"]["phases"], out["ray"]["phases"],
                                                                   strict=True))
    out["phase_count"] = len(out["serial"]["phases"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--time-limit", type=float, default=10.0, help="CP-SAT seconds per sweep job (default 10)")
    ap.add_argument("--workers", type=int, default=1, help="CP-SAT workers per sweep job (default 1)")
    ap.add_argument("--schedule-mode", default="greedy", choices=("greedy", "cpsat"))
    ap.add_argument("--schedule-time-limit", type=float, default=2.0, help="CP-SAT seconds per phase (cpsat mode)")
    ap.add_argument("--tasks", type=int, default=1000, help="trivial tasks for the overhead figure")
    ap.add_argument("--out", type=Path, default=None, help="keep the results here (default: a temporary folder)")
    ap.add_argument("--skip-sweep", action="store_true")
    ap.add_argument("--skip-schedule", action="store_true")
    ap.add_argument("--json", type=Path, default=None, help="also write every figure here")
    args = ap.parse_args()
    folder = args.out or Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    folder.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"load_before": load()}
    print(report["load_before"])

    costs = ray_costs(args.tasks)
    report["ray"] = costs
    print(render(["Ray (local instance)", "value"], [
        ["start a local instance, s", round(costs["start_s"], 2)],
        ["shut it down, s", round(costs["shutdown_s"], 2)],
        [f"trivial task, {args.tasks} submitted at once, ms per task", round(costs["trivial_batch_ms"], 3)],
        ["trivial task, one at a time (submit + get), ms", round(costs["trivial_roundtrip_ms"], 3)],
        ["put a SigLIP b2 capture in the object store, s", round(costs["put_siglip_b2_s"], 3)],
        ["task receiving that capture by reference, ms", round(costs["task_with_capture_ms"], 1)],
    ], title="\nper-task overhead"))

    if not args.skip_sweep:
        sw = run_sweeps(folder, args.time_limit, args.workers)
        report["sweep"] = {k: v for k, v in sw.items() if k not in ("serial", "ray")} | {
            "serial_s": sw["serial"]["wall_s"], "ray_s": sw["ray"]["wall_s"], "rows": sw["ray"]["rows"]}
        rows = []
        for a, b in zip(sw["serial"]["rows"], sw["ray"]["rows"], strict=True):
            rows.append([a["workload"], a["budget"] // 1024, a["mode"], a["state"], a["fits"], a["table"], a["cycles"],
                         a["solver_status"], a["valid"], a["seconds"], b["seconds"]])
        print(render(["workload", "KiB", "mode", "state", "fits", "worst tile B", "cycles", "cp-sat", "valid",
                      "serial s", "ray s"], rows,
                     title=f"\nsweep: 2 workloads x {len(BUDGETS)} budgets x greedy/cpsat, CP-SAT {args.time_limit:g} s"
                           f" and {args.workers} worker(s) per job"))
        print(f"wall: serial {sw['serial']['wall_s']:.1f} s, local Ray {sw['ray']['wall_s']:.1f} s "
              f"(x{sw['serial']['wall_s'] / sw['ray']['wall_s']:.2f}); rows equal {sw['equal_rows']}/{len(rows)}, "
              f"plan files equal {sw['equal_plans']}/{len(rows)}")

    if not args.skip_schedule:
        sc = run_schedule(folder, args.schedule_mode, args.schedule_time_limit)
        report["schedule"] = {"serial_s": sc["serial"]["wall_s"], "ray_s": sc["ray"]["wall_s"],
                              "equal_phases": sc["equal_phases"], "phases": sc["phase_count"],
                              "mode": args.schedule_mode}
        print(f"\nplacer schedule SigLIP b2 ({sc['phase_count']} phases, {args.schedule_mode}"
              + (f", {args.schedule_time_limit:g} s per phase" if args.schedule_mode == "cpsat" else "")
              + f"): serial {sc['serial']['wall_s']:.1f} s, --ray auto {sc['ray']['wall_s']:.1f} s; "
              f"phases equal {sc['equal_phases']}/{sc['phase_count']}")

    report["load_after"] = load()
    print(report["load_after"])
    if args.json is not None:
        args.json.write_bytes(orjson.dumps(report, option=orjson.OPT_INDENT_2))


if __name__ == "__main__":
    main()
