"""The independent placement checker: every placement is run through it before it is printed or written.

It deliberately re-derives every rule from the problem's raw fields (ranges, regions, element sizes, host scratch)
instead of calling the helpers the solvers use (:meth:`PlacementProblem.domains`), so a bug in the shared domain
logic cannot hide itself. It is simple on purpose: an event sweep finds whether any two spans collide, and the
quadratic loop then names every collision.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from placer.placement.model import END_OF_PROGRAM, MemoryClass, PlacementProblem


def _span(problem: PlacementProblem, i: int, address: int) -> tuple[int, int]:
    r = problem.requests[i]
    size = r.bytes
    if r.region1_stride is not None and problem.region_boundary is not None and address >= problem.region_boundary:
        size = r.region1_stride * max(1, len(r.aliases))
    return address, address + size


def memory_elements(problem: PlacementProblem, start: int, end: int) -> set[tuple[int, int]]:
    """Physical elements touched, named (element size, index), so region-0 and region-1 elements never collide."""
    if problem.region_boundary is None:
        return set()
    out: set[tuple[int, int]] = set()
    b = problem.region_boundary
    if start < b:
        size = problem.region0_element
        lo, hi = start, min(end, b)
        out.update((size, k) for k in range(lo // size, (hi - 1) // size + 1))
    if end > b:
        size = problem.region1_element
        lo, hi = max(start, b), end
        out.update((size, k) for k in range(lo // size, (hi - 1) // size + 1))
    return out


def _any_overlap(problem: PlacementProblem, spans: list[tuple[int, int]]) -> bool:
    """Whether two requests live together overlap, or one overlaps a fixed allocation while it is live: a sweep
    over time keeping the live spans sorted by address, where a new span can only collide with its neighbours
    (the live spans are disjoint as long as nothing collided). O(n log n + n * live) instead of all pairs."""
    items = [(r.first, r.last, spans[i][0], spans[i][1]) for i, r in enumerate(problem.requests)]
    items += [(f.first, f.last, f.start, f.end) for f in problem.fixed]
    items.sort()
    live: list[tuple[int, int, int]] = []  # (start, end, last), sorted by start
    for first, last, start, end in items:
        if any(x[2] < first for x in live):
            live = [x for x in live if x[2] >= first]
        k = bisect.bisect_left(live, (start, end, last))
        if k > 0 and live[k - 1][1] > start:
            return True
        if k < len(live) and live[k][0] < end:
            return True
        live.insert(k, (start, end, last))
    return False


def _overlaps(problem: PlacementProblem, spans: list[tuple[int, int]]) -> list[str]:
    errors = []
    for i in range(problem.n):
        ri, (si, ei) = problem.requests[i], spans[i]
        for j in range(i + 1, problem.n):
            rj, (sj, ej) = problem.requests[j], spans[j]
            if ri.first <= rj.last and rj.first <= ri.last and si < ej and sj < ei:
                errors.append(f"requests {i} and {j} are live together and overlap at [{max(si, sj):#x}, "
                              f"{min(ei, ej):#x})")
        for k, f in enumerate(problem.fixed):
            if ri.first <= f.last and f.first <= ri.last and si < f.end and f.start < ei:
                errors.append(f"request {i} overlaps fixed allocation {k} [{f.start:#x}, {f.end:#x}) while it is live")
    return errors


def check_placement(problem: PlacementProblem, addresses: Sequence[int] | None) -> list[str]:
    """Return every rule the placement breaks (empty list: valid). Messages name request indices and addresses."""
    if addresses is None:
        return ["no placement"]
    if len(addresses) != problem.n:
        return [f"placement has {len(addresses)} addresses for {problem.n} requests"]
    errors: list[str] = []
    spans = [_span(problem, i, a) for i, a in enumerate(addresses)]
    b = problem.region_boundary
    for i, (r, (start, end)) in enumerate(zip(problem.requests, spans, strict=True)):
        label = f"request {i} at [{start:#x}, {end:#x})"
        align = r.alignment
        if r.region1_stride is not None and b is not None:
            align = max(align, problem.region1_element if start >= b else problem.region0_element)
        if start % align:
            errors.append(f"{label}: address not aligned to {align}")
        inside = [k for k, (lo, hi) in enumerate(problem.ranges) if lo <= start and end <= hi]
        if not inside:
            errors.append(f"{label}: not inside one free range")
        elif problem.host_scratch is not None and (r.first == 0 or r.last == END_OF_PROGRAM):
            lo, hi = problem.ranges[inside[0]]
            if problem.host_scratch[0] <= lo and hi <= problem.host_scratch[1]:
                errors.append(f"{label}: live at step 0 or to the end, but placed in the host scratch window")
        if b is not None:
            if start < b < end:
                errors.append(f"{label}: crosses the region boundary {b:#x}")
            if r.klass is MemoryClass.INTERLEAVED and start < b + problem.interleaved_offset:
                errors.append(f"{label}: interleaved request below {b + problem.interleaved_offset:#x}")
    if _any_overlap(problem, spans):  # the sweep finds whether there is one; the pairwise loop names them all
        errors += _overlaps(problem, spans)
    roots = {root: i for i, r in enumerate(problem.requests) for root, _ in r.aliases}
    fixed_roots = {f.root: k for k, f in enumerate(problem.fixed) if f.root is not None}
    for i, r in enumerate(problem.requests):
        mine = memory_elements(problem, *spans[i])
        for root in r.conflicts:
            if root in roots and roots[root] != i:
                j = roots[root]
                shared = mine & memory_elements(problem, *spans[j])
                if shared:
                    errors.append(f"requests {i} and {j} conflict but share memory element(s) "
                                  f"{sorted(s * k for s, k in shared)[:3]}")
            elif root in fixed_roots:
                f = problem.fixed[fixed_roots[root]]
                if mine & memory_elements(problem, f.start, f.end):
                    errors.append(f"request {i} conflicts with fixed allocation {fixed_roots[root]} but shares an "
                                  "element")
    return errors
