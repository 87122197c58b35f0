"""A lower bound from each relay host alone, under the reference's rules: its port takes the gathers one at a
time, its lane sends the forwards one at a time, each forward after its gathers, and no receive into an SRAM
element overlaps the send of a forward that reads it (the memory rule).

Why: the memory bound looks at one (tile, element) at a time, so it misses how a host's elements interlock. On
the CP-SAT plan's phase 60 most hosts hold two segments over three elements, the 2,508-word one over B|C and the
4,148-word one over A|B. Whichever forward goes first, the gathers into B that the other one needs may not land
during its send: they land before it or between the two sends, which puts the host's last landing at 11.9k
cycles or more where the busiest element alone gives 10.9k.

For each order of a host's forwards (every order for up to ``PERMUTED`` forwards; a host with more is skipped:
the bound stays valid), a linear program over the windows the forwards cut the port's timeline into: before the
first send, during each send, between sends. Each class of gather words (the forwards it feeds, the elements it
writes that a forward of the host reads) goes in the windows before the first forward it feeds, except during a
send that reads one of its elements; a window holds no more words than its length; the horizon is at least each
send's end plus its tail (its payload's landing on its last replica, and the guard). Pieces may split across
windows and wait, which only makes the program a relaxation. The host's bound is the least optimum over its
orders, and the phase's the largest over its hosts."""

from __future__ import annotations

import itertools
import math
from typing import TYPE_CHECKING, Any

import numpy as np

from placer.arrays import isin, unique
from placer.capture.model import Phase
from placer.solver import lazy_module
from placer.streams.dependencies import Dependencies

if TYPE_CHECKING:
    from ortools.linear_solver import pywraplp
else:  # loaded when the first program is built (``placer.solver.lazy_module``)
    pywraplp = lazy_module("ortools.linear_solver.pywraplp")

PERMUTED = 5  # hosts with up to this many forwards try every order (120 linear programs at most)

_Class = tuple[frozenset[int], frozenset[int]]  # (forwards fed, elements written that a forward of the host reads)


def relay_host_bound(phase: Phase, deps: Dependencies, *, ready: np.ndarray, pointer: np.ndarray,
                     lead: np.ndarray, guard: np.ndarray, last: np.ndarray,
                     hazards: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> int:
    """max over relay hosts of the least horizon the host alone allows (see the module docstring).

    ``ready``: each transfer's earliest offset O; ``pointer``/``lead``/``guard``: the entries' payload offsets
    (P − O), the transfers' send offsets (S − O) and guards; ``last``: each transfer's latest P − O;
    ``hazards``: ``hazard_pairs(phase)``."""
    if not len(deps):
        return 0
    words = phase.words.astype(np.int64)
    source = phase.source.astype(np.int64)
    owner = phase.dst_transfer()
    s_tr, s_key, entry, d_key = hazards
    forwards = unique(deps.succ)
    is_forward = np.zeros(phase.n, bool)
    is_forward[forwards] = True
    reads: dict[int, set[int]] = {int(f): set() for f in forwards}
    for t, k in zip(s_tr[is_forward[s_tr]].tolist(), s_key[is_forward[s_tr]].tolist(), strict=True):
        reads[t].add(k)
    # each gather's entries on its forward's host, as (entry, forward) pairs
    fan = np.diff(phase.dst_ptr)[deps.pred]
    edge = np.repeat(np.arange(len(deps.pred)), fan)
    at = phase.dst_ptr[deps.pred][edge] + np.arange(len(edge)) - np.repeat(np.cumsum(fan) - fan, fan)
    keep = phase.dst_tile[at].astype(np.int64) == source[deps.succ][edge]
    fed_entry, fed_forward = at[keep], deps.succ[edge[keep]]
    by_host: dict[int, list[int]] = {}
    for f in forwards.tolist():
        by_host.setdefault(int(source[f]), []).append(f)
    # the elements an entry writes that a forward of its tile reads (a key names its tile)
    relevant = isin(d_key, s_key[is_forward[s_tr]]) & isin(entry, fed_entry)
    w_entry, w_key = entry[relevant], d_key[relevant]
    # two receives of a tile are spaced by the first's words, less one before a 52-word one (its pointer is a cycle
    # earlier): count each receive one word short there
    span = words - (words == 52)
    classes: dict[int, dict[_Class, int]] = {h: {} for h in by_host}
    head: dict[int, int] = {}
    fed_at, fed_count = np.unique(fed_entry, return_counts=True)
    key_at, key_count = np.unique(w_entry, return_counts=True)
    keys_of = np.zeros(len(fed_at), np.int64)
    keys_of[np.searchsorted(fed_at, key_at)] = key_count
    # almost every entry feeds one forward and writes at most one such element: those are grouped with numpy
    simple = (fed_count == 1) & (keys_of <= 1)
    one_key = np.full(len(fed_at), -1, np.int64)
    single_key = isin(w_entry, fed_at[simple])
    one_key[np.searchsorted(fed_at, w_entry[single_key])] = w_key[single_key]
    o = np.argsort(fed_entry, kind="stable")
    first_forward = fed_forward[o][np.searchsorted(fed_entry[o], fed_at)]
    e = fed_at[simple]
    span_keys = int(d_key.max(initial=0)) + 2
    code = first_forward[simple] * span_keys + one_key[simple] + 1  # the forward names its host
    groups, inverse = np.unique(code, return_inverse=True)
    total = np.bincount(inverse, weights=span[owner[e]], minlength=len(groups)).astype(np.int64)
    arrive = ready[owner] + pointer
    first = np.full(len(groups), np.iinfo(np.int64).max)
    np.minimum.at(first, inverse, arrive[e])
    g_forward, g_key = groups // span_keys, groups % span_keys - 1
    g_host = source[g_forward]
    for h, f, k, w, a in zip(g_host.tolist(), g_forward.tolist(), g_key.tolist(), total.tolist(),
                             first.tolist(), strict=True):
        cls = (frozenset((f,)), frozenset((k,)) if k >= 0 else frozenset())
        classes[h][cls] = classes[h].get(cls, 0) + w
        head[h] = min(head.get(h, a), a)
    rest = fed_at[~simple].tolist()
    if rest:  # a fragment that straddles two segments, or writes two elements
        feeds: dict[int, set[int]] = {x: set() for x in rest}
        mine = isin(fed_entry, rest)
        for x, f in zip(fed_entry[mine].tolist(), fed_forward[mine].tolist(), strict=True):
            feeds[x].add(f)
        writes: dict[int, set[int]] = {x: set() for x in rest}
        mine = isin(w_entry, rest)
        for x, k in zip(w_entry[mine].tolist(), w_key[mine].tolist(), strict=True):
            writes[x].add(k)
        for x in rest:
            h = int(phase.dst_tile[x])
            cls = (frozenset(feeds[x]), frozenset(writes[x]))
            classes[h][cls] = classes[h].get(cls, 0) + int(span[owner[x]])
            head[h] = min(head.get(h, int(arrive[x])), int(arrive[x]))
    # only the forwards that wait for a gather on their host: another may go before the first gather lands, and
    # leaving it out (its lane time, its reads) only loosens the bound
    planned = {h: sorted(set().union(*(feeds for feeds, _ in cls))) for h, cls in classes.items() if cls}
    send = {f: int(words[f]) for fs in planned.values() for f in fs}
    tail = {f: int(last[f] - lead[f] + guard[f]) for f in send}
    earliest = {f: max(head[int(source[f])], int(ready[f] + lead[f])) for f in send}
    # hosts by a value no order exceeds (everything gathered, then every forward), largest first, so that hosts
    # which cannot beat the best so far are skipped
    ceiling = {h: max([head[h] + sum(classes[h].values())] + [earliest[f] for f in fs])
               + sum(send[f] for f in fs) + max(tail[f] for f in fs) for h, fs in planned.items()}
    best = 0
    solved: dict[tuple[Any, ...], int] = {}
    for h in sorted(ceiling, key=lambda h: (-ceiling[h], h)):
        fs = planned[h]
        if ceiling[h] <= best:
            break
        if len(fs) > PERMUTED:
            continue
        host_reads = {f: frozenset(reads[f]) for f in fs}
        key = _signature(fs, classes[h], send, tail, host_reads, earliest, head[h])
        if key not in solved:
            solved[key] = min(_host_program(order, classes[h], send, tail, host_reads, earliest, head[h])
                              for order in itertools.permutations(fs))
        best = max(best, solved[key])
    return best


def _signature(fs: list[int], classes: dict[_Class, int], send: dict[int, int], tail: dict[int, int],
               reads: dict[int, frozenset[int]], earliest: dict[int, int], head: int) -> tuple[Any, ...]:
    """The host's program with its forwards and elements numbered by rank: hosts laid out alike solve once."""
    f_id = {f: j for j, f in enumerate(sorted(fs))}
    keys = sorted(set().union(*reads.values(), *(k for _, k in classes)))
    k_id = {k: j for j, k in enumerate(keys)}
    cls = tuple(sorted((tuple(sorted(f_id[f] for f in feeds)), tuple(sorted(k_id[k] for k in ks)), w)
                       for (feeds, ks), w in classes.items()))
    per_forward = tuple((send[f], tail[f], earliest[f], tuple(sorted(k_id[k] for k in reads[f])))
                        for f in sorted(fs))
    return cls, per_forward, head


def _host_program(order: tuple[int, ...], classes: dict[_Class, int], send: dict[int, int],
                  tail: dict[int, int], reads: dict[int, frozenset[int]], earliest: dict[int, int],
                  head: int) -> int:
    """The least horizon with the forwards sent in ``order`` (see the module docstring), rounded up; ``earliest``:
    each forward's earliest send, ``head``: the earliest a gather lands on the host (no later than any)."""
    solver = pywraplp.Solver.CreateSolver("GLOP")
    inf = solver.infinity()
    k = len(order)
    start = [solver.NumVar(earliest[f], inf, f"S{j}") for j, f in enumerate(order)]
    horizon = solver.NumVar(0, inf, "T")
    for j, f in enumerate(order):
        row = solver.Constraint(send[f] + tail[f], inf)  # T − S_j ≥ send + tail
        row.SetCoefficient(horizon, 1)
        row.SetCoefficient(start[j], -1)
        if j:
            row = solver.Constraint(send[order[j - 1]], inf)  # S_j − S_{j−1} ≥ the previous send
            row.SetCoefficient(start[j], 1)
            row.SetCoefficient(start[j - 1], -1)
    # windows: 0 before the first send (S_0 − head), 2j+1 during send j (its words), 2j+2 between sends j and j+1
    # (S_{j+1} − S_j − send j); each holds no more than its length
    window = [solver.Constraint(-inf, -head)]
    window[0].SetCoefficient(start[0], -1)
    for j in range(k):
        window.append(solver.Constraint(-inf, send[order[j]]))
        if j + 1 < k:
            window.append(solver.Constraint(-inf, -send[order[j]]))
            window[-1].SetCoefficient(start[j + 1], -1)
            window[-1].SetCoefficient(start[j], 1)
    position = {f: j for j, f in enumerate(order)}
    for c, ((feeds, keys), words) in enumerate(classes.items()):
        due = min(position[f] for f in feeds)  # before the send of the first forward it feeds
        allowed = [0] + [w for j in range(due) for w in (2 * j + 1, 2 * j + 2)
                         if w == 2 * j + 2 or not keys & reads[order[j]]]
        total = solver.Constraint(words, words)
        for w in allowed:
            x = solver.NumVar(0, inf, f"x{c}_{w}")
            total.SetCoefficient(x, 1)
            window[w].SetCoefficient(x, 1)
    solver.Objective().SetCoefficient(horizon, 1)
    solver.Objective().SetMinimization()
    if solver.Solve() != pywraplp.Solver.OPTIMAL:  # cannot happen (every class fits before its forward); claim nothing
        return 0
    # the program's data are integers; allow for the solver's tolerance before rounding up
    bound: int = math.ceil(solver.Objective().Value() - 1e-3)
    return bound


__all__ = ["PERMUTED", "relay_host_bound"]
