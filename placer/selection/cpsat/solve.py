"""The staged solve: one CP-SAT solve per objective of the lexicographic order, each fixing the ones before it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from placer.progress import SolverCallback, both, solver_detail, task
from placer.selection.cpsat.model import build_model
from placer.selection.cpsat.objective import lexicographic_stages
from placer.selection.cpsat.solution import Selection, hint, read_selection
from placer.selection.cpsat.variables import PhaseFixed
from placer.selection.problem import SelectionProblem
from placer.solver import SolveResult, SolverParams, Status, clear_hints, run


@dataclass(eq=False)
class StagedResult:
    """The stages' results (name, solve) and the last solution found; its status is the staged solve's."""

    selection: Selection | None
    stages: list[tuple[str, SolveResult]]
    values: dict[str, float]

    @property
    def work(self) -> float:
        return sum(r.work for _, r in self.stages)

    @property
    def backstop(self) -> bool:
        return any(r.backstop for _, r in self.stages)

    @property
    def status(self) -> Status:
        if not self.stages:
            return Status.UNKNOWN
        first = self.stages[0][1].status
        if first in (Status.INFEASIBLE, Status.UNKNOWN):
            return first
        return Status.OPTIMAL if all(r.status is Status.OPTIMAL for _, r in self.stages) else Status.FEASIBLE


def solve_staged(problem: SelectionProblem, params: SolverParams, order: Sequence[str], *,  # noqa: PLR0913
                 start: Selection | None = None, progress: SolverCallback | None = None,
                 tighten: dict[int, int] | None = None, active: set[int] | None = None,
                 fixed: list[PhaseFixed] | None = None, combine: bool = False,
                 lower: dict[str, int] | None = None, wall: Callable[[], float] | None = None,
                 tuning: dict[str, Any] | None = None) -> StagedResult:
    """Lexicographic optimisation: one CP-SAT solve per objective, each fixing the ones before it.

    ``params.time_limit`` is the work of the whole call (deterministic seconds in deterministic mode), shared by
    the stages in fixed proportions; ``wall`` (seconds left on the command's clock) is each solve's backstop.
    ``combine`` minimises the first two objectives in one solve (weighted so the order stays lexicographic), which
    saves a presolve where the model is rebuilt often (neighbourhoods). ``lower`` gives proved lower bounds per
    objective: added as constraints, they let CP-SAT stop as soon as a solution meets them.
    With ``active``, only those selection phases are free; the others are held at ``start`` (whose exact
    contributions are ``fixed``)."""
    handle = build_model(problem, tighten=tighten, active=active, fixed=fixed)
    for name, value in (lower or {}).items():
        if name in handle.objectives:
            handle.model.add(handle.objectives[name] >= int(value))
    if start is not None:
        hint(handle, start)
    stages: list[tuple[str, SolveResult]] = []
    values: dict[str, float] = {}
    selection = start
    names, exprs = lexicographic_stages(problem, handle, list(order), combine, tighten)
    scope = "" if active is None else f"neighbourhood phase {_phase_names(problem, active)}, "
    # fixed shares of the work (not "what is left on the clock"), so deterministic runs stay deterministic
    shares = ([0.45, 0.35, 0.15, 0.05] if len(names) > 2 else [0.8, 0.2])[: len(names)]
    for i, name in enumerate(names):
        budget = params.time_limit * shares[i] / sum(shares)
        handle.model.minimize(exprs[name])
        left = wall() if wall is not None else None
        if left is not None and left <= 0.05:
            stages.append((name, SolveResult(Status.UNKNOWN, None, None, 0.0, backstop=True)))
            if i == 0:
                return StagedResult(None, stages, values)
            break
        # full probing costs seconds on this model's many tile constraints; level 0 trips a CP-SAT check (9.15)
        # with interleaved search
        with task(f"cp-sat {scope}stage {i + 1}/{len(names)} ({name})") as shown:
            solver, res = run(handle.model, replace(params, time_limit=max(0.05, budget), backstop=left),
                              progress=both(shown.solver, progress),
                              tuning={"cp_model_probing_level": 1, **(tuning or {})})
            shown.update(f"{res.status.value}, {solver_detail(res.objective, res.bound)}")
        stages.append((name, res))
        if res.status in (Status.INFEASIBLE, Status.UNKNOWN):
            if i == 0:
                return StagedResult(None, stages, values)
            break
        selection = read_selection(handle, solver, start)
        for n in order:
            values[n] = round(solver.value(handle.objectives[n]))
        value = round(res.objective or 0)
        handle.model.add(exprs[name] <= value)
        # carry the solution into the next stage
        clear_hints(handle.model)
        hint(handle, selection)
    return StagedResult(selection, stages, values)


def _phase_names(problem: SelectionProblem, active: set[int]) -> str:
    return ",".join(str(problem.phases[pi].phase.phase) for pi in sorted(active))
