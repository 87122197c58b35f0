"""The selection model's objectives and how a lexicographic order becomes a sequence of solves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placer.selection.cpsat.variables import Expr, ModelHandle, Variables
from placer.selection.problem import SelectionProblem
from placer.solver import lazy_module

if TYPE_CHECKING:
    from ortools.sat.python import cp_model
else:  # loaded when the first model is built (``placer.solver.lazy_module``)
    cp_model = lazy_module("ortools.sat.python.cp_model")

# the estimate's lexicographic order: the cycles the model knows are the estimate's (docs/cost.md), which rank
# plans when the table comes first; scheduled cycles are measured outside the model (``placer.selection.columns``)
OBJECTIVES = ("estimate", "table", "scratch", "relays")


def objectives(v: Variables, worst: cp_model.IntVar) -> dict[str, Expr]:
    """Total estimated cycles over the program (Repeat phases × iterations; phases without groups at their
    direct cost), the worst tile's table, the relay scratch, the number of relays."""
    problem = v.problem
    selection_ids = {pd.phase.phase for pd in problem.phases}
    fixed_cycles = sum(pc.cycles * k for pc, k in zip(problem.direct.phases, problem.direct.iterations,
                                                       strict=True) if pc.phase not in selection_ids)
    return {
        "estimate": fixed_cycles + sum(v.cycle_terms),
        "table": worst,
        "scratch": sum(v.scratch_terms),
        "relays": sum(v.relay_terms),
    }


def lexicographic_stages(problem: SelectionProblem, handle: ModelHandle, order: list[str], combine: bool,
                         tighten: dict[int, int] | None) -> tuple[list[str], dict[str, Expr]]:
    """The solves of a lexicographic order: one per objective, or (``combine``) one per pair whose second member
    has a known upper bound U, minimising first·(U + 1) + second -- the same order, half the presolves."""
    upper: dict[str, int] = {
        "table": problem.table_budget + max([0, *(-v for v in (tighten or {}).values())]),
        "scratch": sum(max(op.scratch for op in opts) for pd in problem.phases for opts in pd.options),
        "relays": sum(max(op.count for op in opts) for pd in problem.phases for opts in pd.options),
    }
    obj = handle.objectives
    names: list[str] = []
    exprs: dict[str, Expr] = {}
    i = 0
    while i < len(order):
        first = order[i]
        second = order[i + 1] if i + 1 < len(order) else None
        if combine and second in upper:
            assert second is not None
            # the bound is a constraint, so the weight orders every feasible solution lexicographically
            handle.model.add(obj[second] <= upper[second])
            name = f"{first}+{second}"
            exprs[name] = obj[first] * (upper[second] + 1) + obj[second]
            i += 2
        else:
            name = first
            exprs[name] = obj[first]
            i += 1
        names.append(name)
    return names, exprs
