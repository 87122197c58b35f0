"""The three programs of a solve scheduled whole (``placer solve --schedule``): the all-direct program, the
production rule's plan and the selection's plan, every phase under the reference's rules, checked."""

from __future__ import annotations

from typing import TYPE_CHECKING

from placer.capture.model import Capture
from placer.machine import Machine
from placer.ordering.program import ProgramFigures, ProgramScheduler
from placer.solver import RunConfig, SolverParams

if TYPE_CHECKING:
    from placer.selection.select import Outcome

def schedule_programs(capture: Capture, outcome: Outcome, machine: Machine,
                      params: SolverParams | None = None) -> dict[str, ProgramFigures]:
    """The all-direct program, the production rule's plan and the outcome's plan, every phase scheduled under the
    reference's rules and checked (``placer solve --schedule``): B1024, the lower bound, and placer's best order
    (``params.time_limit`` seconds per phase; default the run configuration's ``[ordering]``) on the phases either
    plan relays -- the other phases are the same phase in all three programs."""
    scheduler = ProgramScheduler(machine, params if params is not None else RunConfig.load().ordering)
    searched = {r.group.phase for r in [*outcome.greedy.relays, *outcome.plan.relays]}
    out = {"direct": scheduler.program(capture, searched, "the all-direct program"),
           "production_rule": scheduler.program(outcome.greedy.rewritten(capture), searched,
                                                "the production rule's plan")}
    out["plan"] = scheduler.program(outcome.plan.rewritten(capture), searched, "the plan")
    return out


__all__ = ["schedule_programs"]
