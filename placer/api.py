"""placer's public Python API: the whole pipeline as functions with typed results.

Every command of the ``placer`` command line is a thin layer over one function here, and every ``--json`` a
command prints is the ``to_json()`` of the result that function returns::

    import placer

    capture = placer.read_capture("examples/relay-demo.json")
    machine = placer.load_machine("ipu21")
    result = placer.solve(capture, machine, budget="700")      # relay selection (placer solve)
    result.status, result.objectives.table, result.bounds      # how it ended, the plan's figures, the bounds
    check = placer.validate(capture, result, machine, budget=700)   # the independent validator (placer validate)
    order = placer.schedule(result.rewritten(), machine)        # stream order of every phase (placer schedule)

The names are re-exported from the package (``placer.solve`` is :func:`solve`). Heavy stages (CP-SAT, the
validator, the stream scheduler) are imported when a function needs them, so ``import placer`` stays cheap.
Malformed input raises :class:`placer.errors.InputError` (one line naming the file, the field and the value);
each result's ``exit_code`` is the code the matching command ends with.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from placer import interrupt
from placer.clock import command_start
from placer.errors import ExitCode, InputError
from placer.fileio import read_json, write_json
from placer.modes import OrderingRules, PlacementMode, ScheduleMode, SelectionMode
from placer.solver import Deadline, RunConfig, SolveResult, SolverParams, Status
from placer.units import MAX_ADDRESS, MAX_SIZE, size_option

# Every stage (and numpy with it) is imported by the function that needs it: ``placer place`` on a MiniMalloc-class
# instance imports neither numpy nor ortools, and ``import placer`` stays cheap.
if TYPE_CHECKING:
    from placer.capture.model import Capture
    from placer.machine import Machine
    from placer.ordering.orders import Replayed
    from placer.ordering.program import ProgramFigures
    from placer.ordering.schedule import PhaseSchedule
    from placer.placement import PlacementProblem, PlacementResult
    from placer.selection.greedy import Decision
    from placer.selection.plan import Plan
    from placer.selection.select import Objectives, Outcome
    from placer.validation.plan import Plan as ParsedPlan
    from placer.validation.validator import ValidationReport

OBJECTIVES = ("cycles", "table", "scratch", "relays")  # the selection's default lexicographic order
WRITE_SECONDS_PER_TRANSFER = 6e-6  # writing a capture (numpy writer, gzip level 1), measured on SigLIP b2

CaptureLike: TypeAlias = "Capture | str | Path"  # a capture, or a capture file
MachineLike: TypeAlias = "Machine | str | Path | None"  # a machine, its bundled name or its file (None: ipu21)


# --- captures and machines --------------------------------------------------------------------------------------


def read_capture(path: str | Path) -> Capture:
    """Read a capture file.

    Parameters
    ----------
    path
        A capture in the reference JSON format with placer's extensions (``.json``, or ``.json.gz``).

    Returns
    -------
    Capture
        The program as columnar numpy arrays, checked (tile and address ranges, destination sets, Repeat).

    Raises
    ------
    InputError
        The file is unreadable or malformed; the message names the file, the phase, the transfer and the field.
    """
    from placer.capture.io import read_capture as _read

    return _read(path)


def write_capture(capture: Capture, path: str | Path) -> None:
    """Write ``capture`` to ``path`` (gzipped when the name ends in ``.gz``); the file appears only complete.

    Parameters
    ----------
    capture
        The program to write (e.g. :meth:`SelectionResult.rewritten`).
    path
        Where to write it.
    """
    from placer.capture.writer import write_capture as _write

    _write(capture, path)


def load_machine(spec: str | Path | None = None) -> Machine:
    """Load a machine description: tiles, memory map, bandwidth, table budget, cost constants, kernel timings.

    Parameters
    ----------
    spec
        A bundled machine's name (``"ipu21"``, ``"mk1"``), a machine TOML file, or ``None`` for ``ipu21``.

    Returns
    -------
    Machine
        The frozen constants; ``machine.cost`` holds the cost formula (:class:`placer.machine.CostConstants`).

    Raises
    ------
    InputError
        No such machine, or a field is missing or out of range.
    """
    from placer.machine import load_machine as _load

    return _load(spec)


def generate(model: str | Path, *, batch: int = 2, layers: int | None = None, machine: MachineLike = None,
             seed: int = 0) -> Capture:
    """Lower a workload description to a whole-program synthetic capture (``placer generate``).

    Parameters
    ----------
    model
        A bundled model (``"siglip-so400m"``, ``"pe-core-l14"``; ``models/NAME.toml``) or a model TOML file.
    batch
        Images per step.
    layers
        Repeat iterations of the stored layer body (default one).
    machine
        The machine the program is laid out for (default ``ipu21``).
    seed
        Seed of the weight holders and the per-tile code and scratch sizes.

    Returns
    -------
    Capture
        One layer body in a Repeat, plus the bookends.
    """
    from placer.workloads.generate import generate as _generate

    return _generate(model, batch=batch, layers=layers, machine=machine, seed=seed)


def _machine(machine: MachineLike) -> Machine:
    from placer.machine import Machine, load_machine

    return machine if isinstance(machine, Machine) else load_machine(machine)


def _capture(capture: CaptureLike) -> Capture:
    from placer.capture.io import read_capture as _read
    from placer.capture.model import Capture

    return capture if isinstance(capture, Capture) else _read(capture)


def _size(value: int | str, name: str, maximum: int = MAX_SIZE) -> int:
    return size_option(value, name, maximum=maximum)  # the CLI's check and limits


def objective_order(objective: str | Sequence[str] | None) -> tuple[str, ...]:
    """The selection's lexicographic order: ``objective`` (a comma-separated string or a sequence of names of
    :data:`OBJECTIVES`) first, the rest of the default order after it; ``None`` is the default order."""
    if not objective:
        return OBJECTIVES
    text = objective if isinstance(objective, str) else ",".join(objective)
    names = tuple(s.strip() for s in text.split(",") if s.strip())
    bad = [n for n in names if n not in OBJECTIVES]
    if bad or len(set(names)) != len(names):
        raise InputError(f"--objective {text!r}: use a comma-separated order of {', '.join(OBJECTIVES)}")
    return names + tuple(n for n in OBJECTIVES if n not in names)


# --- inspect ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InspectResult:
    """What a capture costs, per phase and for the program (``placer inspect``).

    Attributes
    ----------
    summary
        The document ``placer inspect --json`` prints: ``phases`` (transfers, multicast groups, worst tile,
        table bytes, fragments, cycles) and ``program`` (worst tile, row estimate, budgets, verdict).
    """

    summary: dict[str, Any]

    @property
    def fits(self) -> bool:
        """Whether the program as captured fits the table budget and the fragment limit."""
        return bool(self.summary["program"]["fits"])

    @property
    def exit_code(self) -> ExitCode:
        """``placer inspect``'s exit code: 0 fits, 4 does not."""
        return ExitCode.OK if self.fits else ExitCode.OVER_BUDGET

    def to_json(self) -> dict[str, Any]:
        """The ``placer inspect --json`` document."""
        return self.summary


def inspect(capture: CaptureLike, machine: MachineLike = None, *, budget: int | str | None = None) -> InspectResult:
    """Cost a capture with the reference compiler's model (docs/reference.md §3), phase by phase (``placer inspect``).

    Parameters
    ----------
    capture
        A :class:`Capture` or a capture file.
    machine
        A :class:`Machine`, a bundled machine's name or a machine file (default ``ipu21``).
    budget
        Table budget per tile (bytes, or a size such as ``"80KiB"``); default the machine's.

    Returns
    -------
    InspectResult
    """
    from placer.report.inspect import inspect_summary

    table = _size(budget, "budget") if budget is not None else None
    cap = _capture(capture)
    return InspectResult(inspect_summary(cap, machine if isinstance(machine, str) else _machine(machine), table))


# --- relay selection ----------------------------------------------------------------------------------------------


@dataclass(eq=False)
class SelectionResult:
    """The outcome of one relay selection (``placer solve``): the plan, its exact figures, the search's bounds.

    Attributes
    ----------
    capture, machine
        What was solved.
    mode
        ``cpsat`` or ``greedy`` (the production rule alone).
    outcome
        The selection driver's full record (``placer.selection.select.Outcome``).
    summary
        Per phase before → after and the program against its budgets (``None`` if a signal stopped the run).
    deadline
        The clock the run was timed on; ``to_json()["time"]`` says how it was spent.
    programs
        With ``schedule=True``: the all-direct program, the production rule's and this plan's, every phase
        scheduled (B1024, lower bound, placer's best order on the phases the plans change) and checked.
    interrupted
        A SIGINT/SIGTERM stopped the search (``placer solve`` then writes the best plan so far if it validates).
    """

    capture: Capture
    machine: Machine
    mode: SelectionMode
    outcome: Outcome
    summary: dict[str, Any] | None
    deadline: Deadline
    programs: dict[str, ProgramFigures] | None = None  # "direct", "production_rule", "plan"
    interrupted: bool = False
    write_reserve: float = 0.0  # seconds of the limit held back for writing the rewritten capture afterwards

    @property
    def status(self) -> Status:
        """How the search ended: ``optimal``, ``feasible``, ``infeasible`` (proved) or ``unknown``."""
        return self.outcome.status

    @property
    def plan(self) -> Plan:
        """The relay plan kept (CP-SAT's, or the incumbent it could not beat)."""
        return self.outcome.plan

    @property
    def plan_from(self) -> str:
        """Where the plan came from: ``cp-sat``, ``production rule``, ``budget-greedy``, ..."""
        from placer.report.selection import plan_source

        return plan_source(self.outcome.source)

    @property
    def objectives(self) -> Objectives:
        """The plan's exact figures (re-costed on the rewritten program): fits, cycles, worst table, ..."""
        return self.outcome.objectives

    @property
    def production_rule(self) -> Objectives:
        """The production rule's plan's figures (docs/reference.md §5), the baseline."""
        return self.outcome.greedy_objectives

    @property
    def decisions(self) -> list[Decision]:
        """The production rule's decision for every phase."""
        return self.outcome.decisions

    @property
    def stages(self) -> list[tuple[str, SolveResult]]:
        """Each lexicographic stage's solve (objective, bound, status, time); empty in greedy mode."""
        return list(self.outcome.staged.stages) if self.outcome.staged is not None else []

    @property
    def bounds(self) -> dict[str, float | None]:
        """Per stage (``cycles``, ``table``, ...), the proved lower bound."""
        return {name: r.bound for name, r in self.stages}

    @property
    def fits(self) -> bool:
        """Whether the plan fits the table budget and the fragment limit."""
        return self.objectives.fits

    @property
    def schedule_ok(self) -> bool:
        """Whether every schedule (``schedule=True``) passed its check (``True`` without schedules)."""
        return all(p.valid for p in (self.programs or {}).values())

    @property
    def exit_code(self) -> ExitCode:
        """``placer solve``'s exit code: 1 a schedule failed its check, 3 proved infeasible, 4 over budget."""
        if not self.schedule_ok:
            return ExitCode.INVALID
        if self.outcome.status is Status.INFEASIBLE and self.mode == SelectionMode.CPSAT:
            return ExitCode.INFEASIBLE
        if not self.objectives.fits:
            return ExitCode.OVER_BUDGET
        return ExitCode.OK

    def rewritten(self) -> Capture:
        """The program with the plan's relays applied."""
        return self.plan.rewritten(self.capture)

    def plan_json(self, *, rendered: bool = False) -> dict[str, Any]:
        """The plan file (docs/plan.md): the delta, the relays, the capture's and machine's digests. ``rendered``
        gives the transfer lists as pre-rendered JSON (the same bytes once serialised, faster to write); without
        it they are lists, as an in-memory reader (the validator) wants them."""
        return self.plan.to_json(self.capture, self._summary(), rendered=rendered)

    def write_plan(self, path: str | Path) -> None:
        """Write the plan file to ``path`` (gzipped when the name ends in ``.gz``), atomically."""
        write_json(path, self.plan_json(rendered=True))

    def order_json(self) -> dict[str, Any]:
        """The order file of the plan's program (``schedule=True``): placer's best order of every phase
        (docs/plan.md, "The order file")."""
        from placer.capture.io import capture_digest
        from placer.ordering.orders import order_document

        if self.programs is None:
            raise ValueError("no schedule: solve with schedule=True")
        rows = self.programs["plan"].rows
        return order_document(capture_digest(self.rewritten()), self.machine, [r.phase_order() for r in rows])

    def write_order(self, path: str | Path) -> None:
        """Write the order file to ``path``, atomically."""
        write_json(path, self.order_json())

    def _summary(self) -> dict[str, Any]:
        if self.summary is None:
            from placer.report.selection import outcome_summary

            self.summary = outcome_summary(self.capture, self.outcome)
        return self.summary

    def to_json(self) -> dict[str, Any]:
        """The ``placer solve --json`` document; ``time`` is the clock as of this call."""
        from placer.report.selection import outcome_json, schedule_json, time_json

        doc = outcome_json(self.capture, self.outcome, self._summary())
        if self.programs is not None:
            doc["schedule"] = schedule_json(self.programs)
        doc["time"] = time_json(self.deadline, [self.outcome])
        if self.write_reserve:
            doc["time"]["write_capture_reserve_s"] = round(self.write_reserve, 1)
        return doc


def _params(params: SolverParams | None, stage: str) -> SolverParams:
    return params if params is not None else getattr(RunConfig.load(), stage)


def _deadline(params: SolverParams, deadline: Deadline | None) -> Deadline:
    # a command's clock starts when the console process imported placer; a library call's, now
    return deadline if deadline is not None else Deadline(params.time_limit, command_start())


def _slack(value: float | None) -> float:
    from placer.selection.select import CYCLE_SLACK

    if value is None:
        return CYCLE_SLACK
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InputError(f"must be a share between 0 and 1 (0.01 is 1 %), got {value!r}", where="cycle_slack")
    return float(value)


def _load_timed(capture: CaptureLike, deadline: Deadline) -> Capture:
    """The capture; reading it counts as "load" from the start of the clock (when nothing was marked yet)."""
    from placer.capture.io import read_capture as _read
    from placer.capture.model import Capture

    if isinstance(capture, Capture):
        return capture
    cap = _read(capture)
    deadline.mark("load", deadline.start if not deadline.marks else time.perf_counter())
    return cap


def solve(capture: CaptureLike, machine: MachineLike = None, *, budget: int | str | None = None,
          fragments: int | None = None, mode: SelectionMode | str = SelectionMode.CPSAT,
          objective: str | Sequence[str] | None = None, params: SolverParams | None = None, local_pack: bool = True,
          schedule: bool = False, deadline: Deadline | None = None, writes_capture: bool = False,
          cycle_slack: float | None = None, order_params: SolverParams | None = None) -> SelectionResult:
    """Choose relays so every tile fits its exchange-table budget (``placer solve``).

    ``cpsat`` searches with CP-SAT from the best incumbent (the production rule's plan or placer's budget-greedy
    construction), re-costs every candidate exactly and never returns a plan worse than the production rule's;
    ``greedy`` runs the production rule (docs/reference.md §5) alone. The same capture, machine, parameters and worker
    count give the same plan (deterministic work; see docs/selection.md, "Time and determinism").

    Parameters
    ----------
    capture
        A :class:`Capture` or a capture file (read here, and counted in the time limit).
    machine
        A :class:`Machine`, a bundled machine's name or a machine file (default ``ipu21``).
    budget
        Exchange-table budget per tile, bytes or a size such as ``"80KiB"`` (default: the machine's).
    fragments
        Fragment limit per tile (default: the machine's).
    mode
        :class:`SelectionMode` ``cpsat`` (default) or ``greedy``.
    objective
        Lexicographic order, e.g. ``"table,cycles"`` (default cycles, table, scratch, relays).
    params
        CP-SAT parameters (default: the run configuration's ``[selection]``); ``time_limit`` bounds the whole
        call, loading included.
    local_pack
        Offer the local-pack variant.
    schedule
        Also schedule the all-direct program, the production rule's plan and this one, every phase (B1024, the
        lower bound, placer's best order on the phases either plan relays), and check each schedule
        (``SelectionResult.programs``, ``write_order``).
    deadline
        The clock to count against (the command line's starts when placer is imported).
    writes_capture
        The caller writes the rewritten program afterwards (``placer solve --write-capture``): the search stops
        early enough for that to fit in the time limit too.
    cycle_slack
        With cycles first: the share of the direct program's Σ lower bound the plan may add (default 0.01; the
        plan's Σ B1024 horizon never exceeds the production rule plan's).
    order_params
        With ``schedule``: the ordering search's parameters (default: the run configuration's ``[ordering]``;
        ``time_limit`` is per searched phase and is not part of ``params.time_limit``).

    Returns
    -------
    SelectionResult
        ``status``, ``objectives``, ``bounds``, ``plan``, ``summary``; ``to_json()`` is ``placer solve --json``.

    Raises
    ------
    InputError
        A malformed capture, machine or parameter.
    """
    from placer.selection.select import SEARCH_END, select

    mode = SelectionMode(mode)
    mach = _machine(machine)
    table = _size(budget, "budget") if budget is not None else mach.budget.table_bytes
    frag = fragments if fragments is not None else mach.budget.fragments
    order = objective_order(objective)
    params = _params(params, "selection")
    deadline = _deadline(params, deadline)
    cap = _load_timed(capture, deadline)
    end = SEARCH_END * deadline.seconds
    reserve = WRITE_SECONDS_PER_TRANSFER * cap.transfer_count() if writes_capture else 0.0
    if writes_capture:
        # writing the rewritten program takes about 6 s per million transfers here: the search stops earlier
        end = min(end, deadline.seconds - reserve)
    with interrupt.graceful():  # a signal stops the search; the best plan so far is still returned
        outcome = select(cap, mach, table, frag, mode=mode, params=params, order=order, local_pack=local_pack,
                         deadline=deadline, search_end=end, cycle_slack=_slack(cycle_slack))
    result = SelectionResult(cap, mach, mode, outcome, None, deadline, write_reserve=reserve)
    if interrupt.received() is not None:
        result.interrupted = True
        return result
    t = time.perf_counter()
    result._summary()
    t = deadline.mark("output", t)
    if schedule:
        # its own time (--order-time per changed phase, the whole program scheduled three times): not the limit's
        result.programs = schedule_programs(cap, outcome, mach, order_params)
        deadline.mark("schedule", t)
    return result


def schedule_programs(capture: Capture, outcome: Outcome, machine: Machine,
                      params: SolverParams | None = None) -> dict[str, ProgramFigures]:
    """The all-direct program, the production rule's plan and the outcome's plan, every phase scheduled under the
    reference's rules and checked (``placer solve --schedule``): B1024, the lower bound, and placer's best order
    (``params.time_limit`` seconds per phase) on the phases either plan relays -- the other phases are the same
    phase in all three programs."""
    from placer.ordering.program import ProgramScheduler

    scheduler = ProgramScheduler(machine, _params(params, "ordering"))
    searched = {r.group.phase for r in [*outcome.greedy.relays, *outcome.plan.relays]}
    out = {"direct": scheduler.program(capture, searched, "the all-direct program"),
           "production_rule": scheduler.program(outcome.greedy.rewritten(capture), searched,
                                                "the production rule's plan")}
    out["plan"] = scheduler.program(outcome.plan.rewritten(capture), searched, "the plan")
    return out


@dataclass(eq=False)
class ComparisonResult:
    """The production rule against CP-SAT for one or more budgets (``placer compare``).

    Attributes
    ----------
    capture
        What was solved.
    outcomes
        Per budget (in the order asked), the selection driver's record.
    entries
        Per budget, the ``placer compare --json`` entry (without ``sweep_time``).
    deadline
        The whole sweep's clock.
    """

    capture: Capture
    outcomes: list[tuple[int, Outcome]]
    entries: list[dict[str, Any]]
    deadline: Deadline

    @property
    def fits(self) -> bool:
        """Whether CP-SAT's plan fits at every budget."""
        return all(out.objectives.fits for _, out in self.outcomes)

    @property
    def exit_code(self) -> ExitCode:
        """``placer compare``'s exit code: 4 when a budget's plan does not fit."""
        return ExitCode.OK if self.fits else ExitCode.OVER_BUDGET

    def time(self) -> dict[str, Any]:
        """How the sweep's clock was spent (as of this call)."""
        from placer.report.selection import time_json

        return time_json(self.deadline, [out for _, out in self.outcomes])

    def to_json(self) -> list[dict[str, Any]]:
        """The ``placer compare --json`` document: one entry per budget, each with the sweep's ``sweep_time``."""
        timing = self.time()
        return [{**entry, "sweep_time": timing} for entry in self.entries]


FIRST_SHARE = 0.7  # of a compare's search time, the first (smallest) budget's: it builds what the others reuse
FRONT_SECONDS = 1.0  # CP-SAT work per point of a compare's trade-off front (a small multiple-choice model)


def compare(capture: CaptureLike, machine: MachineLike = None, *, budgets: Sequence[int | str] | None = None,
            fragments: int | None = None, objective: str | Sequence[str] | None = None,
            params: SolverParams | None = None, local_pack: bool = True,
            deadline: Deadline | None = None) -> ComparisonResult:
    """The production rule (docs/reference.md §5) against the CP-SAT optimum, per phase and group, for each budget
    (``placer compare``).

    The option effects are computed once and shared by every budget; budgets are solved smallest first and each
    starts from the best plan found so far that fits it (and keeps it when its share of the time limit is gone
    before its search starts), so a larger budget never reports a worse plan; a table bound proved at a larger
    budget is reported at every smaller one with the same optimal cycles (``share_table_bounds``).

    Parameters
    ----------
    capture, machine, fragments, objective, local_pack, deadline
        As for :func:`solve`.
    budgets
        Table budgets per tile (default: the machine's alone).
    params
        CP-SAT parameters (default: the run configuration's ``[selection]``); ``time_limit`` bounds the sweep.

    Returns
    -------
    ComparisonResult
    """
    from placer.progress import task
    from placer.report.selection import comparison_json
    from placer.selection.greedy import greedy_plan
    from placer.selection.select import SEARCH_END, cycle_front, prepare, select, share_table_bounds
    from placer.units import format_size

    mach = _machine(machine)
    sizes = [_size(b, "budgets") for b in budgets] if budgets else [mach.budget.table_bytes]
    frag = fragments if fragments is not None else mach.budget.fragments
    order = objective_order(objective)
    params = _params(params, "selection")
    deadline = _deadline(params, deadline)
    cap = _load_timed(capture, deadline)
    t = time.perf_counter()
    prepared = prepare(cap, mach, min(sizes), frag, local_pack=local_pack, workers=params.workers)
    t = deadline.mark("options", t)
    # the rule ignores the budget (docs/reference.md §5): computed before the budgets' shares of the search are set, so
    # the first budget's share is not spent on it
    prepared.rule = greedy_plan(cap, prepared.full, mach, min(sizes), frag, prepared.problem.direct, params.workers)
    deadline.mark("production rule", t)
    work = params.work_per_second * params.time_limit / len(sizes)
    solved: dict[int, Outcome] = {}
    search_from = deadline.elapsed()
    ascending = sorted(set(sizes))
    for i, b in enumerate(ascending):
        # each budget's wall backstop: its share of what is left for the search when the sweep starts. The first
        # budget builds and measures what every budget shares (the constructions, the phase configurations), so
        # it gets FIRST_SHARE of it; the others, which mostly combine, split the rest
        rest = (1 - FIRST_SHARE) / max(1, len(ascending) - 1)
        share = FIRST_SHARE + i * rest if len(ascending) > 1 else 1.0
        end = search_from + share * (SEARCH_END * deadline.seconds - search_from)
        hints = [solved[s].plan for s in ascending[:i] if solved[s].objectives.fits]
        with task(f"budget {format_size(b)}"):
            solved[b] = select(cap, mach, b, frag, params=params, order=order, local_pack=local_pack,
                               deadline=deadline, prepared=prepared, work=work, search_end=end, hints=hints)
    outcomes = [(b, solved[b]) for b in sizes]
    share_table_bounds(outcomes)
    t = time.perf_counter()
    # the front at the largest budget: the measured configurations are every budget's, and a larger budget only
    # admits more plans
    largest = max(sizes)
    front = cycle_front(solved[largest], replace(params, time_limit=FRONT_SECONDS))
    entries = [comparison_json(cap, b, out, front if b == largest else None) for b, out in outcomes]
    deadline.mark("output", t)
    return ComparisonResult(cap, outcomes, entries, deadline)


# --- validation -------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class ValidationResult:
    """The independent validator's verdict on a plan (``placer validate``).

    Attributes
    ----------
    report
        Every check's findings (``errors``; ``valid`` when there are none).
    notes
        What the plan does not record (digests) and which budget it was checked against.
    """

    report: ValidationReport
    notes: list[str] = field(default_factory=list)
    order: ReplayResult | None = None  # with an order file: its phases replayed on the plan's program

    @property
    def valid(self) -> bool:
        """No error: the plan is a correct rewrite of the capture and fits the budgets checked (and its order,
        when one was given, keeps the dependencies and the rules)."""
        return self.report.valid and (self.order is None or self.order.valid)

    @property
    def errors(self) -> list[str]:
        return self.report.errors + [f"order: {p}" for p in (self.order.problems if self.order else [])]

    @property
    def over_budget_only(self) -> bool:
        """Invalid only because it breaks the budget (a correct rewrite)."""
        return not self.valid and all(e.startswith("budget:") for e in self.errors)

    @property
    def exit_code(self) -> ExitCode:
        """``placer validate``'s exit code: 0 valid, 1 invalid, 4 valid but over the budget."""
        if self.valid:
            return ExitCode.OK
        return ExitCode.OVER_BUDGET if self.over_budget_only else ExitCode.INVALID

    def lines(self) -> list[str]:
        """The report as ``placer validate`` prints it."""
        out = [*self.report.lines(), *self.notes]
        if self.order is not None:
            total = sum(r.horizon for r in self.order.phases)
            out.append(f"order {'valid' if self.order.valid else 'INVALID'}: {len(self.order.phases)} phases "
                       f"replayed by the reference's rules, Σ horizon {total:,} cycles")
            out += [f"  order: {p}" for p in self.order.problems[:20]]
        return out

    def to_json(self) -> dict[str, Any]:
        """The ``placer validate --json`` document."""
        doc = {**self.report.to_json(), "notes": self.notes}
        if self.order is not None:
            doc["order"] = self.order.to_json()
            doc["valid"] = self.valid
        return doc


def check_provenance(doc: Any, capture: Capture, capture_path: str | Path, machine: Machine,
                     plan_path: str | Path) -> list[str]:
    """Refuse a plan recorded for another capture or machine; return notes for what the plan does not record."""
    notes = []
    rec = doc.get("capture") if isinstance(doc, dict) else None
    if isinstance(rec, dict) and "sha256" in rec:
        from placer.capture.io import capture_digest

        digest = capture_digest(capture)
        if rec["sha256"] != digest:
            raise InputError(f"the plan was made for another capture (sha256 {str(rec['sha256'])[:16]}…, "
                             f"{rec.get('transfers', '?')} transfers); {capture_path} has sha256 {digest[:16]}… "
                             f"({capture.transfer_count()} transfers)", path=str(plan_path), where="capture.sha256")
    else:
        notes.append("note: the plan records no capture digest; it is checked against this capture as given")
    recorded = doc.get("machine_sha256") if isinstance(doc, dict) else None
    if recorded is not None:
        if recorded != machine.digest():
            raise InputError(f"the plan was made for machine {doc.get('machine')!r} (sha256 {str(recorded)[:16]}…); "
                             f"--machine {machine.name!r} has sha256 {machine.digest()[:16]}…: pass the machine "
                             "the plan was made for", path=str(plan_path), where="machine_sha256")
    else:
        notes.append("note: the plan records no machine digest; it is checked against --machine as given")
    return notes


def validate(capture: CaptureLike, plan: str | Path | dict[str, Any] | SelectionResult, machine: MachineLike = None,
             *, budget: int | str | None = None, fragments: int | None = None,
             order: str | Path | None = None) -> ValidationResult:
    """Check a plan against the original capture and the machine, independently of the code that produced it
    (``placer validate``).

    The validator applies the plan's delta itself, replays both programs symbolically and recounts the exchange
    tables with its own copy of the cost rules. The budget checked is ``budget``/``fragments`` or the machine's,
    never the plan's own record.

    Parameters
    ----------
    capture
        The original capture (a :class:`Capture` or a file).
    plan
        A plan file, a plan document (``SelectionResult.plan_json()``) or a :class:`SelectionResult`.
    machine
        The machine the plan was made for (default ``ipu21``).
    budget, fragments
        The limits to check against (default: the machine's).
    order
        An order file for the program the plan produces (``placer solve --schedule -o``): every phase's order is
        checked against the dependencies and timed by the reference's rules (``placer.ordering.orders``).

    Returns
    -------
    ValidationResult

    Raises
    ------
    InputError
        A malformed plan, or one made for another capture or machine.
    """
    from placer.validation.plan import bind_plan, parse_plan
    from placer.validation.validator import validate as _validate

    mach = _machine(machine)
    table = _size(budget, "budget") if budget is not None else mach.budget.table_bytes
    frag = fragments if fragments is not None else mach.budget.fragments
    cap = _capture(capture)
    capture_name = str(capture) if isinstance(capture, str | Path) else "the capture"
    if isinstance(plan, SelectionResult):
        doc, plan_name = plan.plan_json(), "<plan>"
    elif isinstance(plan, dict):
        doc, plan_name = plan, "<plan>"
    else:
        doc, plan_name = read_json(plan), str(plan)
    # parsed here rather than in the validator so that every InputError names the plan file
    parsed = parse_plan(doc, plan_name)
    notes = check_provenance(doc, cap, capture_name, mach, plan_name)  # before binding: a foreign plan fails here
    bind_plan(parsed, cap, plan_name)
    recorded = (parsed.table_bytes, parsed.fragments)
    parsed.table_bytes, parsed.fragments = table, frag
    report = _validate(cap, parsed, mach)
    if recorded != (table, frag):
        notes.append(f"note: the plan records budget {recorded[0]:,} bytes / {recorded[1]:,} fragments; checked "
                     f"against {table:,} / {frag:,}")
    replayed = None
    if order is not None:
        replayed = replay(program_of(cap, parsed), order, mach)
    return ValidationResult(report, notes, replayed)


def program_of(capture: Capture, plan: ParsedPlan) -> Capture:
    """The program a bound plan (``placer.validation.plan``) produces: each phase of its delta with the removed
    transfers dropped and the appended ones after the rest, each inserted phase after its phase."""
    import numpy as np

    from placer.capture.model import Phase, Repeat

    delta = {d.phase: d for d in plan.delta}
    inserted: dict[int, list[Phase]] = {}
    for ins in plan.inserted:
        assert ins.transfers is not None  # bound
        inserted.setdefault(ins.after, []).append(ins.transfers)
    phases: list[Phase] = []
    body = set(capture.repeat.phases) if capture.repeat is not None else set()
    for p in capture.phases:
        d = delta.get(p.phase)
        if d is None:
            phases.append(p)
        else:
            assert d.append is not None  # bound
            keep = np.setdiff1d(np.arange(p.n), d.remove)
            phases.append(Phase.concat(p.phase, [p.take(keep), d.append], extra=p.extra))
        for extra in inserted.get(p.phase, []):
            phases.append(extra)
            if p.phase in body:
                body.add(extra.phase)
    out = capture.with_phases(phases)
    if capture.repeat is not None:
        out.repeat = Repeat(tuple(ph.phase for ph in phases if ph.phase in body), capture.repeat.iterations)
    return out


def replay(program: CaptureLike, order: str | Path, machine: MachineLike = None) -> ReplayResult:
    """Check an order file against ``program`` (``placer schedule --replay``, ``placer validate --order``): it
    must name this program (by digest) and machine, and every phase's order must be a permutation that respects
    the phase's dependencies, time by the reference's rules to the recorded horizon and pass the independent
    checker.

    Raises
    ------
    InputError
        A malformed order file, or one written for another program or machine.
    """
    from placer.capture.io import capture_digest
    from placer.ordering.orders import parse_orders, replay_all

    mach = _machine(machine)
    prog = _capture(program)
    path = str(order)
    digest, machine_digest, orders = parse_orders(read_json(order), path)
    if digest != capture_digest(prog):
        raise InputError(f"the order was written for another program (sha256 {digest[:16]}…): order files name "
                         "the program they index -- the capture given to placer schedule, or the program a plan "
                         "produces", path=path, where="program_sha256")
    if machine_digest != mach.digest():
        raise InputError(f"the order was written for another machine (sha256 {machine_digest[:16]}…), not "
                         f"{mach.name!r}", path=path, where="machine_sha256")
    return ReplayResult(path, replay_all(prog, orders, mach, path))


@dataclass(frozen=True)
class ReplayResult:
    """An order file replayed (``placer schedule --replay``)."""

    path: str
    phases: list[Replayed]

    @property
    def valid(self) -> bool:
        return all(r.valid for r in self.phases)

    @property
    def exit_code(self) -> ExitCode:
        return ExitCode.OK if self.valid else ExitCode.INVALID

    @property
    def problems(self) -> list[str]:
        return [p for r in self.phases for p in r.problems]

    def to_json(self) -> dict[str, Any]:
        return {"order": self.path, "valid": self.valid,
                "phases": [{"phase": r.phase, "horizon": r.horizon, "recorded": r.recorded, "valid": r.valid,
                            "problems": r.problems[:5]} for r in self.phases]}


# --- placement --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PlaceResult:
    """One tile's buffers placed, or proved impossible to place (``placer place``).

    Attributes
    ----------
    problem
        The requests, free ranges and fixed allocations placed.
    result
        Status, addresses or the proof, the engine that answered, its time.
    verified
        The independent checker accepted the addresses (``None`` without a placement).
    """

    problem: PlacementProblem
    result: PlacementResult
    verified: bool | None

    @property
    def placed(self) -> bool:
        return self.result.placed

    @property
    def status(self) -> Status:
        return self.result.status

    @property
    def exit_code(self) -> ExitCode:
        """``placer place``'s exit code: 0 placed, 3 proved infeasible, 4 unknown."""
        if self.result.placed:
            return ExitCode.OK
        return ExitCode.INFEASIBLE if self.result.status is Status.INFEASIBLE else ExitCode.OVER_BUDGET

    def to_json(self, *, placements: bool = True) -> dict[str, Any]:
        """The ``placer place --json`` document; ``placements`` adds every request's address (what ``-o X.json``
        writes), without it only the status."""
        from placer.placement.formats import solution_json

        doc = solution_json(self.problem, self.result) if placements else {"problem": self.problem.name,
                                                                           **self.result.to_json()}
        doc["verified"] = self.verified
        return doc


def place(problem: PlacementProblem | str | Path, *, capacity: int | str | None = None,
          mode: PlacementMode | str = PlacementMode.EXACT, params: SolverParams | None = None,
          deadline: float | None = None) -> PlaceResult:
    """Place one tile's buffers in SRAM, or prove that they cannot be placed (``placer place``).

    Parameters
    ----------
    problem
        A :class:`placer.placement.PlacementProblem`, a placement dump (``.json``) or a MiniMalloc CSV.
    capacity
        MiniMalloc capacity (default: from the file name, e.g. ``A.1048576.csv``).
    mode
        :class:`PlacementMode` ``exact`` (default: the production allocator, then the exact engines) or
        ``greedy`` (the production allocator only).
    params
        CP-SAT parameters (default: the run configuration's ``[placement]``).
    deadline
        A ``time.perf_counter`` value no engine runs past (``placer place``: its start + ``--time-limit``, so the
        limit bounds the whole command, reading included).

    Returns
    -------
    PlaceResult
        Every placement returned has passed the independent checker.
    """
    from placer.placement import PlacementProblem, check_placement, read_problem, solve_placement
    from placer.progress import task

    mode = PlacementMode(mode)
    params = _params(params, "placement")
    if not isinstance(problem, PlacementProblem):
        cap = _size(capacity, "capacity", MAX_ADDRESS) if capacity is not None else None
        problem = read_problem(problem, capacity=cap)
    with task(f"place {problem.n:,} buffers ({mode})") as shown:
        result = solve_placement(problem, params, mode=mode,
                                 progress=lambda engine, elapsed, status: shown.advance(0, f"{engine}: {status}"),
                                 deadline=deadline)
    verified = None
    if result.addresses is not None:
        errors = check_placement(problem, result.addresses)
        if errors:  # never return a placement the independent checker rejects
            raise RuntimeError(f"internal error: placement failed the checker: {errors[0]}")
        verified = True
    return PlaceResult(problem, result, verified)


# --- ordering ---------------------------------------------------------------------------------------------------


@dataclass(eq=False)
class ScheduleResult:
    """Every phase's exchange streams ordered (``placer schedule``).

    Attributes
    ----------
    capture_name
        The capture file's name as given (``capture`` in the JSON).
    machine
        The machine the schedules are for.
    mode
        ``greedy`` (the production B1024 rule) or ``cpsat``.
    phases
        Per phase: horizon, lower bound and gap, chunks, timed table rows, time.
    invalid
        Phases whose schedule the independent checker rejected, with its findings.
    checked
        Whether the checker ran.
    """

    capture_name: str
    machine: Machine
    mode: ScheduleMode
    phases: list[PhaseSchedule]
    invalid: dict[int, list[str]] = field(default_factory=dict)
    checked: bool = True
    capture: Capture | None = field(default=None, repr=False)  # what was scheduled (the order file names it)

    @property
    def valid(self) -> bool:
        return not self.invalid

    @property
    def exit_code(self) -> ExitCode:
        """``placer schedule``'s exit code: 1 when a schedule failed its check."""
        return ExitCode.OK if self.valid else ExitCode.INVALID

    def order_json(self) -> dict[str, Any]:
        """The order file of the scheduled phases (docs/plan.md, "The order file"); reference rules only."""
        from placer.capture.io import capture_digest
        from placer.ordering.orders import PhaseOrder, order_document

        if self.capture is None or any(ps.rules != "reference" for ps in self.phases):
            raise InputError("an order file is written for the reference's rules only (--rules reference)",
                             where="--output")
        return order_document(capture_digest(self.capture), self.machine,
                              [PhaseOrder(ps.phase, ps.order, ps.horizon, ps.lower, ps.method) for ps in self.phases])

    def to_json(self) -> dict[str, Any]:
        """The ``placer schedule --json`` document."""
        return {"capture": self.capture_name, "machine": self.machine.name, "mode": self.mode.value,
                "phases": [dict(ps.to_json(), valid=(ps.phase not in self.invalid) if self.checked else None)
                           for ps in self.phases]}


def schedule(capture: CaptureLike, machine: MachineLike = None, *, phases: Sequence[int] | None = None,
             mode: ScheduleMode | str = ScheduleMode.GREEDY, params: SolverParams | None = None,
             wave_words: int = 1024, rules: str = "reference", check: bool = True,
             ray: str | None = None) -> ScheduleResult:
    """Order each phase's exchange streams and measure the order against a lower bound (``placer schedule``).

    Parameters
    ----------
    capture
        A :class:`Capture` or a capture file (e.g. :meth:`SelectionResult.rewritten`).
    machine
        As for :func:`solve`.
    phases
        Only these phase ids (default: every phase).
    mode
        :class:`ScheduleMode` ``greedy`` (the production B1024 rule) or ``cpsat`` (improved with CP-SAT).
    params
        CP-SAT parameters (default: the run configuration's ``[ordering]``); ``time_limit`` is per phase.
    wave_words
        Largest chunk of a stream per wave, in words.
    rules
        ``"reference"``: the reference compiler's own order and timing rules, transfer by transfer (its B1024
        figures); ``"model"``: placer's chunk model of the exchange (faster; the model CP-SAT improves in). In
        cpsat mode under ``"reference"``, CP-SAT's order is timed by the reference's rules too.
    check
        Verify every schedule with the independent checker (of the rules used).
    ray
        Schedule the phases as Ray tasks: ``"auto"`` or a cluster address (same results).

    Returns
    -------
    ScheduleResult
    """
    from placer.ordering.check import check_reference_schedule, check_schedule
    from placer.ordering.schedule import RULES, OrderingParams, schedule_capture
    from placer.progress import task, track

    mode = ScheduleMode(mode)
    if wave_words < 1:
        raise InputError(f"must be at least 1, got {wave_words}", where="wave_words")
    if rules not in RULES:
        raise InputError(f"must be one of {', '.join(RULES)}, got {rules!r}", where="rules")
    params = _params(params, "ordering")
    mach = _machine(machine)
    cap = _capture(capture)
    name = str(capture) if isinstance(capture, str | Path) else "<capture>"
    ids = list(phases) if phases is not None else cap.phase_ids()
    for pid in ids:
        if pid not in cap.phase_ids():
            known = cap.phase_ids()
            listed = ", ".join(map(str, known[:20])) + (" ..." if len(known) > 20 else "")
            raise InputError(f"no phase {pid} (phases: {listed})", path=name)
    ordering = OrderingParams(wave_words=wave_words, rules=OrderingRules(rules))
    if ray is not None:
        from placer.sweep.fanout import schedule_phases

        with task(f"schedule {len(ids)} phase(s) as Ray tasks"):
            results = schedule_phases(cap, mach, mode, params, ids, ordering, ray)
    else:
        results = schedule_capture(cap, mach, mode, params, phases=ids, ordering=ordering)
    invalid: dict[int, list[str]] = {}
    if check:
        for ps in track(results, "check schedules", unit="phases"):
            p = cap.phase_by_id(ps.phase)
            checker = check_reference_schedule if ps.rules == OrderingRules.REFERENCE else check_schedule
            problems = checker(p, ps.schedule.tx_start, ps.schedule.rx_start, ps.schedule.horizon, mach)
            if problems:
                invalid[ps.phase] = problems
    return ScheduleResult(name, mach, mode, results, invalid, check, cap)


__all__ = [
    "OBJECTIVES",
    "ComparisonResult",
    "InspectResult",
    "PlaceResult",
    "PlacementMode",
    "ScheduleMode",
    "ScheduleResult",
    "SelectionMode",
    "SelectionResult",
    "ValidationResult",
    "check_provenance",
    "compare",
    "generate",
    "inspect",
    "load_machine",
    "objective_order",
    "place",
    "read_capture",
    "schedule",
    "schedule_programs",
    "solve",
    "validate",
    "write_capture",
]
