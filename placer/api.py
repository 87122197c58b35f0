"""placer's public Python API: the whole pipeline as functions with typed results.

Every command of the ``placer`` command line is a thin layer over one function here, and every ``--json`` a
command prints is the ``to_json()`` of the result that function returns (the results are frozen records defined in
:mod:`placer.results`; their JSON documents are typed where ``placer.report`` builds them)::

    import placer

    capture = placer.read_capture("examples/relay-demo.json")
    machine = placer.load_machine("ipu21")
    result = placer.solve(capture, machine, budget="700")      # relay selection (placer solve)
    result.status, result.objectives.table, result.bounds      # how it ended, the plan's figures, the bounds
    check = placer.validate(capture, result, machine, budget=700)   # the independent validator (placer validate)
    order = placer.schedule(result.rewritten(), machine)        # stream order of every phase (placer schedule)

The names are re-exported from the package (``placer.solve`` is :func:`solve`). This module only composes the
stages: each function checks its arguments, calls the stages in order and wraps what they found in a result.
Heavy stages (CP-SAT, the validator, the stream scheduler) are imported when a function needs them, so
``import placer`` stays cheap.
Malformed input raises :class:`placer.errors.InputError` (one line naming the file, the field and the value);
each result's ``exit_code`` is the code the matching command ends with.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from placer import interrupt
from placer.clock import command_start
from placer.errors import InputError
from placer.fileio import read_json, write_json
from placer.modes import OrderingRules, PlacementMode, ScheduleMode, SelectionMode
from placer.results import (
    ComparisonResult,
    InspectResult,
    PlaceManyResult,
    PlaceResult,
    ReplayResult,
    ReportResult,
    ScheduleResult,
    SelectionResult,
    ValidationResult,
)
from placer.solver import Deadline, RunConfig, SolverParams
from placer.units import MAX_ADDRESS, MAX_SIZE, size_option

# Every stage (and numpy with it) is imported by the function that needs it: ``placer place`` on a MiniMalloc-class
# instance imports neither numpy nor ortools, and ``import placer`` stays cheap.
if TYPE_CHECKING:
    from placer.capture.model import Capture
    from placer.machine import Machine
    from placer.placement import PlacementProblem, PlacementResult

OBJECTIVES = ("cycles", "table", "scratch", "relays")  # the selection's default lexicographic order

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


def write_capture(capture: Capture, path: str | Path) -> int:
    """Write ``capture`` to ``path`` (gzipped when the name ends in ``.gz``); the file appears only complete.

    Parameters
    ----------
    capture
        The program to write (e.g. :meth:`SelectionResult.rewritten`).
    path
        Where to write it.

    Returns
    -------
    int
        The file's size in bytes.
    """
    from placer.capture.writer import write_capture as _write

    return _write(capture, path)


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

    Raises
    ------
    InputError
        A malformed model, or one too large to generate in this machine's free memory (refused before it is
        built).
    """
    from placer.progress import task
    from placer.workloads.generate import check_memory
    from placer.workloads.generate import generate as _generate

    check_memory(model, batch)
    with task(f"lower {model} batch {batch}"):
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


def solve(capture: CaptureLike, machine: MachineLike = None, *, budget: int | str | None = None,  # noqa: PLR0913
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
    from placer.capture.writer import write_seconds
    from placer.report.selection import outcome_summary
    from placer.selection.programs import schedule_programs
    from placer.selection.select import SEARCH_END, SelectionContext, SelectionSettings, select

    mode = SelectionMode(mode)
    mach = _machine(machine)
    table = _size(budget, "budget") if budget is not None else mach.budget.table_bytes
    frag = fragments if fragments is not None else mach.budget.fragments
    order = objective_order(objective)
    params = _params(params, "selection")
    deadline = _deadline(params, deadline)
    cap = _load_timed(capture, deadline)
    end = SEARCH_END * deadline.seconds
    reserve = write_seconds(cap) if writes_capture else 0.0
    if writes_capture:  # writing the rewritten program afterwards fits in the limit too: the search stops earlier
        end = min(end, deadline.seconds - reserve)
    with interrupt.graceful():  # a signal stops the search; the best plan so far is still returned
        outcome = select(cap, mach, table, frag,
                         SelectionSettings(mode=mode, params=params, order=order, local_pack=local_pack,
                                           cycle_slack=_slack(cycle_slack)),
                         SelectionContext(deadline=deadline, search_end=end))
    if interrupt.received() is not None:
        return SelectionResult(cap, mach, mode, outcome, None, deadline, interrupted=True, write_reserve=reserve)
    t = time.perf_counter()
    summary = outcome_summary(cap, outcome)
    t = deadline.mark("output", t)
    programs = None
    if schedule:
        # its own time (--order-time per changed phase, the whole program scheduled three times): not the limit's
        programs = schedule_programs(cap, outcome, mach, order_params)
        deadline.mark("schedule", t)
    return SelectionResult(cap, mach, mode, outcome, summary, deadline, programs, write_reserve=reserve)


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
    from placer.report.selection import comparison_json
    from placer.selection.budgets import largest_front, select_budgets

    mach = _machine(machine)
    sizes = [_size(b, "budgets") for b in budgets] if budgets else [mach.budget.table_bytes]
    frag = fragments if fragments is not None else mach.budget.fragments
    order = objective_order(objective)
    params = _params(params, "selection")
    deadline = _deadline(params, deadline)
    cap = _load_timed(capture, deadline)
    outcomes = select_budgets(cap, mach, sizes, frag, params=params, order=order, local_pack=local_pack,
                              deadline=deadline)
    t = time.perf_counter()
    front = largest_front(outcomes, params, deadline)
    largest = max(sizes)
    entries = [comparison_json(cap, b, out, front.points if b == largest else None) for b, out in outcomes]
    deadline.mark("output", t)
    return ComparisonResult(cap, outcomes, entries, deadline, front_cut=front.cut)


# --- validation -------------------------------------------------------------------------------------------------


def validate(capture: CaptureLike, plan: str | Path | Mapping[str, object] | SelectionResult,
             machine: MachineLike = None, *, budget: int | str | None = None, fragments: int | None = None,
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
    from placer.validation.document import check_document, program_of

    mach = _machine(machine)
    table = _size(budget, "budget") if budget is not None else mach.budget.table_bytes
    frag = fragments if fragments is not None else mach.budget.fragments
    cap = _capture(capture)
    capture_name = str(capture) if isinstance(capture, str | Path) else "the capture"
    doc: object
    if isinstance(plan, SelectionResult):
        doc, plan_name = plan.plan_json(), "<plan>"
    elif isinstance(plan, Mapping):
        doc, plan_name = plan, "<plan>"
    else:
        doc, plan_name = read_json(plan), str(plan)
    # parsed there rather than in the validator so that every InputError names the plan file
    checked = check_document(doc, cap, mach, table, frag, capture_name=capture_name, plan_name=plan_name)
    replayed = replay(program_of(cap, checked.plan), order, mach) if order is not None else None
    return ValidationResult(checked.report, checked.notes, replayed)


def save_interrupted(result: SelectionResult, path: str | Path) -> ValidationResult:
    """Write the best plan of a solve a signal stopped (``result.interrupted``) to ``path``, only if the independent
    validator passes it against the budget it was made for: the search was cut short, so nothing else has checked
    it (``placer solve`` interrupted with ``-o``).

    Returns
    -------
    ValidationResult
        ``valid``: the file was written; otherwise ``errors`` says why not.
    """
    from placer.validation.validator import validate as _validate

    doc = result.interrupted_plan_json()
    report = _validate(result.capture, doc, result.machine)
    if report.valid:
        write_json(path, doc)
    return ValidationResult(report, [], None)


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
    from placer.ordering.orders import read_orders, replay_all

    mach = _machine(machine)
    prog = _capture(program)
    path = str(order)
    orders = read_orders(read_json(order), path, prog, mach)
    return ReplayResult(path, replay_all(prog, orders, mach, path))


# --- placement --------------------------------------------------------------------------------------------------


def place(problem: PlacementProblem | str | Path, *, capacity: int | str | None = None,
          mode: PlacementMode | str = PlacementMode.EXACT, params: SolverParams | None = None,
          deadline: float | None = None, allocator: bool = False) -> PlaceResult:
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
    allocator
        Also run the production allocator where the exact engines skipped it (large MiniMalloc-class problems),
        for ``PlaceResult.allocator`` (what ``placer place`` prints about it).

    Returns
    -------
    PlaceResult
        Every placement returned has passed the independent checker.
    """
    from placer.placement import PlacementProblem, read_problem, solve_placement
    from placer.progress import task

    mode = PlacementMode(mode)
    params = _params(params, "placement")
    if not isinstance(problem, PlacementProblem):
        cap = _size(capacity, "capacity", MAX_ADDRESS) if capacity is not None else None
        problem = read_problem(problem, capacity=cap)
    with task(f"place {problem.n:,} buffers ({mode})") as shown:
        result = solve_placement(problem, params, mode=mode,
                                 progress=lambda engine, _elapsed, status: shown.advance(0, f"{engine}: {status}"),
                                 deadline=deadline)
    verified = _checked(problem, result)
    described = result.greedy
    if allocator and described is None and mode == PlacementMode.EXACT and problem.n:
        from placer.placement.greedy import greedy_place

        described = greedy_place(problem, deadline=deadline).describe()
    return PlaceResult(problem, result, verified, described)


def _checked(problem: PlacementProblem, result: PlacementResult, name: str = "") -> bool | None:
    """``True`` when the independent checker accepts the placement, ``None`` without one; a placement it rejects
    is a bug in placer, never returned."""
    from placer.placement import check_placement

    if result.addresses is None:
        return None
    errors = check_placement(problem, result.addresses)
    if errors:
        raise RuntimeError(f"internal error: {name}placement failed the checker: {errors[0]}")
    return True


def place_many(files: Sequence[str | Path], *, capacity: int | str | None = None,
               mode: PlacementMode | str = PlacementMode.EXACT, params: SolverParams | None = None,
               ray: str | None = None) -> PlaceManyResult:
    """Place several files independently, each one tile's buffers (``placer place A B ...``).

    Parameters
    ----------
    files
        Placement dumps or MiniMalloc CSVs; every file is read first (a bad one is an ``InputError`` naming it).
    capacity, mode, params
        As for :func:`place`, for every file.
    ray
        Place the files as Ray tasks: ``"auto"`` or a cluster address (same results); ``None``: in turn, here.

    Returns
    -------
    PlaceManyResult
        Per file, in order; every placement has passed the independent checker.
    """
    from placer.sweep.fanout import place_files

    mode = PlacementMode(mode)
    params = _params(params, "placement")
    cap = _size(capacity, "capacity", MAX_ADDRESS) if capacity is not None else None
    paths = [Path(f) for f in files]
    pairs = place_files(paths, cap, params, mode, ray, use_ray=ray is not None)
    for path, (problem, result) in zip(paths, pairs, strict=True):
        _checked(problem, result, f"{path}: ")
    return PlaceManyResult([str(f) for f in files], pairs)


# --- ordering ---------------------------------------------------------------------------------------------------


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
    from placer.ordering.schedule import RULES, OrderingParams
    from placer.progress import track
    from placer.sweep.fanout import schedule_phases

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
    results = schedule_phases(cap, mach, mode, params, ids, ordering, ray, use_ray=ray is not None)
    invalid: dict[int, list[str]] = {}
    if check:
        for ps in track(results, "check schedules", unit="phases"):
            p = cap.phase_by_id(ps.phase)
            checker = check_reference_schedule if ps.rules == OrderingRules.REFERENCE else check_schedule
            problems = checker(p, ps.schedule.tx_start, ps.schedule.rx_start, ps.schedule.horizon, mach)
            if problems:
                invalid[ps.phase] = problems
    return ScheduleResult(name, mach, mode, results, invalid, check, cap)


# --- report -----------------------------------------------------------------------------------------------------


def report(capture: CaptureLike, plans: Sequence[str | Path] = (), *, output: str | Path,
           compare: str | Path | None = None, phase: int | None = None, tile: int | None = None,
           png: str | Path | None = None, budget: int | str | None = None,
           machine: MachineLike = None) -> ReportResult:
    """Write the interactive, self-contained HTML report of a capture and its plans (``placer report``).

    Needs the ``[report]`` extra (plotly, matplotlib).

    Parameters
    ----------
    capture
        A :class:`Capture` or a capture file.
    plans
        Up to two plan files (``placer solve -o``): the production rule's and placer's are drawn side by side.
    output
        The HTML page to write (atomically).
    compare
        A ``placer compare --json`` file: adds the budget figure (and the trade-off front).
    phase
        The schedule figure's phase (default: the relayed phase with the largest worst-tile table).
    tile
        The SRAM map's tile (default: the busiest relay host).
    png
        Also write every figure as a PNG into this directory.
    budget
        The budget to mark (default: the first plan's, else the machine's).
    machine
        As for :func:`solve`.

    Returns
    -------
    ReportResult
        The page's path, size and figure count, the time it took, and the PNG files.
    """
    from placer.progress import task
    from placer.report.data import gather
    from placer.report.html import write_page
    from placer.report.page import build_page, need_extra

    need_extra()
    started = time.perf_counter()
    mach = _machine(machine)
    table = _size(budget, "budget") if budget is not None else None
    cap = _capture(capture)
    name = str(capture) if isinstance(capture, str | Path) else "<capture>"
    data = gather(cap, mach, [Path(p) for p in plans], table, Path(compare) if compare is not None else None)
    page = build_page(data, name, phase, tile)
    out = Path(output)
    size = write_page(out, page.text)
    seconds = time.perf_counter() - started
    pngs: list[Path] = []
    if png is not None:
        from placer.report.png import write_pngs

        with task(f"PNG figures into {png}"):
            pngs = write_pngs(data, page.plan, page.phase, page.tile, page.schedule, Path(png))
    return ReportResult(out, size, page.figures, seconds, page.phase, page.tile,
                        Path(png) if png is not None else None, tuple(pngs))


__all__ = [
    "OBJECTIVES",
    "ComparisonResult",
    "InspectResult",
    "PlaceManyResult",
    "PlaceResult",
    "PlacementMode",
    "ReplayResult",
    "ReportResult",
    "ScheduleMode",
    "ScheduleResult",
    "SelectionMode",
    "SelectionResult",
    "ValidationResult",
    "compare",
    "generate",
    "inspect",
    "load_machine",
    "objective_order",
    "place",
    "place_many",
    "read_capture",
    "replay",
    "report",
    "save_interrupted",
    "schedule",
    "solve",
    "validate",
    "write_capture",
]
