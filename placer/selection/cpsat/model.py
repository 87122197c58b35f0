"""Build the selection model: every selection phase free (its options and hosts) or held at the incumbent."""

from __future__ import annotations

from placer.selection.cpsat import constraints
from placer.selection.cpsat.objective import objectives
from placer.selection.cpsat.variables import ModelHandle, PhaseFixed, PhaseTerms, Variables
from placer.selection.problem import PhaseData, SelectionProblem


def build_model(problem: SelectionProblem, *, tighten: dict[int, int] | None = None, coarse: bool | None = None,
                active: set[int] | None = None, fixed: list[PhaseFixed] | None = None) -> ModelHandle:
    """Build the CP-SAT model. ``tighten`` lowers a tile's table budget (lazy correction of seam effects; negative
    values raise it, for the relaxation that proves infeasibility).

    ``coarse`` (default: when the exact host model would exceed EXACT_HOST_LIMIT pairs) replaces host classes by
    one "hosts a segment" literal per tile and phase, each host charged the heaviest segment *chosen* in its phase:
    linear in the tiles instead of in tiles × classes, and conservative -- never optimistic -- about host loads.
    With ``active``, only those selection phases are free; the others are held at ``fixed``.
    """
    if coarse is None:
        coarse = constraints.exact_host_pairs(problem, active) > constraints.EXACT_HOST_LIMIT
    v = Variables(problem, tighten or {}, coarse)
    for pi, pd in enumerate(problem.phases):
        if active is not None and pi not in active:
            assert fixed is not None
            constraints.held_phase(v, pd, fixed[pi])
        else:
            _free_phase(v, pi, pd)
    worst, totals = constraints.budgets(v)
    return ModelHandle(v.m, v.xs, v.zs, v.ns, objectives(v, worst), totals)


def _free_phase(v: Variables, pi: int, pd: PhaseData) -> None:
    """A phase whose options and hosts the model chooses: the families in the order the model depends on."""
    terms = PhaseTerms()
    classes = constraints.choose_options(v, pd, terms)
    if v.coarse:
        constraints.coarse_hosts(v, pi, pd, terms)
    else:
        constraints.exact_hosts(v, pi, pd, classes, terms)
    constraints.tables_and_cycles(v, pd, terms)
    if terms.lp_vars:
        constraints.extra_phase(v, pd, terms)
