"""The calibration table: generated batch-two SigLIP So400m and PE-core L/14 (one layer) against the reference
compiler's direct figures (docs/reference.md §8), every ratio and whether it is inside the tolerance.

    python benchmarks/bench_workloads.py              # both models, every figure (scheduled cycles included)
    python benchmarks/bench_workloads.py --no-cycles  # skip the scheduled-cycle figures (a few seconds)
    python benchmarks/bench_workloads.py --model      # also the scheduled figures under placer's chunk model
    python benchmarks/bench_workloads.py --layers 18  # captures with 18 Repeat iterations (weights then "moving")
    python benchmarks/bench_workloads.py --programs   # the whole-program table (batches 1, 2, 4, every group direct)
    python benchmarks/bench_workloads.py --memory     # each batch-two program's memory picture, one layer and full

Scheduled figures are the reference's own rules (placer.refschedule.reference). Prints the Markdown table
docs/workloads.md carries, then generation and measurement times. Exit status 1 when a figure is outside the
tolerance (the model-rule columns are for comparison only).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from placer.capture.headroom import headroom
from placer.cost.model import program_cost
from placer.errors import InputError
from placer.machine import Machine, load_machine
from placer.modes import OrderingRules
from placer.workloads.calibration import TARGETS, TOLERANCE, measure, render_rows
from placer.workloads.generate import generate
from placer.workloads.spec import load_model


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-cycles", action="store_true", help="skip the scheduled-cycle figures")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", action="store_true",
                    help="also measure the scheduled figures under placer's chunk model (--rules model)")
    ap.add_argument("--programs", action="store_true",
                    help="print the whole-program table of docs/workloads.md (batches 1, 2, 4) instead")
    ap.add_argument("--layers", type=int, default=1,
                    help="Repeat iterations of the generated captures (weights read from as many addresses)")
    ap.add_argument("--memory", action="store_true",
                    help="print docs/workloads.md's memory picture (one layer and full depth) instead")
    args = ap.parse_args()
    machine = load_machine()
    if args.memory:
        return memory(machine, args.seed)
    if args.programs:
        return programs(machine, args.seed, args.layers)
    rows = []
    other = []
    times = []
    # one-layer figures at --layers (the stored body does not change with depth), full-depth ones at their depth
    for model, depth in dict.fromkeys((t.model, t.layers) for t in TARGETS):
        t0 = time.perf_counter()
        layers = args.layers if depth == 1 else depth
        cap = generate(model, batch=2, layers=layers, machine=machine, seed=args.seed)
        t1 = time.perf_counter()
        targets = [t for t in TARGETS if t.model == model and t.layers == depth and not (args.no_cycles and t.slow)]
        rows += measure(cap, machine, targets, model)
        t2 = time.perf_counter()
        times.append(f"{model} ({layers} layer{'s' if layers > 1 else ''}): generate {t1 - t0:.1f} s, "
                     f"measure {t2 - t1:.1f} s")
        if args.model and not args.no_cycles:
            other += measure(cap, machine, [t for t in targets if t.slow], model, rules=OrderingRules.MODEL)
            times[-1] += f", model rules {time.perf_counter() - t2:.1f} s"
    print(render_rows(rows, other if args.model else None))
    out = [r for r in rows if not r.within]
    print(f"\n{len(rows) - len(out)} of {len(rows)} figures within ±{TOLERANCE:.0%}; " + "; ".join(times)
          + f"; load average {os.getloadavg()[0]:.1f}")
    return 1 if out else 0


def programs(machine: Machine, seed: int, layers: int) -> int:
    """docs/workloads.md's "Whole program, all groups direct" table."""
    print("| model | batch | transfers | largest phase | worst-tile table B | (without sharing) | Σ of phase maxima B "
          "| worst fragments | fits 80 KiB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for model, label in (("siglip-so400m", "SigLIP So400m"), ("pe-core-l14", "PE-core L/14")):
        for batch in (1, 2, 4):
            cap = generate(model, batch=batch, layers=layers, machine=machine, seed=seed)
            cost = program_cost(cap, machine)
            big = max(cap.phases, key=lambda p: p.n)
            worst = cost.worst_table()
            unshared = int(np.add.reduce([ph.table_bytes for ph in cost.phases]).max())
            print(f"| {label} | {batch} | {cap.transfer_count():,} | {big.n:,} ({big.phase}) | {worst:,} | "
                  f"{unshared:,} | {cost.row_estimate:,} | {cost.worst_fragments():,} | "
                  f"{'yes' if worst <= machine.budget.table_bytes else 'no'} |")
    return 0


def memory(machine: Machine, seed: int) -> int:
    """docs/workloads.md's memory picture: per batch-two program, at one layer and at the model's depth, the most
    bytes live on a tile, the fullest tile's free bytes per region, the MAP head's passes; then the deepest
    program that generates and what stops the next layer."""
    print("| model | layers | MAP head passes | most live bytes on a tile | headroom (tile, phase) | region 0 free | "
          "region 1 free | generate s |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    deepest = []
    for model, label in (("siglip-so400m", "SigLIP So400m"), ("pe-core-l14", "PE-core L/14")):
        depth = int(load_model(model).layers)
        for layers in (1, depth):
            t0 = time.perf_counter()
            cap = generate(model, batch=2, layers=layers, machine=machine, seed=seed)
            took = time.perf_counter() - t0
            room = headroom(cap, machine)
            assert room is not None
            print(f"| {label} | {layers} | {cap.extra['workload']['head_passes']} | {room.capacity - room.free:,} | "
                  f"{room.free:,} B ({room.tile}, {room.phase}) | {room.region0_free:,} | {room.region1_free:,} | "
                  f"{took:.1f} |", flush=True)
        lo, hi = depth, 4 * depth  # lo generates; find the first depth that does not
        error = ""
        while hi - lo > 1:
            mid = (lo + hi) // 2
            try:
                generate(model, batch=2, layers=mid, machine=machine, seed=seed)
                lo = mid
            except InputError as exc:
                hi, error = mid, str(exc)
        deepest.append(f"{label}: deepest {lo} layers; at {hi}: {error or 'not tried'}")
    print("\n" + "\n".join(deepest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
