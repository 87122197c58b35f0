"""The reference compiler's B1024 scheduler, rule for rule: its order, and its timing of one transfer at a time.

``placer.chunkmodel.greedy`` is placer's own model of B1024 (chunks of a stream held as one block, a flat latency,
a 13-cycle base write per chunk); the CP-SAT improvement works in that model. This module ports what the
reference's source does (docs/ordering.md, "The reference's rules"), so that a horizon can be compared with the
reference's figures and with an improved order under the same timing:

Order. A transfer is *moving* when its Repeat source addresses differ (a per-layer weight read). Streams are the
transfers of one (not moving, source, destination tile list), numbered in that key's order (moving streams first);
inside a stream, by (first destination address, first source address, index); transfer k is in wave ⌊(stream words
before k) / 1,024⌋. Each (wave, stream) is balanced as one item over its payload words (``balanced_picks``, the
compiled heap of ``placer.streams.balance``); the final order is (dependency depth, not moving, wave, pick, position
in stream, index): every weight before every activation of its depth.

Timing, one transfer after another in that order, at the earliest offset ``O`` (from the predecessors' last
arrival) at which all of these hold:
- the sender's first word leaves at ``S = O + lead``, ``lead = max(0, −min m)`` over its receivers, with
  ``m = machine.mux_time(source, receiver)``; a lone receive of a tile with no other receive in the phase uses
  the point-to-point row instead (``lead = 112 − m``);
- receiver ``d`` selects the source at ``X = S + m + 1`` and the payload lands from ``P = X + 52 + 2·row(d)``
  (51 for a 52-word transfer) for ``words`` cycles;
- the sender's lane holds ``[S, S + words)`` and may fill an earlier gap; no receive control of the sender's tile
  falls on ``S`` or ``S + 1``;
- a receiver takes its receives in append order: ``X ≥`` the previous ``X + words``, and ``P ≥`` the previous
  ``P + words`` unless the address continues the previous receive (then no pointer control is written);
- control events of one tile (source select at ``X``, teardown at ``X + words``, pointer at ``P``) never share a
  cycle, except a pointer with a select or teardown (one instruction), and a select that replaces the previous
  teardown (a direct cutover); none falls on a send start of its tile or the cycle after;
- memory: on one tile, a send (from every Repeat source address) and a receive window ``[P, P + words + 5)`` that
  touch a common SRAM element (16 KiB below 0x80000, 32 KiB pairs above) never overlap in time.
The transfer's completion is its last arrival ``max(S + words, P + words)``; a tile's horizon is its last send end
or arrival + 5 (the row's guard); the phase horizon is the largest.

The timing loop is compiled (``_materialize.cpp``: the constants prepared here with numpy, the loop ported line
by line from ``_materialize_python``, 64-bit integers throughout); the Python loop stays here as its test oracle
(the same schedule bit for bit, compared on random phases and orders). SigLIP b2's MLP-up phase (62,856 transfers
× 46 receivers): 13–16 s in Python, 1.5–2.4 s compiled, 0.3–0.6 s once the phase is prepared (docs/ordering.md).
"""

from __future__ import annotations

import bisect
import threading
import weakref
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from placer import native
from placer.arrays import intersect1d, isin, unique
from placer.capture.model import WORD32, Phase
from placer.machine import Machine
from placer.refschedule import _materialize
from placer.refschedule.hostbound import relay_host_bound
from placer.streams.balance import balanced_picks
from placer.streams.dependencies import Dependencies, transfer_dependencies, transfer_levels

POINTER_DELAY = 52  # select → payload within the receiver's row: P = X + 52 + 2·row
GUARD = 5  # a receive row's closing delay past its payload
POINT_LEAD = 112  # point-to-point row: the receiver selects at offset 113, the sender at 112 − m
INTERLEAVED = 0x80000
_XPIC, _PIC, _SEND = 1, 2, 4  # event flags per (tile, cycle)

native.require(_materialize)

I64 = npt.NDArray[np.int64]  # what the compiled loop takes and fills: contiguous int64 (``_materialize.pyi``)


@dataclass(eq=False)
class ReferenceSchedule:
    """Times of one phase under the reference's rules (exchange cycles, sync excluded)."""

    order: I64  # transfers in append order
    tx_start: I64  # (n,) S: the sender's first payload word
    rx_start: I64  # (destination entries,) P: the payload's first word lands
    cutover: npt.NDArray[np.bool_]  # (destination entries,): the select replaced the previous receive's teardown
    carries: npt.NDArray[np.bool_]  # (destination entries,): the address continues the previous receive (no pointer)
    tile_horizon: I64  # (tiles,)
    horizon: int


def moving_sources(phase: Phase) -> np.ndarray:
    """Transfers whose Repeat source addresses differ between iterations (bool per transfer)."""
    counts = np.diff(phase.src_ptr)
    first = np.repeat(phase.src_addr[phase.src_ptr[:-1]], counts)
    differs = (phase.src_addr != first).astype(np.int64)
    per = np.zeros(phase.n, np.int64)
    np.add.at(per, np.repeat(np.arange(phase.n), counts), differs)
    return per > 0


def reference_order(phase: Phase, levels: np.ndarray, *, wave_words: int = 1024, tiles: int) -> np.ndarray:
    """The reference's B1024 order of the transfers (see the module docstring)."""
    n = phase.n
    if n == 0:
        return np.zeros(0, np.int64)
    moving = moving_sources(phase)
    lid = _row_ids(phase.dst_ptr, phase.dst_tile)
    # streams in (not moving, source, destination list) order
    skey = np.lexsort((lid, phase.source.astype(np.int64), ~moving))
    new = np.ones(n, bool)
    ks = (~moving)[skey].astype(np.int64), phase.source[skey].astype(np.int64), lid[skey]
    new[1:] = (ks[0][1:] != ks[0][:-1]) | (ks[1][1:] != ks[1][:-1]) | (ks[2][1:] != ks[2][:-1])
    stream = np.empty(n, np.int64)
    stream[skey] = np.cumsum(new) - 1
    # inside a stream: (first destination address, first source address, index)
    first_dst = phase.dst_addr[phase.dst_ptr[:-1]]
    order = np.lexsort((np.arange(n), phase.first_src_addr(), first_dst, stream))
    words = phase.words.astype(np.int64)
    w_sorted = words[order]
    s_sorted = stream[order]
    head = np.ones(n, bool)
    head[1:] = s_sorted[1:] != s_sorted[:-1]
    pos = np.arange(n)
    head_at = np.maximum.accumulate(np.where(head, pos, 0))
    before = np.cumsum(w_sorted) - w_sorted
    wave_sorted = (before - before[head_at]) // wave_words
    position = pos - head_at
    # one balancing item per (wave, stream), its endpoints those of its first transfer
    brk = head.copy()
    brk[1:] |= wave_sorted[1:] != wave_sorted[:-1]
    item_of = np.cumsum(brk) - 1
    first = order[brk]
    item_words = np.bincount(item_of, weights=w_sorted).astype(np.int64)
    totals = np.bincount(s_sorted, weights=w_sorted).astype(np.int64)
    _, at, dset = np.unique(lid[first], return_index=True, return_inverse=True)
    set_tiles = [phase.dst_tile[phase.dst_ptr[t]:phase.dst_ptr[t + 1]].astype(np.int64) for t in first[at].tolist()]
    picks = balanced_picks(tiles, item_words, s_sorted[brk], wave_sorted[brk], totals[s_sorted[brk]],
                           phase.source[first].astype(np.int64), dset.reshape(-1).astype(np.int64), set_tiles)
    pick = np.empty(n, np.int64)
    pick[order] = picks[item_of]
    wave = np.empty(n, np.int64)
    wave[order] = wave_sorted
    place = np.empty(n, np.int64)
    place[order] = position
    return np.lexsort((np.arange(n), place, pick, wave, ~moving, levels))


def _row_ids(ptr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Dense id of every CSR row ``values[ptr[i]:ptr[i + 1]]``, numbered in the rows' sorted order as tuples
    (lexicographic; a row that is a prefix of another sorts first, the empty row first of all); equal rows share
    an id.

    Each row's rank is the sorted position of the first row that shares its prefix so far; the prefixes grow a few
    columns per pass, as a suffix array is built: a pass sorts the rows still tied with another by (rank, their
    next columns), packed in one int64 key where a column past a row's end reads below every value, and a row
    drops out once no other row shares its prefix or it has ended. Each entry is read about once, and there is no
    Python object per row (``reference_order`` numbered tuples of the rows before, ~0.2 s on 130k transfers)."""
    n = int(ptr.shape[0]) - 1
    rank = np.zeros(n, np.int64)
    if n < 2:
        return rank
    length = np.diff(ptr).astype(np.int64)
    start = ptr[:-1].astype(np.int64)
    vals = values.astype(np.int64)
    end = int(vals.min(initial=0)) - 1  # an ended row's column: below every value
    vbits = (int(vals.max(initial=0)) - end).bit_length()
    if n.bit_length() + vbits > 62:  # values too far apart to pack: their order is all that counts
        vals = np.unique(vals, return_inverse=True)[1].reshape(-1).astype(np.int64)
        end = -1
        vbits = (int(vals.max(initial=0)) + 1).bit_length()
    # as many columns per pass as fit in one int64 key beside the rank (at least one: n and the distinct values
    # are far below 2^31)
    step = max(1, (62 - n.bit_length()) // vbits)
    live = np.arange(n)
    j = 0
    while live.size:
        lv_rank, lv_len, lv_start = rank[live], length[live], start[live]
        key = lv_rank << (step * vbits)
        for k in range(step):
            col = np.full(live.size, end, np.int64)
            has = lv_len > j + k
            col[has] = vals[lv_start[has] + j + k]
            key |= (col - end) << ((step - 1 - k) * vbits)
        o = np.argsort(key)  # equal keys are equal prefixes: their order among themselves does not matter
        rows, group, key = live[o], lv_rank[o], key[o]
        at = np.arange(rows.size)
        new_group = np.ones(rows.size, bool)
        new_group[1:] = group[1:] != group[:-1]
        new_run = np.ones(rows.size, bool)
        new_run[1:] = key[1:] != key[:-1]
        # a run of equal keys starts (its position − its group's start) after the group's first row
        rank[rows] = group + np.maximum.accumulate(np.where(new_run, at, 0)) \
            - np.maximum.accumulate(np.where(new_group, at, 0))
        run = np.cumsum(new_run) - 1
        # a tied row that ended inside these columns equals the rest of its run; one that ends right after them
        # still has to be told from the longer ones by its end
        live = rows[(np.bincount(run)[run] > 1) & (lv_len[o] >= j + step)]
        j += step
    present = np.zeros(n, bool)
    present[rank] = True
    return (np.cumsum(present) - 1)[rank]


class _History:
    """Intervals on one (tile, memory element), sorted by start with a running largest end (as the reference's
    per-element history): the latest end of an interval overlapping a window, in O(log n)."""

    __slots__ = ("ends", "peak", "starts")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.peak: list[int] = []

    def record(self, start: int, end: int) -> None:
        if not self.starts or start >= self.starts[-1]:  # the usual case: appended in time order
            self.starts.append(start)
            self.ends.append(end)
            self.peak.append(max(end, self.peak[-1]) if self.peak else end)
            return
        k = bisect.bisect_right(self.starts, start)
        self.starts.insert(k, start)
        self.ends.insert(k, end)
        self.peak.insert(k, 0)
        top = self.peak[k - 1] if k else 0
        for j in range(k, len(self.starts)):
            top = max(top, self.ends[j])
            self.peak[j] = top

    def conflict_end(self, start: int, end: int) -> int:
        """Latest end of an interval overlapping [start, end), or -1."""
        c = bisect.bisect_left(self.starts, end)
        if c == 0:
            return -1
        latest = self.peak[c - 1]
        return latest if latest > start else -1


def memory_elements(addr: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(access index, element id) of every SRAM element each access ``[addr, addr + nbytes)`` touches: 16 KiB
    elements below 0x80000, 32 KiB interleaved pairs above (ids 64 and up)."""
    def element(a: np.ndarray) -> np.ndarray:
        return np.where(a < INTERLEAVED, a >> 14, 64 + ((a - INTERLEAVED) >> 15))

    lo = element(addr)
    hi = element(addr + nbytes - 1)
    span = hi - lo + 1
    access = np.repeat(np.arange(len(addr)), span)
    within = np.arange(int(span.sum())) - np.repeat(np.cumsum(span) - span, span)
    return access, lo[access] + within


Hazards = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]

# The last phase's hazard pairs, read-only: the timing preparation, the bounds and the order search's steps each
# need them (0.1–0.3 s on a SigLIP phase), many times for one phase. One slot per thread, as for ``_prepare``'s
# (``_SLOTS``): measurements run two phases at a time, and one slot shared by the threads was taken by the other
# phase between a phase's bound and its schedule, so both were prepared twice.
_SLOTS = threading.local()


def hazard_pairs(phase: Phase) -> Hazards:
    """The (tile, element) keys on which a send and a receive of one tile can meet in this phase; everything else
    can never clash and is not tracked. Returns (send transfer, its key) pairs, each once (a send's Repeat
    addresses may touch one element several times), sorted by transfer, and (destination entry, its key) pairs in
    entry order, as read-only arrays."""
    last: tuple[weakref.ref[Phase], Hazards] | None = getattr(_SLOTS, "hazards", None)
    if last is not None and last[0]() is phase:
        return last[1]
    pairs = _hazard_pairs(phase)
    for a in pairs:
        a.flags.writeable = False
    _SLOTS.hazards = (weakref.ref(phase), pairs)
    return pairs


def _hazard_pairs(phase: Phase) -> Hazards:
    n = phase.n
    nbytes = phase.nbytes
    s_tr = np.repeat(np.arange(n), np.diff(phase.src_ptr))
    s_acc, s_el = memory_elements(phase.src_addr, nbytes[s_tr])
    s_key = phase.source[s_tr[s_acc]].astype(np.int64) * 4096 + s_el
    d_tr = phase.dst_transfer()
    d_acc, d_el = memory_elements(phase.dst_addr, nbytes[d_tr])
    d_key = phase.dst_tile[d_acc].astype(np.int64) * 4096 + d_el
    shared = intersect1d(s_key, d_key)
    if shared.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    span = int(max(s_key.max(), d_key.max())) + 1
    pairs = unique(s_tr[s_acc] * span + s_key)
    pairs = pairs[isin(pairs % span, shared)]
    hit = isin(d_key, shared)
    return pairs // span, pairs % span, d_acc[hit].astype(np.int64), d_key[hit]


def _hazard_keys(phase: Phase) -> tuple[dict[int, list[int]], dict[int, tuple[list[int], list[int]]]]:
    """``hazard_pairs`` per transfer: its send's keys, and its receives' (entry offsets in the transfer, keys),
    one pair per (entry, key)."""
    s_tr, s_key, entry, key = hazard_pairs(phase)
    if s_tr.size == 0:
        return {}, {}
    src_keys = _grouped(s_tr, [s_key])
    t = phase.dst_transfer()[entry]  # entries in order, so grouped by transfer
    dst = _grouped(t, [entry - phase.dst_ptr[:-1][t], key])
    return {i: v[0] for i, v in src_keys.items()}, {i: (v[0], v[1]) for i, v in dst.items()}


def _grouped(owner: np.ndarray, columns: list[np.ndarray]) -> dict[int, list[list[int]]]:
    """``owner`` sorted: for each owner, its slice of every column as a list."""
    if owner.size == 0:
        return {}
    cut = np.flatnonzero(owner[1:] != owner[:-1]) + 1
    parts = [np.split(c, cut) for c in columns]
    return {int(o): [p[k].tolist() for p in parts] for k, o in enumerate(owner[np.append(0, cut)].tolist())}


@dataclass(eq=False)
class _Plan:
    """Per-transfer and per-entry constants of the reference's rows: lead, select and pointer offsets."""

    lead: I64  # (n,)
    select: I64  # (entries,) X − O
    pointer: I64  # (entries,) P − O
    guard: I64  # (n,)


def _plan(phase: Phase, machine: Machine, tiles: int) -> _Plan:
    """The phase's ``_Plan``, kept for the last phase of this thread: a measurement bounds the phase and then
    schedules it, and both need it."""
    last: tuple[weakref.ref[Phase], Machine, int, _Plan] | None = getattr(_SLOTS, "plan", None)
    if last is not None and last[0]() is phase and last[1] is machine and last[2] == tiles:
        return last[3]
    plan = _make_plan(phase, machine, tiles)
    for a in (plan.lead, plan.select, plan.pointer, plan.guard):  # shared by every caller until the next phase
        a.flags.writeable = False
    _SLOTS.plan = (weakref.ref(phase), machine, tiles, plan)
    return plan


def _make_plan(phase: Phase, machine: Machine, tiles: int) -> _Plan:
    n = phase.n
    owner = phase.dst_transfer()
    words = phase.words.astype(np.int64)
    m = machine.mux_time(phase.source[owner], phase.dst_tile)
    receives = np.bincount(phase.dst_tile, minlength=tiles)
    fan = np.diff(phase.dst_ptr)
    first = phase.dst_ptr[:-1]
    point = (fan == 1) & (receives[phase.dst_tile[first]] == 1) & (phase.width == WORD32)
    lowest = np.minimum.reduceat(m, first) if n else np.zeros(0, np.int64)
    lead = np.where(point, POINT_LEAD - m[first], np.maximum(0, -lowest)).astype(np.int64)
    select = lead[owner] + m + 1
    pointer = select + POINTER_DELAY - (words[owner] == 52) + 2 * machine.row(phase.dst_tile)
    guard = GUARD + (words == 52)
    return _Plan(lead, select.astype(np.int64), pointer.astype(np.int64), guard.astype(np.int64))


def materialize(phase: Phase, order: npt.NDArray[np.integer[Any]], deps: Dependencies, machine: Machine,
                tiles: int) -> ReferenceSchedule:
    """Time the transfers of ``phase`` in ``order`` (a topological order of ``deps``) by the reference's rules.

    Each transfer goes at the earliest offset every rule allows (each rule's own earliest offset is monotone, so
    advancing to it never skips an offset all of them allow). The loop is compiled (``_materialize.cpp``, a
    line-by-line port of ``_materialize_python``, its test oracle).

    Raises ValueError if a transfer names one destination tile twice, and on inputs the loop cannot time: an order
    or a dependency naming no transfer, a tile outside ``[0, tiles)``, a transfer without destinations, negative
    words, an address beyond ±2^60, or routes that put a transfer's control events outside its event rows."""
    _check_distinct_destinations(phase)
    return _materialize_compiled(phase, order, deps, machine, tiles)


@dataclass(eq=False)
class _Prepared:
    """What the compiled loop needs of a phase whatever the order, as contiguous int64 arrays: the transfers' and
    entries' columns, the plan, and the hazard keys as CSR over transfers, each (tile, element) key numbered
    densely (``keys`` of them) and each receive key's entry absolute (the Python loop's ``a + offset``)."""

    phase: weakref.ref[Phase]
    machine: Machine
    tiles: int
    source: I64
    words: I64
    dst_ptr: I64
    dst_tile: I64
    dst_addr: I64
    plan: _Plan
    src_key_ptr: I64
    src_key: I64
    dst_key_ptr: I64
    dst_key_entry: I64
    dst_key: I64
    keys: int


# The last phase prepared (per thread, in ``_SLOTS``): an order search times one phase many times, and the
# preparation (the plan's routes for every entry, the hazard keys) costs about three times the compiled loop on a
# SigLIP phase. One slot per thread only, so a run over every phase of a capture does not keep every phase's
# arrays alive.


def _prepare(phase: Phase, machine: Machine, tiles: int) -> _Prepared:
    """The compiled loop's order-free inputs of ``phase``; raises ValueError where it cannot time the phase: a tile
    out of range, a transfer without destinations, negative words, or an address whose continuation (``address +
    4·words``) could leave int64."""
    last: _Prepared | None = getattr(_SLOTS, "prepared", None)
    if last is not None and last.phase() is phase and last.machine is machine and last.tiles == tiles:
        return last
    source = phase.source.astype(np.int64)
    dest = phase.dst_tile.astype(np.int64)
    if not (_within(source, tiles) and _within(dest, tiles)):
        raise ValueError(f"materialize: phase {phase.phase} names a tile outside [0, {tiles})")
    if not (phase.fanout > 0).all():
        raise ValueError(f"materialize: phase {phase.phase} has a transfer without destinations")
    if not (int(phase.words.min(initial=0)) >= 0 and int(phase.dst_addr.min(initial=0)) > -(1 << 60)
            and int(phase.dst_addr.max(initial=0)) < 1 << 60):
        raise ValueError(f"materialize: phase {phase.phase} has negative words or an address beyond ±2^60")
    plan = _plan(phase, machine, tiles)
    s_tr, s_key, entry, key = hazard_pairs(phase)
    _, ids = np.unique(np.concatenate([s_key, key]), return_inverse=True)
    ids = ids.reshape(-1).astype(np.int64)
    t = phase.dst_transfer()[entry]  # entries in order, so grouped by transfer, as in _hazard_keys

    def flat(a: npt.NDArray[np.integer[Any]]) -> I64:
        return np.ascontiguousarray(a, np.int64)

    prepared = _Prepared(weakref.ref(phase), machine, tiles, flat(source), flat(phase.words), flat(phase.dst_ptr),
                         flat(dest), flat(phase.dst_addr),
                         _Plan(flat(plan.lead), flat(plan.select), flat(plan.pointer), flat(plan.guard)),
                         _csr_pointers(s_tr, phase.n), flat(ids[:len(s_key)]), _csr_pointers(t, phase.n),
                         flat(entry), flat(ids[len(s_key):]), int(ids.max(initial=-1)) + 1)
    _SLOTS.prepared = prepared
    return prepared


def _materialize_compiled(phase: Phase, order: npt.NDArray[np.integer[Any]], deps: Dependencies, machine: Machine,
                          tiles: int) -> ReferenceSchedule:
    """``_materialize_python`` compiled; raises ValueError as :func:`materialize` says."""
    n = phase.n
    entries = int(phase.dst_tile.shape[0])
    order64 = np.asarray(order, np.int64)
    pred = deps.pred.astype(np.int64)
    succ = deps.succ.astype(np.int64)
    if n == 0:
        return _empty_schedule(entries, tiles)
    if not (_within(order64, n) and _within(pred, n) and _within(succ, n)):
        raise ValueError(f"materialize: an order or a dependency names no transfer of phase {phase.phase}")
    prepared = _prepare(phase, machine, tiles)
    tx = np.zeros(n, np.int64)
    rx = np.zeros(entries, np.int64)
    cutover = np.zeros(entries, bool)
    carries = np.zeros(entries, bool)
    horizon = np.zeros(tiles, np.int64)
    by_succ = np.argsort(succ, kind="stable")
    p = prepared
    if not _materialize.materialize(
            order=np.ascontiguousarray(order64), source=p.source, words=p.words, dst_ptr=p.dst_ptr,
            dst_tile=p.dst_tile, dst_addr=p.dst_addr, select=p.plan.select, pointer=p.plan.pointer,
            lead=p.plan.lead, guard=p.plan.guard, pred_ptr=_csr_pointers(succ, n),
            pred=np.ascontiguousarray(pred[by_succ]), src_key_ptr=p.src_key_ptr, src_key=p.src_key,
            dst_key_ptr=p.dst_key_ptr, dst_key_entry=p.dst_key_entry, dst_key=p.dst_key, keys=p.keys, tx=tx, rx=rx,
            cutover=cutover, carries=carries, horizon=horizon):
        raise ValueError(f"materialize: phase {phase.phase}'s routes put a transfer's control events outside its "
                         "event rows (a lead longer than its rows, or negative; no bundled machine's routes do)")
    return ReferenceSchedule(order64, tx, rx, cutover, carries, horizon, int(horizon.max(initial=0)))


def _empty_schedule(entries: int, tiles: int) -> ReferenceSchedule:
    """The schedule of a phase without transfers."""
    return ReferenceSchedule(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(entries, np.int64),
                             np.zeros(entries, bool), np.zeros(entries, bool), np.zeros(tiles, np.int64), 0)


def _within(values: npt.NDArray[np.integer[Any]], top: int) -> bool:
    return values.size == 0 or (int(values.min()) >= 0 and int(values.max()) < top)


def _csr_pointers(owner: npt.NDArray[np.integer[Any]], n: int) -> I64:
    """(n + 1,) int64 offsets of each owner's run in ``owner`` sorted."""
    ptr = np.zeros(n + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=ptr[1:])
    return ptr


def _materialize_python(phase: Phase, order: np.ndarray, deps: Dependencies, machine: Machine,  # noqa: PLR0912, PLR0915
                        tiles: int) -> ReferenceSchedule:
    """The timing loop in plain Python over lists and one byte row of event flags per tile: the per-transfer work
    is a few dozen operations per receiver, where numpy calls on a handful of receivers would cost more than they
    save. The test oracle of ``_materialize.cpp``, which follows it line by line (never run by ``materialize``)."""
    n = phase.n
    entries = int(phase.dst_tile.shape[0])
    if n == 0:
        return _empty_schedule(entries, tiles)
    plan = _plan(phase, machine, tiles)
    src_keys, dst_keys = _hazard_keys(phase)
    sends_on: dict[int, _History] = {}
    receives_on: dict[int, _History] = {}
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(deps.pred.tolist(), deps.succ.tolist(), strict=True):
        preds[b].append(a)
    source = phase.source.tolist()
    words = phase.words.tolist()
    dptr = phase.dst_ptr.tolist()
    dest = phase.dst_tile.tolist()
    addr = phase.dst_addr.tolist()
    sel_of = plan.select.tolist()
    ptr_of = plan.pointer.tolist()
    lead_of = plan.lead.tolist()
    guard_of = plan.guard.tolist()
    tx = [0] * n
    rx = [0] * entries
    cutover = [False] * entries
    carries = [False] * entries
    completion = [0] * n
    horizon = [0] * tiles
    lane_starts: list[list[int]] = [[] for _ in range(tiles)]
    lane_ends: list[list[int]] = [[] for _ in range(tiles)]
    select_end = [-1] * tiles  # receive streams: last select end (-1: none yet), payload end, next address
    payload_end = [0] * tiles
    next_address = [-1] * tiles
    cap = 1 << 12
    events = [bytearray(cap) for _ in range(tiles)]
    for i in np.asarray(order, np.int64).tolist():
        s, w, lead = source[i], words[i], lead_of[i]
        a, b = dptr[i], dptr[i + 1]
        o = 0
        for p in preds[i]:
            if completion[p] > o:
                o = completion[p]
        for e in range(a, b):  # the receive streams' own bounds (fixed while this transfer is placed)
            d = dest[e]
            if select_end[d] >= 0:
                carries[e] = addr[e] == next_address[d]
                if select_end[d] - sel_of[e] > o:
                    o = select_end[d] - sel_of[e]
                if not carries[e] and payload_end[d] - ptr_of[e] > o:
                    o = payload_end[d] - ptr_of[e]
        top = max(ptr_of[a:b]) + w + 2
        hazard_src = src_keys.get(i)
        hazard_dst = dst_keys.get(i)
        starts, ends, lane_ev = lane_starts[s], lane_ends[s], events[s]
        while True:
            if o + top >= cap:
                grow = max(cap, o + top - cap + 1)
                for row in events:
                    row.extend(bytes(grow))
                cap += grow
            start = o + lead
            k = bisect.bisect_right(starts, start) - 1
            if k >= 0 and ends[k] > start:
                o = ends[k] - lead
                continue
            if k + 1 < len(starts) and starts[k + 1] < start + w:
                o = ends[k + 1] - lead
                continue
            if (lane_ev[start] | lane_ev[start + 1]) & (_XPIC | _PIC):
                o += 1
                continue
            clash = False
            for e in range(a, b):
                ev = events[dest[e]]
                x = o + sel_of[e]
                f = ev[x]
                if f & _XPIC and x != select_end[dest[e]]:  # except a cutover onto the teardown
                    clash = True
                    break
                g = ev[x + w]
                if g & _XPIC or (f | ev[x - 1] | g | ev[x + w - 1]) & _SEND:
                    clash = True
                    break
                if not carries[e]:
                    pe = o + ptr_of[e]
                    h = ev[pe]
                    if h & _PIC or (h | ev[pe - 1]) & _SEND:
                        clash = True
                        break
            if clash:
                o += 1
                continue
            delay = 0
            if hazard_src is not None:
                lane_end = max(start + w, o + 6)
                for key in hazard_src:
                    hist = receives_on.get(key)
                    if hist is not None:
                        delay = max(delay, hist.conflict_end(start, lane_end) - start)
            if hazard_dst is not None:
                for k_entry, key in zip(*hazard_dst, strict=True):
                    hist = sends_on.get(key)
                    if hist is not None:
                        pk = o + ptr_of[a + k_entry]
                        delay = max(delay, hist.conflict_end(pk, pk + w + guard_of[i]) - pk)
            if delay > 0:
                o += delay
                continue
            break
        start = o + lead
        k = bisect.bisect_right(starts, start)
        starts.insert(k, start)
        ends.insert(k, start + w)
        lane_ev[start] |= _SEND
        lane_end = max(start + w, o + 6)
        if lane_end > horizon[s]:
            horizon[s] = lane_end
        tx[i] = start
        done = start + w
        for e in range(a, b):
            d = dest[e]
            ev = events[d]
            x = o + sel_of[e]
            pe = o + ptr_of[e]
            cutover[e] = x == select_end[d]
            ev[x] |= _XPIC
            ev[x + w] |= _XPIC
            if not carries[e]:
                ev[pe] |= _PIC
            select_end[d] = x + w
            payload_end[d] = pe + w
            next_address[d] = addr[e] + 4 * w
            if pe + w + guard_of[i] > horizon[d]:
                horizon[d] = pe + w + guard_of[i]
            rx[e] = pe
            if pe + w > done:
                done = pe + w
        completion[i] = done
        if hazard_src is not None:
            for key in hazard_src:
                sends_on.setdefault(key, _History()).record(start, lane_end)
        if hazard_dst is not None:
            for k_entry, key in zip(*hazard_dst, strict=True):
                pk = o + ptr_of[a + k_entry]
                receives_on.setdefault(key, _History()).record(pk, pk + w + guard_of[i])
    tile_horizon = np.asarray(horizon, np.int64)
    return ReferenceSchedule(np.asarray(order, np.int64), np.asarray(tx, np.int64), np.asarray(rx, np.int64),
                             np.asarray(cutover, bool), np.asarray(carries, bool), tile_horizon,
                             int(tile_horizon.max(initial=0)))


def reference_schedule(phase: Phase, machine: Machine, *, tiles: int | None = None,
                       wave_words: int = 1024, deps: Dependencies | None = None) -> ReferenceSchedule:
    """The reference's B1024 schedule of ``phase``: its order, timed by its rules."""
    tiles = tiles or _tiles(phase, machine)
    deps = deps if deps is not None else transfer_dependencies(phase)
    levels = transfer_levels(phase.n, deps)
    order = reference_order(phase, levels, wave_words=wave_words, tiles=tiles)
    return materialize(phase, order, deps, machine, tiles)


class ReferenceBound(NamedTuple):
    """Lower bounds on any horizon of a phase under the reference's rules (see ``reference_bound``)."""

    port: int
    lane: int
    chain: int
    memory: int
    host: int = 0

    @property
    def best(self) -> int:
        return max(self)

    @property
    def kind(self) -> str:
        return max(zip(self, self._fields, strict=True))[1]


def reference_bound(phase: Phase, machine: Machine, *, tiles: int | None = None,
                    deps: Dependencies | None = None) -> ReferenceBound:
    """Lower bounds on any horizon under the reference's rules: port, lane, chain, memory and relay host.

    Chain: the dependency chains, each transfer no sooner than its predecessors' last arrival + its lead, and no
    sooner than the predecessors that land on one tile can have landed one after another there (a relay's gathers
    on its host); this also gives each transfer its earliest start (its *release*). Port: a tile's selects are
    disjoint, so for any release r the receives released at r or later end no sooner than r + their words, and the
    payload then lands 52 + 2·row later, followed by the guard (on a relayed phase: a replica's forwards wait for
    their gathers). Lane: a tile's sends are disjoint. Memory: on one (tile, SRAM element), the sends that read it
    and the receives that write it never overlap in time (nor do two sends, nor two receives), so the same
    release argument holds over all of them, each followed by its smallest tail (a relay host whose forwards
    read the element its later segments are gathered into). Host: each relay host alone, its port taking the
    gathers, its lane the forwards, the memory rule between them, over every order of its forwards
    (``placer.refschedule.hostbound``)."""
    return reference_profile(phase, machine, tiles=tiles, deps=deps).bound


class ReferenceProfile(NamedTuple):
    """A phase's lower bounds and what each tile contributes to them (relay selection reads the direct phase's
    profile to see how much more a tile may receive or send before the phase's bound rises)."""

    bound: ReferenceBound
    port: np.ndarray  # per tile, its port bound alone (0 where it receives nothing)
    lane: np.ndarray  # per tile, the words it sends


def reference_profile(phase: Phase, machine: Machine, *, tiles: int | None = None,
                      deps: Dependencies | None = None) -> ReferenceProfile:
    """``reference_bound`` with each tile's port bound and lane words."""
    tiles = tiles or _tiles(phase, machine)
    if phase.n == 0:
        zero = np.zeros(tiles, np.int64)
        return ReferenceProfile(ReferenceBound(0, 0, 0, 0, 0), zero, zero)
    words = phase.words.astype(np.int64)
    owner = phase.dst_transfer()
    lanes = np.bincount(phase.source, weights=words, minlength=tiles).astype(np.int64)
    deps = deps if deps is not None else transfer_dependencies(phase)
    plan = _plan(phase, machine, tiles)
    last = np.maximum.reduceat(plan.pointer, phase.dst_ptr[:-1])  # P − O of the latest receiver
    ready = _releases(phase, machine, tiles, deps, plan, last)
    chain = int((ready + last + words + plan.guard).max(initial=0))
    ports = _port_terms(phase, machine, tiles, ready[owner] + plan.select)
    hazards = hazard_pairs(phase)
    host = relay_host_bound(phase, deps, ready=ready, pointer=plan.pointer, lead=plan.lead, guard=plan.guard,
                            last=last, hazards=hazards)
    bound = ReferenceBound(int(ports.max(initial=0)), int(lanes.max(initial=0)), chain,
                           _memory_bound(phase, plan, ready, last, hazards), host)
    return ReferenceProfile(bound, ports, lanes)


def _port_terms(phase: Phase, machine: Machine, tiles: int, release: np.ndarray) -> np.ndarray:
    """Per tile: max over its receives' releases r of r + the words of its receives released at r or later,
    + the payload's latency and the guard (``release``: per destination entry)."""
    words = phase.words.astype(np.int64)[phase.dst_transfer()]
    # each tile's receives, latest release first (one stable sort of one key: a lexsort of two costs twice that)
    low, high = (int(release.min()), int(release.max())) if release.size else (0, 0)
    if (high - low + 1) * tiles < 1 << 62:
        o = np.argsort(phase.dst_tile.astype(np.int64) * (high - low + 1) + (high - release), kind="stable")
    else:
        o = np.lexsort((-release, phase.dst_tile))
    tile, w = phase.dst_tile[o].astype(np.int64), words[o]
    first = np.ones(len(o), bool)
    first[1:] = tile[1:] != tile[:-1]
    total = np.cumsum(w)
    since = total - np.repeat((total - w)[first], np.diff(np.append(np.flatnonzero(first), len(o))))
    ends = release[o] + since  # the receives released at this one's release or later all end by then
    out = np.zeros(tiles, np.int64)
    np.maximum.at(out, tile, ends + POINTER_DELAY + GUARD + 2 * machine.row(tile))
    return out


def _releases(phase: Phase, machine: Machine, tiles: int, deps: Dependencies, plan: _Plan,
              last: np.ndarray) -> np.ndarray:
    """Each transfer's earliest offset O: its dependency chains, with the predecessors that land on one tile
    landing one after another."""
    words = phase.words.astype(np.int64)
    landed = np.maximum(plan.lead, last) + words  # completion − O
    ready = np.zeros(phase.n, np.int64)
    if not len(deps):
        return ready
    levels = transfer_levels(phase.n, deps)
    by_level = np.argsort(levels[deps.succ], kind="stable")
    pred, succ = deps.pred[by_level], deps.succ[by_level]
    edge_level = levels[succ]
    fan = np.diff(phase.dst_ptr)
    for lv in unique(edge_level).tolist():
        sel = edge_level == lv
        a, b = pred[sel], succ[sel]
        np.maximum.at(ready, b, ready[a] + landed[a])
        # the predecessors that land on one tile do so one after another (a relay's gathers on its host):
        # the last of them lands no sooner than the first select + all their words + the row's latency
        k = np.repeat(np.arange(len(a)), fan[a])
        entry = phase.dst_ptr[a][k] + np.arange(len(k)) - np.repeat(np.cumsum(fan[a]) - fan[a], fan[a])
        tile = phase.dst_tile[entry].astype(np.int64)
        group, inv = np.unique(b[k] * tiles + tile, return_inverse=True)
        first = np.full(len(group), np.iinfo(np.int64).max)
        np.minimum.at(first, inv, ready[a][k] + plan.select[entry])
        total = np.bincount(inv, weights=words[a][k], minlength=len(group)).astype(np.int64)
        tile_g = group % tiles
        np.maximum.at(ready, group // tiles,
                      first + total + POINTER_DELAY - 1 + 2 * machine.row(tile_g))
    return ready


def _memory_bound(phase: Phase, plan: _Plan, ready: np.ndarray, last: np.ndarray, hazards: Hazards) -> int:
    """max over (tile, element) keys and releases r of r + the durations of its accesses released at r or later
    + their smallest tail.

    A send reads from S = O + lead for its words and its payload lands at its last receiver pointer − lead later,
    then the guard; a receive writes from P for its words, then the guard. Two receives of a tile are spaced by
    the first's words, less one when the second is a 52-word transfer (its pointer is a cycle earlier)."""
    s_tr, s_key, entry, d_key = hazards
    if s_tr.size == 0:
        return 0
    words = phase.words.astype(np.int64)
    t = phase.dst_transfer()[entry]
    key = np.concatenate([s_key, d_key])
    release = np.concatenate([ready[s_tr] + plan.lead[s_tr], ready[t] + plan.pointer[entry]])
    length = np.concatenate([words[s_tr], words[t] - (words[t] == 52)])
    tail = np.concatenate([last[s_tr] - plan.lead[s_tr] + plan.guard[s_tr], plan.guard[t] + (words[t] == 52)])
    o = np.lexsort((-release, key))
    key, release, length, tail = key[o], release[o], length[o], tail[o]
    first = np.ones(len(key), bool)
    first[1:] = key[1:] != key[:-1]
    group = np.cumsum(first) - 1
    total = np.cumsum(length)
    since = total - (total - length)[first][group]
    shift = group * (int(tail.max()) - int(tail.min()) + 1)
    least = np.minimum.accumulate(tail - shift) + shift  # the smallest tail walked so far in this key
    return int((release + since + least).max(initial=0))


def reference_table_bytes(phase: Phase, schedule: ReferenceSchedule, machine: Machine, tiles: int,
                          *, delay_max: int = 1 << 19) -> np.ndarray:
    """Each tile's timed row in bytes, encoded as the reference encodes a scheduled phase.

    Words: a send is one word for up to 64 words plus one per further 4,096 (the address is in the instruction:
    no base write); a receive writes a source select, a teardown (none when the next select is at that cycle: a
    direct cutover) and a pointer (none when the address continues the previous receive). A gap before a send
    costs a DELAY word per 2^19 cycles; a select or teardown absorbs a gap of up to 4,096 cycles and a pointer one
    of up to 128 (DELAY words before it for the rest); controls that fall inside one of the tile's own sends ride
    on the send (SENDPIC) and need no delay. The row ends with a delay to the tile's own horizon and a RETURN;
    the total is rounded up to 8 bytes."""
    if phase.n == 0:
        return np.zeros(tiles, np.int64)
    words = phase.words.astype(np.int64)
    owner = phase.dst_transfer()
    w_e = words[owner]
    dst = phase.dst_tile.astype(np.int64)
    select = schedule.rx_start - POINTER_DELAY + (w_e == 52) - 2 * machine.row(dst)
    # the teardown of a receive is dropped when the tile's next receive (in select order) cuts over at its cycle
    by_tile = np.lexsort((select, dst))
    dropped = np.zeros(len(dst), bool)
    nxt = by_tile[1:]
    dropped[by_tile[:-1]] = (dst[nxt] == dst[by_tile[:-1]]) & schedule.cutover[nxt]
    s_tile = phase.source.astype(np.int64)
    send_cost = 1 + np.maximum(0, -(-(words - 64) // 4096))
    kinds = [  # (tile, cycle, end, words, absorb, is_send)
        (s_tile, schedule.tx_start, schedule.tx_start + words, send_cost, 0, True),
        (dst, select, select, np.ones(len(dst), np.int64), 4096, False),
        (dst[~dropped], (select + w_e)[~dropped], (select + w_e)[~dropped], np.ones(int((~dropped).sum()),
                                                                                 np.int64), 4096, False),
        (dst[~schedule.carries], schedule.rx_start[~schedule.carries], schedule.rx_start[~schedule.carries],
         np.ones(int((~schedule.carries).sum()), np.int64), 128, False),
    ]
    tile = np.concatenate([k[0] for k in kinds])
    start = np.concatenate([k[1] for k in kinds]).astype(np.int64)
    end = np.concatenate([k[2] for k in kinds]).astype(np.int64)
    cost = np.concatenate([k[3] for k in kinds]).astype(np.int64)
    absorb = np.concatenate([np.full(len(k[0]), k[4], np.int64) for k in kinds])
    is_send = np.concatenate([np.full(len(k[0]), k[5]) for k in kinds])
    # controls inside one of the tile's own sends ride on it
    big = int(max(end.max(initial=0), int(schedule.tile_horizon.max(initial=0)))) + 2
    send_key = s_tile * big + schedule.tx_start
    srt = np.argsort(send_key)
    key = tile * big + start
    k = np.searchsorted(send_key[srt], key, side="left") - 1
    inside = ~is_send & (k >= 0)
    cand = srt[np.maximum(k, 0)]
    inside &= (s_tile[cand] == tile) & (schedule.tx_start[cand] < start) & (start <= schedule.tx_start[cand]
                                                                              + words[cand])
    o = np.lexsort((~is_send, start, tile))
    tile, start, end, cost, absorb = tile[o], start[o], end[o], cost[o], absorb[o]
    is_send, inside = is_send[o], inside[o]
    first = np.ones(len(tile), bool)
    first[1:] = tile[1:] != tile[:-1]
    shift = np.cumsum(first) * big
    running = np.maximum.accumulate(end + shift) - shift
    prev_end = np.zeros(len(tile), np.int64)
    prev_end[1:] = running[:-1]
    prev_end[first] = 0
    gap = np.maximum(0, start - prev_end)
    delays = np.where(is_send, -(-gap // delay_max),
                      np.where(inside | (gap <= absorb), 0, -(-(gap - absorb) // delay_max)))
    total = np.bincount(tile, weights=cost + delays, minlength=tiles).astype(np.int64)
    last_end = np.zeros(tiles, np.int64)
    np.maximum.at(last_end, tile, end)
    active = np.bincount(tile, minlength=tiles) > 0
    tail = -(-np.maximum(0, schedule.tile_horizon[:tiles] - last_end) // delay_max)
    total += np.where(active, tail + 1, 0)  # delay to the tile's horizon, RETURN
    table: npt.NDArray[np.int64] = machine.cost.rounded(4 * total).astype(np.int64)
    return table


def _tiles(phase: Phase, machine: Machine) -> int:
    top = max(int(phase.source.max(initial=-1)), int(phase.dst_tile.max(initial=-1))) + 1
    return max(machine.tiles, top)


# phases whose destination lists are known to name each tile once: the order searches time one phase many times
_DISTINCT: weakref.WeakSet[Phase] = weakref.WeakSet()


def _check_distinct_destinations(phase: Phase) -> None:
    """Raise ValueError if a transfer names one destination tile twice.

    The capture reader rejects such a transfer, but a phase built in code is not checked there, and ``materialize``
    would give the tile two overlapping receives of the one transfer: a schedule the checker rejects."""
    if phase in _DISTINCT:
        return
    rows = phase.dst_transfer()
    multi = (phase.fanout > 1)[rows]  # a single destination cannot repeat
    r, t = rows[multi], phase.dst_tile[multi]
    if r.size < 2 or not ((r[1:] == r[:-1]) & (t[1:] <= t[:-1])).any():
        # each transfer's tiles rising, as the captures list them: no repeat, and no sort of every entry
        _DISTINCT.add(phase)
        return
    by = np.lexsort((t, r))
    r, t = r[by], t[by]
    dup = np.flatnonzero((r[1:] == r[:-1]) & (t[1:] == t[:-1]))
    if dup.size:
        k = int(dup[0])
        raise ValueError(f"phase {phase.phase}, transfer {int(r[k])}: destination tile {int(t[k])} appears twice "
                         "in one transfer")
    _DISTINCT.add(phase)
