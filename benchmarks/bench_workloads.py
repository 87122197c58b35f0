"""The calibration table: generated batch-two SigLIP So400m and PE-core L/14 (one layer) against the reference
compiler's direct figures (BRIEF §8), every ratio and whether it is inside the tolerance.

    python benchmarks/bench_workloads.py              # both models, every figure (scheduled cycles included)
    python benchmarks/bench_workloads.py --no-cycles  # skip the scheduled-cycle figures (a few seconds)

Prints the Markdown table docs/workloads.md carries, then generation and measurement times. Exit status 1 when a
figure is outside the tolerance.
"""

from __future__ import annotations

import argparse
import os
import time

from placer.machine import load_machine
from placer.workloads.calibration import TARGETS, TOLERANCE, measure, render_rows
from placer.workloads.generate import generate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-cycles", action="store_true", help="skip the scheduled-cycle figures")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    machine = load_machine()
    rows = []
    times = []
    for model in dict.fromkeys(t.model for t in TARGETS):
        t0 = time.perf_counter()
        cap = generate(model, batch=2, layers=1, machine=machine, seed=args.seed)
        t1 = time.perf_counter()
        targets = [t for t in TARGETS if t.model == model and not (args.no_cycles and t.slow)]
        rows += measure(cap, machine, targets, model)
        times.append(f"{model}: generate {t1 - t0:.1f} s, measure {time.perf_counter() - t1:.1f} s")
    print(render_rows(rows))
    out = [r for r in rows if not r.within]
    print(f"\n{len(rows) - len(out)} of {len(rows)} figures within ±{TOLERANCE:.0%}; " + "; ".join(times)
          + f"; load average {os.getloadavg()[0]:.1f}")
    return 1 if out else 0


if __name__ == "__main__":
    raise SystemExit(main())
