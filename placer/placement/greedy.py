"""The production allocator, mirrored: online first-fit, then an offline size-ordered retry (docs/reference.md §6).

Online: requests sorted by (first, interleaved first, −alignment, −bytes, last); a free list of holes in which
allocations whose lifetime ended before the request's first step have been released; first fit by (region 1?,
address), then hole index. Offline retry (only if online fails): sorted by (−alignment, −bytes, −duration, first);
the free list is rebuilt for every request from the placements whose lifetime intersects it. Conflicting
allocations are widened to their memory elements and the start is bumped past them.

Three deliberate differences from the reference, all only on inputs it never produces: conflicts are used from both
sides (the reference reads only the request's own list; its dumps always list both); fixed allocations (our
extension) are treated as forbidden spans while they are live; and released holes are not merged across the
boundary of two touching free ranges (a request may not cross a range boundary).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from placer.placement.model import MemoryClass, PlacementProblem


@dataclass(frozen=True)
class GreedyOutcome:
    addresses: tuple[int, ...] | None  # complete placement, or None
    phase: str  # "online", "offline" or "failed"
    failed_request: int | None  # the request the last attempted pass could not place
    partial: tuple[int | None, ...]  # what the last pass placed before failing (a CP-SAT hint)

    def describe(self) -> str:
        if self.addresses is not None:
            return f"placed ({self.phase} first-fit)"
        if self.phase == "out of time":
            return "not run to the end: the time limit came first"
        return f"failed (online and offline first-fit; offline stopped at request {self.failed_request})"


def merge_ranges(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def subtract(ranges: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    out = []
    for lo, hi in ranges:
        if end <= lo or hi <= start:
            out.append((lo, hi))
            continue
        if lo < start:
            out.append((lo, start))
        if end < hi:
            out.append((end, hi))
    return out


def subtract_all(ranges: list[tuple[int, int]], spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``ranges`` minus every span: the same list as subtracting the spans one by one, in one sorted pass."""
    cut = merge_ranges(spans)
    out = []
    for lo, hi in ranges:
        cur = lo
        for a, b in cut:
            if b <= cur:
                continue
            if a >= hi:
                break
            if a > cur:
                out.append((cur, a))
            cur = b
            if cur >= hi:
                break
        if cur < hi:
            out.append((cur, hi))
    return out


def online_order(problem: PlacementProblem) -> list[int]:
    reqs = problem.requests
    return sorted(
        range(problem.n),
        key=lambda i: (reqs[i].first, reqs[i].klass is not MemoryClass.INTERLEAVED, -reqs[i].alignment,
                       -reqs[i].bytes, reqs[i].last),
    )


def offline_order(problem: PlacementProblem) -> list[int]:
    reqs = problem.requests
    return sorted(
        range(problem.n),
        key=lambda i: (-reqs[i].alignment, -reqs[i].bytes, -(reqs[i].last - reqs[i].first), reqs[i].first),
    )


class _Arena:
    def __init__(self, problem: PlacementProblem, offline: bool) -> None:
        self.p = problem
        self.offline = offline
        self.free: list[tuple[int, int]] = list(problem.ranges)
        self.active: list[tuple[int, int, int]] = []  # (last, start, end)
        self.history: list[tuple[int, int, int, int]] = []  # (first, last, start, end)
        self.placed: dict[int, tuple[int, int]] = {}
        partners: dict[int, set[int]] = {i: set() for i in range(problem.n)}
        for i, j in problem.conflict_pairs:
            partners[i].add(j)
            partners[j].add(i)
        self.partners = partners
        self.fixed_partners: dict[int, list[int]] = {}
        for i, k in problem.fixed_conflicts:
            self.fixed_partners.setdefault(i, []).append(k)

    def _within_ranges(self, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
        # released holes merge, but never across the boundary of two touching free ranges
        return [(max(a, lo), min(b, hi)) for a, b in spans for lo, hi in self.p.ranges if a < hi and lo < b]

    def allocate(self, i: int) -> int | None:
        p = self.p
        r = p.requests[i]
        if self.offline:
            self.free = subtract_all(list(p.ranges), [(start, end) for first, last, start, end in self.history
                                                      if first <= r.last and r.first <= last])
            self.active = []
        kept = []
        released = []
        for last, start, end in self.active:
            if last < r.first:
                released.append((start, end))
            else:
                kept.append((last, start, end))
        if released:
            self.active = kept
            self.free = self._within_ranges(merge_ranges(self.free + released))
        forbidden = [p.element_span(*self.placed[j]) for j in self.partners[i] if j in self.placed]
        for k in self.fixed_partners.get(i, ()):
            forbidden.append(p.element_span(p.fixed[k].start, p.fixed[k].end))
        for f in p.fixed:
            if f.first <= r.last and r.first <= f.last:
                forbidden.append((f.start, f.end))
        forbidden = merge_ranges(forbidden)
        best = None
        for d in p.domains(i, self.free):
            start = d.first
            for a, b in forbidden:
                if start < b and a < start + d.bytes:
                    start = -(-b // d.alignment) * d.alignment
            if start <= d.last:
                key = ((d.region == 1, start), d.range_index)
                if best is None or key < best[0]:
                    best = (key, d.range_index, start, start + d.bytes)
        if best is None:
            return None
        _, index, start, end = best
        base, limit = self.free.pop(index)
        if base < start:
            self.free.append((base, start))
        if end < limit:
            self.free.append((end, limit))
        self.free.sort()
        self.placed[i] = (start, end)
        self.active.append((r.last, start, end))
        if self.offline:
            self.history.append((r.first, r.last, start, end))
        return start


class _OutOfTime(Exception):
    pass


def run_order(problem: PlacementProblem, order: list[int], offline: bool,
              deadline: float | None = None) -> tuple[list[int | None], int | None]:
    arena = _Arena(problem, offline)
    addresses: list[int | None] = [None] * problem.n
    for k, i in enumerate(order):
        if deadline is not None and k % 64 == 0 and time.perf_counter() > deadline:
            raise _OutOfTime
        address = arena.allocate(i)
        if address is None:
            return addresses, i
        addresses[i] = address
    return addresses, None


def greedy_place(problem: PlacementProblem, *, offline_retry: bool = True,
                 deadline: float | None = None) -> GreedyOutcome:
    """Run the production allocator: online first-fit, then (if it fails) the offline retry; stopped (phase
    "out of time") at ``deadline`` (a ``time.perf_counter`` value): its offline retry is quadratic in the
    buffers, tens of seconds at 20,000."""
    try:
        addresses, failed = run_order(problem, online_order(problem), offline=False, deadline=deadline)
        if failed is None:
            return GreedyOutcome(tuple(a for a in addresses if a is not None), "online", None, tuple(addresses))
        if not offline_retry:
            return GreedyOutcome(None, "failed", failed, tuple(addresses))
        addresses, failed = run_order(problem, offline_order(problem), offline=True, deadline=deadline)
    except _OutOfTime:
        return GreedyOutcome(None, "out of time", None, ())
    if failed is None:
        return GreedyOutcome(tuple(a for a in addresses if a is not None), "offline", None, tuple(addresses))
    return GreedyOutcome(None, "failed", failed, tuple(addresses))
