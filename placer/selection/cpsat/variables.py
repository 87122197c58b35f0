"""The selection model's variables and the linear pieces the constraint families build from them.

:class:`Variables` is what the families share while the model is built (PyJobShop's "variables manager"): the
model itself, every decision variable created so far (``x``, ``z``, ``n``) and, per tile, the constant and the
linear terms of its program table and fragments, plus the pieces of each objective. The families
(``placer.selection.cpsat.constraints``) add to it in a fixed order, so the same problem always gives the same
model, variable for variable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from placer.machine import CostConstants
from placer.selection.options import HostClass
from placer.selection.problem import PhaseData, SelectionProblem
from placer.solver import lazy_module

if TYPE_CHECKING:
    from ortools.sat.python import cp_model
else:  # loaded when the first model is built (``placer.solver.lazy_module``)
    cp_model = lazy_module("ortools.sat.python.cp_model")

HostKey = HostClass | tuple[()]  # a host class, or ANY: the single class of the coarse host model
ANY: tuple[()] = ()
# A linear expression of the model. Typed loosely on purpose: ortools' LinearExprT admits numpy integers that its
# own operator stubs then reject, so every sum of pieces would need a cast.
Expr = Any
Terms = dict[int, list[Expr]]  # per tile: linear pieces added to a counter


class ClassMember(NamedTuple):
    """An option with segments of a host class: its group, its index in the group's options, how many."""

    group: int
    option: int
    segments: int  # how many of the option's segments are of the class


class ClassCycles(NamedTuple):
    """Aggregated tile classes: what a class host's transmit, receive and controls reach, and the literal saying
    the class hosts a segment in the phase."""

    tx: Expr
    rx: Expr
    ctrl: Expr
    hosts: cp_model.IntVar


@dataclass(frozen=True, eq=False)
class PhaseFixed:
    """What a selection phase contributes when it is held at the incumbent's choice (exact, re-costed)."""

    table: np.ndarray  # per tile, this phase (and its local-pack extra phase) rounded table bytes
    fragments: np.ndarray
    cycles: int  # times its executions, including any extra phase and kernel
    scratch: int
    relays: int


@dataclass(eq=False)
class PhaseTerms:
    """What the chosen options add to each tile's counters in one phase (and its local-pack extra phase)."""

    raw: Terms = field(default_factory=dict)
    frag: Terms = field(default_factory=dict)
    tx: Terms = field(default_factory=dict)
    rx: Terms = field(default_factory=dict)
    ctrl: Terms = field(default_factory=dict)
    ext_raw: Terms = field(default_factory=dict)
    ext_frag: Terms = field(default_factory=dict)
    ext_rx: Terms = field(default_factory=dict)
    ext_tx: Terms = field(default_factory=dict)
    ext_ctrl: Terms = field(default_factory=dict)
    ext_members: dict[int, list[cp_model.IntVar]] = field(default_factory=dict)  # local-pack options per replica
    lp_vars: list[cp_model.IntVar] = field(default_factory=list)
    kernels: list[tuple[int, cp_model.IntVar]] = field(default_factory=list)  # (kernel cycles, option literal)
    # coarse host model: per tile its "hosts a segment" literal and the (variable) load it then carries
    host_cond: dict[int, tuple[cp_model.IntVar, dict[str, Expr]]] = field(default_factory=dict)
    class_cycles: list[ClassCycles] = field(default_factory=list)
    extra_cycles: cp_model.IntVar | None = None

    @staticmethod
    def add(terms: Terms, tile: int, expr: Expr) -> None:
        terms.setdefault(tile, []).append(expr)


@dataclass(eq=False)
class Variables:
    """The model under construction: its decision variables and the per-tile and objective terms so far."""

    problem: SelectionProblem
    tighten: dict[int, int]  # per tile: how much lower its table budget is (negative: higher)
    coarse: bool  # one host literal per tile and phase instead of one per (host class, tile)
    # a lambda: ``cp_model`` is looked up when a model is built, not when the class is defined (it loads lazily)
    m: cp_model.CpModel = field(default_factory=lambda: cp_model.CpModel())  # noqa: PLW0108
    # per tile: program table / fragments = constant + terms
    table_const: np.ndarray = field(init=False)
    frag_const: np.ndarray = field(init=False)
    table_terms: list[list[Expr]] = field(init=False)
    frag_terms: list[list[Expr]] = field(init=False)
    class_table: list[list[Expr]] = field(init=False)  # per tile class
    class_frag: list[list[Expr]] = field(init=False)
    cycle_terms: list[Expr] = field(default_factory=list)
    scratch_terms: list[Expr] = field(default_factory=list)
    relay_terms: list[Expr] = field(default_factory=list)
    # the decision variables, per selection phase
    xs: list[list[list[cp_model.IntVar]]] = field(default_factory=list)  # group -> option -> literal
    zs: list[dict[HostKey, dict[int, cp_model.IntVar]]] = field(default_factory=list)  # class -> named tile
    ns: list[dict[tuple[HostKey, int], cp_model.IntVar]] = field(default_factory=list)  # (class, tile class)
    direct_index: dict[int, int] = field(init=False)  # phase id -> index in the capture (and the direct cost)

    def __post_init__(self) -> None:
        problem = self.problem
        tiles = problem.tiles
        self.direct_index = {p.phase: i for i, p in enumerate(problem.capture.phases)}
        self.table_const = problem.direct.table_bytes[:tiles].copy()
        self.frag_const = problem.direct.fragments[:tiles].copy()
        self.table_terms = [[] for _ in range(tiles)]
        self.frag_terms = [[] for _ in range(tiles)]
        self.class_table = [[] for _ in problem.tile_classes]
        self.class_frag = [[] for _ in problem.tile_classes]

    @property
    def cost(self) -> CostConstants:
        return self.problem.machine.cost

    @property
    def bpc(self) -> int:
        return self.problem.machine.exchange.bytes_per_cycle

    def extra_cycles(self, pd: PhaseData, terms: PhaseTerms) -> cp_model.IntVar:
        """The cycles of the phase's local-pack extra phase (created when a family first needs it)."""
        if terms.extra_cycles is None:
            terms.extra_cycles = self.m.new_int_var(0, 10**8, f"extra_cycles_{pd.phase.phase}")
        return terms.extra_cycles


@dataclass(eq=False)
class ModelHandle:
    """The built model: its variables (to hint and to read) and its objectives."""

    model: cp_model.CpModel
    x: list[list[list[cp_model.IntVar]]]
    z: list[dict[HostKey, dict[int, cp_model.IntVar]]]
    n: list[dict[tuple[HostKey, int], cp_model.IntVar]]
    objectives: dict[str, Expr]
    totals: dict[int, Expr] = field(default_factory=dict)  # per tile: program table (modelled)
