"""Benchmark of stream ordering (docs/reference.md §7, §9): greedy time and horizon on a ~586k-transfer phase, the gap
to the lower bound, and CP-SAT improvement on QKV- and MLP-like phases, under the reference's rules (the default; the
schedule is checked by the checker of its rules).

    python benchmarks/bench_ordering.py [--time-limit 10] [--capture siglip_b2.json.gz] [--phases 16,50,54]
        [--relayed rw.json.gz --relayed-phases 9,50] [--no-synthetic] [--json out.json]

For a capture, phases 16 and 50 are also run with their activations alone (the transfers of the largest fan-out),
as the reference's figures (docs/reference.md §8) are. Every row: estimate rows (cost model, worst tile), timed rows
(the schedule's, worst tile), the cost model's cycles, the B1024 horizon, the CP-SAT horizon, the lower bound, the
order that won (cpsat mode) and whether the time limit cut the search short.

Reference (Rust, one thread): 586k transfers in 33.4 s, 8.9 s with 1,024-word waves. Goal: greedy <= 10 s, and the
CP-SAT-improved horizon within 1.10 x the lower bound on QKV- and MLP-like phases.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from placer.capture.io import read_capture
from placer.capture.model import Phase
from placer.fileio import write_json
from placer.machine import load_machine
from placer.ordering.check import check_reference_schedule, check_schedule
from placer.ordering.schedule import schedule_phase
from placer.report.table import render
from placer.solver import SolverParams
from tests.ordering.synthetic import replica_phase


def synthetic_phases() -> dict[str, Phase]:
    return {
        # 240 groups x 6 replicas, 2,443 32-byte fragments per group from 400 owners: 586,320 transfers
        "586k mlp-down-like": replica_phase(groups=240, replicas=6, fragments=2443, sources=400, seed=1),
        "qkv-like 40x36": replica_phase(groups=40, replicas=36, fragments=1312, sources=36, weight_words=6912),
        "mlp-up-like 27x54": replica_phase(groups=27, replicas=54, fragments=2000, sources=54, weight_words=7000),
    }


def run(name: str, phase: Phase, mode: str, params: SolverParams, machine: Any) -> dict[str, Any]:
    clock = time.perf_counter()
    ps = schedule_phase(phase, machine, mode, params)
    wall = time.perf_counter() - clock
    clock = time.perf_counter()
    check = check_reference_schedule if ps.rules == "reference" else check_schedule
    problems = check(phase, ps.schedule.tx_start, ps.schedule.rx_start, ps.schedule.horizon, machine)
    return {
        "name": name, "mode": mode, "transfers": ps.transfers, "chunks": ps.chunks,
        "greedy_horizon": ps.greedy_horizon, "horizon": ps.horizon, "lower_bound": ps.lower,
        "bound_kind": ps.lower_kind, "ratio": ps.horizon / max(ps.lower, 1), "gap": ps.gap,
        "greedy_s": ps.greedy_seconds, "total_s": wall, "check_s": time.perf_counter() - clock,
        "valid": not problems, "cpsat": ps.cpsat.describe() if ps.cpsat else "", "method": ps.method,
        "backstop": bool(ps.cpsat and ps.cpsat.backstop),
        "estimate_rows": ps.estimate_table_worst, "timed_rows": ps.table_worst, "estimate_cycles": ps.estimate_cycles,
    }


def _ids(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def capture_phases(path: Path, ids: list[int], tag: str) -> dict[str, Phase]:
    cap = read_capture(path)
    out: dict[str, Phase] = {}
    for pid in ids:
        if pid not in cap.phase_ids():
            continue
        phase = cap.phase_by_id(pid)
        out[f"{tag} {pid}"] = phase
        if tag == "direct" and pid in (16, 50):
            fan = phase.fanout
            out[f"{tag} {pid} act"] = phase.take(np.flatnonzero(fan == fan.max()))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--capture", type=Path, help="also run these phases of a capture (direct)")
    ap.add_argument("--phases", default="16,50,54")
    ap.add_argument("--relayed", type=Path, help="a rewritten capture (placer solve --write-capture)")
    ap.add_argument("--relayed-phases", default="9,50")
    ap.add_argument("--no-synthetic", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    machine = load_machine()
    params = SolverParams(time_limit=args.time_limit, workers=args.workers)
    rows = []
    phases = {} if args.no_synthetic else synthetic_phases()
    if args.capture:
        phases.update(capture_phases(args.capture, _ids(args.phases), "direct"))
    if args.relayed:
        phases.update(capture_phases(args.relayed, _ids(args.relayed_phases), "relayed"))
    for name, phase in phases.items():
        rows.append(run(name, phase, "greedy", params, machine))
        if phase.n < 300_000:
            rows.append(run(name, phase, "cpsat", params, machine))
        r = rows[-1]
        print(f"{name}: {r['mode']} horizon {r['horizon']:,} / bound {r['lower_bound']:,} "
              f"({r['ratio']:.3f}x) in {r['total_s']:.1f} s", file=sys.stderr)
    print(render(["phase", "mode", "transfers", "chunks", "rows est", "rows timed", "est cycles", "greedy",
                  "horizon", "lower bound", "kind", "x bound", "order", "greedy s", "total s", "cut", "valid"],
                 [[r["name"], r["mode"], r["transfers"], r["chunks"], r["estimate_rows"], r["timed_rows"],
                   r["estimate_cycles"], r["greedy_horizon"], r["horizon"], r["lower_bound"], r["bound_kind"],
                   f"{r['ratio']:.3f}", r["method"], round(r["greedy_s"], 2), round(r["total_s"], 2),
                   "yes" if r["backstop"] else "", r["valid"]]
                  for r in rows],
                 title="stream ordering (cycles without sync; rows = worst tile bytes)"))
    if args.json:
        write_json(args.json, {"rows": rows})


if __name__ == "__main__":
    main()
