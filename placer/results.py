"""What placer's public API returns (:mod:`placer.api`, re-exported from ``placer``): one frozen record per command,
each with the ``to_json()`` its command's ``--json`` prints and the ``exit_code`` the command ends with.

Nothing here runs a stage: a result holds what the stages found, and its JSON is built by ``placer.report``, whose
modules define the documents' types (``InspectDoc``, ``SolveDoc``, ``CompareEntryDoc``, ``ValidationDoc``,
``ReplayDoc``, ``PlaceDoc``, ``ScheduleDoc``, ``ReportDoc``; the plan summary is a ``PlanSummaryDoc``). Every
field is set when the record is made (a selection's summary too), so a result never changes once returned.
Stages are imported by the methods that need them, so ``import placer.api`` stays cheap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from placer.errors import ExitCode, InputError
from placer.fileio import write_json
from placer.modes import ScheduleMode, SelectionMode
from placer.solver import Deadline, SolveResult, Status

if TYPE_CHECKING:
    from placer.capture.model import Capture
    from placer.machine import Machine
    from placer.ordering.orders import OrderDoc, Replayed
    from placer.ordering.program import ProgramFigures
    from placer.ordering.schedule import PhaseSchedule
    from placer.placement import PlacementProblem, PlacementResult
    from placer.report.inspect import InspectDoc
    from placer.report.ordering import ScheduleDoc
    from placer.report.page import ReportDoc
    from placer.report.placement import PlaceDoc, PlaceFileDoc
    from placer.report.selection import CompareEntryDoc, SolveDoc, TimeDoc
    from placer.report.summary import PlanSummaryDoc
    from placer.report.validation import ReplayDoc, ValidationDoc
    from placer.selection.greedy import Decision
    from placer.selection.plan import Plan, PlanDoc
    from placer.selection.select import Objectives, Outcome
    from placer.validation.validator import ValidationReport


# --- inspect ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InspectResult:
    """What a capture costs, per phase and for the program (``placer inspect``).

    Attributes
    ----------
    summary
        The document ``placer inspect --json`` prints (:class:`placer.report.inspect.InspectDoc`): ``phases``
        (transfers, multicast groups, worst tile, table bytes, fragments, cycles) and ``program`` (worst tile, row
        estimate, budgets, verdict).
    """

    summary: InspectDoc

    @property
    def fits(self) -> bool:
        """Whether the program as captured fits the table budget and the fragment limit."""
        return bool(self.summary["program"]["fits"])

    @property
    def exit_code(self) -> ExitCode:
        """``placer inspect``'s exit code: 0 fits, 4 does not."""
        return ExitCode.OK if self.fits else ExitCode.OVER_BUDGET

    def to_json(self) -> InspectDoc:
        """The ``placer inspect --json`` document."""
        return self.summary


# --- relay selection ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
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
        Per phase before → after and the program against its budgets (:class:`PlanSummaryDoc`), computed when the
        result is made; ``None`` if a signal stopped the run (``plan_json`` then computes it for the file).
    deadline
        The clock the run was timed on; ``to_json()["time"]`` says how it was spent.
    programs
        With ``schedule=True``: the all-direct program, the production rule's and this plan's, every phase
        scheduled (B1024, lower bound, placer's best order on the phases the plans change) and checked.
    interrupted
        A SIGINT/SIGTERM stopped the search (``placer solve`` then writes the best plan so far if it validates).
    write_reserve
        Seconds of the limit held back for writing the rewritten capture afterwards.
    """

    capture: Capture
    machine: Machine
    mode: SelectionMode
    outcome: Outcome
    summary: PlanSummaryDoc | None
    deadline: Deadline
    programs: dict[str, ProgramFigures] | None = None  # "direct", "production_rule", "plan"
    interrupted: bool = False
    write_reserve: float = 0.0

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

    def _plan_summary(self) -> PlanSummaryDoc:
        """``summary``; an interrupted run's is computed here (and not kept: a result does not change)."""
        if self.summary is not None:
            return self.summary
        from placer.report.selection import outcome_summary

        return outcome_summary(self.capture, self.outcome)

    def plan_json(self, *, rendered: bool = False) -> PlanDoc:
        """The plan file (docs/plan.md): the delta, the relays, the capture's and machine's digests. ``rendered``
        gives the transfer lists as pre-rendered JSON (the same bytes once serialised, faster to write); without
        it they are lists, as an in-memory reader (the validator) wants them."""
        return self.plan.to_json(self.capture, self._plan_summary(), rendered=rendered)

    def write_plan(self, path: str | Path) -> None:
        """Write the plan file to ``path`` (gzipped when the name ends in ``.gz``), atomically."""
        write_json(path, self.plan_json(rendered=True))

    def interrupted_plan_json(self) -> PlanDoc:
        """The plan file of a run a signal stopped (:func:`placer.api.save_interrupted`): its summary is costed
        afresh on the capture, without the outcome's direct program or scheduled figures, which the stopped
        search may have left unset."""
        from placer.report.summary import plan_summary

        outcome = self.outcome
        return outcome.plan.to_json(self.capture, plan_summary(self.capture, outcome.scans, outcome.plan, None))

    def order_json(self) -> OrderDoc:
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

    def to_json(self) -> SolveDoc:
        """The ``placer solve --json`` document; ``time`` is the clock as of this call."""
        from placer.report.selection import solve_json

        return solve_json(self.capture, self.outcome, self._plan_summary(), self.deadline, programs=self.programs,
                          write_reserve=self.write_reserve)


@dataclass(frozen=True, eq=False)
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
    front_cut
        Whether the clock cut the trade-off front short (then it depends on the machine's speed).
    """

    capture: Capture
    outcomes: list[tuple[int, Outcome]]
    entries: list[CompareEntryDoc]
    deadline: Deadline
    front_cut: bool = False

    @property
    def fits(self) -> bool:
        """Whether CP-SAT's plan fits at every budget."""
        return all(out.objectives.fits for _, out in self.outcomes)

    @property
    def exit_code(self) -> ExitCode:
        """``placer compare``'s exit code: 4 when a budget's plan does not fit."""
        return ExitCode.OK if self.fits else ExitCode.OVER_BUDGET

    def time(self) -> TimeDoc:
        """How the sweep's clock was spent (as of this call)."""
        from placer.report.selection import time_json

        return time_json(self.deadline, [out for _, out in self.outcomes], cut=self.front_cut)

    def to_json(self) -> list[CompareEntryDoc]:
        """The ``placer compare --json`` document: one entry per budget, each with the sweep's ``sweep_time``."""
        from placer.report.selection import compare_json

        return compare_json(self.entries, self.time())


# --- validation -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayResult:
    """An order file replayed (``placer schedule --replay``, ``placer validate --order``)."""

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

    def to_json(self) -> ReplayDoc:
        """The ``placer schedule --replay --json`` document."""
        from placer.report.validation import replay_json

        return replay_json(self.path, self.phases)


@dataclass(frozen=True, eq=False)
class ValidationResult:
    """The independent validator's verdict on a plan (``placer validate``).

    Attributes
    ----------
    report
        Every check's findings (``errors``; ``valid`` when there are none).
    notes
        What the plan does not record (digests) and which budget it was checked against.
    order
        With an order file: its phases replayed on the plan's program.
    """

    report: ValidationReport
    notes: list[str] = field(default_factory=list)
    order: ReplayResult | None = None

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
        from placer.report.validation import validation_lines

        return validation_lines(self.report, self.notes, self.order.phases if self.order is not None else None)

    def to_json(self) -> ValidationDoc:
        """The ``placer validate --json`` document."""
        from placer.report.validation import validation_json

        return validation_json(self.report, self.notes, self.order.to_json() if self.order is not None else None)


# --- placement --------------------------------------------------------------------------------------------------


def _place_code(result: PlacementResult) -> ExitCode:
    """0 placed, 3 proved infeasible, 4 unknown."""
    if result.placed:
        return ExitCode.OK
    return ExitCode.INFEASIBLE if result.status is Status.INFEASIBLE else ExitCode.OVER_BUDGET


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
    allocator
        What the production allocator did on the same input (``None`` when it did not run).
    """

    problem: PlacementProblem
    result: PlacementResult
    verified: bool | None
    allocator: str | None = None

    @property
    def placed(self) -> bool:
        return self.result.placed

    @property
    def status(self) -> Status:
        return self.result.status

    @property
    def exit_code(self) -> ExitCode:
        """``placer place``'s exit code: 0 placed, 3 proved infeasible, 4 unknown."""
        return _place_code(self.result)

    def write(self, path: str | Path) -> None:
        """Write the placement to ``path`` (``.json``: :meth:`to_json` with every address; ``.csv``: MiniMalloc's
        columns plus the offset), atomically."""
        from placer.placement.formats import write_solution

        write_solution(path, self.problem, self.result)

    def to_json(self, *, placements: bool = True) -> PlaceDoc:
        """The ``placer place --json`` document; ``placements`` adds every request's address (what ``-o X.json``
        writes), without it only the status."""
        from placer.report.placement import place_json

        return place_json(self.problem, self.result, self.verified, placements=placements)


@dataclass(frozen=True, eq=False)
class PlaceManyResult:
    """Several files placed, each one tile's buffers (``placer place A B ...``, ``--ray``); every placement
    passed the independent checker."""

    files: list[str]
    placements: list[tuple[PlacementProblem, PlacementResult]]  # per file, in order

    @property
    def exit_code(self) -> ExitCode:
        """0 when every file was placed, else 4 if any is unknown, else 3."""
        return max((_place_code(result) for _, result in self.placements), default=ExitCode.OK)

    def lines(self) -> list[str]:
        """One line per file, as ``placer place`` prints them."""
        return [f"{path}: {problem.n} requests: {result.describe()}"
                for path, (problem, result) in zip(self.files, self.placements, strict=True)]

    def to_json(self) -> list[PlaceFileDoc]:
        """The ``placer place A B ... --json`` document: one object per file."""
        from placer.report.placement import place_file_json

        return [place_file_json(path, problem, result)
                for path, (problem, result) in zip(self.files, self.placements, strict=True)]


# --- ordering ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
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
    capture
        What was scheduled (the order file names it).
    """

    capture_name: str
    machine: Machine
    mode: ScheduleMode
    phases: list[PhaseSchedule]
    invalid: dict[int, list[str]] = field(default_factory=dict)
    checked: bool = True
    capture: Capture | None = field(default=None, repr=False)

    @property
    def valid(self) -> bool:
        return not self.invalid

    @property
    def exit_code(self) -> ExitCode:
        """``placer schedule``'s exit code: 1 when a schedule failed its check."""
        return ExitCode.OK if self.valid else ExitCode.INVALID

    def order_json(self) -> OrderDoc:
        """The order file of the scheduled phases (docs/plan.md, "The order file"); reference rules only."""
        from placer.capture.io import capture_digest
        from placer.ordering.orders import PhaseOrder, order_document

        if self.capture is None or any(ps.rules != "reference" for ps in self.phases):
            raise InputError("an order file is written for the reference's rules only (--rules reference)",
                             where="--output")
        return order_document(capture_digest(self.capture), self.machine,
                              [PhaseOrder(ps.phase, ps.order, ps.horizon, ps.lower, ps.method) for ps in self.phases])

    def to_json(self) -> ScheduleDoc:
        """The ``placer schedule --json`` document."""
        from placer.report.ordering import schedule_doc

        return schedule_doc(self.capture_name, self.machine.name, self.mode.value, self.phases, self.invalid,
                            self.checked)


# --- report -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportResult:
    """The report page written, and its PNG figures (``placer report``).

    Attributes
    ----------
    page
        The HTML page written (self-contained).
    size
        Its size in bytes.
    figures
        How many figures it holds.
    seconds
        From the call to the page written (the PNGs after it are not counted).
    png_dir, pngs
        With ``png``: the directory and every PNG file written into it.
    phase, tile
        The schedule figure's phase and the SRAM map's tile.
    """

    page: Path
    size: int
    figures: int
    seconds: float
    phase: int
    tile: int
    png_dir: Path | None = None
    pngs: Sequence[Path] = ()

    def lines(self) -> list[str]:
        """What ``placer report`` prints: the page, then (``--png``) the PNG files."""
        from placer.units import format_size

        out = [f"{self.page}: {format_size(self.size)}, {self.figures} figures, written in {self.seconds:.1f} s"]
        if self.png_dir is not None:
            out.append(f"{self.png_dir}: {', '.join(p.name for p in self.pngs)}")
        return out

    def to_json(self) -> ReportDoc:
        """The page, its size and figures, and the PNG files, as JSON."""
        from placer.report.page import report_json

        return report_json(self.page, self.size, self.figures, self.seconds, self.phase, self.tile, self.pngs)


__all__ = [
    "ComparisonResult",
    "InspectResult",
    "PlaceManyResult",
    "PlaceResult",
    "ReplayResult",
    "ReportResult",
    "ScheduleResult",
    "SelectionResult",
    "ValidationResult",
]
