"""Zero-slack stacking: place a problem whose live bytes fill its memory at every step, by decomposing it.

When every step is exactly full, a placement is an exact tiling, and the canonical search's hard decisions are its
bottom layers: a wrong choice among the first placements is refuted only after an exhaustive subtree
(``docs/placement.md``). A tiling has two structures that split it instead:

* **time sections**: a step that no buffer lives across splits the problem into independent parts (each fills the
  whole memory on its own steps);
* **strips**: a set of buffers whose live bytes are the same at every step of the section fills a strip of that
  width on its own, and a section is its strips stacked in some order. Strips are found smallest first ("atoms"):
  CP-SAT picks the fewest buffers containing a seed buffer whose live bytes change by zero at every step where one
  of them starts or ends. A buffer live throughout the section is an atom by itself.

A strip's placement depends on its base only through alignment and the domains (regions) that hold its window: where
no domain edge falls inside the window, placing it at ``base`` or at any base congruent modulo its alignments in the
same stretch between edges is the same problem shifted. Strips are memoised on that key (on a tile, only the few
strips across the region boundary are keyed on the base itself), so the stacking order is searched with a failure
memo on the strips left. Conflicts (tiles) are checked on the result; if one is broken, a second pass checks each
buffer as it is placed against the partners placed so far, and memoises a strip holding such a buffer with those
partners' addresses as context. Strips with equal signatures (sizes, lifetimes, domains) are interchangeable, so
only the first of them is tried at each level. Each strip is placed the same way,
recursively, down to single buffers (legal at their base or not) or to an indivisible strip of several buffers,
which the compiled canonical search places on its own. The decomposition is sound (every placement is checked by
the caller) and incomplete: a non-guillotine tiling, or a coincidental atom that is not a strip of any tiling,
leaves it without an answer, and the caller goes on with the complete search. Seeds: the shortest-lived buffer
first (its atom is rarely a coincidence), then the smallest.

The perfect packings of the benchmark set (guillotine cuts of the full rectangle, ``placer.placement.generate``)
are placed in 0.01-0.3 s at 50-500 buffers, where the canonical search and MiniMalloc need more than 60 s.
"""

from __future__ import annotations

import bisect
import math
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from placer.placement.bounds import live_runs
from placer.placement.checker import check_placement, memory_elements
from placer.placement.model import PlacementProblem

# an indivisible strip of several buffers is handed to the canonical search for at most this long
LEAF_SECONDS = 0.2


@dataclass(frozen=True)
class StackingOutcome:
    addresses: tuple[int, ...] | None  # absolute, one per request; None: no answer (not a proof)
    atoms: int  # CP-SAT atom searches run
    leaves: int  # indivisible strips handed to the canonical search
    runtime: float
    reason: str = ""


class _OutOfTime(Exception):
    pass


def zero_slack(problem: PlacementProblem) -> bool:
    """True when the requests' live bytes equal the one free range's size at every step of their span."""
    if len(problem.ranges) != 1 or problem.fixed or problem.n < 2:
        return False
    if any(r.region1_stride is not None for r in problem.requests):
        return False
    capacity = problem.ranges[0][1] - problem.ranges[0][0]
    return all(live == capacity for _first, _last, live in live_runs(problem))


def _sections(ids: Iterable[int], first: Sequence[int], last: Sequence[int]) -> list[list[int]]:
    """``ids`` split where no buffer lives across a step, in time order."""
    out: list[list[int]] = []
    reach = -1
    for i in sorted(ids, key=lambda i: (first[i], i)):
        if not out or first[i] > reach:
            out.append([])
        out[-1].append(i)
        reach = max(reach, last[i])
    return out


class _Stacker:
    def __init__(self, problem: PlacementProblem, deadline: float, seed: Callable[[list[int]], int],
                 conflicts: bool = False) -> None:
        from ortools.sat.python import cp_model  # only here: ortools costs a third of a second to import

        self.cp_model: Any = cp_model
        self.problem = problem
        self.deadline = deadline
        self.seed = seed
        self.size = [r.bytes for r in problem.requests]
        self.first = [r.first for r in problem.requests]
        self.last = [r.last for r in problem.requests]
        self.align = [r.alignment for r in problem.requests]
        # a strip's legality depends on its base only through the base modulo its alignments and which domains
        # hold the strip's window, unless a domain's edge cuts the window (then the base itself is the key)
        self.edges = sorted({e for doms in problem.all_domains for d in doms for e in (d.first, d.last + d.bytes)})
        self.memo: dict[tuple[Any, ...], dict[int, int] | None] = {}
        self.atoms: dict[frozenset[int], list[frozenset[int]]] = {}
        self.lcm: dict[frozenset[int], int] = {}
        # atoms with equal signatures are interchangeable: after one failed at a base, trying the other there
        # would repeat the same search on renamed buffers (up to index tie-breaks; it is a pruning, never a proof)
        self.signature = [(r.bytes, r.first, r.last, tuple((d.first, d.last, d.alignment, d.bytes, d.region)
                                                            for d in problem.all_domains[i]))
                          for i, r in enumerate(problem.requests)]
        # conflicts (tiles): partners may not share a memory element; checked as buffers are placed, against the
        # partners placed so far on the current path, which are then part of the memo's key (``_context``)
        self.partners: dict[int, list[int]] = {}
        for i, j in problem.conflict_pairs if conflicts else ():
            self.partners.setdefault(i, []).append(j)
            self.partners.setdefault(j, []).append(i)
        self.placed: dict[int, int] = {}  # buffers with partners, placed on the current path
        self.atom_searches = 0
        self.leaves = 0

    def _left(self) -> float:
        left = self.deadline - time.perf_counter()
        if left <= 0:
            raise _OutOfTime
        return left

    # -- a strip: the buffers ``ids`` fill [base, base + width) at every step of their span ---------------------
    def place(self, ids: frozenset[int], base: int, width: int) -> dict[int, int] | None:
        key = self._key(ids, base, width)
        if key in self.memo:
            hit = self.memo[key]
            if hit is None:
                return None
            shifted = {i: a + base for i, a in hit.items()}
            self.placed.update((i, a) for i, a in shifted.items() if i in self.partners)
            return shifted
        found = self._place(ids, base, width)
        self.memo[key] = None if found is None else {i: a - base for i, a in found.items()}
        return found

    def _key(self, strip: frozenset[int], base: int, width: int) -> tuple[Any, ...]:
        """What decides whether (and how) ``strip`` fills ``[base, base + width)``: the strip, its base up to the
        equivalence above and, for buffers with conflicts, the partners already placed outside the strip."""
        if not self.partners.keys().isdisjoint(strip):
            return strip, base, width, self._context(strip)
        window = bisect.bisect_right(self.edges, base)
        if window < len(self.edges) and self.edges[window] < base + width:
            return strip, base, width  # a domain edge inside the window: legality depends on where
        modulus = self.lcm.get(strip)
        if modulus is None:
            modulus = self.lcm[strip] = math.lcm(*(self.align[i] for i in strip))
        return strip, base % modulus, width, window

    def _context(self, buffers: frozenset[int]) -> frozenset[tuple[int, int]]:
        """Partners of ``buffers`` placed on the current path outside them, with their addresses."""
        return frozenset((j, self.placed[j]) for i in buffers if i in self.partners
                         for j in self.partners[i] if j in self.placed and j not in buffers)

    def _place(self, ids: frozenset[int], base: int, width: int) -> dict[int, int] | None:
        self._left()  # raises at the deadline: the order search can be long (conflicts narrow the memo)
        if len(ids) == 1:
            (i,) = ids
            if self.size[i] != width or not self._legal(i, base) or self._conflicts(i, base):
                return None
            if i in self.partners:
                self.placed[i] = base
            return {i: base}
        sections = _sections(ids, self.first, self.last)
        if len(sections) > 1:
            out: dict[int, int] = {}
            for sec in sections:
                part = self.place(frozenset(sec), base, width)
                if part is None:
                    self._forget(out)
                    return None
                out.update(part)
            return out
        atoms = self.atoms.get(ids)
        if atoms is None:  # they depend on the buffers alone, not on the base
            atoms = self.atoms[ids] = [frozenset(a) for a in self._atoms(sorted(ids))]
        if len(atoms) == 1:
            return self._leaf(ids, base, width)
        start = min(self.first[i] for i in ids)
        widths = [sum(self.size[i] for i in a if self.first[i] == start) for a in atoms]
        # the strips left decide where the next one starts (the end is fixed); with conflicts, so do the partners
        # placed outside what is left
        failed: set[tuple[frozenset[int], frozenset[tuple[int, int]]]] = set()
        conflicted = [not self.partners.keys().isdisjoint(a) for a in atoms]
        signatures = [tuple(sorted(self.signature[i] for i in a)) for a in atoms]

        def stack(left: frozenset[int], at: int) -> dict[int, int] | None:
            if not left:
                return {}
            context: frozenset[tuple[int, int]] = frozenset()
            if any(conflicted[k] for k in left):
                context = self._context(frozenset(i for k in left for i in atoms[k]))
            key = (left, context)
            if key in failed:
                return None
            tried = set()
            for k in sorted(left):
                if not conflicted[k]:
                    if signatures[k] in tried:
                        continue
                    tried.add(signatures[k])
                strip = self.place(atoms[k], at, widths[k])
                if strip is None:
                    continue
                rest = stack(left - {k}, at + widths[k])
                if rest is not None:
                    rest.update(strip)
                    return rest
                self._forget(strip)
            failed.add(key)
            return None

        return stack(frozenset(range(len(atoms))), base)

    def _conflicts(self, i: int, address: int) -> bool:
        """Whether ``i`` at ``address`` shares a memory element with a partner placed on the current path."""
        if i not in self.partners:
            return False
        p = self.problem
        mine = memory_elements(p, address, address + self.size[i])
        return any(not mine.isdisjoint(memory_elements(p, self.placed[j], self.placed[j] + self.size[j]))
                   for j in self.partners[i] if j in self.placed)

    def _forget(self, part: dict[int, int]) -> None:
        """A placement given up on the current path: its buffers' conflicts no longer hold."""
        for i in part:
            self.placed.pop(i, None)

    def _legal(self, i: int, address: int) -> bool:
        return any(d.first <= address <= d.last and (address - d.first) % d.alignment == 0
                   for d in self.problem.all_domains[i])

    def _atoms(self, ids: list[int]) -> list[list[int]]:
        """``ids`` (one section, filling a strip) partitioned into smallest sets of constant live bytes."""
        cp_model = self.cp_model
        rest = list(ids)
        atoms: list[list[int]] = []
        while len(rest) > 1:
            lo = min(self.first[i] for i in rest)
            hi = max(self.last[i] for i in rest)
            whole = [i for i in rest if self.first[i] == lo and self.last[i] == hi]
            if whole:  # live throughout: an atom by itself
                atoms.append([whole[0]])
                rest.remove(whole[0])
                continue
            model = cp_model.CpModel()
            x = {i: model.NewBoolVar(f"x{i}") for i in rest}
            starts: dict[int, list[int]] = {}
            ends: dict[int, list[int]] = {}
            for i in rest:
                starts.setdefault(self.first[i], []).append(i)
                ends.setdefault(self.last[i] + 1, []).append(i)
            for t in sorted(set(starts) | set(ends)):
                if lo < t <= hi:
                    model.Add(sum(self.size[i] * x[i] for i in starts.get(t, []))
                              == sum(self.size[i] * x[i] for i in ends.get(t, [])))
            model.Add(x[self.seed(rest)] == 1)
            model.Add(sum(x.values()) <= len(rest) - 1)
            model.Minimize(sum(x.values()))
            solver = cp_model.CpSolver()
            solver.parameters.num_workers = 1  # tiny models; one worker is deterministic
            solver.parameters.random_seed = 0
            solver.parameters.max_time_in_seconds = self._left()
            self.atom_searches += 1
            status = solver.Solve(model)
            if status == cp_model.INFEASIBLE:
                break  # what is left has no smaller part of constant live bytes
            if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
                raise _OutOfTime
            atom = [i for i in rest if solver.Value(x[i])]
            atoms.append(atom)
            taken = set(atom)
            rest = [i for i in rest if i not in taken]
        if rest:
            atoms.append(rest)
        return atoms

    def _leaf(self, ids: Collection[int], base: int, width: int) -> dict[int, int] | None:
        """An indivisible strip of several buffers: the compiled canonical search, briefly (tiles with conflicts
        are left alone: their conflicts name requests of the whole problem)."""
        from placer.placement.canonical import solve_flat, solve_general

        if self.problem.conflict_pairs:
            return None
        sub = replace(self.problem, ranges=((base, base + width),),
                      requests=tuple(self.problem.requests[i] for i in ids), name=f"{self.problem.name} strip")
        self.leaves += 1
        limit = min(LEAF_SECONDS, self._left())
        out = solve_flat(sub, limit) if sub.is_flat else solve_general(sub, limit)
        if out is None or out.status != "placed" or out.offsets is None:
            return None
        return dict(zip(ids, out.offsets, strict=True))


def _shortest(problem: PlacementProblem) -> Callable[[list[int]], int]:
    r = problem.requests
    return lambda ids: min(ids, key=lambda i: (r[i].last - r[i].first, r[i].bytes, i))


def _smallest(problem: PlacementProblem) -> Callable[[list[int]], int]:
    r = problem.requests
    return lambda ids: min(ids, key=lambda i: (r[i].bytes, r[i].last - r[i].first, i))


def stack(problem: PlacementProblem, time_limit: float) -> StackingOutcome:
    """Place a zero-slack problem (:func:`zero_slack`) by time sections and strips, or give no answer."""
    t0 = time.perf_counter()
    if not zero_slack(problem):
        return StackingOutcome(None, 0, 0, 0.0, "not zero slack at every step")
    deadline = t0 + time_limit
    base, end = problem.ranges[0]
    searches = leaves = 0
    reason = "no stacking of strips places every buffer"
    # first with conflicts checked on the result only (every strip's placement memoised); if that breaks one,
    # again checking them as buffers are placed (no memo for the strips holding a conflicting buffer: slower)
    attempts = [(seed, aware) for seed in (_shortest(problem), _smallest(problem))
                for aware in ((False, True) if problem.conflict_pairs else (False,))]
    broke = False
    for seed, aware in attempts:
        if aware and not broke:
            continue
        stacker = _Stacker(problem, deadline, seed, conflicts=aware)
        try:
            found = stacker.place(frozenset(range(problem.n)), base, end - base)
        except _OutOfTime:
            found, reason = None, "time limit"
        searches += stacker.atom_searches
        leaves += stacker.leaves
        broke = False
        if found is None and reason != "time limit":
            reason = "no stacking of strips places every buffer"
        if found is not None:
            addresses = tuple(found[i] for i in range(problem.n))
            if not check_placement(problem, addresses):
                return StackingOutcome(addresses, searches, leaves, time.perf_counter() - t0)
            broke, reason = True, "the stacking breaks a conflict"
        if reason == "time limit":
            break
    return StackingOutcome(None, searches, leaves, time.perf_counter() - t0, reason)


__all__ = ["StackingOutcome", "stack", "zero_slack"]
