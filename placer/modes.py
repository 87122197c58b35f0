"""The modes a command (and the matching API call) runs a stage in: one ``StrEnum`` per stage.

Kept apart from the stages so that the command line and the API can name a mode without importing a solver; a
member is its string (``SelectionMode.GREEDY == "greedy"``), so the stages compare and serialise it as before.
"""

from __future__ import annotations

from enum import StrEnum


class SelectionMode(StrEnum):
    """``placer solve --mode``: CP-SAT from the best incumbent, or the production rule alone."""

    CPSAT = "cpsat"
    GREEDY = "greedy"


class PlacementMode(StrEnum):
    """``placer place --mode``: the production allocator only, or the exact engines after it."""

    GREEDY = "greedy"
    EXACT = "exact"


class OrderingRules(StrEnum):
    """``placer schedule --rules``: whose rules a phase is scheduled under."""

    REFERENCE = "reference"  # the reference compiler's own B1024 rules (the default)
    MODEL = "model"  # placer's chunk model (fast; CP-SAT works in it)


class PlanMode(StrEnum):
    """Where a relay plan came from (the plan file's ``mode``)."""

    PRODUCTION_RULE = "production-rule"  # the production rule (older files say "greedy")
    CPSAT = "cpsat"  # placer's search
    BUDGET_GREEDY = "budget-greedy"  # the budget-greedy incumbent the search kept


class ScheduleMode(StrEnum):
    """``placer schedule --mode``: the production B1024 rule, or that improved with CP-SAT."""

    GREEDY = "greedy"
    CPSAT = "cpsat"
