"""``placer solve`` and ``placer compare``."""

from __future__ import annotations

import json as jsonlib
import sys
import time
from pathlib import Path
from typing import Any

import typer

from placer import interrupt
from placer.capture import read_capture
from placer.capture import write_capture as save_capture
from placer.capture.model import Capture
from placer.errors import InputError
from placer.fileio import check_output, write_json
from placer.machine import Machine, load_machine
from placer.report.summary import plan_summary, render_summary
from placer.report.table import render
from placer.selection.cpsat import OBJECTIVES
from placer.selection.select import Outcome, select
from placer.solver import SolverParams, Status
from placer.units import count_option, format_size, size_list_option, size_option

EXIT_INFEASIBLE = 3
EXIT_OVER_BUDGET = 4


def parse_objective(text: str | None) -> tuple[str, ...]:
    if not text:
        return OBJECTIVES
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [n for n in names if n not in OBJECTIVES]
    if bad or len(set(names)) != len(names):
        raise InputError(f"--objective {text!r}: use a comma-separated order of {', '.join(OBJECTIVES)}")
    return names + tuple(n for n in OBJECTIVES if n not in names)


def _progress(enabled: bool):  # type: ignore[no-untyped-def]
    # a redrawn status line only makes sense on a terminal; logs and pipes get the final summary only
    if not enabled or not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(elapsed: float, objective: float | None, bound: float | None) -> None:
        now = time.perf_counter()
        if now - last[0] < 0.5 and objective is None:
            return
        last[0] = now
        obj = f"objective {objective:,.0f}" if objective is not None else "objective  -"
        bnd = f"bound {bound:,.0f}" if bound is not None else ""
        sys.stderr.write(f"\r  cp-sat {elapsed:6.1f}s  {obj}  {bnd}    ")
        sys.stderr.flush()

    return show


def _params(params_file: Path | None, time_limit: float | None, workers: int | None, seed: int | None) -> SolverParams:
    return SolverParams.from_toml(params_file).with_overrides(time_limit=time_limit, workers=workers, seed=seed)


def _budgets(machine: Machine, budget: str | None, fragments: int | None) -> tuple[int, int]:
    table = size_option(budget, "--budget") if budget is not None else machine.budget.table_bytes
    frag = count_option(fragments, "--fragments") if fragments is not None else machine.budget.fragments
    return table, frag


def _cpsat_only(mode: str, **given: object) -> None:
    """``--mode greedy`` runs no search: a CP-SAT flag next to it is a mistake, not something to ignore."""
    if mode != "greedy":
        return
    flags = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None]
    if flags:
        raise InputError(f"{', '.join(flags)} only apply to --mode cpsat (--mode greedy runs no search)",
                         where="--mode greedy")


def outcome_json(capture: Capture, outcome: Outcome) -> dict[str, Any]:
    direct = outcome.problem.direct if outcome.problem is not None else None
    summary = plan_summary(capture, outcome.scans, outcome.plan, direct)
    staged = outcome.staged
    return {
        "summary": summary,
        "solver": {
            "status": outcome.status.value if staged is not None or outcome.source != "greedy" or
            outcome.status is Status.INFEASIBLE else "not-run",
            "plan_from": outcome.source,
            "stages": [{"stage": n, **r.to_json()} for n, r in (staged.stages if staged else [])],
            "runtime_s": round(outcome.runtime, 3),
            "rounds": outcome.rounds,
            "note": outcome.note,
        },
        "objectives": outcome.objectives.to_json(),
        "greedy_objectives": outcome.greedy_objectives.to_json(),
        "irreducible_tiles": [{"tile": t, "bytes_over": b} for t, b in outcome.irreducible],
    }


def solve(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    budget: str = typer.Option(None, help="Exchange-table budget per tile, e.g. 80KiB (default: the machine's)."),
    fragments: int = typer.Option(None, help="Fragment limit per tile (default: the machine's)."),
    mode: str = typer.Option("cpsat", help="cpsat (default) or greedy (the production rule)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the plan here (.json or .json.gz)."),
    write_capture: Path = typer.Option(None, "--write-capture", help="Also write the rewritten program as a "
                                       "capture (the plan's delta applied)."),
    objective: str = typer.Option(None, help="Lexicographic order, e.g. table,cycles (default "
                                            "cycles,table,scratch,relays)."),
    time_limit: float = typer.Option(None, help="CP-SAT seconds in all (default 30, from --params)."),
    workers: int = typer.Option(None, help="CP-SAT workers (default 2)."),
    seed: int = typer.Option(None, help="CP-SAT random seed (default 0)."),
    params: Path = typer.Option(None, help="Solver parameters TOML (see placer/params/default.toml)."),
    machine: str = typer.Option("ipu21", help="Bundled machine (ipu21, mk1) or a machine TOML file."),
    local_pack: bool = typer.Option(True, "--local-pack/--no-local-pack", help="Offer the local-pack variant."),
    schedule: bool = typer.Option(False, "--schedule", help="Also order every phase of the plan (B1024 greedy) "
                                  "and check each schedule."),
    json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """Choose relays so every tile fits its exchange-table budget; print per phase before → after.

    Exit codes: 0 plan fits; 1 a schedule failed its check; 3 proved infeasible; 4 the plan (or the greedy
    fallback) breaks the budget.
    """
    if mode not in ("cpsat", "greedy"):
        raise InputError(f"use cpsat or greedy, got {mode!r}", where="--mode")
    _cpsat_only(mode, objective=objective, time_limit=time_limit, workers=workers, seed=seed, params=params)
    inputs = (capture, params, machine)
    if output is not None:
        output = check_output(output, "-o", inputs=inputs)
    if write_capture is not None:
        write_capture = check_output(write_capture, "--write-capture", inputs=inputs, outputs=(("-o", output),))
    mach = load_machine(machine)
    table, frag = _budgets(mach, budget, fragments)
    order = parse_objective(objective)
    solver_params = _params(params, time_limit, workers, seed)
    cap = read_capture(capture)
    with interrupt.graceful():  # a signal stops the search; the best plan so far is still reported below
        outcome = select(cap, mach, table, frag, mode=mode, params=solver_params, order=order,
                         local_pack=local_pack, progress=_progress(not quiet and not json and mode == "cpsat"))
    if not quiet and not json and mode == "cpsat" and sys.stderr.isatty():
        sys.stderr.write("\n")
    stopped = interrupt.received()
    if stopped is not None:
        _interrupted(stopped, cap, mach, outcome, output)
    report = outcome_json(cap, outcome)
    schedule_ok = True
    if schedule:
        report["schedule"], schedule_ok = schedule_plan(outcome.plan.rewritten(cap), mach, quiet or json)
    if output is not None:
        write_json(output, outcome.plan.to_json(cap, report["summary"]))
    if write_capture is not None:
        save_capture(outcome.plan.rewritten(cap), write_capture)
    if json:
        typer.echo(jsonlib.dumps(report, indent=2))
    else:
        typer.echo(render_summary(report["summary"]))
        typer.echo(_status_line(outcome))
        if outcome.irreducible:
            typer.echo("tiles that cannot fit even with every option (tile: bytes over):")
            typer.echo("  " + ", ".join(f"{t}: {b:,}" for t, b in outcome.irreducible))
        if schedule:
            typer.echo(render_schedule(report["schedule"]))
        if output is not None:
            typer.echo(f"plan written to {output}")
    if not schedule_ok:
        raise typer.Exit(1)
    if outcome.status is Status.INFEASIBLE and mode == "cpsat":
        raise typer.Exit(EXIT_INFEASIBLE)
    if not outcome.objectives.fits:
        raise typer.Exit(EXIT_OVER_BUDGET)


def _interrupted(signal: interrupt.Interrupted, cap: Capture, mach: Machine, outcome: Outcome,
                 output: Path | None) -> None:
    """SIGINT/SIGTERM stopped the search: write the best plan so far if it passes the independent validator
    (budget included), say so in one line, and end with 130/143."""
    from placer.validation.plan import bind_plan, parse_plan
    from placer.validation.validator import validate

    status = f"cp-sat {outcome.status.value}, plan from {outcome.source}"
    written = "no -o given"
    if output is not None:
        doc = outcome.plan.to_json(cap, plan_summary(cap, outcome.scans, outcome.plan, None))
        checked = parse_plan(doc, "<plan>")
        bind_plan(checked, cap, "<plan>")
        report = validate(cap, checked, mach)
        if report.valid:
            write_json(output, doc)
            written = f"best plan so far written to {output}"
        else:
            written = f"nothing written: the best plan so far fails validation ({report.errors[0]})"
    typer.echo(f"interrupted by {signal.name}: search stopped ({status}); {written}", err=True)
    raise typer.Exit(signal.exit_code)


def schedule_plan(program: Capture, machine: Machine, quiet: bool) -> tuple[list[dict[str, Any]], bool]:
    """Order every phase of the rewritten program with the production scheduler; check each schedule."""
    from placer.ordering.check import check_schedule
    from placer.ordering.schedule import schedule_phase

    rows, ok = [], True
    for phase in program.phases:
        if not quiet and sys.stderr.isatty():
            sys.stderr.write(f"\r  scheduling phase {phase.phase} ({phase.n:,} transfers)        ")
        ps = schedule_phase(phase, machine, "greedy", tiles=program.tile_count)
        problems = check_schedule(phase, ps.schedule.tx_start, ps.schedule.rx_start, ps.schedule.horizon, machine)
        ok &= not problems
        rows.append({**ps.to_json(), "label": program.label(phase.phase), "valid": not problems,
                     "problems": problems[:5]})
    if not quiet and sys.stderr.isatty():
        sys.stderr.write("\n")
    return rows, ok


def render_schedule(rows: list[dict[str, Any]]) -> str:
    table = render(["phase", "label", "transfers", "horizon", "lower bound", "gap", "checked"],
                   [[r["phase"], r["label"][:28], r["transfers"], r["horizon"], r["lower_bound"],
                     f"{r['gap']:.1%}", "ok" if r["valid"] else "INVALID"] for r in rows],
                   title="\nstream order (B1024 greedy), cycles without sync:")
    total = sum(r["horizon"] for r in rows)
    bound = sum(r["lower_bound"] for r in rows)
    return table + f"\nsum of horizons {total:,} against a summed lower bound of {bound:,}"


def _status_line(outcome: Outcome) -> str:
    if outcome.staged is None and outcome.status is Status.INFEASIBLE:
        return f"infeasible (proved): {outcome.note}; the plan shown is the best incumbent"
    if outcome.staged is None:
        return "mode greedy: the production rule (no search)"
    stages = "; ".join(f"{n}: {r.describe()}" for n, r in outcome.staged.stages)
    extra = f" — {outcome.note}" if outcome.note else ""
    return f"cp-sat {outcome.status.value} [{stages}]; plan from {outcome.source}{extra}"


def compare(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    budget: str = typer.Option(None, help="One budget or a comma-separated sweep, e.g. 64KiB,72KiB,80KiB,96KiB."),
    fragments: int = typer.Option(None, help="Fragment limit per tile (default: the machine's)."),
    objective: str = typer.Option(None, help="Lexicographic order (default cycles,table,scratch,relays)."),
    time_limit: float = typer.Option(None, help="CP-SAT seconds per budget (default 30)."),
    workers: int = typer.Option(None, help="CP-SAT workers (default 2)."),
    seed: int = typer.Option(None, help="CP-SAT random seed (default 0)."),
    params: Path = typer.Option(None, help="Solver parameters TOML."),
    machine: str = typer.Option("ipu21", help="Bundled machine (ipu21, mk1) or a machine TOML file."),
    local_pack: bool = typer.Option(True, "--local-pack/--no-local-pack", help="Offer the local-pack variant."),
    groups: bool = typer.Option(False, "--groups", help="List every group, not only those where the two differ."),
    json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """The production greedy against the CP-SAT optimum, per phase and group, for one or more budgets."""
    mach = load_machine(machine)
    budgets = size_list_option(budget, "--budget") if budget is not None else [mach.budget.table_bytes]
    _, frag = _budgets(mach, None, fragments)
    order = parse_objective(objective)
    solver_params = _params(params, time_limit, workers, seed)
    cap = read_capture(capture)
    results = []
    for b in budgets:
        if not quiet and not json:
            sys.stderr.write(f"budget {format_size(b)}:\n")
        out = select(cap, mach, b, frag, params=solver_params, order=order, local_pack=local_pack,
                     progress=_progress(not quiet and not json))
        if not quiet and not json and sys.stderr.isatty():
            sys.stderr.write("\n")
        results.append((b, out))
    doc = [comparison_json(cap, b, out) for b, out in results]
    if json:
        typer.echo(jsonlib.dumps(doc, indent=2))
    else:
        for entry in doc:
            typer.echo(render_comparison(entry, all_groups=groups))
            typer.echo("")
    if any(not out.objectives.fits for _, out in results):
        raise typer.Exit(EXIT_OVER_BUDGET)


def comparison_json(capture: Capture, budget: int, out: Outcome) -> dict[str, Any]:
    g_by = {(r.group.phase, r.group.index): r for r in out.greedy.relays}
    c_by = {(r.group.phase, r.group.index): r for r in out.plan.relays}
    direct = out.problem.direct if out.problem is not None else None
    g_sum = plan_summary(capture, out.scans, out.greedy, direct)
    c_sum = plan_summary(capture, out.scans, out.plan, direct)
    phases = []
    for gp, cp in zip(g_sum["phases"], c_sum["phases"], strict=True):
        if not gp["groups"]:
            continue
        phases.append({"phase": gp["phase"], "label": gp["label"], "groups": gp["groups"],
                       "greedy": {k: gp[k] for k in ("relayed", "relays", "table_after", "cycles_after")},
                       "cpsat": {k: cp[k] for k in ("relayed", "relays", "table_after", "cycles_after")},
                       "table_before": gp["table_before"], "cycles_before": gp["cycles_before"]})
    group_rows = []
    for scan in out.scans:
        for g in scan.groups:
            gr, cr = g_by.get(g.key()), c_by.get(g.key())
            group_rows.append({
                "phase": g.phase, "group": g.index, "replicas": g.replica_count, "fragments": g.fragments,
                "greedy": _choice(gr), "cpsat": _choice(cr),
                "greedy_scratch": int(gr.scratch_bytes.sum()) if gr else 0,
                "cpsat_scratch": int(cr.scratch_bytes.sum()) if cr else 0,
            })
    return {
        "budget": budget,
        "status": out.status.value,
        "plan_from": out.source,
        "stages": [{"stage": n, **r.to_json()} for n, r in (out.staged.stages if out.staged else [])],
        "runtime_s": round(out.runtime, 3),
        "greedy": out.greedy_objectives.to_json(),
        "cpsat": out.objectives.to_json(),
        "phases": phases,
        "groups": group_rows,
    }


def _choice(r: Any) -> str:
    if r is None:
        return "direct"
    return f"{'DR' if r.variant == 'direct-receive' else 'LP'}×{r.segmentation.count}"


def render_comparison(entry: dict[str, Any], *, all_groups: bool = False) -> str:
    g, c = entry["greedy"], entry["cpsat"]
    lines = [f"budget {format_size(entry['budget'])}: cp-sat {entry['status']} (plan from {entry['plan_from']}, "
             f"{entry['runtime_s']:.1f} s)"]
    for st in entry["stages"]:
        gap = f", gap {st['gap']:.2%}" if st["gap"] is not None else ""
        obj = "-" if st["objective"] is None else f"{st['objective']:,.0f}"
        bnd = "-" if st["bound"] is None else f"{st['bound']:,.0f}"
        lines.append(f"  stage {st['stage']}: {st['status']}, objective {obj}, bound {bnd}{gap}, "
                     f"{st['runtime_s']:.2f} s")
    rows = [[p["phase"], p["label"][:24], p["groups"], f"{p['greedy']['relayed']} / {p['greedy']['relays']}",
             f"{p['cpsat']['relayed']} / {p['cpsat']['relays']}", p["table_before"], p["greedy"]["table_after"],
             p["cpsat"]["table_after"], p["cycles_before"], p["greedy"]["cycles_after"], p["cpsat"]["cycles_after"]]
            for p in entry["phases"]]
    lines.append(render(["phase", "label", "groups", "greedy grp/relays", "cp-sat grp/relays", "table direct",
                         "table greedy", "table cp-sat", "cycles direct", "cycles greedy", "cycles cp-sat"], rows))
    diff = [r for r in entry["groups"] if all_groups or r["greedy"] != r["cpsat"]]
    if diff:
        shown = diff[:40]
        lines.append(render(["phase", "group", "replicas", "fragments", "greedy", "cp-sat", "greedy scratch",
                             "cp-sat scratch"],
                            [[r["phase"], r["group"], r["replicas"], r["fragments"], r["greedy"], r["cpsat"],
                             r["greedy_scratch"], r["cpsat_scratch"]] for r in shown],
                            title="\ngroups where the choices differ:" if not all_groups else "\ngroups:"))
        if len(diff) > len(shown):
            lines.append(f"… and {len(diff) - len(shown)} more (--json for all)")
    lines.append(render(["", "fits", "cycles", "worst table B", "worst fragments", "scratch B", "relays"], [
        ["greedy", g["fits"], g["cycles"], g["table"], g["fragments"], g["scratch"], g["relays"]],
        ["cp-sat", c["fits"], c["cycles"], c["table"], c["fragments"], c["scratch"], c["relays"]],
    ], title="\ntotals:"))
    return "\n".join(lines)
