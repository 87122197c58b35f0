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
- ``y[c, p]`` ≥ 0: how many tiles of class ``c`` host pattern ``p``. A segment's buffer must lie in one free gap
  of its host's memory in its phase, so a tile may host a type only where its largest gap there holds the
  type's buffer; the tiles fall into classes by the types their memory takes (SigLIP b2, one layer: 24 classes
  at 34,144 B). Within a class the rooms are nested (a tile with more room can take whatever one with less can),
  so per room ``r``, the class's patterns heavier than its next smaller room need its tiles with room ``r`` or
  more: at most that many of them (Hall's condition, exact for nested sets, and the classes partition the tiles);
- per segment type ``s`` (a phase, a size in granules and the tiles whose memory holds its buffer): the segments
  the options create ≤ the slots the patterns offer;
- minimise the total change: with the direct tables less the model's slack, the least the tables add up to when
  every tile's hosting fits its room under ``T``.

There are far too many patterns to list, so they are generated (column generation): the restricted program's
duals price each segment type, and for every class and room the most valuable pattern is a multiple-choice
knapsack over the phases, solved exactly by dynamic programming over the room in granules, every class at once
(``_best_patterns``). A pattern worth more than the class's nested rows charge for its weight is added, until none
is; a bisection's probes start from the patterns the probes before them generated.

**Why the bound holds at any stage of that.** It is not the restricted program's optimum (that is an upper bound
on the program's) but its Lagrangian dual: with the supply rows relaxed at multipliers ``u ≥ 0`` (the duals),

    L(u) = Σ_groups min(0, min_o (total_o + Σ_s u_s·n_o,s)) − Σ_tiles max over patterns fitting the tile (Σ_s u_s)

is at most the total change of every plan whose worst tile is at most ``T``: such a plan's ``x`` is integral, each
tile's hosting is one of its patterns (its segments' rows, rounded down to granules, add up to no more than its
room, rounded down; each segment's buffer in a free gap of the tile's memory in its phase, which is at most the
largest), and every segment has a slot of its own type, so the relaxed rows add zero. The dynamic program computes
the second sum exactly, per tile at its own room and with the types its memory takes (a type too heavy for the
tile's room is in no pattern within it, so treating it as taken changes nothing), so ``L(u)`` is a valid bound
whatever ``u`` is -- when column generation stops early, or when GLOP's duals are a little off -- and at
convergence it equals the program's optimum. The least mean at ``T`` only rises as ``T`` falls (every tile's room
shrinks, so every plan there is a plan at the higher ``T`` too), so the bisection of ``hosted_patterns_bound`` is
sound for the same reason as the hosted mass's: every ``T`` it rejects has a proved least mean above it.

What it still ignores: the tiles barred from hosting a segment (its group's replicas and senders), that a
replica of a group relayed at a costlier option has less room (its floor counts the group's most favourable
option), and that other relays' buffers, while live, take part of a tile's gaps (the gaps counted are the
capture's own).
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
    fit: np.ndarray  # (types, tiles): the tile's largest free gap in the type's phase holds the type's buffer


def _segment_types(problem: SelectionProblem) -> _Types:
    """A segment type is a phase, a weight and the tiles whose free memory in that phase holds the buffer (named
    by how many tiles do not: in one phase the gaps are fixed, so the count names the set)."""
    cached: _Types | None = problem.shared.get("hosted_types")
    if cached is not None:
        return cached
    granule = max(problem.machine.cost.table_rounding, 1)
    tiles = problem.tiles
    gaps = [np.sort(pd.largest_gap[:tiles]) for pd in problem.phases]
    index: dict[tuple[int, int, int], int] = {}
    by_group: dict[tuple[int, int], list[int]] = {}
    total, types, counts = [], [], []
    for k, (pi, gi, change, sizes, buffers) in enumerate(hosted_segments(problem)[0]):
        by_group.setdefault((pi, gi), []).append(k)
        short = np.searchsorted(gaps[pi], buffers, side="left")  # tiles whose largest gap is under the buffer
        tally = Counter(index.setdefault((pi, int(w), int(n)), len(index))
                        for w, n in zip((sizes // granule).tolist(), short.tolist(), strict=True))
        keys = sorted(tally)
        total.append(change)
        types.append(np.array(keys, np.int64))
        counts.append(np.array([tally[s] for s in keys], np.float64))
    phase = np.zeros(len(index), np.int64)
    weight = np.zeros(len(index), np.int64)
    fit = np.ones((len(index), tiles), bool)
    for (pi, w, n), s in index.items():
        phase[s], weight[s] = pi, w
        if n:  # the tiles whose gap is at least the smallest one that holds the buffer (none: n is every tile)
            fit[s] = problem.phases[pi].largest_gap[:tiles] >= gaps[pi][n] if n < tiles else False
    cached = problem.shared["hosted_types"] = _Types([by_group[key] for key in sorted(by_group)], total, types,
                                                     counts, phase, weight, fit)
    return cached


def _tile_classes(types: _Types, room: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The tiles in classes by what they can host: per class, the types its tiles' memory takes (a type heavier
    than a tile's room counts as taken: no pattern within that room holds it, so it cannot tell tiles apart), and
    per tile, its class. Within a class the rooms are nested."""
    takes = types.fit | (types.weight[:, None] > room[None, :])
    allowed, class_of = np.unique(takes.T, axis=0, return_inverse=True)
    return allowed, class_of.ravel()


def _best_patterns(types: _Types, phases: int, value: np.ndarray, room: int, allowed: np.ndarray
                   ) -> tuple[np.ndarray, list[np.ndarray]]:
    """Per tile class (``allowed``: classes by types, the types a class's tiles may host) and every room from 0
    to ``room`` granules, the most a pattern (at most one type per phase, weights within the room, types the class
    allows) is worth at ``value`` per type; and per phase, the type taken at each class and room (-1: none), from
    which ``_pattern`` reads a best pattern back. A multiple-choice knapsack, phase by phase, all classes at once."""
    best = np.zeros((len(allowed), room + 1))
    taken = []
    for p in range(phases):
        nxt = best.copy()
        take = np.full((len(allowed), room + 1), -1, np.int64)
        for s in np.flatnonzero((types.phase == p) & (value > 0)).tolist():
            w = int(types.weight[s])
            if w > room:
                continue
            with_s = best[:, : room + 1 - w] + value[s]
            better = (with_s > nxt[:, w:]) & allowed[:, s, None]
            nxt[:, w:][better] = with_s[better]
            take[:, w:][better] = s
        taken.append(take)
        best = nxt
    return best, taken


def _pattern(types: _Types, taken: list[np.ndarray], cls: int, room: int) -> list[int]:
    out = []
    for take in reversed(taken):
        s = int(take[cls, room])
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
    allowed, class_of = _tile_classes(types, room)
    lp = pywraplp.Solver.CreateSolver("GLOP")
    if lp is None:
        return None
    inf = lp.infinity()
    objective = lp.Objective()
    supply = [lp.Constraint(-inf, 0.0) for _ in range(len(types.phase))]
    # within a class the tiles' rooms are nested: a pattern heavier than the class's k-th smallest room needs one of
    # its tiles with a larger room, so per room, the class's patterns heavier than the room below it at most the
    # class's tiles with that room or more (Hall's condition, exact for nested sets; one column per class and
    # pattern whatever the tile; the classes partition the tiles)
    rooms: list[np.ndarray] = []
    nested: list[list[pywraplp.Constraint]] = []
    for c in range(len(allowed)):
        r, members = np.unique(room[class_of == c], return_counts=True)
        rooms.append(r)
        nested.append([lp.Constraint(-inf, float(n)) for n in np.cumsum(members[::-1])[::-1].tolist()])
    for options in types.groups:
        pick = lp.Constraint(-inf, 1.0)
        for k in options:
            x = lp.NumVar(0.0, 1.0, "")
            pick.SetCoefficient(x, 1.0)
            objective.SetCoefficient(x, float(types.total[k]))
            for s, n in zip(types.types[k].tolist(), types.counts[k].tolist(), strict=True):
                supply[s].SetCoefficient(x, n)
    objective.SetMinimization()
    columns: set[tuple[int, tuple[int, ...]]] = set()

    def add(c: int, pattern: tuple[int, ...], weight: int) -> None:
        columns.add((c, pattern))
        y = lp.NumVar(0.0, inf, "")
        for row in nested[c][: int(np.searchsorted(rooms[c], weight)) + 1]:
            row.SetCoefficient(y, 1.0)
        for s in pattern:
            supply[s].SetCoefficient(y, -1.0)

    # a known pattern joins every class whose memory takes it and whose largest room holds it
    for pattern, weight in sorted(known.items()):
        for c in np.flatnonzero(allowed[:, list(pattern)].all(axis=1)).tolist():
            if weight <= rooms[c][-1]:
                add(c, pattern, weight)

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
        # what a pattern of each weight pays for the tiles it needs: the class's nested rows' duals up to its room
        charge = [np.cumsum([max(0.0, -row.dual_value()) for row in rows]) for rows in nested]
        worth, taken = _best_patterns(types, phases, value, int(room.max(initial=0)), allowed)
        relayed = sum(min(0.0, *(types.total[k] + float(value[types.types[k]] @ types.counts[k]) for k in options))
                      for options in types.groups)
        best = max(best, relayed - float(worth[class_of, room].sum()))
        if mean(best) > target or mean(objective.Value()) <= target:
            break
        new: dict[tuple[int, tuple[int, ...]], int] = {}
        for c, class_rooms in enumerate(rooms):
            for r in class_rooms.tolist():
                pattern = tuple(sorted(_pattern(types, taken, c, r)))
                weight = int(types.weight[list(pattern)].sum())
                pays = charge[c][int(np.searchsorted(class_rooms, weight))] + _IMPROVES
                if (c, pattern) not in columns and (c, pattern) not in new and float(value[list(pattern)].sum()) > pays:
                    new[(c, pattern)] = weight
        if not new:
            break
        for (c, pattern), weight in new.items():
            add(c, pattern, weight)
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
