"""The calibration table: generated batch-two SigLIP So400m and PE-core L/14 (one layer) against the reference
compiler's direct figures (docs/reference.md §8), every ratio and whether it is inside the tolerance.

    python benchmarks/bench_workloads.py              # both models, every figure (scheduled cycles included)
    python benchmarks/bench_workloads.py --no-cycles  # skip the scheduled-cycle figures (a few seconds)
    python benchmarks/bench_workloads.py --model      # also the scheduled figures under placer's chunk model
    python benchmarks/bench_workloads.py --layers 18  # captures with 18 Repeat iterations (weights then "moving")
    python benchmarks/bench_workloads.py --programs   # the whole-program table (batches 1, 2, 4, every group direct)

Scheduled figures are the reference's own rules (placer.ordering.reference). Prints the Markdown table
docs/workloads.md carries, then generation and measurement times. Exit status 1 when a figure is outside the
tolerance (the model-rule columns are for comparison only).
"""

from __future__ import annotations

import argparse
import os
import time

from placer.cost.model import program_cost
from placer.machine import Machine, load_machine
from placer.workloads.calibration import TARGETS, TOLERANCE, measure, render_rows
from placer.workloads.generate import generate


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
    args = ap.parse_args()
    machine = load_machine()
    if args.programs:
        return programs(machine, args.seed, args.layers)
    rows = []
    other = []
    times = []
    for model in dict.fromkeys(t.model for t in TARGETS):
        t0 = time.perf_counter()
        cap = generate(model, batch=2, layers=args.layers, machine=machine, seed=args.seed)
        t1 = time.perf_counter()
        targets = [t for t in TARGETS if t.model == model and not (args.no_cycles and t.slow)]
        rows += measure(cap, machine, targets, model)
        t2 = time.perf_counter()
        times.append(f"{model}: generate {t1 - t0:.1f} s, measure {t2 - t1:.1f} s")
        if args.model and not args.no_cycles:
            other += measure(cap, machine, [t for t in targets if t.slow], model, rules="model")
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
            unshared = int(sum(ph.table_bytes for ph in cost.phases).max())
            print(f"| {label} | {batch} | {cap.transfer_count():,} | {big.n:,} ({big.phase}) | {worst:,} | "
                  f"{unshared:,} | {cost.row_estimate:,} | {cost.worst_fragments():,} | "
                  f"{'yes' if worst <= machine.budget.table_bytes else 'no'} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
