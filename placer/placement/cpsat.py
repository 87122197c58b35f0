"""Exact placement for the general problem (regions, classes, alignment, element conflicts, fixed allocations).

Model: each request starts at ``alignment * k`` with ``k`` in the union of its legal (range, region) pieces, so range
and region boundaries are never crossed by construction. Two requests live together may not overlap: one
``NoOverlap`` per maximal set of simultaneously live requests (exact, because lifetimes are intervals) plus a
``NoOverlap2D`` over (address × time) for its energy reasoning. Conflicting requests get element-aligned intervals
that must not overlap. Identical interchangeable requests are ordered by address (symmetry breaking), and the
production mirror's (partial) placement or another engine's answer is given as a hint.

A CP-SAT ``INFEASIBLE`` is the solver's proof; a time-out is ``UNKNOWN``, never infeasible.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from placer.placement.model import Domain, PlacementProblem
from placer.progress import SolverCallback
from placer.solver import SolveResult, SolverParams, lazy_module, run

if TYPE_CHECKING:
    from ortools.sat.python import cp_model
else:  # loaded when the first model is built (``placer.solver.lazy_module``)
    cp_model = lazy_module("ortools.sat.python.cp_model")


@dataclass
class _Vars:
    start: list[cp_model.IntVar]  # chosen address
    # per request: (option literal or None, address interval, bytes, region)
    options: list[list[tuple[cp_model.IntVar | None, cp_model.IntervalVar, int, int]]]
    time: list[tuple[int, int]]  # compressed half-open [first, last + 1)


def _time_ranks(problem: PlacementProblem) -> list[tuple[int, int]]:
    points = sorted({r.first for r in problem.requests} | {r.last + 1 for r in problem.requests}
                    | {f.first for f in problem.fixed} | {f.last + 1 for f in problem.fixed})
    rank = {t: k for k, t in enumerate(points)}
    return [(rank[r.first], rank[r.last + 1]) for r in problem.requests]


def _variables(model: cp_model.CpModel, problem: PlacementProblem) -> _Vars:
    starts, options = [], []
    for i in range(problem.n):
        doms = problem.all_domains[i]
        groups: dict[tuple[int, int, int], list[Domain]] = defaultdict(list)
        for d in doms:
            groups[(d.bytes, d.alignment, d.region)].append(d)
        lo = min(d.first for d in doms)
        hi = max(d.last for d in doms)
        x = model.new_int_var_from_domain(
            cp_model.Domain.from_intervals([[d.first, d.last] for d in doms]), f"x{i}"
        )
        opts: list[tuple[cp_model.IntVar | None, cp_model.IntervalVar, int, int]] = []
        if len(groups) == 1:
            ((size, alignment, region), ds), = groups.items()
            if alignment > 1:
                k = model.new_int_var_from_domain(
                    cp_model.Domain.from_intervals([[d.first // alignment, d.last // alignment] for d in ds]), f"k{i}"
                )
                model.add(x == alignment * k)
            opts.append((None, model.new_fixed_size_interval_var(x, size, f"iv{i}"), size, region))
        else:
            lits = []
            for (size, alignment, region), ds in sorted(groups.items()):
                lit = model.new_bool_var(f"o{i}_{region}_{size}")
                lits.append(lit)
                xo = model.new_int_var_from_domain(
                    cp_model.Domain.from_intervals([[d.first, d.last] for d in ds]), f"x{i}_{region}_{size}"
                )
                k = model.new_int_var(ds[0].first // alignment, max(d.last for d in ds) // alignment, f"k{i}_{region}")
                model.add(xo == alignment * k).only_enforce_if(lit)
                model.add(x == xo).only_enforce_if(lit)
                opts.append((lit, model.new_optional_fixed_size_interval_var(xo, size, lit, f"iv{i}_{region}"), size,
                             region))
            model.add_exactly_one(lits)
        del lo, hi
        starts.append(x)
        options.append(opts)
    return _Vars(starts, options, _time_ranks(problem))


def _no_overlap_in_time(model: cp_model.CpModel, problem: PlacementProblem, v: _Vars) -> None:
    """Exact non-overlap: one NoOverlap per maximal clique of the interval graph of lifetimes."""
    n = problem.n
    fixed_ivs = [model.new_fixed_size_interval_var(f.start, f.end - f.start, f"fixed{k}")
                 for k, f in enumerate(problem.fixed)]
    fixed_time = []
    points = sorted({r.first for r in problem.requests} | {r.last + 1 for r in problem.requests}
                    | {f.first for f in problem.fixed} | {f.last + 1 for f in problem.fixed})
    rank = {t: k for k, t in enumerate(points)}
    fixed_time = [(rank[f.first], rank[f.last + 1]) for f in problem.fixed]
    events = sorted({a for a, _ in v.time} | {a for a, _ in fixed_time})
    previous: frozenset[int] = frozenset()
    cliques = []
    for t in events:
        live = frozenset(i for i in range(n) if v.time[i][0] <= t < v.time[i][1])
        live_fixed = frozenset(k for k in range(len(problem.fixed)) if fixed_time[k][0] <= t < fixed_time[k][1])
        if live and not (live <= previous):
            cliques.append((live, live_fixed))
        previous = live
    # keep only maximal cliques (a clique contained in another adds nothing)
    for c, (live, live_fixed) in enumerate(cliques):
        if any(c != d and live < other for d, (other, _) in enumerate(cliques)):
            continue
        ivs = [iv for i in sorted(live) for _, iv, _, _ in v.options[i]]
        ivs += [fixed_ivs[k] for k in sorted(live_fixed)]
        if len(ivs) > 1:
            model.add_no_overlap(ivs)
    # fixed allocations that start while a request is live but were not at a clique start are covered by 2D
    x_ivs, y_ivs = [], []
    for i in range(n):
        a, b = v.time[i]
        for _, iv, _, _ in v.options[i]:
            x_ivs.append(iv)
            y_ivs.append(model.new_fixed_size_interval_var(a, b - a, f"t{i}"))
    for k in range(len(problem.fixed)):
        a, b = fixed_time[k]
        x_ivs.append(fixed_ivs[k])
        y_ivs.append(model.new_fixed_size_interval_var(a, b - a, f"tf{k}"))
    if len(x_ivs) > 1:
        model.add_no_overlap_2d(x_ivs, y_ivs)


def _elements_used(model: cp_model.CpModel, problem: PlacementProblem, v: _Vars, i: int
                   ) -> dict[int, cp_model.IntVar]:
    """Element start address -> literal that is true whenever request ``i`` touches that memory element."""
    used: dict[int, cp_model.IntVar] = {}
    for lit, iv, size, _region in v.options[i]:
        x = cast("cp_model.LinearExpr", iv.start_expr())  # the stub says ``object``
        doms = [d for d in problem.all_domains[i] if d.bytes == size]
        lo = min(d.first for d in doms)
        hi = max(d.last for d in doms) + size
        e_start, _ = problem.element_span(lo, lo + 1)
        while e_start < hi:
            e_lo, e_hi = problem.element_span(e_start, e_start + 1)
            touches = model.new_bool_var(f"touch{i}_{e_lo}")
            below = model.new_bool_var(f"below{i}_{e_lo}")  # x < end of element
            above = model.new_bool_var(f"above{i}_{e_lo}")  # x + size > start of element
            model.add(x <= e_hi - 1).only_enforce_if(below)
            model.add(x >= e_hi).only_enforce_if(~below)
            model.add(x >= e_lo - size + 1).only_enforce_if(above)
            model.add(x <= e_lo - size).only_enforce_if(~above)
            clause = [~below, ~above, touches] + ([] if lit is None else [~lit])
            model.add_bool_or(clause)
            if e_lo in used:  # two options may touch the same element: either one marks it
                model.add_implication(touches, used[e_lo])
            else:
                used[e_lo] = touches
            e_start = e_hi
    return used


def _conflicts(model: cp_model.CpModel, problem: PlacementProblem, v: _Vars) -> None:
    """Conflicting requests never touch the same memory element: one at-most-one per shared element."""
    involved = sorted({i for pair in problem.conflict_pairs for i in pair} | {i for i, _ in problem.fixed_conflicts})
    used = {i: _elements_used(model, problem, v, i) for i in involved}
    for i, j in problem.conflict_pairs:
        for e, lit in used[i].items():
            if e in used[j]:
                model.add_at_most_one([lit, used[j][e]])
    for i, k in problem.fixed_conflicts:
        f = problem.fixed[k]
        taken_lo, taken_hi = problem.element_span(f.start, f.end)
        for e, lit in used[i].items():
            if taken_lo <= e < taken_hi:
                model.add(lit == 0)


def _symmetry(model: cp_model.CpModel, problem: PlacementProblem, v: _Vars) -> None:
    """Interchangeable requests (same everything, no conflicts, one option) are placed in index order."""
    conflicted = {i for pair in problem.conflict_pairs for i in pair} | {i for i, _ in problem.fixed_conflicts}
    classes: dict[tuple[Any, ...], list[int]] = defaultdict(list)
    for i, r in enumerate(problem.requests):
        if i in conflicted or len(v.options[i]) != 1:
            continue
        classes[(r.bytes, r.alignment, r.first, r.last, problem.all_domains[i])].append(i)
    for members in classes.values():
        for a, b in itertools.pairwise(members):
            model.add(v.start[a] < v.start[b])


def build_model(problem: PlacementProblem, hint: tuple[int | None, ...] | None = None
                ) -> tuple[cp_model.CpModel, _Vars]:
    model = cp_model.CpModel()
    v = _variables(model, problem)
    _no_overlap_in_time(model, problem, v)
    _conflicts(model, problem, v)
    _symmetry(model, problem, v)
    if hint is not None:
        for i, address in enumerate(hint):
            if address is not None:
                model.add_hint(v.start[i], address)
    return model, v


def solve_cpsat(problem: PlacementProblem, params: SolverParams, hint: tuple[int | None, ...] | None = None,
                progress: SolverCallback | None = None) -> tuple[SolveResult, tuple[int, ...] | None]:
    """Solve for feasibility; returns the uniform solve record and the addresses when a placement was found."""
    model, v = build_model(problem, hint)
    solver, result = run(model, params, progress=progress, has_objective=False)
    if result.objective is None:
        return result, None
    return result, tuple(int(solver.value(x)) for x in v.start)
