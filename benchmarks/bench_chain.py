"""What a relay's chain costs in scheduled cycles: the table-first plans, phase by phase.

    python benchmarks/bench_chain.py                                  # SigLIP b2 and PE-core b2, one layer, 80 KiB
    python benchmarks/bench_chain.py --models pe-core-l14 --batches 1,2 --budget 72KiB

Per program, exactly what `placer solve --budget B --objective table,cycles --no-local-pack` returns (generation
excluded), and then, for each phase the plan relays:
- its relays and their segment counts;
- the phase's lower bound direct, the relay-free bound (``timing.relay_free_bound``: what the cycles stage's bound
  assumes of the phase), the plan's lower bound and which term sets it;
- the phase's largest relayed group relayed alone at each segment count it is offered (hosts: the highest-numbered
  tiles that may take its segments, the production rule's order), and the phase's lower bound then: the price of
  the chain -- a forward is released only when the gathers it reads have landed on its host, so a replica's
  forwards end no sooner than that release plus all their words -- as a function of the cut; and the same group
  relayed alone as the plan relays it, on the plan's hosts (a host's port takes its own receives and the gathers
  one after another).

Last, the host-aware construction (the table-first plan's source) again with every host's receive port and send
lane capped as the schedule-true constructions cap them (``timing.schedule_caps``: its direct receives and the
gathers within each phase's direct lower bound plus 0, 10 or 30 %): the worst tile and the selection phases' Σ
lower bound it then reaches, against the table-first plan's.

This is what the table-first plans' cycles gap is made of (docs/selection.md, "Bounds"): the table's optimum cuts
operands coarsely (fewest rows), and a coarse cut's forwards wait for a large gather.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import numpy as np

from placer.alternatives.relay import direct_receive
from placer.api import solve
from placer.machine import load_machine
from placer.modes import PlanMode
from placer.selection import capacity
from placer.selection.plan import Plan, RelayChoice
from placer.selection.problem import PhaseData, SelectionProblem
from placer.selection.select import plan_objectives
from placer.selection.timing import direct_timings, phase_figures, relay_free_bound, schedule_caps
from placer.solver import SolverParams
from placer.units import parse_size
from placer.validation import validate
from placer.workloads.generate import generate

MOST_COUNTS = 6  # segment counts measured alone per phase (the fewest first)
PORT_SLACK = (0.0, 0.1, 0.3)  # the capped constructions' targets: each phase's direct lower bound plus this share


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def alone(problem: SelectionProblem, pd: PhaseData, gi: int) -> list[tuple[int, int, str]]:
    """(segments, the phase's lower bound, its kind) with group ``gi`` relayed alone at each count it is offered."""
    machine = problem.machine
    max_bytes = machine.exchange.max_transfer_words * 4
    out = []
    for op in sorted(pd.options[gi][1:], key=lambda o: o.count)[:MOST_COUNTS]:
        if op.seg is None or op.variant != "direct-receive":
            continue
        hosts: list[int] = []
        buffers: list[int] = []
        for s in range(op.count):
            for t in range(problem.tiles - 1, -1, -1):
                if t in op.banned[s] or t in hosts:
                    continue
                at = pd.memory.first_fit(t, int(op.buffer_bytes[s]))
                if at is not None:
                    hosts.append(t)
                    buffers.append(int(at))
                    break
        if len(hosts) < op.count:
            continue
        h, b = np.asarray(hosts, np.int64), np.asarray(buffers, np.int64)
        relay = RelayChoice(op.group, op.variant, op.seg, h, b,
                            direct_receive(op.group, op.seg, h, b, pd.phase, max_bytes))
        main, _extra = Plan(PlanMode.CPSAT, machine, problem.table_budget, problem.fragment_limit,
                            [relay]).phase_rewrite(pd.phase)
        f = phase_figures(main, machine, problem.tiles)
        out.append((op.count, f.bound, f.kind))
    return out


def selection_cycles(problem: SelectionProblem, plan: Plan) -> int:
    """Σ over the selection phases of the plan's lower bound (times their iterations)."""
    total = 0
    for pd in problem.phases:
        main, _extra = plan.phase_rewrite(pd.phase)
        total += phase_figures(main, problem.machine, problem.tiles).bound * pd.iterations
    return total


def port_capped(problem: SelectionProblem, share: float) -> Plan:
    """The host-aware construction with its hosts' ports and lanes capped at each phase's direct bound + share."""
    ids = [pd.phase.phase for pd in problem.phases]
    timings = direct_timings(problem, ids)
    ports = schedule_caps(problem, timings, [int(timings[i].figures.bound * (1 + share)) for i in ids])
    caps = [capacity.with_room(pd, replace(c, rx_cap=s.rx_cap, tx_cap=s.tx_cap))
            for pd, c, s in zip(problem.phases, capacity.memory_caps(problem), ports, strict=True)]
    return capacity.relay_greedy(problem, caps, by_hosts=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="siglip-so400m,pe-core-l14")
    ap.add_argument("--batches", default="2")
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--budget", default="80KiB")
    ap.add_argument("--time-limit", type=float, default=60.0)
    args = ap.parse_args()
    machine = load_machine()
    budget = parse_size(args.budget)
    print(load(), flush=True)
    for model in args.models.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            cap = generate(model, batch, args.layers, machine, 0)
            began = time.perf_counter()
            params = SolverParams.from_toml(None).with_overrides(time_limit=args.time_limit)
            res = solve(cap, machine, budget=budget, objective="table,cycles", local_pack=False, params=params)
            wall = time.perf_counter() - began
            out = res.outcome
            problem, plan = out.problem, out.plan
            assert problem is not None
            assert out.staged is not None
            ok = validate(cap, plan.to_json(cap), machine).valid
            cycles = dict(out.staged.stages)["cycles"]
            assert cycles.objective is not None
            assert cycles.bound
            print(f"\n{model} b{batch} ({args.layers} layer(s)), {args.budget}, the table first: worst tile "
                  f"{out.objectives.table:,} B, Σ lower bound {cycles.objective:,.0f} against a relay-free bound of "
                  f"{cycles.bound:,.0f} (+{cycles.objective / cycles.bound - 1:.2%}), {wall:.1f} s, "
                  f"validates: {ok}", flush=True)
            print(f"{'phase':>5} {'relays':>6} {'segments':>9} {'direct':>7} {'relay-free':>10} {'plan':>7} "
                  f"{'kind':>6} {'Δ':>7}   largest group alone: segments → bound")
            for pd in problem.phases:
                relays = [r for r in plan.relays if r.group.phase == pd.phase.phase]
                if not relays:
                    continue
                direct = phase_figures(pd.phase, machine, problem.tiles).bound
                main, _extra = plan.phase_rewrite(pd.phase)
                f = phase_figures(main, machine, problem.tiles)
                counts = sorted({r.segmentation.count for r in relays})
                biggest = max(relays, key=lambda r: (r.group.extent, -r.group.index))
                gi = next(g for g, opts in enumerate(pd.options) if opts[0].group.index == biggest.group.index)
                shown = ", ".join(f"{k}: {b:,} ({kind})" for k, b, kind in alone(problem, pd, gi))
                own, _extra = Plan(PlanMode.CPSAT, machine, problem.table_budget, problem.fragment_limit,
                                   [biggest]).phase_rewrite(pd.phase)
                mine = phase_figures(own, machine, problem.tiles)
                shown += f"; on the plan's hosts ({biggest.segmentation.count}): {mine.bound:,} ({mine.kind})"
                print(f"{pd.phase.phase:>5} {len(relays):>6} {'/'.join(map(str, counts)):>9} {direct:>7,} "
                      f"{relay_free_bound(problem, pd.phase.phase):>10,} {f.bound:>7,} {f.kind:>6} "
                      f"{f.bound / direct - 1:>+7.1%}   {shown}", flush=True)
            print(f"host-aware construction, hosts' ports capped: the plan above {out.objectives.table:,} B at "
                  f"{selection_cycles(problem, plan):,} cycles (Σ lower bound of the selection phases)", flush=True)
            for share in PORT_SLACK:
                capped = port_capped(problem, share)
                print(f"  at the direct bound +{share:.0%}: {plan_objectives(cap, capped).table:,} B at "
                      f"{selection_cycles(problem, capped):,} cycles", flush=True)
    print("\n" + load())


if __name__ == "__main__":
    main()
