"""``placer solve`` and ``placer compare``: options in, :func:`placer.api.solve` / :func:`placer.api.compare`,
the result printed or written."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from placer import api, interrupt
from placer.capture import write_capture as save_capture
from placer.cli import options
from placer.clock import command_start
from placer.errors import ExitCode, InputError
from placer.fileio import check_output, print_json
from placer.machine import Machine, load_machine
from placer.modes import SelectionMode
from placer.progress import install
from placer.report.changes import render_changes
from placer.report.selection import (
    SolveDoc,
    render_certificate,
    render_comparisons,
    render_schedule,
    render_time,
    status_line,
)
from placer.report.summary import render_decisions, render_summary
from placer.solver import Deadline
from placer.units import count_option, size_list_option, size_option


def _budgets(machine: Machine, budget: str | None, fragments: int | None) -> tuple[int, int]:
    table = size_option(budget, "--budget") if budget is not None else machine.budget.table_bytes
    frag = count_option(fragments, "--fragments") if fragments is not None else machine.budget.fragments
    return table, frag


def _cpsat_only(mode: str, **given: object) -> None:
    """``--mode greedy`` runs no search: a CP-SAT flag next to it is a mistake, not something to ignore."""
    if mode != SelectionMode.GREEDY:
        return
    flags = [f"--{k.replace('_', '-')}" for k, v in given.items() if v is not None]
    if flags:
        raise InputError(f"{', '.join(flags)} only apply to --mode cpsat (--mode greedy runs no search)",
                         where="--mode greedy")


def solve(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    budget: str = options.budget(),
    fragments: int = options.fragments(),
    mode: SelectionMode = typer.Option(SelectionMode.CPSAT, "--mode", help="cpsat (default: CP-SAT from the best "
                                       "incumbent, production rule or budget-greedy) or greedy (the production "
                                       "rule alone)."),
    output: Path = typer.Option(None, "-o", "--output", help="Write the plan here (.json or .json.gz)."),
    write_capture: Path = typer.Option(None, "--write-capture", help="Also write the rewritten program as a "
                                       "capture (the plan's delta applied)."),
    objective: str = typer.Option(None, help="Lexicographic order, e.g. table,cycles (default "
                                             "cycles,table,scratch,relays)."),
    time_limit: float = options.time_limit("Wall seconds for the whole command, loading included", "selection"),
    workers: int = options.workers(),
    seed: int = options.seed(),
    params: Path = options.params(),
    machine: str = options.machine(),
    local_pack: bool = typer.Option(True, "--local-pack/--no-local-pack", help="Offer the local-pack variant."),
    schedule: bool = typer.Option(False, "--schedule", help="Also schedule the all-direct program, the production "
                                  "rule's plan and this one (B1024, lower bound, placer's best order on the phases "
                                  "the plans change), check every schedule, and with -o write the plan's order "
                                  "file next to the plan (PLAN.order.json). Takes --order-time per changed phase "
                                  "on top of --time-limit."),
    order_time: float = typer.Option(None, "--order-time", help="With --schedule: seconds of placer's ordering "
                                     "search per changed phase (default 10, from the run configuration's "
                                     "[ordering])."),
    cycle_slack: float = typer.Option(None, "--cycle-slack", help="With cycles first: the share of the direct "
                                      "program's Σ scheduled lower bound the plan may add, e.g. 0.01 (the default) "
                                      "for 1 %; its Σ B1024 horizon never exceeds the production rule plan's."),
    json: bool = options.json("the summary"),
    quiet: bool = options.quiet(),
) -> None:
    """Choose relays so every tile fits its exchange-table budget; print per phase before → after.

    Modes: cpsat (default) searches with CP-SAT from the best incumbent it has: the production rule's plan or
    placer's own budget-greedy construction (largest groups first, a group is relayed when one of its replicas is
    over the budget and relaying lowers the total excess; not the production rule). The output says which plan it
    kept ("plan from cp-sat", "budget-greedy" or "production rule"). greedy runs the production rule alone
    (docs/reference.md §5): no search.

    Exit codes: 0 plan fits; 1 a schedule failed its check; 3 proved infeasible; 4 the plan (or the production
    rule's, in greedy mode or when CP-SAT finds nothing) breaks the budget.
    """
    install(quiet)
    began = command_start()
    _cpsat_only(mode, objective=objective, time_limit=time_limit, workers=workers, seed=seed, params=params)
    _cpsat_only(mode, cycle_slack=cycle_slack)
    if order_time is not None and not schedule:
        raise InputError("--order-time only applies with --schedule", where="--order-time")
    inputs = (capture, params, machine)
    if output is not None:
        output = check_output(output, "-o", inputs=inputs)
    if write_capture is not None:
        write_capture = check_output(write_capture, "--write-capture", inputs=inputs, outputs=(("-o", output),))
    order_file = None
    if schedule and output is not None:
        order_file = check_output(order_path(output), "the order file", inputs=inputs,
                                  outputs=(("-o", output), ("--write-capture", write_capture)))
    mach = load_machine(machine)
    table, frag = _budgets(mach, budget, fragments)
    order = api.objective_order(objective)
    solver_params = options.solver_params("selection", params, time_limit, workers, seed)
    order_params = options.solver_params("ordering", params, order_time, workers, seed) if schedule else None
    deadline = Deadline(solver_params.time_limit, began)
    result = api.solve(capture, mach, budget=table, fragments=frag, mode=mode, objective=order,
                       params=solver_params, local_pack=local_pack, schedule=schedule, deadline=deadline,
                       writes_capture=write_capture is not None, cycle_slack=cycle_slack, order_params=order_params)
    stopped = interrupt.received()
    if stopped is not None:
        _interrupted(stopped, result, output)
    unbuilt = _rule_unbuilt(result)
    t = time.perf_counter()
    # in greedy mode the rule's plan is the result: when it cannot be built, no file is written and it exits 3
    writes = not (unbuilt and result.mode == SelectionMode.GREEDY)
    if output is not None and writes:
        result.write_plan(output)
    if order_file is not None and writes:
        result.write_order(order_file)
    if write_capture is not None and writes:
        save_capture(result.rewritten(), write_capture)
    deadline.mark("output", t)
    report = result.to_json()
    if json:
        print_json(report)
    else:
        _print_solve(result, report, output if writes else None)
    if not writes:
        raise typer.Exit(ExitCode.INFEASIBLE)
    if result.exit_code is not ExitCode.OK:
        raise typer.Exit(result.exit_code)


def _rule_unbuilt(result: api.SelectionResult) -> bool:
    """Say on stderr, as the reference compiler would, each relay buffer of the production rule that does not
    fit its host (docs/selection.md, "The production rule", step 5); True if there is one."""
    from placer.selection.greedy import placement_failures

    failures = placement_failures(result.decisions)
    if not failures:
        return False
    unplaced = sum(d.unplaced for d in result.decisions)
    for why in failures:
        typer.echo(f"placer: production rule: {why}", err=True)
    what = ("no plan is written (exit 3)" if result.mode == SelectionMode.GREEDY else
            "the rule's figures below leave those phases direct")
    typer.echo(f"placer: the production rule's plan cannot be built: {unplaced:,} relay buffer(s) it accepted do "
               f"not fit their hosts, where the reference compiler stops with an allocation failure; {what}",
               err=True)
    return True


def _print_solve(result: api.SelectionResult, report: SolveDoc, output: Path | None) -> None:
    cap, outcome = result.capture, result.outcome
    if result.mode == SelectionMode.GREEDY:
        typer.echo(render_decisions(report["production_rule"]["decisions"], cap.phase_labels or {}) + "\n")
    typer.echo(render_summary(report["summary"], phase_table=result.mode != SelectionMode.GREEDY))
    typer.echo(render_changes(cap, outcome.plan))
    typer.echo(status_line(outcome))
    if result.mode == SelectionMode.CPSAT:
        typer.echo(render_time(report["time"]))
    if outcome.certificate is not None:
        typer.echo(render_certificate(outcome.certificate))
    if result.programs is not None:
        typer.echo(render_schedule(report["schedule"]))
    if output is not None:
        typer.echo(f"plan written to {output}")
        if result.programs is not None:
            typer.echo(f"order written to {order_path(output)}")


def order_path(plan: Path) -> Path:
    """Where ``solve --schedule -o PLAN`` writes the plan's order file: PLAN's name with ``.order.json``."""
    name = plan.name
    for suffix in (".json.gz", ".json", ".gz"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return plan.with_name(name + ".order.json")


def _interrupted(signal: interrupt.Interrupted, result: api.SelectionResult, output: Path | None) -> None:
    """SIGINT/SIGTERM stopped the search: write the best plan so far if it passes the independent validator
    (budget included), say so in one line, and end with 130/143."""
    outcome = result.outcome
    status = f"cp-sat {outcome.status.value}, plan from {outcome.source}"
    written = "no -o given"
    if output is not None:
        checked = api.save_interrupted(result, output)
        if checked.valid:
            written = f"best plan so far written to {output}"
        else:
            written = f"nothing written: the best plan so far fails validation ({checked.report.errors[0]})"
    typer.echo(f"interrupted by {signal.name}: search stopped ({status}); {written}", err=True)
    raise typer.Exit(signal.exit_code)


def compare(
    capture: Path = typer.Argument(..., help="Capture JSON (.json or .json.gz)."),
    budget: str = options.budget("One budget or a comma-separated sweep, e.g. 64KiB,72KiB,80KiB,96KiB."),
    fragments: int = options.fragments(),
    objective: str = typer.Option(None, help="Lexicographic order (default cycles,table,scratch,relays)."),
    time_limit: float = options.time_limit("Wall seconds for the whole sweep, loading included", "selection"),
    workers: int = options.workers(),
    seed: int = options.seed(),
    params: Path = options.params(),
    machine: str = options.machine(),
    local_pack: bool = typer.Option(True, "--local-pack/--no-local-pack", help="Offer the local-pack variant."),
    groups: bool = typer.Option(False, "--groups", help="With --detail: every group, not only those where the two "
                                "differ."),
    detail: bool = typer.Option(False, "--detail", help="Also each budget's phases and groups, after the summary."),
    json: bool = options.json("the comparison"),
    quiet: bool = options.quiet(),
) -> None:
    """The production rule (docs/reference.md §5) against the CP-SAT optimum, per phase and group, for 1+ budgets.

    The option effects are computed once and shared by every budget; budgets are solved smallest first and each
    starts from the best plan found so far that fits it, so a larger budget never reports a worse plan."""
    began = command_start()
    install(quiet)
    mach = load_machine(machine)
    budgets = size_list_option(budget, "--budget") if budget is not None else [mach.budget.table_bytes]
    _, frag = _budgets(mach, None, fragments)
    order = api.objective_order(objective)
    solver_params = options.solver_params("selection", params, time_limit, workers, seed)
    deadline = Deadline(solver_params.time_limit, began)
    result = api.compare(capture, mach, budgets=budgets, fragments=frag, objective=order, params=solver_params,
                         local_pack=local_pack, deadline=deadline)
    if json:
        print_json(result.to_json())
    else:
        typer.echo(render_comparisons(result.entries, detail=detail, all_groups=groups))
        typer.echo(render_time(result.time()))
    if result.exit_code is not ExitCode.OK:
        raise typer.Exit(result.exit_code)
