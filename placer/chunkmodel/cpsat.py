"""CP-SAT for stream ordering: an exact model for small phases, windowed large-neighbourhood search for big ones.

One interval per chunk in the transmit-time frame (``chunks`` explains why the latency shifts cancel on a port),
one NoOverlap per distinct set of chunks sharing a lane or a port (the replicas of a multicast group share one),
precedence for stream order and data dependencies, minimise the horizon. The greedy schedule is the hint and the
upper bound, so a result is never worse than the incumbent.

Large phases: a monolithic model of 1k–20k multicast intervals found nothing useful in 30 s on two workers, so
the search frees a neighbourhood (the chunks sharing a lane or port with a critical chunk, nearest to it in time)
and keeps every other chunk fixed at its time; a solved neighbourhood is then *compacted*: every chunk is shifted
as early as the orders on its lane and ports and its dependencies allow, which is where the horizon drops. The
compacted schedule is accepted only if its horizon is not worse, so the incumbent is never lost.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING

import numpy as np

from placer.arrays import setdiff1d, unique
from placer.chunkmodel.chunks import Chunks
from placer.progress import SolverCallback
from placer.solver import SolveResult, SolverParams, Status, lazy_module, run

if TYPE_CHECKING:
    from ortools.sat.python import cp_model
else:  # loaded when the first model is built (``placer.solver.lazy_module``)
    cp_model = lazy_module("ortools.sat.python.cp_model")


@dataclass(frozen=True)
class _OrderingSolverParams(SolverParams):
    """SolverParams plus the presolve limit that matters here (``run`` calls ``apply``)."""

    def apply(self, solver: cp_model.CpSolver) -> None:
        super().apply(solver)
        # merging many no-overlaps into cliques alone can eat a short time budget on multicast schedules
        solver.parameters.merge_no_overlap_work_limit = 0.0
        if self.workers == 1:  # one worker is deterministic by itself; interleaving only slows small models
            solver.parameters.interleave_search = False


def _solver_params(params: SolverParams, time_limit: float) -> _OrderingSolverParams:
    base = {f.name: getattr(params, f.name) for f in fields(SolverParams)}
    base["time_limit"] = max(0.05, time_limit)
    return _OrderingSolverParams(**base)


def horizon_of(chunks: Chunks, starts: np.ndarray) -> int:
    return int((starts + chunks.words + chunks.tail).max(initial=0))


# --- shared structure ------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _Graph:
    """Static structure reused by every neighbourhood: incidences and precedence edges with start-to-start lags."""

    inc_chunk: np.ndarray
    inc_res: np.ndarray
    res_ptr: np.ndarray  # CSR resource -> chunks (inc sorted by resource)
    res_chunks: np.ndarray
    chunk_res: list[list[int]]
    prec_pred: np.ndarray
    prec_succ: np.ndarray
    prec_lag: np.ndarray


def _graph(chunks: Chunks) -> _Graph:
    chunk, res = chunks.resources()
    order = np.argsort(res, kind="stable")
    nres = 2 * chunks.tiles
    res_ptr = np.zeros(nres + 1, np.int64)
    np.cumsum(np.bincount(res, minlength=nres), out=res_ptr[1:])
    chunk_res: list[list[int]] = [[] for _ in range(chunks.count)]
    for c, r in zip(chunk.tolist(), res.tolist(), strict=True):
        chunk_res[c].append(r)
    sa, sb = chunks.stream_edges()
    pred = np.concatenate([chunks.dep_pred, sa])
    succ = np.concatenate([chunks.dep_succ, sb])
    lag = np.concatenate([chunks.words[chunks.dep_pred] + chunks.tail[chunks.dep_pred], chunks.lane_words[sa]])
    return _Graph(chunk, res, res_ptr, chunk[order], chunk_res, pred, succ, lag)


def _resource_groups(chunks: Chunks, graph: _Graph) -> list[tuple[bool, list[int]]]:
    """Distinct (is a lane, chunk set) sharing a resource (replica ports of one multicast set collapse to one)."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for r in range(len(graph.res_ptr) - 1):
        a, b = graph.res_ptr[r], graph.res_ptr[r + 1]
        if b - a < 2:
            continue
        lane = r < chunks.tiles
        key = (int(lane), *sorted(graph.res_chunks[a:b].tolist()))
        if key not in seen:
            seen.add(key)
            out.append((lane, list(key[1:])))
    return out


def _disjunctive_edges(chunks: Chunks, graph: _Graph, starts: np.ndarray) -> tuple[np.ndarray, ...]:
    """All start-to-start edges implied by a schedule: consecutive chunks on each resource, plus precedences."""
    order = np.lexsort((starts[graph.inc_chunk], graph.inc_res))
    c = graph.inc_chunk[order]
    r = graph.inc_res[order]
    same = r[1:] == r[:-1]
    a = c[:-1][same]
    b = c[1:][same]
    on_lane = r[:-1][same] < chunks.tiles  # a lane is held lead cycles longer than a port
    g = np.where(on_lane, chunks.lane_words[a], chunks.words[a])
    key = a * chunks.count + b
    o = np.lexsort((-g, key))
    key, g = key[o], g[o]
    first = np.ones(len(key), bool)
    first[1:] = key[1:] != key[:-1]
    key, g = key[first], g[first]  # the largest lag of a pair sharing several resources
    pred = np.concatenate([key // chunks.count, graph.prec_pred])
    succ = np.concatenate([key % chunks.count, graph.prec_succ])
    lag = np.concatenate([g, graph.prec_lag])
    return pred, succ, lag


def compact(chunks: Chunks, graph: _Graph, starts: np.ndarray) -> np.ndarray:
    """Shift every chunk as early as its resource orders (taken from ``starts``) and dependencies allow.

    ``starts`` is feasible, so it satisfies every such edge and the result is pointwise no later; sorting by start
    is a topological order of the edges (every edge has a positive lag), so one pass suffices.
    """
    pred, succ, lag = _disjunctive_edges(chunks, graph, starts)
    pos = np.empty(chunks.count, np.int64)
    pos[np.argsort(starts, kind="stable")] = np.arange(chunks.count)
    e = np.argsort(pos[succ], kind="stable")
    est = [0] * chunks.count
    for a, b, g in zip(pred[e].tolist(), succ[e].tolist(), lag[e].tolist(), strict=True):
        v = est[a] + g
        if v > est[b]:
            est[b] = v
    return np.asarray(est, np.int64)


def _lengths(chunks: Chunks, graph: _Graph, starts: np.ndarray) -> np.ndarray:
    """Longest path from each chunk's start to the end of the schedule under the schedule's orders."""
    pred, succ, lag = _disjunctive_edges(chunks, graph, starts)
    pos = np.empty(chunks.count, np.int64)
    pos[np.argsort(starts, kind="stable")] = np.arange(chunks.count)
    e = np.argsort(-pos[pred], kind="stable")
    length = (chunks.words + chunks.tail).tolist()
    for a, b, g in zip(pred[e].tolist(), succ[e].tolist(), lag[e].tolist(), strict=True):
        v = length[b] + g
        if v > length[a]:
            length[a] = v
    return np.asarray(length, np.int64)


# --- exact ----------------------------------------------------------------------------------------------------


def solve_exact(
    chunks: Chunks,
    hint: np.ndarray,
    lower: int,
    params: SolverParams,
    progress: SolverCallback | None = None,
) -> tuple[np.ndarray, SolveResult]:
    """The whole phase as one model; returns the best starts (the hint if CP-SAT finds nothing better)."""
    graph = _graph(chunks)
    upper = horizon_of(chunks, hint)
    model = cp_model.CpModel()
    words = chunks.words.tolist()
    tail = chunks.tail.tolist()
    s = [model.new_int_var(0, max(0, upper - w - t), f"s{c}") for c, (w, t) in enumerate(zip(words, tail,
                                                                                              strict=True))]
    lane_words = chunks.lane_words.tolist()
    iv = [model.new_fixed_size_interval_var(s[c], words[c], f"i{c}") for c in range(chunks.count)]
    lane_iv = [model.new_fixed_size_interval_var(s[c], lane_words[c], f"l{c}") for c in range(chunks.count)]
    for lane, group in _resource_groups(chunks, graph):
        model.add_no_overlap([(lane_iv if lane else iv)[c] for c in group])
    _add_precedences(model, s, graph.prec_pred, graph.prec_succ, graph.prec_lag)
    makespan = model.new_int_var(min(lower, upper), upper, "makespan")
    for c in range(chunks.count):
        model.add(makespan >= s[c] + words[c] + tail[c])
    model.minimize(makespan)
    for c, v in enumerate(hint.tolist()):
        model.add_hint(s[c], v)
    model.add_hint(makespan, upper)
    solver, result = run(model, _solver_params(params, params.time_limit), progress=progress)
    if result.status in (Status.OPTIMAL, Status.FEASIBLE):
        starts = np.array([solver.value(v) for v in s], np.int64)
        if horizon_of(chunks, starts) <= upper:
            return starts, result
    return hint.copy(), result


def _add_precedences(model: cp_model.CpModel, s: list[cp_model.IntVar], pred: np.ndarray, succ: np.ndarray,
                     lag: np.ndarray) -> None:
    for a, b, g in zip(pred.tolist(), succ.tolist(), lag.tolist(), strict=True):
        model.add(s[b] >= s[a] + g)


# --- large-neighbourhood search ---------------------------------------------------------------------------------


_KINDS = ("ports", "sets", "window")
# work charges (in CP-SAT deterministic-time units, about a second each) of one neighbourhood step's Python passes
_WORK_PER_EDGE = 2e-6
_WORK_PER_FREED = 5e-4


def improve_lns(
    chunks: Chunks,
    incumbent: np.ndarray,
    lower: int,
    params: SolverParams,
    *,
    neighbourhood: int = 120,
    step_time: float = 1.5,
    progress: SolverCallback | None = None,
    deadline: float | None = None,
) -> tuple[np.ndarray, bool]:
    """Improve ``incumbent`` within ``params.time_limit``; never returns a longer schedule. Returns the schedule and
    whether the wall clock cut a deterministic search short (its result is then not reproducible).

    With ``params.deterministic`` the search is bounded by a work budget, not the clock: each step costs CP-SAT's
    deterministic time plus a charge for the Python passes proportional to the phase's edges and the freed chunks,
    and each neighbourhood is solved to a deterministic-time limit, so the same input and seed give the same
    schedule (the wall clock, at three times the limit or at ``deadline`` if sooner, is only a backstop). Otherwise
    the wall clock bounds it."""
    start_clock = time.perf_counter()
    deterministic = bool(getattr(params, "deterministic", False))
    own = start_clock + (3.0 * params.time_limit + 5.0 if deterministic else params.time_limit)
    deadline = own if deadline is None else min(own, deadline)
    work = 0.0
    graph = _graph(chunks)
    rng = np.random.default_rng(params.seed)
    best = compact(chunks, graph, incumbent)
    if horizon_of(chunks, best) > horizon_of(chunks, incumbent):  # cannot happen; keep the promise anyway
        best = incumbent.copy()
    best_h = horizon_of(chunks, best)
    size = neighbourhood
    steps = 0  # neighbourhood kinds take turns
    step_cost = 0.0  # Python work of one step (graph passes, model building), measured
    edges = len(graph.prec_pred) + len(graph.inc_chunk)
    cut = False
    while best_h > lower:
        began = time.perf_counter()
        left = deadline - began - step_cost
        if deterministic:
            if work >= params.time_limit - 0.1:
                break
            if left < 0.1:
                cut = True
                break
            left = params.time_limit - work
        elif left < 0.1:
            break
        length = _lengths(chunks, graph, best)
        free = _neighbourhood(chunks, graph, best, length, best_h, size, rng,
                              kind=_KINDS[steps % len(_KINDS)])
        if len(free) == 0:
            break
        solve_clock = time.perf_counter()
        # each solve stops by the wall-clock deadline too (its own backstop is 2 x its limit + 5 s)
        step = replace(params, time_limit=min(step_time, left),
                       backstop=max(0.05, deadline - time.perf_counter() - step_cost))
        cand, status, dtime = _solve_window(chunks, graph, best, length, free, best_h, step)
        solve_time = time.perf_counter() - solve_clock
        work += dtime + _WORK_PER_EDGE * edges + _WORK_PER_FREED * len(free)
        steps += 1
        if status is Status.OPTIMAL:
            size = min(int(size * 1.25) + 1, 600)
        elif status is Status.UNKNOWN:
            size = max(int(size * 0.7), 12)
        if cand is None:
            continue
        cand = compact(chunks, graph, cand)
        h = horizon_of(chunks, cand)
        if h <= best_h:
            best, best_h = cand, h
        step_cost = max(0.0, time.perf_counter() - began - solve_time)
        if progress is not None:
            progress(time.perf_counter() - start_clock, float(best_h), float(lower))
    return best, cut


def _neighbourhood(
    chunks: Chunks,
    graph: _Graph,
    starts: np.ndarray,
    length: np.ndarray,
    horizon: int,
    size: int,
    rng: np.random.Generator,
    *,
    kind: str,
) -> np.ndarray:
    """``size`` chunks around a random critical chunk ``c`` (one whose longest path reaches the horizon):
    ``ports``: the chunks sharing a lane or port with the critical chunks near ``c``, nearest to it in time;
    ``sets``: the chunks on ``c``'s destination ports, then the other chunks of their lanes;
    ``window``: every chunk starting in a time window that begins a little before ``c``."""
    critical = np.flatnonzero(starts + length >= horizon)
    if len(critical) == 0:
        return np.zeros(0, np.int64)
    c = int(rng.choice(critical))
    if kind == "sets":
        # every chunk on c's destination ports, then the other chunks of their lanes (nearest first): a multicast
        # group and its replicas' unicast feeds move together, so the group's windows can be re-aligned
        ports = [r for r in graph.chunk_res[c] if r >= chunks.tiles]
        core = unique(np.concatenate([graph.res_chunks[graph.res_ptr[r]:graph.res_ptr[r + 1]] for r in ports]))
        if len(core) >= size:
            return np.sort(core[np.argsort(np.abs(starts[core] - starts[c]), kind="stable")[:size]])
        lanes = unique(chunks.source[core])
        ring = np.concatenate([graph.res_chunks[graph.res_ptr[r]:graph.res_ptr[r + 1]] for r in lanes.tolist()])
        ring = setdiff1d(ring, core)
        ring = ring[np.argsort(np.abs(starts[ring] - starts[c]), kind="stable")[:size - len(core)]]
        return np.sort(np.concatenate([core, ring]))
    if kind == "window":
        order = np.argsort(starts, kind="stable")
        at = int(np.searchsorted(starts[order], starts[c]))
        first = max(0, at - int(rng.integers(0, max(1, size // 2))))
        return np.sort(order[first:first + size])
    near = critical[np.abs(starts[critical] - starts[c]) <= 4 * int(chunks.words[c]) + 64]
    res = {r for k in near.tolist()[:32] for r in graph.chunk_res[k]}
    pool = unique(np.concatenate([graph.res_chunks[graph.res_ptr[r]:graph.res_ptr[r + 1]] for r in res]))
    dist = np.abs(starts[pool] - starts[c])
    take = min(size, len(pool))
    return np.sort(pool[np.argpartition(dist, take - 1)[:take]])


def _solve_window(
    chunks: Chunks,
    graph: _Graph,
    starts: np.ndarray,
    length: np.ndarray,
    free: np.ndarray,
    horizon: int,
    params: SolverParams,
) -> tuple[np.ndarray | None, Status, float]:
    """Re-time ``free`` with every other chunk fixed; minimise the worst (start + path-to-end), then the sum of
    starts (packing left is what compaction turns into a shorter horizon)."""
    count = chunks.count
    is_free = np.zeros(count, bool)
    is_free[free] = True
    words = chunks.words
    lo = np.zeros(count, np.int64)
    hi = horizon - words - chunks.tail
    # outside-in precedences become bounds
    p, q, g = graph.prec_pred, graph.prec_succ, graph.prec_lag
    m = ~is_free[p] & is_free[q]
    np.maximum.at(lo, q[m], starts[p[m]] + g[m])
    m = is_free[p] & ~is_free[q]
    np.minimum.at(hi, p[m], starts[q[m]] - g[m])
    # a free chunk gains nothing by moving past the window (what follows is fixed), and a bounded window keeps
    # the fixed intervals it must avoid few
    hi[free] = np.minimum(hi[free], int(starts[free].max()) + int(words[free].max()))
    if np.any(lo[free] > hi[free]):
        return None, Status.INFEASIBLE, 0.0
    # the part of the path-to-end that runs through fixed chunks only (the free ones are being re-ordered)
    tail_len = words + chunks.tail
    pe, se, le = _disjunctive_edges(chunks, graph, starts)
    m = is_free[pe] & ~is_free[se]
    fixed_len = tail_len.copy()
    np.maximum.at(fixed_len, pe[m], le[m] + length[se[m]])

    model = cp_model.CpModel()
    var = {}
    ivs: dict[int, cp_model.IntervalVar] = {}
    lane_ivs: dict[int, cp_model.IntervalVar] = {}
    lane_words = chunks.lane_words
    for c in free.tolist():
        var[c] = model.new_int_var(int(lo[c]), int(hi[c]), f"s{c}")
        ivs[c] = model.new_fixed_size_interval_var(var[c], int(words[c]), f"i{c}")
        lane_ivs[c] = model.new_fixed_size_interval_var(var[c], int(lane_words[c]), f"l{c}")
    t_lo = int(lo[free].min())
    t_hi = int((hi[free] + lane_words[free]).max())
    touched = sorted({r for c in free.tolist() for r in graph.chunk_res[c]})
    seen: set[tuple[int, ...]] = set()
    for r in touched:
        lane = r < chunks.tiles
        size = lane_words if lane else words
        pool = lane_ivs if lane else ivs
        members = graph.res_chunks[graph.res_ptr[r]:graph.res_ptr[r + 1]]
        fixed = members[~is_free[members]]
        fixed = fixed[(starts[fixed] + size[fixed] > t_lo) & (starts[fixed] < t_hi)]
        mine = members[is_free[members]]
        key = (int(lane), *mine.tolist(), -1, *fixed.tolist())
        if key in seen or len(mine) + len(fixed) < 2:
            continue
        seen.add(key)
        fixed_ivs = [model.new_fixed_size_interval_var(int(starts[f]), int(size[f]), f"f{f}")
                     for f in fixed.tolist()]
        model.add_no_overlap([pool[c] for c in mine.tolist()] + fixed_ivs)
    m = is_free[p] & is_free[q]
    for a, b, lag in zip(p[m].tolist(), q[m].tolist(), g[m].tolist(), strict=True):
        model.add(var[b] >= var[a] + lag)
    worst = model.new_int_var(0, horizon + int(length.max()), "worst")
    for c in free.tolist():
        model.add(worst >= var[c] + int(fixed_len[c]))
    model.minimize(worst)
    for c in free.tolist():
        model.add_hint(var[c], int(starts[c]))
    # neighbourhood models are small: one worker (deterministic, no interleaving overhead) solves them fastest
    sub = replace(_solver_params(params, params.time_limit), workers=1)
    solver, result = run(model, sub)
    dtime = float(solver.deterministic_time)
    if result.status not in (Status.OPTIMAL, Status.FEASIBLE):
        return None, result.status, dtime
    out = starts.copy()
    for c in free.tolist():
        out[c] = solver.value(var[c])
    return out, result.status, dtime
