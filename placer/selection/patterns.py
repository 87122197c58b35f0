"""The hosted patterns (g): the hosted mass with each tile's hosting taken whole.

The hosted mass (f, ``bounds.hosted_mass_at``) counts the segments a worst tile ``T`` leaves room for by size
levels: at most Σ ⌊room / L⌋ segments of ``L`` bytes or more, at most one per phase on a tile with room ``L``,
their bytes within that room. What it cannot see is that one tile's room is shared by the segments it hosts in
every phase: a tile with room for 1.5 segments takes one, and a tile with 12 KB of room takes a 7.8 KB segment and
then nothing larger than 4.2 KB. This bound sees it. A tile's *pattern* is what it hosts: at most one segment per
phase, their rows (less the hosting margin) within its room. The linear program (Gilmore and Gomory's for cutting
stock, here with a multiple-choice side):

- ``x[o]`` in [0, 1]: the share of group ``g`` relayed by its option ``o`` (Σ over a group's options ≤ 1, the
  rest direct), costing the option's total change;
- ``y[p]`` ≥ 0: how many tiles host pattern ``p``; the tiles' rooms are nested (a tile with more room can take
  whatever one with less can), so per room ``r``, the patterns heavier than the next smaller room need tiles
  with room ``r`` or more: at most that many of them (Hall's condition, exact for nested sets);
- per segment type ``s`` (a phase and a size in granules): the segments the options create ≤ the slots the
  patterns offer;
- minimise the total change: with the direct tables less the model's slack, the least the tables add up to when
  every tile's hosting fits its room under ``T``.

There are far too many patterns to list, so they are generated (column generation): the restricted program's
duals price each segment type, and for every room the most valuable pattern is a multiple-choice knapsack over
the phases, solved exactly by dynamic programming over the room in granules (``_best_patterns``). A pattern worth
more than the nested rows charge for its weight is added, until none is; a bisection's probes start from the
patterns the probes before them generated.

**Why the bound holds at any stage of that.** It is not the restricted program's optimum (that is an upper bound
on the program's) but its Lagrangian dual: with the supply rows relaxed at multipliers ``u ≥ 0`` (the duals),

    L(u) = Σ_groups min(0, min_o (total_o + Σ_s u_s·n_o,s)) − Σ_tiles max over patterns fitting the tile (Σ_s u_s)

is at most the total change of every plan whose worst tile is at most ``T``: such a plan's ``x`` is integral, each
tile's hosting is one of its patterns (its segments' rows, rounded down to granules, add up to no more than its
room, rounded down), and every segment has a slot of its own type, so the relaxed rows add zero. The dynamic
program computes the second sum exactly, per tile at its own room, so ``L(u)`` is a valid bound whatever ``u`` is
-- when column generation stops early, or when GLOP's duals are a little off -- and at convergence it equals the
program's optimum. The least mean at ``T`` only rises as ``T`` falls (every tile's room shrinks, so every plan
there is a plan at the higher ``T`` too), so the bisection of ``hosted_patterns_bound`` is sound for the same
reason as the hosted mass's: every ``T`` it rejects has a proved least mean above it.

What it still ignores: the tiles barred from hosting a segment (its group's replicas and senders), and that a
replica of a group relayed at a costlier option has less room (its floor counts the group's most favourable
option).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from placer.selection.bounds import hosted_segments
from placer.selection.floors import mass_floor, tile_floors
from placer.selection.problem import SelectionProblem
from placer.solver import lazy_module

if TYPE_CHECKING:
    from ortools.linear_solver import pywraplp
else:  # loaded when the first model is built (``placer.solver.lazy_module``)
    pywraplp = lazy_module("ortools.linear_solver.pywraplp")

PATTERN_ROUNDS = 200  # column-generation rounds at one target at most (SigLIP b2's bisection: 24 over its 7 probes)
_IMPROVES = 1e-6  # a pattern must be worth this much more than the nested rows charge for its weight to be added


@dataclass(frozen=True, eq=False)
class _Types:
    """The relay options as the patterns see them (once per prepared problem)."""

    groups: list[list[int]]  # per group with relay options: its options' indices
    total: list[int]  # per option: its total change (replicas, senders, hosts, extra phase)
    types: list[np.ndarray]  # per option: the segment types it creates
    counts: list[np.ndarray]  # per option: how many segments of each of those types
    phase: np.ndarray  # per type: its selection phase index
    weight: np.ndarray  # per type: its rows less the hosting margin, in granules (rounded down)


def _segment_types(problem: SelectionProblem) -> _Types:
    cached: _Types | None = problem.shared.get("hosted_types")
    if cached is not None:
        return cached
    granule = max(problem.machine.cost.table_rounding, 1)
    index: dict[tuple[int, int], int] = {}
    by_group: dict[tuple[int, int], list[int]] = {}
    total, types, counts = [], [], []
    for k, (pi, gi, change, sizes) in enumerate(hosted_segments(problem)[0]):
        by_group.setdefault((pi, gi), []).append(k)
        tally = Counter(index.setdefault((pi, int(w)), len(index)) for w in (sizes // granule).tolist())
        keys = sorted(tally)
        total.append(change)
        types.append(np.array(keys, np.int64))
        counts.append(np.array([tally[s] for s in keys], np.float64))
    phase = np.zeros(len(index), np.int64)
    weight = np.zeros(len(index), np.int64)
    for (pi, w), s in index.items():
        phase[s], weight[s] = pi, w
    cached = problem.shared["hosted_types"] = _Types([by_group[key] for key in sorted(by_group)], total, types,
                                                     counts, phase, weight)
    return cached


def _best_patterns(types: _Types, phases: int, value: np.ndarray, room: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """For every room from 0 to ``room`` granules, the most a pattern (at most one type per phase, weights within
    the room) is worth at ``value`` per type; and per phase, the type taken at each room (-1: none), from which
    ``_pattern`` reads a best pattern back. A multiple-choice knapsack, phase by phase."""
    best = np.zeros(room + 1)
    taken = []
    for p in range(phases):
        nxt = best.copy()
        take = np.full(room + 1, -1, np.int64)
        for s in np.flatnonzero((types.phase == p) & (value > 0)).tolist():
            w = int(types.weight[s])
            if w > room:
                continue
            with_s = best[: room + 1 - w] + value[s]
            better = with_s > nxt[w:]
            nxt[w:][better] = with_s[better]
            take[w:][better] = s
        taken.append(take)
        best = nxt
    return best, taken


def _pattern(types: _Types, taken: list[np.ndarray], room: int) -> list[int]:
    out = []
    for take in reversed(taken):
        s = int(take[room])
        if s >= 0:
            out.append(s)
            room -= int(types.weight[s])
    return out


def hosted_patterns_at(problem: SelectionProblem, target: int, known: dict[tuple[int, ...], int] | None = None,
                       until: float | None = None) -> int | None:
    """The least mean table at a worst tile of ``target`` with every tile's hosting within its room (the module
    docstring); None if GLOP did not solve the first restricted program. Stops as soon as the answer to "is the
    least mean above ``target``?" is known: a Lagrangian bound above it, or a restricted program at or under it
    (its optimum is at least the full program's). ``known``: patterns (their types, sorted) to start from, with
    their weights; the ones generated here are added to it (a bisection's probes share them). ``until``
    (``time.perf_counter()`` time): no round starts after it (the bound so far is kept)."""
    types = _segment_types(problem)
    mass = mass_floor(problem)
    tiles = problem.tiles
    if not types.groups or not tiles:
        return mass.floor
    known = {} if known is None else known
    granule = max(problem.machine.cost.table_rounding, 1)
    room = np.maximum(target - tile_floors(problem).astype(np.int64), 0) // granule
    rooms, members = np.unique(room, return_counts=True)
    lp = pywraplp.Solver.CreateSolver("GLOP")
    if lp is None:
        return None
    inf = lp.infinity()
    objective = lp.Objective()
    supply = [lp.Constraint(-inf, 0.0) for _ in range(len(types.phase))]
    # the tiles' rooms are nested: a pattern heavier than the k-th smallest room needs one of the tiles with a
    # larger room, so per room, the patterns heavier than the room below it at most the tiles with that room or more
    # (Hall's condition, exact for nested sets; one column per pattern whatever the tile)
    above = np.cumsum(members[::-1])[::-1]
    nested = [lp.Constraint(-inf, float(n)) for n in above.tolist()]
    for options in types.groups:
        pick = lp.Constraint(-inf, 1.0)
        for k in options:
            x = lp.NumVar(0.0, 1.0, "")
            pick.SetCoefficient(x, 1.0)
            objective.SetCoefficient(x, float(types.total[k]))
            for s, n in zip(types.types[k].tolist(), types.counts[k].tolist(), strict=True):
                supply[s].SetCoefficient(x, n)
    objective.SetMinimization()
    columns: set[tuple[int, ...]] = set()

    def add(pattern: tuple[int, ...], weight: int) -> None:
        columns.add(pattern)
        y = lp.NumVar(0.0, inf, "")
        for row in nested[: int(np.searchsorted(rooms, weight)) + 1]:
            row.SetCoefficient(y, 1.0)
        for s in pattern:
            supply[s].SetCoefficient(y, -1.0)

    for pattern, weight in sorted(known.items()):
        if weight <= rooms[-1]:
            add(pattern, weight)

    def mean(total_change: float) -> int:
        # GLOP's tolerances are relative (about 1e-7): step below them
        total = mass.direct - mass.slack + math.floor(total_change - abs(total_change) * 1e-6) - 1
        return max(0, -(-total // tiles))

    best = -math.inf
    phases = len(problem.phases)
    for _ in range(PATTERN_ROUNDS):
        if (until is not None and time.perf_counter() > until) or lp.Solve() != pywraplp.Solver.OPTIMAL:
            break
        # every dual is read before a column is added: GLOP forgets its solution once the model changes
        value = np.maximum(np.array([-c.dual_value() for c in supply]), 0.0)
        # what a pattern of each weight pays for the tiles it needs: the nested rows' duals up to its room
        charge = np.cumsum([max(0.0, -row.dual_value()) for row in nested])
        worth, taken = _best_patterns(types, phases, value, int(rooms[-1]))
        relayed = sum(min(0.0, *(types.total[k] + float(value[types.types[k]] @ types.counts[k]) for k in options))
                      for options in types.groups)
        best = max(best, relayed - float(worth[room].sum()))
        if mean(best) > target or mean(objective.Value()) <= target:
            break
        new: dict[tuple[int, ...], int] = {}
        for r in rooms.tolist():
            pattern = tuple(sorted(_pattern(types, taken, r)))
            weight = int(types.weight[list(pattern)].sum())
            if pattern not in columns and pattern not in new and \
                    float(value[list(pattern)].sum()) > charge[int(np.searchsorted(rooms, weight))] + _IMPROVES:
                new[pattern] = weight
        if not new:
            break
        for pattern, weight in new.items():
            add(pattern, weight)
            known[pattern] = weight
    return None if best == -math.inf else mean(best)


def hosted_patterns_bound(problem: SelectionProblem, lower: int, upper: int, until: float | None = None) -> int:
    """The least worst tile ``T`` between ``lower`` (a bound already proved: the floors, the mass, the hosted mass)
    and ``upper`` (a plan's worst tile) whose least mean with every tile's hosting in its room is at most ``T``;
    multiples of the granule, by bisection (the module docstring). ``until`` (``time.perf_counter()`` time): no
    probe starts after it, and the bound is what the probes proved by then (still a bound: every ``T`` rejected
    is below every plan)."""
    step = max(problem.machine.cost.table_rounding, 1)
    lo, hi = -(-lower // step), upper // step
    if lo >= hi or not _segment_types(problem).groups:
        return max(lower, 0)
    known: dict[tuple[int, ...], int] = {}
    while lo < hi and (until is None or time.perf_counter() < until):
        mid = (lo + hi) // 2
        at = hosted_patterns_at(problem, mid * step, known, until)
        if at is not None and at > mid * step:
            lo = mid + 1  # no plan's worst tile is ``mid`` granules or less
        else:
            hi = mid
    return max(lo * step, lower)


__all__ = ["PATTERN_ROUNDS", "hosted_patterns_at", "hosted_patterns_bound"]
