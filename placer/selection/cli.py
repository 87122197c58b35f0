"""``placer solve`` and ``placer compare``."""

from __future__ import annotations

import json as jsonlib
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
from placer.progress import install, task, track
from placer.report.changes import render_changes
from placer.report.summary import plan_summary, render_decisions, render_summary
from placer.report.table import render
from placer.selection.cpsat import OBJECTIVES
from placer.selection.select import SEARCH_END, Outcome, prepare, select
from placer.solver import Deadline, SolverParams, Status, command_start
from placer.units import count_option, format_size, size_list_option, size_option

WRITE_SECONDS_PER_TRANSFER = 6e-6  # writing a capture (numpy writer, gzip level 1), measured on SigLIP b2
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


def time_json(deadline: Deadline, outcomes: list[Outcome]) -> dict[str, Any]:
    """How the command's wall-clock limit was spent, and whether the run is reproducible."""
    return {
        "limit_s": deadline.seconds,
        "wall_s": round(deadline.elapsed(), 3),
        "spent_s": {k: round(v, 3) for k, v in deadline.spent().items()},
        "work": round(sum(o.work for o in outcomes), 3),
        "work_budget": round(sum(o.work_budget for o in outcomes), 3),
        "backstop": any(o.backstop for o in outcomes),
    }


def render_time(doc: dict[str, Any]) -> str:
    parts = ", ".join(f"{k} {v:.1f} s" for k, v in doc["spent_s"].items())
    line = (f"time: {doc['wall_s']:.1f} s of a {doc['limit_s']:g} s limit ({parts}); CP-SAT work "
            f"{doc['work']:.1f} of {doc['work_budget']:.1f} deterministic s")
    if doc["backstop"]:
        line += ("\nwarning: the wall-clock backstop stopped the search before its deterministic work was done "
                 "(busy machine?): this plan may differ from run to run")
    return line


def outcome_json(capture: Capture, outcome: Outcome) -> dict[str, Any]:
    direct = outcome.problem.direct if outcome.problem is not None else None
    summary = plan_summary(capture, outcome.scans, outcome.plan, direct)
    staged = outcome.staged
    return {
        "summary": summary,
        "solver": {
            "status": outcome.status.value if staged is not None or outcome.source != "greedy" or
            outcome.status is Status.INFEASIBLE else "not-run",
            "plan_from": plan_source(outcome.source),
            "stages": [{"stage": n, **r.to_json()} for n, r in (staged.stages if staged else [])],
            "runtime_s": round(outcome.runtime, 3),
            "rounds": outcome.rounds,
            "note": outcome.note,
        },
        "objectives": outcome.objectives.to_json(),
        "production_rule": {"objectives": outcome.greedy_objectives.to_json(),
                            "decisions": [d.to_json() for d in outcome.decisions]},
        "irreducible_tiles": [{"tile": t, "bytes_over": b} for t, b in outcome.irreducible],
    }


def solve(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    budget: str = typer.Option(None, help="Exchange-table budget per tile, e.g. 80KiB (default: the machine's)."),
    fragments: int = typer.Option(None, help="Fragment limit per tile (default: the machine's)."),
    mode: str = typer.Option("cpsat", help="cpsat (default: CP-SAT from the best incumbent, "
                              "production rule or budget-greedy) or greedy (the production rule alone)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the plan here (.json or .json.gz)."),
    write_capture: Path = typer.Option(None, "--write-capture", help="Also write the rewritten program as a "
                                       "capture (the plan's delta applied)."),
    objective: str = typer.Option(None, help="Lexicographic order, e.g. table,cycles (default "
                                            "cycles,table,scratch,relays)."),
    time_limit: float = typer.Option(None, help="Wall seconds for the whole command, loading included (default "
                                     "30, from --params)."),
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

    Modes: cpsat (default) searches with CP-SAT from the best incumbent it has: the production rule's plan or
    placer's own budget-greedy construction (largest groups first, a group is relayed when one of its replicas is
    over the budget and relaying lowers the total excess; not the production rule). The output says which plan it
    kept ("plan from cp-sat", "budget-greedy" or "production rule"). greedy runs the production rule alone
    (BRIEF §5): no search.

    Exit codes: 0 plan fits; 1 a schedule failed its check; 3 proved infeasible; 4 the plan (or the production
    rule's, in greedy mode or when CP-SAT finds nothing) breaks the budget.
    """
    install(quiet)
    began = command_start()
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
    deadline = Deadline(solver_params.time_limit, began)
    cap = read_capture(capture)
    deadline.mark("load", began)
    end = SEARCH_END * deadline.seconds
    if write_capture is not None:
        # writing the rewritten program takes about 6 s per million transfers here: the search stops earlier
        end = min(end, deadline.seconds - WRITE_SECONDS_PER_TRANSFER * cap.transfer_count())
    with interrupt.graceful():  # a signal stops the search; the best plan so far is still reported below
        outcome = select(cap, mach, table, frag, mode=mode, params=solver_params, order=order,
                         local_pack=local_pack, deadline=deadline, search_end=end)
    stopped = interrupt.received()
    if stopped is not None:
        _interrupted(stopped, cap, mach, outcome, output)
    t = time.perf_counter()
    report = outcome_json(cap, outcome)
    schedule_ok = True
    if schedule:
        report["schedule"], schedule_ok = schedule_plan(outcome.plan.rewritten(cap), mach)
        if mode == "greedy":
            report["production_rule"]["scheduled"] = accepted_horizons(cap, outcome, report["schedule"], mach)
    if output is not None:
        write_json(output, outcome.plan.to_json(cap, report["summary"], rendered=True))
    if write_capture is not None:
        save_capture(outcome.plan.rewritten(cap), write_capture)
    deadline.mark("output", t)
    report["time"] = time_json(deadline, [outcome])
    if json:
        typer.echo(jsonlib.dumps(report, indent=2))
    else:
        if mode == "greedy":
            typer.echo(render_decisions(report["production_rule"]["decisions"], cap.phase_labels or {}) + "\n")
        typer.echo(render_summary(report["summary"], phase_table=mode != "greedy"))
        typer.echo(render_changes(cap, outcome.plan))
        typer.echo(_status_line(outcome))
        if mode == "cpsat":
            typer.echo(render_time(report["time"]))
        if outcome.irreducible:
            typer.echo("tiles that cannot fit even with every option (tile: bytes over):")
            typer.echo("  " + ", ".join(f"{t}: {b:,}" for t, b in outcome.irreducible))
        if schedule:
            typer.echo(render_schedule(report["schedule"]))
            for h in report["production_rule"].get("scheduled", []):
                typer.echo(f"phase {h['phase']} (relayed by the production rule): scheduled horizon "
                           f"{h['horizon_direct']:,} direct → {h['horizon_relayed']:,} relayed")
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


def schedule_plan(program: Capture, machine: Machine) -> tuple[list[dict[str, Any]], bool]:
    """Order every phase of the rewritten program with the production scheduler; check each schedule."""
    from placer.ordering.check import check_schedule
    from placer.ordering.schedule import schedule_phase

    rows, ok = [], True
    for phase in track(program.phases, "schedule and check phases", unit="phases"):
        ps = schedule_phase(phase, machine, "greedy", tiles=program.tile_count)
        problems = check_schedule(phase, ps.schedule.tx_start, ps.schedule.rx_start, ps.schedule.horizon, machine)
        ok &= not problems
        rows.append({**ps.to_json(), "label": program.label(phase.phase), "valid": not problems,
                     "problems": problems[:5]})
    return rows, ok


def accepted_horizons(capture: Capture, outcome: Outcome, scheduled: list[dict[str, Any]],
                      machine: Machine) -> list[dict[str, Any]]:
    """For every phase the production rule relayed: its scheduled horizon all direct and with the relays (B1024
    greedy order, cycles without sync)."""
    from placer.ordering.schedule import schedule_phase

    after = {r["phase"]: r["horizon"] for r in scheduled}
    out = []
    for d in outcome.decisions:
        if d.accepted:
            direct = schedule_phase(capture.phase_by_id(d.phase), machine, "greedy", tiles=capture.tile_count)
            out.append({"phase": d.phase, "horizon_direct": direct.horizon, "horizon_relayed": after[d.phase]})
    return out


def render_schedule(rows: list[dict[str, Any]]) -> str:
    table = render(["phase", "label", "transfers", "horizon", "lower bound", "gap", "checked"],
                   [[r["phase"], r["label"], r["transfers"], r["horizon"], r["lower_bound"],
                     f"{r['gap']:.1%}", "ok" if r["valid"] else "INVALID"] for r in rows],
                   title="\nstream order (B1024 greedy), cycles without sync:")
    total = sum(r["horizon"] for r in rows)
    bound = sum(r["lower_bound"] for r in rows)
    return table + f"\nsum of horizons {total:,} against a summed lower bound of {bound:,}"


def plan_source(source: str) -> str:
    """Where a plan came from, named for the reader: the selection driver calls the production rule "greedy"."""
    return "production rule" if source == "greedy" else source


def _status_line(outcome: Outcome) -> str:
    if outcome.staged is None and outcome.status is Status.INFEASIBLE:
        return f"infeasible (proved): {outcome.note}; the plan shown is the best incumbent"
    if outcome.staged is None:
        accepted = sum(d.accepted for d in outcome.decisions)
        candidates = sum(d.has_candidate for d in outcome.decisions)
        return (f"mode greedy: the production rule (BRIEF §5, no search): {accepted} of {candidates} phases with a "
                "candidate relayed")
    stages = "; ".join(f"{n}: {r.describe()}" for n, r in outcome.staged.stages)
    extra = f" — {outcome.note}" if outcome.note else ""
    return f"cp-sat {outcome.status.value} [{stages}]; plan from {plan_source(outcome.source)}{extra}"


def compare(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    budget: str = typer.Option(None, help="One budget or a comma-separated sweep, e.g. 64KiB,72KiB,80KiB,96KiB."),
    fragments: int = typer.Option(None, help="Fragment limit per tile (default: the machine's)."),
    objective: str = typer.Option(None, help="Lexicographic order (default cycles,table,scratch,relays)."),
    time_limit: float = typer.Option(None, help="Wall seconds for the whole sweep, loading included (default 30)."),
    workers: int = typer.Option(None, help="CP-SAT workers (default 2)."),
    seed: int = typer.Option(None, help="CP-SAT random seed (default 0)."),
    params: Path = typer.Option(None, help="Solver parameters TOML."),
    machine: str = typer.Option("ipu21", help="Bundled machine (ipu21, mk1) or a machine TOML file."),
    local_pack: bool = typer.Option(True, "--local-pack/--no-local-pack", help="Offer the local-pack variant."),
    groups: bool = typer.Option(False, "--groups", help="List every group, not only those where the two differ."),
    json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress display."),
) -> None:
    """The production rule (BRIEF §5) against the CP-SAT optimum, per phase and group, for one or more budgets.

    The option effects are computed once and shared by every budget; budgets are solved smallest first and each
    starts from the best plan found so far that fits it, so a larger budget never reports a worse plan."""
    began = command_start()
    install(quiet)
    mach = load_machine(machine)
    budgets = size_list_option(budget, "--budget") if budget is not None else [mach.budget.table_bytes]
    _, frag = _budgets(mach, None, fragments)
    order = parse_objective(objective)
    solver_params = _params(params, time_limit, workers, seed)
    deadline = Deadline(solver_params.time_limit, began)
    cap = read_capture(capture)
    t = deadline.mark("load", began)
    prepared = prepare(cap, mach, min(budgets), frag, local_pack=local_pack)
    deadline.mark("options", t)
    work = solver_params.work_per_second * solver_params.time_limit / len(budgets)
    solved: dict[int, Outcome] = {}
    search_from = deadline.elapsed()
    ascending = sorted(set(budgets))
    for i, b in enumerate(ascending):
        # each budget's wall backstop: its share of what is left for the search when the sweep starts
        end = search_from + (i + 1) / len(ascending) * (SEARCH_END * deadline.seconds - search_from)
        hints = [solved[s].plan for s in ascending[:i] if solved[s].objectives.fits]
        with task(f"budget {format_size(b)}"):
            out = select(cap, mach, b, frag, params=solver_params, order=order, local_pack=local_pack,
                         deadline=deadline, prepared=prepared, work=work, search_end=end, hints=hints)
        solved[b] = out
    results = [(b, solved[b]) for b in budgets]
    t = time.perf_counter()
    doc = [comparison_json(cap, b, out) for b, out in results]
    deadline.mark("output", t)
    timing = time_json(deadline, list(solved.values()))
    if json:
        for entry in doc:
            entry["sweep_time"] = timing  # the whole sweep's clock (the same in every entry)
        typer.echo(jsonlib.dumps(doc, indent=2))
    else:
        for entry in doc:
            typer.echo(render_comparison(entry, all_groups=groups))
            typer.echo("")
        typer.echo(render_time(timing))
    if any(not out.objectives.fits for _, out in results):
        raise typer.Exit(EXIT_OVER_BUDGET)


def comparison_json(capture: Capture, budget: int, out: Outcome) -> dict[str, Any]:
    g_by = {(r.group.phase, r.group.index): r for r in out.greedy.relays}
    c_by = {(r.group.phase, r.group.index): r for r in out.plan.relays}
    direct = out.problem.direct if out.problem is not None else None
    g_sum = plan_summary(capture, out.scans, out.greedy, direct)
    c_sum = plan_summary(capture, out.scans, out.plan, direct)
    phases = []
    verdict = {d.phase: d.reason for d in out.decisions}
    for gp, cp in zip(g_sum["phases"], c_sum["phases"], strict=True):
        if not gp["groups"]:
            continue
        phases.append({"phase": gp["phase"], "label": gp["label"], "groups": gp["groups"],
                       "production_rule": {**{k: gp[k] for k in ("relayed", "relays", "table_after", "cycles_after")},
                                           "reason": verdict.get(gp["phase"], "")},
                       "cpsat": {k: cp[k] for k in ("relayed", "relays", "table_after", "cycles_after")},
                       "table_before": gp["table_before"], "cycles_before": gp["cycles_before"]})
    group_rows = []
    scanned = {g.key() for scan in out.scans for g in scan.groups}
    # the production rule also relays groups the optimiser's scan prunes: list those too
    extra = [r.group for r in out.greedy.relays if r.group.key() not in scanned]
    for scan in out.scans:
        for g in [*scan.groups, *(e for e in extra if e.phase == scan.phase)]:
            gr, cr = g_by.get(g.key()), c_by.get(g.key())
            group_rows.append({
                "phase": g.phase, "group": g.index, "replicas": g.replica_count, "fragments": g.fragments,
                "production_rule": _choice(gr), "cpsat": _choice(cr),
                "production_rule_scratch": int(gr.scratch_bytes.sum()) if gr else 0,
                "cpsat_scratch": int(cr.scratch_bytes.sum()) if cr else 0,
            })
    return {
        "budget": budget,
        "status": out.status.value,
        "plan_from": plan_source(out.source),
        "stages": [{"stage": n, **r.to_json()} for n, r in (out.staged.stages if out.staged else [])],
        "runtime_s": round(out.runtime, 3),
        "production_rule": {**out.greedy_objectives.to_json(),
                            "row_estimate": g_sum["program"]["row_estimate_after"]},
        "cpsat": {**out.objectives.to_json(), "row_estimate": c_sum["program"]["row_estimate_after"]},
        "direct": {"fits": g_sum["program"]["fits_before"], "cycles": g_sum["program"]["cycles_before"],
                   "table": g_sum["program"]["worst_table_before"],
                   "row_estimate": g_sum["program"]["row_estimate_before"],
                   "fragments": g_sum["program"]["worst_fragments_before"]},
        "phases": phases,
        "groups": group_rows,
        "production_rule_decisions": [d.to_json() for d in out.decisions],
    }


def _choice(r: Any) -> str:
    if r is None:
        return "direct"
    return f"{'DR' if r.variant == 'direct-receive' else 'LP'}×{r.segmentation.count}"


def render_comparison(entry: dict[str, Any], *, all_groups: bool = False) -> str:
    g, c = entry["production_rule"], entry["cpsat"]
    lines = [f"budget {format_size(entry['budget'])}: cp-sat {entry['status']} (plan from {entry['plan_from']}, "
             f"{entry['runtime_s']:.1f} s)"]
    for st in entry["stages"]:
        gap = f", gap {st['gap']:.2%}" if st["gap"] is not None else ""
        obj = "-" if st["objective"] is None else f"{st['objective']:,.0f}"
        bnd = "-" if st["bound"] is None else f"{st['bound']:,.0f}"
        lines.append(f"  stage {st['stage']}: {st['status']}, objective {obj}, bound {bnd}{gap}, "
                     f"{st['runtime_s']:.2f} s")
    rows = [[p["phase"], p["label"], p["groups"], p["production_rule"]["reason"],
             f"{p['production_rule']['relayed']} / {p['production_rule']['relays']}",
             f"{p['cpsat']['relayed']} / {p['cpsat']['relays']}",
             p["table_before"], p["production_rule"]["table_after"], p["cpsat"]["table_after"], p["cycles_before"],
             p["production_rule"]["cycles_after"], p["cpsat"]["cycles_after"]]
            for p in entry["phases"]]
    lines.append(render(["phase", "label", "groups", "rule verdict", "rule grp/relays", "cp-sat grp/relays",
                         "table direct", "table rule", "table cp-sat", "cycles direct", "cycles rule",
                         "cycles cp-sat"], rows,
                        title="per phase ('rule' is the production rule, BRIEF §5):"))
    diff = [r for r in entry["groups"] if all_groups or r["production_rule"] != r["cpsat"]]
    if diff:
        shown = diff[:40]
        lines.append(render(["phase", "group", "replicas", "fragments", "production rule", "cp-sat", "rule scratch",
                             "cp-sat scratch"],
                            [[r["phase"], r["group"], r["replicas"], r["fragments"], r["production_rule"], r["cpsat"],
                             r["production_rule_scratch"], r["cpsat_scratch"]] for r in shown],
                            title="\ngroups where the choices differ:" if not all_groups else "\ngroups:"))
        if len(diff) > len(shown):
            lines.append(f"… and {len(diff) - len(shown)} more (--json for all)")
    d = entry["direct"]
    lines.append(render(["", "fits", "cycles", "worst tile table B", "row estimate B (Σ phase maxima)",
                         "fragment max", "scratch B", "relays"], [
        ["all direct", d["fits"], d["cycles"], d["table"], d["row_estimate"], d["fragments"], 0, 0],
        ["production rule", g["fits"], g["cycles"], g["table"], g["row_estimate"], g["fragments"], g["scratch"],
         g["relays"]],
        ["cp-sat", c["fits"], c["cycles"], c["table"], c["row_estimate"], c["fragments"], c["scratch"], c["relays"]],
    ], title="\ntotals (the budget is checked against the worst tile; the row estimate is the reference's figure):"))
    return "\n".join(lines)
