"""Relay selection on the generated workloads: the production rule against CP-SAT (the README's selection rows).

    python benchmarks/bench_selection.py                          # SigLIP and PE-core, batches 1, 2, 4, at 80 KiB
    python benchmarks/bench_selection.py --models siglip-so400m --batches 2 --budgets 64KiB,72KiB,80KiB,96KiB
    python benchmarks/bench_selection.py --readme                 # just the README's "Where things stand" rows
    python benchmarks/bench_selection.py --readme --schedule      # ... and their programs scheduled whole
    python benchmarks/bench_selection.py --sweep --budgets 64KiB,72KiB,80KiB,96KiB   # option effects shared
    python benchmarks/bench_selection.py --readme --layers full   # full depth: SigLIP b2 at 27 layers, PE-core b2 at 24
    python benchmarks/bench_selection.py --batches 1,2 --front    # ... and what each cycle cap costs in table bytes
    python benchmarks/bench_selection.py --objective table,cycles # the table first, nothing capped
    python benchmarks/bench_selection.py --objective table,cycles --no-local-pack   # ... and bounded over those plans

With --sweep the option effects are computed once per program (printed as "prepare") and the budgets are solved
smallest first, each hinted with the smaller budgets' plans, as `placer compare` does; each budget still gets its
own limit (wall seconds then exclude the shared preparation).

Per (workload, batch, budget), exactly what `placer solve --budget B --time-limit S` does on the generated program
(generation excluded, everything after it counted against S): the production rule's worst tile and scheduled cycles
(the program's Σ lower bound, its Σ B1024 horizon against the all-direct program's); placer's, with its worst tile
against the rule's and its Σ lower bound against the direct program's; the objective, bound, gap and status per
stage; where the plan came from; the least worst tile the checks without search allow (every budget under it is
proved infeasible, with a certificate: ``floors.proved_floor``); the wall seconds; whether the wall-clock
backstop fired (then that run is not reproducible); whether the plan validates. The machine's load average is
printed before and after: on a shared machine, wall seconds mean little without it.

With --front, each row is followed by the price of the cycle caps (``select.cycle_front`` over the solve's measured
configurations, after the solve and outside its wall seconds): the least worst tile with the Σ lower bound cap
kept and the B1024 cap dropped, and with nothing capped (docs/selection.md, "What the gap is made of").
"""

from __future__ import annotations

import argparse
import os
import time

from placer.allocator import keep_freed_arrays
from placer.api import objective_order
from placer.capture.headroom import headroom
from placer.machine import load_machine
from placer.selection.budgets import FRONT_SECONDS
from placer.selection.floors import proved_floor
from placer.selection.plan import Plan
from placer.selection.programs import schedule_programs
from placer.selection.select import Outcome, SelectionContext, SelectionSettings, cycle_front, prepare, select
from placer.solver import Deadline, SolverParams
from placer.units import format_size, parse_size_list
from placer.validation import validate
from placer.workloads.generate import generate
from placer.workloads.spec import load_model

README_ROWS = (("siglip-so400m", 2), ("pe-core-l14", 2), ("siglip-so400m", 4))
FULL_DEPTH_ROWS = (("siglip-so400m", 2), ("pe-core-l14", 2))  # batch four does not fit tile memory at full depth


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def stages(out: Outcome) -> str:
    if out.staged is None or not out.staged.stages:
        return "-"
    parts = []
    for name, r in out.staged.stages:
        gap = f"{r.gap:.2%}" if r.gap is not None else "-"
        obj = "-" if r.objective is None else f"{r.objective:,.0f}"
        bnd = "-" if r.bound is None else f"{r.bound:,.0f}"
        parts.append(f"{name} {obj}/{bnd} gap {gap} {r.status.value}")
    return "; ".join(parts)


def caps_price(out: Outcome, params: SolverParams) -> str:
    """The table the measured configurations allow without the B1024 cap, and without any cycle cap."""
    front = cycle_front(out, params.with_overrides(time_limit=FRONT_SECONDS))
    parts = []
    for p in front.points:
        if p.b1024_capped:
            continue
        what = "nothing capped" if p.slack is None else f"Σ bound within +{p.slack:.2%}, B1024 not capped"
        parts.append(f"{what}: {p.table:,} B (Σ bound {p.cycles:,}, B1024 Δ {p.b1024_change:+,})")
    return "; ".join(parts) or "no measured configurations"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="siglip-so400m,pe-core-l14")
    ap.add_argument("--batches", default="1,2,4")
    ap.add_argument("--budgets", default="80KiB")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--params", default=None, help="solver parameters TOML (e.g. a work_per_second that keeps the "
                    "default work under a longer limit on a busy machine)")
    ap.add_argument("--readme", action="store_true", help="only the README rows (SigLIP b2, PE-core b2, SigLIP b4)")
    ap.add_argument("--no-validate", action="store_true")
    ap.add_argument("--layers", default="1", help="Repeat iterations of each generated program: a number, or "
                    "'full' for each model's own depth (27 for SigLIP So400m, 24 for PE-core L/14)")
    ap.add_argument("--sweep", action="store_true", help="share option effects between budgets, as compare does")
    ap.add_argument("--schedule", action="store_true", help="the README rows' programs (all direct, the rule's, "
                    "placer's) scheduled whole, as `placer solve --schedule` does")
    ap.add_argument("--front", action="store_true", help="after each row, the least worst tile without the B1024 "
                    "cap, and with no cycle cap, over the solve's measured configurations")
    ap.add_argument("--objective", default=None, help="lexicographic order of the objectives, as "
                    "`placer solve --objective` (default: the cycles first, under the caps)")
    ap.add_argument("--no-local-pack", action="store_true", help="offer no local-pack option, as `placer solve "
                    "--no-local-pack` (with the table first, the table stage is then also bounded over direct-receive "
                    "plans)")
    ap.add_argument("--order-time", type=float, default=10.0, help="with --schedule: seconds of placer's ordering "
                    "search per changed phase")
    args = ap.parse_args()
    keep_freed_arrays()  # as the CLI does
    machine = load_machine()
    budgets = parse_size_list(args.budgets)
    order = objective_order(args.objective)
    params = SolverParams.from_toml(args.params).with_overrides(time_limit=args.time_limit)
    settings = SelectionSettings(params=params, order=order, local_pack=not args.no_local_pack)
    full = args.layers == "full"
    rows = FULL_DEPTH_ROWS if full else README_ROWS
    runs = rows if args.readme else [(m, int(b)) for m in args.models.split(",") for b in args.batches.split(",")]
    print(f"{load()}; limit {params.time_limit:g} s per solve, {params.workers} workers, "
          f"work {params.work_per_second * params.time_limit:.1f} deterministic s, "
          f"deterministic={params.deterministic}; objectives {','.join(order)}")
    print(f"{'program':<12}{'budget':>8}  {'rule worst B':>12}{'Σ bound':>10}{'B1024 Δ':>9}{'fits':>5}  "
          f"{'placer worst B':>14}{'÷ rule':>7}{'Σ bound':>10}{'vs direct':>10}{'B1024 Δ':>9}{'fits':>5}"
          f"{'wall s':>8}{'backstop':>9}{'valid':>6}  stages (objective/bound)  [plan from]")
    readme = []
    for model, batch in runs:
        layers = int(load_model(model).layers) if full else int(args.layers)
        cap = generate(model, batch, layers, machine, 0)
        prepared = None
        hints: list[Plan] = []
        if args.sweep:
            began = time.perf_counter()
            prepared = prepare(cap, machine, min(budgets), machine.budget.fragments, workers=params.workers,
                              local_pack=not args.no_local_pack)
            print(f"{model.split('-')[0]} b{batch}: prepare {time.perf_counter() - began:.1f} s", flush=True)
        for budget in (sorted(budgets) if args.sweep else budgets):
            began = time.perf_counter()
            out = select(cap, machine, budget, machine.budget.fragments, settings,
                         SelectionContext(deadline=Deadline(params.time_limit, began), prepared=prepared, hints=hints))
            wall = time.perf_counter() - began
            if args.sweep and out.objectives.fits:
                hints.append(out.plan)
            g, c = out.greedy_objectives, out.objectives
            direct = out.scheduled.direct_bound if out.scheduled is not None else c.cycles
            valid = "-"
            if not args.no_validate:
                valid = "yes" if validate(cap, out.plan.to_json(cap), machine).valid == c.fits else "NO"
            name = f"{model.split('-')[0]} b{batch}"
            print(f"{name:<12}{format_size(budget):>8}  {g.table:>12,}{g.cycles:>10,}{g.b1024:>+9,}"
                  f"{'y' if g.fits else 'n':>5}  {c.table:>14,}{c.table / g.table:>7.3f}{c.cycles:>10,}"
                  f"{c.cycles / direct - 1:>+10.2%}{c.b1024:>+9,}{'y' if c.fits else 'n':>5}"
                  f"{wall:>8.1f}{'yes' if out.backstop else 'no':>9}{valid:>6}  {stages(out)}  [{out.source}]"
                  + (f"  infeasible under {proved_floor(out.problem):,} B" if out.problem is not None else ""),
                  flush=True)
            if args.front:
                print(f"{'':<12}{'':>8}  {caps_price(out, params)}", flush=True)
            if (model, batch) in rows and budget == 80 * 1024:
                readme.append((model, batch, cap, out, wall, valid))
    print(load())
    if readme and full:
        print("\nREADME full-depth rows (80 KiB; Σ bound: the program's scheduled lower bound, every Repeat "
              "iteration counted; B1024 Δ: Σ B1024 horizon against the all-direct program; headroom: the fullest "
              "tile's free bytes in its fullest phase, relay buffers included; fullest host: the least free bytes of a "
              "relay host in a phase where it holds a relay buffer):")
        print("| program | plan | worst tile B | fits 80 KiB | relays | memory headroom | fullest host | "
              "Σ bound (cycles) | B1024 Δ |")
        print("|---|---|---:|---|---:|---:|---:|---:|---:|")
        for model, batch, cap, out, _wall, _valid in readme:
            direct_cost = out.problem.direct if out.problem is not None else None
            d_bound = out.scheduled.direct_bound if out.scheduled is not None else 0
            name = f"{model} b{batch}, {cap.repeat.iterations if cap.repeat else 1} layers"
            plans = [("all direct", None, direct_cost.worst_table() if direct_cost else 0,
                      direct_cost.fits(machine.budget.table_bytes, machine.budget.fragments) if direct_cost else False,
                      0, d_bound, 0),
                     ("production rule", out.greedy, out.greedy_objectives.table, out.greedy_objectives.fits,
                      out.greedy_objectives.relays, out.greedy_objectives.cycles, out.greedy_objectives.b1024),
                     ("placer", out.plan, out.objectives.table, out.objectives.fits, out.objectives.relays,
                      out.objectives.cycles, out.objectives.b1024)]
            for label, plan, table, fits, relays, bound, b1024 in plans:
                room = headroom(cap, machine, plan.buffers() if plan is not None else None)
                free = f"{room.free:,} B" if room is not None else "-"
                host = f"{room.hosts_free:,} B" if room is not None and room.hosts_free is not None else "-"
                print(f"| {name} | {label} | {table:,} | {'yes' if fits else 'no'} | {relays:,} | {free} | {host} | "
                      f"{bound:,} | {b1024:+,} |")
    elif readme:
        print("\nREADME rows (80 KiB, one layer; Σ bound: the program's scheduled lower bound; B1024 Δ: against the "
              "all-direct program):")
        for model, batch, _cap, out, wall, valid in readme:
            g, c = out.greedy_objectives, out.objectives
            direct = out.scheduled.direct_bound if out.scheduled is not None else c.cycles
            rule = f"{g.table:,} B" + ("" if g.fits else ": does not fit") + f", B1024 {g.b1024:+,}"
            cp = (f"{c.table:,} B ({c.table / g.table:.2f} × rule), {'fits' if c.fits else 'DOES NOT FIT'}, "
                  f"Σ bound {c.cycles / direct - 1:+.2%} vs direct, B1024 {c.b1024:+,}, {wall:.0f} s"
                  f"{', validates' if valid == 'yes' else ''}")
            print(f"| {model} batch {batch} | {rule} | {cp} |")
    if args.schedule and readme:
        print(f"\nevery phase scheduled (placer solve --schedule; best order: {args.order_time:g} s of placer's "
              "search per changed phase; cycles without sync):")
        print(f"{'program':<14}{'plan':<16}{'worst B':>9}{'estimate':>10}{'Σ B1024':>10}{'vs rule':>9}"
              f"{'Σ best':>10}{'Σ bound':>10}{'vs direct':>10}{'valid':>6}")
        ordering = SolverParams(time_limit=args.order_time, workers=params.workers, seed=params.seed)
        for model, batch, cap, out, _wall, _valid in readme:
            programs = schedule_programs(cap, out, machine, ordering)
            tables = {"direct": out.problem.direct.worst_table() if out.problem is not None else 0,
                      "production_rule": out.greedy_objectives.table, "plan": out.objectives.table}
            estimates = {"direct": out.problem.direct.cycles if out.problem is not None else 0,
                         "production_rule": out.greedy_objectives.estimate, "plan": out.objectives.estimate}
            rule_fig, direct_fig = programs["production_rule"], programs["direct"]
            for key, fig in programs.items():
                print(f"{model.split('-')[0] + ' b' + str(batch):<14}{key:<16}{tables[key]:>9,}{estimates[key]:>10,}"
                      f"{fig.b1024:>10,}{fig.b1024 / rule_fig.b1024 - 1:>+9.2%}{fig.best:>10,}{fig.bound:>10,}"
                      f"{fig.bound / direct_fig.bound - 1:>+10.2%}{'yes' if fig.valid else 'NO':>6}", flush=True)
        print(load())


if __name__ == "__main__":
    main()
