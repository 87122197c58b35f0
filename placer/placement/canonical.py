"""Exact placement: a canonical-order depth-first search in the style of MiniMalloc.

:func:`solve_flat` applies to :attr:`PlacementProblem.is_flat` problems (one address interval for every request, no
regions, conflicts or fixed allocations): the MiniMalloc instances, and tiles whose free memory is one hole.
:func:`solve_general` runs the compiled search on tiles with regions, several free ranges, live allocations and
conflicts (legal start windows per request, element-rounded conflicts, per-section free memory; see
``_canonical.cpp``), everything but region-1 sequences.

The search (Moffitt, ASPLOS 2023) places buffers in non-decreasing (offset, preorder index) order, each at its
lowest feasible offset, so only "canonical" solutions are enumerated; any solution can be compacted into one, so
exhausting the search is a proof of infeasibility. Pruning, all sound:

* section inference: the time axis is cut into sections with a constant live set; in each section the unplaced
  buffers must stack above max(current offset, highest placed top, lowest unplaced minimum offset);
* dominance: a buffer is never placed at or above the lowest top any unplaced buffer could reach (that buffer
  would fit underneath, so the same solution is found in another order);
* hatless pruning: if a buffer shares no section with any unplaced buffer, trying other buffers first is futile;
* dynamic decomposition: when no unplaced buffer spans a section boundary, the two sides are solved separately;
* a transposition table (our addition): the subtree below a node depends only on the set of placed buffers, the
  skyline of placed tops per section and the canonical constraint, so a failed (set, skyline) is never searched
  again under an equal or stricter constraint. Different stacking orders of the same buffers reach the same
  skyline often in tight instances.

Static preorders are tried round-robin with doubling node limits: T = largest section total, A = area, W = lifetime
width, Z = size, L = earliest start, R = latest end, X = seeded random (see :data:`HEURISTICS`). The compiled search
(``_canonical.cpp``, whose header lists every rule) adds blocked levels and forced placements, keys its failed-state
table by incremental fingerprints, and runs portfolios of preorders on threads; it is the one placer runs. This
module's Python search (:meth:`CanonicalSearch.solve_python`) is its test oracle on flat problems: the same status
on random instances.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from placer import native
from placer.placement import _canonical
from placer.placement.model import PlacementProblem

native.require(_canonical)

np: Any = None  # numpy: imported by the Python search (the test oracle) only, so that `placer place` starts fast
_INF: Any = None


def _numpy() -> None:
    global np, _INF
    if np is None:
        import numpy

        np = numpy
        _INF = numpy.int64(1) << numpy.int64(60)

# Preorders (letters: T largest section total, A area, W lifetime, Z size, L earliest start, R latest end, X seeded
# random; earlier letters dominate). MiniMalloc's three plus RZ/R/L: with the blocked-level rule those two sweep each
# level right to left (left to right), which places the perfect packings with holes (pph) in about n nodes where
# the size-first orders stall. The round robin gives each the same doubling node limit.
HEURISTICS = ("TWA", "TAW", "RZ", "LZ", "WAT", "R", "L")
PORTFOLIO = {  # preorders per worker thread (the first definite answer wins)
    2: (("TWA", "RZ", "WAT", "L"), ("TAW", "LZ", "R", "RX")),
    3: (("TWA", "WAT", "L"), ("TAW", "LZ", "RX"), ("RZ", "R", "LX")),
}

# Tiles with regions and several free ranges: size first (Z) fills a fragmented tile's small ranges with its small
# buffers, where the other orders stall (fragmented.json: 238 nodes with Z, none of the others in 1 s).
GENERAL_HEURISTICS = ("TAW", "Z", "RZ", "LZ", "WAT", "TWA")
GENERAL_PORTFOLIO = {
    2: (("TAW", "Z", "WAT"), ("RZ", "LZ", "TWA")),
    3: (("TAW", "WAT"), ("Z", "TWA"), ("RZ", "LZ")),
}

CanonicalProgress = Callable[[float, int], None]
"""Called with (elapsed seconds, nodes explored) about twice a second."""


@dataclass(frozen=True)
class CanonicalOutcome:
    status: str  # "placed", "infeasible" or "unknown"
    offsets: tuple[int, ...] | None  # relative to the interval's base
    nodes: int
    runtime: float
    heuristic: str | None = None
    cpu: float = 0.0  # CPU seconds of the search that answered (its critical path, whatever the machine load)
    memory_full: bool = False  # no answer because the search's path reached its memory ceiling (1 GiB)


class _Timeout(Exception):
    pass


class _Budget(Exception):
    pass


class CanonicalSearch:
    """Search state. Times are half-open section indices; offsets are relative to the base of the interval."""

    def __init__(self, sizes: list[int], starts: list[int], ends: list[int], alignments: list[int], capacity: int):
        n = len(sizes)
        self.lifetimes = [e - s for s, e in zip(starts, ends, strict=True)]
        self.n = n
        self.capacity = capacity
        self.size = list(sizes)
        self.align = list(alignments)
        self.aligned = any(a > 1 for a in alignments)
        times = sorted(set(starts) | set(ends))
        index = {t: k for k, t in enumerate(times)}
        self.S = max(len(times) - 1, 0)
        self.slo = [index[t] for t in starts]
        self.shi = [index[t] for t in ends]
        self.starts, self.ends = list(starts), list(ends)
        self.prepared = False
        self.area = [sizes[i] * (ends[i] - starts[i]) for i in range(n)]
        self.width = [ends[i] - starts[i] for i in range(n)]
        self.nodes = 0
        self.memos: dict[str, dict[Any, Any]] = {}
        self._pmask: dict[int, tuple[list[int], int]] = {}

    def _prepare(self) -> None:
        """The numpy structures of the Python search (the compiled one needs none of them)."""
        _numpy()
        if self.prepared:
            return
        self.prepared = True
        n, S, sizes = self.n, self.S, self.size
        self.size_arr = np.array([*sizes, 0], dtype=np.int64)
        members: list[list[int]] = [[] for _ in range(S)]
        for i in range(n):
            for s in range(self.slo[i], self.shi[i]):
                members[s].append(i)
        flat: list[int] = []
        mstarts: list[int] = []
        for m in members:
            mstarts.append(len(flat))
            flat.extend(m if m else [n])  # index n is a sentinel whose minimum offset is always "infinite"
        self.mflat = np.array(flat, dtype=np.int64)
        self.mstarts = np.array(mstarts, dtype=np.int64)
        lo = np.array(self.starts, dtype=np.int64)
        hi = np.array(self.ends, dtype=np.int64)
        over = (lo[:, None] < hi[None, :]) & (lo[None, :] < hi[:, None])
        np.fill_diagonal(over, False)
        self.overlaps = [np.nonzero(over[i])[0] for i in range(n)]
        self.total0 = np.zeros(S, dtype=np.int64)
        for i in range(n):
            self.total0[self.slo[i]:self.shi[i]] += sizes[i]
        self.cuts0 = [0] * max(S - 1, 0)
        for i in range(n):
            for s in range(self.slo[i], self.shi[i] - 1):
                self.cuts0[s] += 1

    # ------------------------------------------------------------------------------------------------ driver
    def solve(self, time_limit: float, progress: CanonicalProgress | None = None,
              heuristics: tuple[str, ...] = HEURISTICS) -> CanonicalOutcome:
        """The compiled search, one thread, round robin over ``heuristics``."""
        return self.solve_shares((heuristics,), time_limit, progress)

    def solve_shares(self, shares: tuple[tuple[str, ...], ...], time_limit: float,
                     progress: CanonicalProgress | None = None, seed: int = 0) -> CanonicalOutcome:
        """The compiled search, one thread per share of preorders; the first definite answer wins."""
        start = time.perf_counter()
        cpu0 = time.process_time()
        code, offsets, nodes, heuristic = _canonical.search(
            sizes=self.size, lifetimes=self.lifetimes, slo=self.slo, shi=self.shi, aligns=self.align,
            capacity=self.capacity, sections=self.S, shares=[list(share) for share in shares],
            time_limit=time_limit, progress=progress, seed=seed)
        self.nodes = nodes
        status = ("placed", "infeasible", "unknown", "unknown")[code]
        return CanonicalOutcome(status, None if offsets is None else tuple(offsets), nodes,
                                time.perf_counter() - start, heuristic, time.process_time() - cpu0,
                                memory_full=code == 3)

    def solve_python(self, time_limit: float, progress: CanonicalProgress | None = None,
                     heuristics: tuple[str, ...] = HEURISTICS) -> CanonicalOutcome:
        """The search in Python (numpy), without the compiled one's blocked levels, forced placements and
        fingerprinted table: the test oracle of ``_canonical.cpp`` (the same status), never run by placer."""
        self._prepare()
        start = time.perf_counter()
        cpu0 = time.process_time()
        self.deadline = start + time_limit
        self.progress = progress
        self.started = start
        self.next_report = start + 0.5
        old_limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(old_limit, 20 * self.n + 1000))
        try:
            limit = max(self.n, 1)
            while True:
                limit *= 2
                for h in heuristics:
                    self._reset(h)
                    self.budget = limit
                    try:
                        ok = self._solve_partitions(list(range(self.n)), 0, self.S)
                    except _Budget:
                        continue
                    runtime = time.perf_counter() - start
                    cpu = time.process_time() - cpu0
                    if ok:
                        return CanonicalOutcome("placed", tuple(self.sol), self.nodes, runtime, h, cpu)
                    return CanonicalOutcome("infeasible", None, self.nodes, runtime, h, cpu)
        except _Timeout:
            return CanonicalOutcome("unknown", None, self.nodes, time.perf_counter() - start, None,
                                    time.process_time() - cpu0)
        finally:
            sys.setrecursionlimit(old_limit)

    def _reset(self, heuristic: str) -> None:
        n = self.n
        self.heuristic = heuristic
        self.total = self.total0.copy()
        self.floor = np.zeros(self.S, dtype=np.int64)  # highest top of a placed buffer, per section
        self.minoff = np.zeros(n + 1, dtype=np.int64)
        self.U = np.zeros(n + 1, dtype=np.int64)  # minimum offset of unplaced buffers, "infinite" once placed
        self.U[n] = _INF
        self.off = [-1] * n
        self.sol = [-1] * n
        self.cuts = list(self.cuts0)
        self.mask = 0
        # a failure proved under one preorder is only meaningful for that preorder's canonical constraint
        self.memo = self.memos.setdefault(heuristic, {})

    def _preorder(self, part: list[int]) -> np.ndarray:
        total = self.total
        keys = []
        for i in part:
            t = int(total[self.slo[i]:self.shi[i]].max()) if self.shi[i] > self.slo[i] else 0
            value = {"T": t, "A": self.area[i], "W": self.width[i], "Z": self.size[i], "L": -self.slo[i],
                     "R": self.shi[i], "C": self.shi[i] - self.slo[i]}
            keys.append((tuple(-value[c] for c in self.heuristic if c in value), i))
        keys.sort()
        return np.array([i for _, i in keys], dtype=np.int64)

    def _part_mask(self, part: list[int]) -> int:
        cached = self._pmask.get(id(part))
        if cached is None or cached[0] is not part:
            value = 0
            for i in part:
                value |= 1 << i
            cached = (part, value)
            self._pmask[id(part)] = cached
        return cached[1]

    def _solve_partitions(self, part: list[int], plo: int, phi: int) -> bool:
        """Solve ``part`` over sections [plo, phi), splitting first wherever no unplaced buffer crosses a cut."""
        cutpoints = [plo] + [s + 1 for s in range(plo, phi - 1) if self.cuts[s] == 0] + [phi]
        for c in range(1, len(cutpoints)):
            lo, hi = cutpoints[c - 1], cutpoints[c]
            sub = [i for i in part if self.off[i] < 0 and self.slo[i] < hi and lo < self.shi[i]]
            if sub and not self._search(sub, lo, hi, self._preorder(sub), 0, 0):
                return False
        return True

    # ------------------------------------------------------------------------------------------------ search
    def _search(self, part: list[int], plo: int, phi: int, pre: np.ndarray, min_offset: int, min_pidx: int) -> bool:
        self.nodes += 1
        self.budget -= 1
        if self.budget < 0:
            raise _Budget
        if not self.nodes & 127:
            now = time.perf_counter()
            if now > self.deadline:
                raise _Timeout
            if self.progress is not None and now >= self.next_report:
                self.next_report = now + 0.5
                self.progress(now - self.started, self.nodes)
        key = (plo, phi, self.mask & self._part_mask(part), self.floor[plo:phi].tobytes())
        proved = self.memo.get(key)
        if proved is not None and proved <= (min_offset, min_pidx):
            return False
        U = self.U
        N = len(pre)
        u = U[pre]
        live = u < _INF
        if not live.any():
            for i in part:
                self.sol[i] = self.off[i]
            return True
        order = (u * N + np.arange(N, dtype=np.int64))[live]
        order.sort()
        min_height = int((u[live] + self.size_arr[pre[live]]).min())
        cap = self.capacity
        # every unplaced buffer of a section stacks above the next offset, so offsets above this cannot work
        o_max = cap - int(self.total[plo:phi].max())
        floor, total, minoff, size, off = self.floor, self.total, self.minoff, self.size, self.off
        # keys are offset * N + preorder index, so the canonical constraint (offset, index) >= (min_offset,
        # min_pidx) and the offset cut-offs are both contiguous slices of the sorted keys
        first = int(np.searchsorted(order, min_offset * N + min_pidx))
        stop = int(np.searchsorted(order, min(min_height, o_max + 1) * N))
        for k in order[first:stop].tolist():
            o, p = divmod(k, N)
            b = int(pre[p])
            off[b] = o
            U[b] = _INF
            height = o + size[b]
            ov = self.overlaps[b]
            ov_u = U[ov]
            hatless = not (ov_u < _INF).any()
            sel = ov[ov_u < height]
            saved = minoff[sel]
            if self.aligned:
                al = np.array([self.align[j] for j in sel.tolist()], dtype=np.int64)
                raised = -(-height // al) * al
            else:
                raised = height
            minoff[sel] = raised
            U[sel] = raised
            lo, hi = self.slo[b], self.shi[b]
            old_floor = floor[lo:hi].copy()
            floor[lo:hi] = height
            total[lo:hi] -= size[b]
            self.mask |= 1 << b
            lowest = np.minimum.reduceat(U[self.mflat], self.mstarts)
            eff = np.maximum(floor[plo:phi], np.where(lowest[plo:phi] < _INF, lowest[plo:phi], 0))
            ok = not (np.maximum(eff, o) + total[plo:phi] > cap).any()
            found = ok and self._place_rest(part, plo, phi, pre, o, p, b)
            self.mask ^= 1 << b
            total[lo:hi] += size[b]
            floor[lo:hi] = old_floor
            minoff[sel] = saved
            U[sel] = saved
            U[b] = minoff[b]
            off[b] = -1
            if found:
                return True
            if hatless:
                break
        if proved is None or (min_offset, min_pidx) < proved:
            self.memo[key] = (min_offset, min_pidx)
        return False

    def _place_rest(self, part: list[int], plo: int, phi: int, pre: np.ndarray, o: int, p: int, b: int) -> bool:
        self.sol[b] = self.off[b]
        cuts = self.cuts
        split = False
        lo, hi = self.slo[b], self.shi[b]
        for s in range(lo, hi - 1):
            cuts[s] -= 1
            if cuts[s] == 0 and plo <= s < phi - 1:
                split = True
        try:
            if not split:
                return self._search(part, plo, phi, pre, o, p)
            return self._solve_partitions(part, plo, phi)
        finally:
            for s in range(lo, hi - 1):
                cuts[s] += 1


def _build(problem: PlacementProblem) -> CanonicalSearch:
    base, limit = problem.ranges[0]
    reqs = problem.requests
    return CanonicalSearch(
        [r.bytes for r in reqs], [r.first for r in reqs], [r.last + 1 for r in reqs], [r.alignment for r in reqs],
        limit - base,
    )


def _shares(workers: int, n: int, general: bool = False) -> tuple[tuple[str, ...], ...]:
    """The preorders each worker thread round-robins over (tiny problems end before a second thread pays off)."""
    if workers <= 1 or n <= 24:
        return (GENERAL_HEURISTICS if general else HEURISTICS,)
    table = GENERAL_PORTFOLIO if general else PORTFOLIO
    return table[min(workers, max(table))]


def solve_flat(problem: PlacementProblem, time_limit: float, progress: CanonicalProgress | None = None,
               workers: int = 1, seed: int = 0) -> CanonicalOutcome:
    """Run the canonical search on a flat problem; offsets in the outcome are absolute addresses.

    With ``workers > 1`` the compiled search runs a portfolio: one thread per share of :data:`PORTFOLIO`, the
    first definite answer wins (which preorder solves an instance fast varies a lot, and two at once remove most of
    the round robin's waste on a two-core machine)."""
    if not problem.is_flat:
        raise ValueError("the canonical search needs a flat problem (one interval, no regions or conflicts)")
    base = problem.ranges[0][0]
    out = _build(problem).solve_shares(_shares(workers, problem.n), time_limit, progress, seed=seed)
    if out.offsets is not None:
        out = CanonicalOutcome(out.status, tuple(base + o for o in out.offsets), out.nodes, out.runtime,
                               out.heuristic, out.cpu)
    return out


# ------------------------------------------------------------------------------------------ tiles with regions
@dataclass(frozen=True)
class GeneralInputs:
    """The compiled search's inputs for a tile with regions (absolute addresses; see :func:`general_inputs`)."""

    sizes: list[int]
    lifetimes: list[int]
    slo: list[int]  # first section of each request
    shi: list[int]  # one past its last section
    aligns: list[int]
    capacity: int  # the top of the highest range
    sections: int
    # per request its legal start windows [first0, last0, first1, last1, ...] and its conflict partners; the
    # element geometry (region boundary or -1, region-0 element, region-1 element); per section its free memory
    # [start0, end0, start1, end1, ...]
    general: tuple[list[list[int]], list[list[int]], tuple[int, int, int], list[list[int]]]


def general_inputs(problem: PlacementProblem) -> GeneralInputs | None:
    """The compiled search's inputs for a tile with regions, several free ranges, fixed allocations or conflicts
    (absolute addresses): per request its legal start windows (its domains minus the starts that would overlap a
    fixed allocation live with it, or share an element with a fixed allocation it conflicts with), the conflict
    lists, the element geometry, and per section the free memory. None where the search does not apply: region-1
    sequences (their span depends on the region) or no request at all."""
    reqs = problem.requests
    if not reqs or any(r.region1_stride is not None for r in reqs):
        return None
    times = sorted({t for r in reqs for t in (r.first, r.last + 1)} | {t for f in problem.fixed for t in
                                                                         (f.first, f.last + 1)})
    index = {t: k for k, t in enumerate(times)}
    sections = len(times) - 1
    boundary = problem.region_boundary
    windows = []
    for i, r in enumerate(reqs):
        forbidden = [(f.start - r.bytes + 1, f.end - 1) for f in problem.fixed
                     if r.first <= f.last and f.first <= r.last]
        if boundary is not None:
            for _i, k in (pair for pair in problem.fixed_conflicts if pair[0] == i):
                forbidden += [(a - r.bytes + 1, b - 1) for a, b in _element_ranges(problem, problem.fixed[k])]
        spans = [(d.first, d.last) for d in problem.all_domains[i]]
        for lo, hi in forbidden:
            spans = [piece for first, last in spans for piece in _cut(first, last, lo, hi, r.alignment)]
        flat: list[int] = []
        for first, last in sorted(spans):
            flat += [first, last]
        windows.append(flat)
    conflicts: list[list[int]] = [[] for _ in reqs]
    if boundary is not None:
        for i, j in problem.conflict_pairs:
            conflicts[i].append(j)
            conflicts[j].append(i)
    geometry = (boundary if boundary is not None else -1, problem.region0_element, problem.region1_element)
    profiles = []
    for k in range(sections):
        lo_t, hi_t = times[k], times[k + 1]
        taken = sorted((f.start, f.end) for f in problem.fixed if f.first < hi_t and lo_t <= f.last)
        free: list[int] = []
        for start, b in problem.ranges:
            a = start
            for fa, fb in taken:
                if fb <= a or b <= fa:
                    continue
                if fa > a:
                    free += [a, fa]
                a = max(a, fb)
            if a < b:
                free += [a, b]
        profiles.append(free)
    return GeneralInputs([r.bytes for r in reqs], [r.last + 1 - r.first for r in reqs],
                         [index[r.first] for r in reqs], [index[r.last + 1] for r in reqs],
                         [r.alignment for r in reqs], max(b for _, b in problem.ranges), sections,
                         (windows, conflicts, geometry, profiles))


def _cut(first: int, last: int, lo: int, hi: int, alignment: int) -> list[tuple[int, int]]:
    """The aligned starts of [first, last] outside [lo, hi] (all inclusive; first and last are aligned)."""
    if hi < first or last < lo:
        return [(first, last)]
    out = []
    below = (lo - 1) // alignment * alignment
    if below >= first:
        out.append((first, min(below, last)))
    above = -(-(hi + 1) // alignment) * alignment
    if above <= last:
        out.append((max(above, first), last))
    return out


def _element_ranges(problem: PlacementProblem, f: Any) -> list[tuple[int, int]]:
    """The address ranges of the memory elements a fixed allocation touches (as the checker counts them)."""
    b = problem.region_boundary
    assert b is not None
    out = []
    if f.start < b:
        e = problem.region0_element
        out.append((f.start // e * e, -(-min(f.end, b) // e) * e))
    if f.end > b:
        e = problem.region1_element
        out.append((max(f.start, b) // e * e, -(-f.end // e) * e))
    return out


def solve_general(problem: PlacementProblem, time_limit: float, progress: CanonicalProgress | None = None,
                  workers: int = 1, seed: int = 0) -> CanonicalOutcome | None:
    """The compiled canonical search on a tile with regions, ranges, fixed allocations and conflicts: placed,
    infeasible (exhaustive: a proof) or unknown. None only where it does not apply (region-1 sequences, or no
    request: see :func:`general_inputs`)."""
    g = general_inputs(problem)
    if g is None:
        return None
    start, cpu0 = time.perf_counter(), time.process_time()
    code, offsets, nodes, heuristic = _canonical.search(
        sizes=g.sizes, lifetimes=g.lifetimes, slo=g.slo, shi=g.shi, aligns=g.aligns, capacity=g.capacity,
        sections=g.sections, shares=[list(s) for s in _shares(workers, problem.n, True)], time_limit=time_limit,
        progress=progress, general=g.general, seed=seed)
    return CanonicalOutcome(("placed", "infeasible", "unknown", "unknown")[code],
                            None if offsets is None else tuple(offsets), nodes, time.perf_counter() - start,
                            heuristic, time.process_time() - cpu0, memory_full=code == 3)
