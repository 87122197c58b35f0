"""Several budgets solved as one sweep (``placer compare``): the option effects computed once and shared, the
budgets smallest first, each starting from the best plan found so far that fits it, and the cycle front at the
largest."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from placer.capture.model import Capture
from placer.machine import Machine
from placer.progress import task
from placer.selection.greedy import greedy_plan
from placer.selection.select import (
    SEARCH_END,
    Front,
    Outcome,
    SelectionContext,
    SelectionSettings,
    cycle_front,
    prepare,
    select,
    share_table_bounds,
)
from placer.solver import Deadline, SolverParams
from placer.units import format_size

FIRST_SHARE = 0.8  # of a compare's search time, the first (smallest) budget's: it builds what the others reuse
FRONT_SECONDS = 1.0  # CP-SAT work per point of a compare's trade-off front (a small multiple-choice model)


def select_budgets(capture: Capture, machine: Machine, budgets: Sequence[int], fragment_limit: int, *,
                   params: SolverParams, order: tuple[str, ...], local_pack: bool, deadline: Deadline
                   ) -> list[tuple[int, Outcome]]:
    """Per budget (in the order given), the selection's outcome.

    Budgets are solved smallest first and each starts from the best plan found so far that fits it (and keeps it
    when its share of the time limit is gone before its search starts), so a larger budget never reports a worse
    plan; a table bound proved at a larger budget is reported at every smaller one with the same optimal cycles
    (``share_table_bounds``). ``params.time_limit`` bounds the sweep, counted on ``deadline``."""
    t = time.perf_counter()
    prepared = prepare(capture, machine, min(budgets), fragment_limit, local_pack=local_pack, workers=params.workers)
    t = deadline.mark("options", t)
    # the rule ignores the budget (docs/reference.md §5): computed before the budgets' shares of the search are set,
    # so the first budget's share is not spent on it
    prepared.rule = greedy_plan(capture, prepared.full, machine, min(budgets), fragment_limit,
                                prepared.problem.direct, params.workers)
    deadline.mark("production rule", t)
    work = params.work_per_second * params.time_limit / len(budgets)
    settings = SelectionSettings(params=params, order=order, local_pack=local_pack)
    solved: dict[int, Outcome] = {}
    search_from = deadline.elapsed()
    ascending = sorted(set(budgets))
    for i, b in enumerate(ascending):
        # each budget's wall backstop: its share of what is left for the search when the sweep starts. The first
        # budget builds and measures what every budget shares (the constructions, the phase configurations), so
        # it gets FIRST_SHARE of it; the others, which mostly combine, split the rest
        rest = (1 - FIRST_SHARE) / max(1, len(ascending) - 1)
        share = FIRST_SHARE + i * rest if len(ascending) > 1 else 1.0
        end = search_from + share * (SEARCH_END * deadline.seconds - search_from)
        hints = [solved[s].plan for s in ascending[:i] if solved[s].objectives.fits]
        with task(f"budget {format_size(b)}"):
            solved[b] = select(capture, machine, b, fragment_limit, settings,
                               SelectionContext(deadline=deadline, prepared=prepared, work=work, search_end=end,
                                                hints=hints))
    outcomes = [(b, solved[b]) for b in budgets]
    share_table_bounds(outcomes)
    return outcomes


def largest_front(outcomes: list[tuple[int, Outcome]], params: SolverParams, deadline: Deadline | None = None
                  ) -> Front:
    """The cycle front at the largest budget (``FRONT_SECONDS`` of CP-SAT work per point, within the sweep's
    ``deadline``): the measured configurations are every budget's, and a larger budget only admits more plans."""
    largest = max(b for b, _ in outcomes)
    return cycle_front(dict(outcomes)[largest], replace(params, time_limit=FRONT_SECONDS), deadline)


__all__ = ["FIRST_SHARE", "FRONT_SECONDS", "largest_front", "select_budgets"]
