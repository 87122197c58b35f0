"""A bounded address search for general problems: branch on hole edges and memory-element boundaries.

Each unplaced request keeps its legal starts as a list of aligned intervals. Placing a request removes, from every
request live at the same time, the starts that would overlap it, and from every conflicting request the starts that
would touch its elements; a request left with no start fails the branch. The next request is the most constrained
one (fewest starts per byte, then most conflicts, then largest), and its candidate starts are the ends of its
intervals and the element boundaries inside them (the places a tight packing puts things).

The candidates are a sample, not every address, so exhausting this search proves nothing: it answers "placed" or
"gave up", and the caller turns to CP-SAT for a proof. It is what makes the common hard tile fast.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from placer.placement.model import PlacementProblem

Interval = tuple[int, int, int, int]  # (first, last, alignment, bytes): starts first, first+alignment, ..., last


@dataclass(frozen=True)
class EdgeOutcome:
    addresses: tuple[int, ...] | None
    nodes: int
    runtime: float


def _without(d: Interval, start: int, end: int) -> list[Interval]:
    """Starts of ``d`` whose span avoids [start, end)."""
    first, last, align, size = d
    out = []
    if start - size >= first:
        new_last = min(last, (start - size) // align * align)
        if first <= new_last:
            out.append((first, new_last, align, size))
    new_first = max(first, -(-end // align) * align)
    if new_first <= last:
        out.append((new_first, last, align, size))
    return out


class _Search:
    def __init__(self, problem: PlacementProblem, node_limit: int, deadline: float) -> None:
        self.p = problem
        self.node_limit = node_limit
        self.deadline = deadline
        self.nodes = 0
        n = problem.n
        self.partners: list[set[int]] = [set() for _ in range(n)]
        for i, j in problem.conflict_pairs:
            self.partners[i].add(j)
            self.partners[j].add(i)
        self.live_with = [[j for j in range(n) if j != i and problem.time_overlap(i, j)] for i in range(n)]
        self.degree = [len(s) for s in self.partners]

    def initial(self) -> list[list[Interval]] | None:
        p = self.p
        doms: list[list[Interval]] = []
        for i in range(p.n):
            d = [(x.first, x.last, x.alignment, x.bytes) for x in p.all_domains[i]]
            r = p.requests[i]
            for f in p.fixed:
                if f.first <= r.last and r.first <= f.last:
                    d = [y for x in d for y in _without(x, f.start, f.end)]
            for k in (k for ii, k in p.fixed_conflicts if ii == i):
                es, ee = p.element_span(p.fixed[k].start, p.fixed[k].end)
                d = [y for x in d for y in _without(x, es, ee)]
            if not d:
                return None
            doms.append(d)
        return doms

    def candidates(self, d: list[Interval]) -> list[tuple[int, int]]:
        p = self.p
        out = set()
        for first, last, align, size in d:
            out.add((first, size))
            out.add((last, size))
            if p.region_boundary is None:
                continue
            element = p.region1_element if first >= p.region_boundary else p.region0_element
            boundary = -(-first // element) * element
            while boundary <= last + size:
                s = -(-boundary // align) * align
                if first <= s <= last:
                    out.add((s, size))
                s = (boundary - size) // align * align
                if first <= s <= last:
                    out.add((s, size))
                boundary += element
        return sorted(out)

    def visit(self, doms: list[list[Interval]], placed: list[int | None]) -> bool:
        if self.nodes >= self.node_limit:
            return False
        self.nodes += 1
        if not self.nodes & 63 and time.perf_counter() > self.deadline:
            self.nodes = self.node_limit
            return False
        best, best_key = None, None
        p = self.p
        for i, d in enumerate(doms):
            if placed[i] is not None or d is None:
                continue
            starts = sum((x[1] - x[0]) // x[2] + 1 for x in d)
            r = p.requests[i]
            key = (r.last != 2**32 - 1, starts * r.alignment // max(r.bytes, 1), -self.degree[i], -r.bytes, i)
            if best_key is None or key < best_key:
                best, best_key = i, key
        if best is None:
            return True
        i = best
        for start, size in self.candidates(doms[i]):
            end = start + size
            nxt = list(doms)
            ok = True
            for j in self.live_with[i]:
                if placed[j] is None and j not in self.partners[i]:
                    nxt[j] = [y for x in nxt[j] for y in _without(x, start, end)]
                    if not nxt[j]:
                        ok = False
                        break
            if ok:
                es, ee = p.element_span(start, end)
                for j in self.partners[i]:
                    if placed[j] is None:
                        nxt[j] = [y for x in nxt[j] for y in _without(x, es, ee)]
                        if not nxt[j]:
                            ok = False
                            break
            if ok:
                placed[i] = start
                if self.visit(nxt, placed):
                    return True
                placed[i] = None
            if self.nodes >= self.node_limit:
                return False
        return False


def edge_search(problem: PlacementProblem, *, node_limit: int = 20000, time_limit: float = 5.0) -> EdgeOutcome:
    t0 = time.perf_counter()
    search = _Search(problem, node_limit, t0 + time_limit)
    doms = search.initial()
    if doms is None:
        return EdgeOutcome(None, 0, time.perf_counter() - t0)
    placed: list[int | None] = [None] * problem.n
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * problem.n + 1000))
    try:
        found = search.visit(list(doms), placed)
    finally:
        sys.setrecursionlimit(old)
    addresses = tuple(a for a in placed if a is not None) if found else None
    return EdgeOutcome(addresses, search.nodes, time.perf_counter() - t0)
