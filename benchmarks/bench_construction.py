"""The host-aware construction alone: its worst tile on the generated workloads, with and without cutting finer,
or with and without local-pack options.

    python benchmarks/bench_construction.py                         # SigLIP and PE-core, batches 1, 2, 4, one layer
    python benchmarks/bench_construction.py --layers full --batches 2   # full depth: 27 and 24 layers
    python benchmarks/bench_construction.py --local-pack            # local-pack options offered (the default)

Per program, ``capacity.relay_greedy(problem, memory_caps(problem), by_hosts=True)`` (the construction the table
first and the programs nothing else fits use; docs/selection.md, "The host-aware construction"), without
local-pack options, re-costed exactly: its worst tile, the tiles' mean, the table bound (the largest of the tile
floors, the mass, the hosted mass and the hosted patterns: docs/selection.md, "Bounds") and the gap to it (over
the worst tile, as the solver reports gaps), the construction's seconds, and the same construction with its
second close turned off (no segment cut finer: ``capacity._cut_finer`` returns False), which is what it was
before that close was added. With ``--local-pack`` the problem offers local-pack options, as ``placer solve`` does
by default: the construction takes them (``memory_caps(problem, local_pack=True)``), run a second time with each
group limited to four of its cuts (``capacity.fewer_cuts``) and the better of the two kept, as ``placer solve``
does (both runs' worst tiles are printed last); the bound is the one with them, and the column before is the
construction with direct-receive options alone. Generation and preparation are excluded from the seconds; each
plan is validated.
"""

from __future__ import annotations

import argparse
import os
import time

from placer.machine import load_machine
from placer.selection import capacity
from placer.selection.bounds import hosted_mass_bound
from placer.selection.patterns import hosted_patterns_bound
from placer.selection.plan import Plan
from placer.selection.problem import SelectionProblem
from placer.selection.select import FEWER_CUTS, phase_fixed, plan_objectives, prepare, program_tables
from placer.units import parse_size
from placer.validation import validate
from placer.workloads.generate import generate
from placer.workloads.spec import load_model


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def build(problem: SelectionProblem, finer: bool, local_pack: bool) -> tuple[Plan, float, str]:
    """The construction's plan, its seconds, and (with local-pack options) each run's worst tile."""
    saved = capacity._cut_finer
    if not finer:
        capacity._cut_finer = lambda *_args: False
    try:
        began = time.perf_counter()
        plan = capacity.relay_greedy(problem, capacity.memory_caps(problem, local_pack), by_hosts=True)
        fewer = capacity.fewer_cuts(problem, capacity.memory_caps(problem, True), FEWER_CUTS) if local_pack else None
        if fewer is None:
            return plan, time.perf_counter() - began, ""
        # as ``select._fewer_cuts_plans`` adds: the better of the two
        again = capacity.relay_greedy(problem, fewer, by_hosts=True)
        seconds = time.perf_counter() - began
        every, four = plan_objectives(problem.capture, plan).table, plan_objectives(problem.capture, again).table
        return (again if four < every else plan), seconds, f"every cut {every:,} B, {FEWER_CUTS} cuts {four:,} B"
    finally:
        capacity._cut_finer = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="siglip-so400m,pe-core-l14")
    ap.add_argument("--batches", default="1,2,4")
    ap.add_argument("--layers", default="1", help="layers per program, or 'full' (the model's depth)")
    ap.add_argument("--budget", default="80KiB", help="the problem's budget (the construction ignores it)")
    ap.add_argument("--local-pack", action="store_true",
                    help="offer local-pack options; compare with the construction without them")
    args = ap.parse_args()
    machine = load_machine()
    budget = parse_size(args.budget)
    # (cut finer, local-pack) of the construction measured, then of the one it is compared with
    runs = ((True, True), (True, False)) if args.local_pack else ((True, False), (False, False))
    print(load(), flush=True)
    print(f"{'program':<24} {'worst B':>8} {'mean B':>8} {'bound B':>8} {'gap':>7} {'s':>5} {'valid':>5}   "
          f"{'direct-receive alone' if args.local_pack else 'without cutting finer':>22}")
    for model in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            layers = int(load_model(model).layers) if args.layers == "full" else int(args.layers)
            cap = generate(model, batch, layers, machine, 0)
            problem = prepare(cap, machine, budget, machine.budget.fragments, local_pack=args.local_pack).problem
            rows = []
            for finer, local_pack in runs:
                plan, seconds, each = build(problem, finer, local_pack)
                obj = plan_objectives(cap, plan)
                table, _frags, _cycles = program_tables(problem, phase_fixed(problem, plan))
                valid = validate(cap, plan.to_json(cap), machine).valid == obj.fits
                rows.append((obj.table, float(table.mean()), seconds, valid, each))
            (worst, mean, seconds, valid, each), (worst0, _mean0, seconds0, valid0, _) = rows
            bound = hosted_patterns_bound(problem, hosted_mass_bound(problem, worst), worst)
            name = f"{model} b{batch}, {layers} layer{'s' if layers > 1 else ''}"
            print(f"{name:<24} {worst:>8,} {mean:>8,.0f} {bound:>8,} {(worst - bound) / worst:>7.2%} {seconds:>5.1f} "
                  f"{'yes' if valid else 'NO':>5}   {worst0:>8,} B ({seconds0:.1f} s, {'yes' if valid0 else 'NO'})"
                  f"{'   ' + each if each else ''}",
                  flush=True)
    print(load())


if __name__ == "__main__":
    main()
