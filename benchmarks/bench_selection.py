"""Relay selection on the generated workloads: the production greedy against CP-SAT.

    python benchmarks/bench_selection.py                       # SigLIP and PE-core, batches 1, 2, 4, at 80 KiB
    python benchmarks/bench_selection.py --budget 64KiB --models pe-core-l14 --batches 2 --time-limit 30

Prints, per program: time of the greedy (the reference compiler's relay pass takes 10–13 s on SigLIP batch two),
CP-SAT status, objectives and bounds, the gap, and the ratios CP-SAT / greedy on worst-tile table bytes and
cycles, plus whether each plan fits and validates.
"""

from __future__ import annotations

import argparse
import time

from placer.machine import load_machine
from placer.selection.select import select
from placer.solver import SolverParams
from placer.units import parse_size
from placer.validation import validate
from placer.workloads.generate import generate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="siglip-so400m,pe-core-l14")
    ap.add_argument("--batches", default="1,2,4")
    ap.add_argument("--budget", default="80KiB")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--no-validate", action="store_true")
    args = ap.parse_args()
    machine = load_machine()
    budget = parse_size(args.budget)
    params = SolverParams.from_toml().with_overrides(time_limit=args.time_limit)
    print(f"budget {budget:,} B, CP-SAT {params.time_limit:.0f} s, {params.workers} workers, "
          f"deterministic={params.deterministic}")
    header = (f"{'program':<22}{'transfers':>11}{'greedy s':>9}{'total s':>9}  {'status':<9}"
              f"{'greedy table':>13}{'cp-sat table':>13}{'ratio':>7}{'greedy cyc':>11}{'cp-sat cyc':>11}"
              f"{'ratio':>7}  {'gaps (cycles, table)':<22}{'fits g/c':>9}{'valid':>7}")
    print(header)
    for model in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            cap = generate(model, batch, 1, machine, 0)
            t0 = time.perf_counter()
            greedy = select(cap, machine, budget, machine.budget.fragments, mode="greedy")
            t_greedy = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = select(cap, machine, budget, machine.budget.fragments, params=params)
            t_total = time.perf_counter() - t0
            g, c = greedy.greedy_objectives, out.objectives
            gaps = ", ".join(f"{r.gap:.2%}" if r.gap is not None else "-" for _, r in out.staged.stages[:2]) \
                if out.staged else "-"
            valid = "-"
            if not args.no_validate:
                valid = "yes" if validate(cap, out.plan.to_json(cap), machine).valid == c.fits else "NO"
            print(f"{model + ' b' + str(batch):<22}{cap.transfer_count():>11,}{t_greedy:>9.1f}{t_total:>9.1f}  "
                  f"{out.status.value:<9}{g.table:>13,}{c.table:>13,}{c.table / g.table:>7.3f}{g.cycles:>11,}"
                  f"{c.cycles:>11,}{c.cycles / g.cycles:>7.3f}  {gaps:<22}"
                  f"{('y' if g.fits else 'n') + '/' + ('y' if c.fits else 'n'):>9}{valid:>7}", flush=True)
            if out.note:
                print(f"{'':<22}{out.note}")


if __name__ == "__main__":
    main()
