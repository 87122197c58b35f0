"""Whole programs scheduled under the reference's rules: the figures ``placer solve --schedule`` reports.

Every phase of a program gets the reference's B1024 order (what a compiler that keeps its scheduler does with the
program), its lower bound (no order is faster), and, on the phases named ``searched``, placer's best order
(``placer.refschedule.improve``, a time limit per phase); each schedule is checked by the independent checker.
Programs that share phases -- the all-direct program, the production rule's and placer's plans of one capture --
share the work: a phase object scheduled once is not scheduled again (``ProgramScheduler``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from placer.capture.model import Capture, Phase
from placer.machine import Machine
from placer.modes import OrderingRules, ScheduleMode
from placer.ordering.check import check_reference_schedule
from placer.ordering.orders import PhaseOrder
from placer.ordering.schedule import OrderingParams, schedule_phase
from placer.progress import track
from placer.solver import SolverParams


@dataclass(frozen=True, eq=False)
class PhaseRow:
    """One phase of a program, scheduled."""

    phase: int
    label: str
    transfers: int
    b1024: int  # the reference's B1024 horizon
    best: int  # the best order's horizon (B1024's where the phase was not searched)
    bound: int  # lower bound
    kind: str  # which bound
    method: str  # which step found the best order
    searched: bool
    problems: list[str]  # the independent checker's findings on the best schedule (empty: valid)
    order: np.ndarray = field(repr=False)  # the best order (transfer indices in append order)

    @property
    def valid(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "label": self.label, "transfers": self.transfers, "b1024": self.b1024,
                "best": self.best, "lower_bound": self.bound, "lower_bound_kind": self.kind, "method": self.method,
                "searched": self.searched, "valid": self.valid, "problems": self.problems[:5]}

    def phase_order(self) -> PhaseOrder:
        return PhaseOrder(self.phase, self.order, self.best, self.bound, self.method)


@dataclass(frozen=True)
class ProgramFigures:
    """A program's scheduled totals (cycles, sync excluded, times Repeat iterations) and its phases."""

    rows: list[PhaseRow]
    iterations: list[int]

    def _sum(self, name: str) -> int:
        return sum(getattr(r, name) * k for r, k in zip(self.rows, self.iterations, strict=True))

    @property
    def b1024(self) -> int:
        return self._sum("b1024")

    @property
    def best(self) -> int:
        return self._sum("best")

    @property
    def bound(self) -> int:
        return self._sum("bound")

    @property
    def valid(self) -> bool:
        return all(r.valid for r in self.rows)

    def totals(self) -> dict[str, Any]:
        best, bound = self.best, self.bound
        return {"b1024": self.b1024, "best": best, "lower_bound": bound,
                "best_gap": round((best - bound) / best, 6) if best else 0.0,
                "b1024_gap": round((self.b1024 - bound) / self.b1024, 6) if self.b1024 else 0.0}


@dataclass(eq=False)
class ProgramScheduler:
    """Schedules programs phase by phase, each distinct phase object once."""

    machine: Machine
    params: SolverParams  # the ordering search's (its time limit is per searched phase)
    _done: dict[int, tuple[Phase, PhaseRow]] = field(default_factory=dict)

    def program(self, program: Capture, searched: set[int], what: str) -> ProgramFigures:
        rows = []
        for phase in track(program.phases, f"schedule {what}", unit="phases"):
            hit = self._done.get(id(phase))
            search = phase.phase in searched
            if hit is None or (search and not hit[1].searched):
                row = self._schedule(program, phase, search)
                self._done[id(phase)] = (phase, row)  # the phase object is kept: its id stays its own
            else:
                row = hit[1]
            rows.append(row)
        return ProgramFigures(rows, [program.iterations(p.phase) for p in program.phases])

    def _schedule(self, program: Capture, phase: Phase, search: bool) -> PhaseRow:
        ps = schedule_phase(phase, self.machine, ScheduleMode.CPSAT if search else ScheduleMode.GREEDY, self.params,
                            OrderingParams(rules=OrderingRules.REFERENCE), tiles=program.tile_count)
        problems = check_reference_schedule(phase, ps.schedule.tx_start, ps.schedule.rx_start, ps.schedule.horizon,
                                            self.machine)
        return PhaseRow(phase.phase, program.label(phase.phase), phase.n, ps.greedy_horizon, ps.horizon, ps.lower,
                        ps.lower_kind, ps.method, search, problems, ps.order)


__all__ = ["PhaseRow", "ProgramFigures", "ProgramScheduler"]
