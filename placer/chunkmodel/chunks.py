"""Placer's chunk model of an exchange phase: its streams, waves and chunks (docs/ordering.md, "Placer's chunk model").

A *stream* is the transfers of one (source, destination set), in (dependency depth, first destination address,
first source address) order (docs/reference.md §7); transfer k of a stream is in wave ⌊(stream words before k) / 1024⌋.
A *chunk* is one (stream, depth, wave): the unit every scheduler in this package places (transfers are never split).

A chunk started at ``s`` first writes its outgoing base (``lead`` = 13 cycles, lane only), then sends its
transfers back to back, each at ``s + offset``: a transfer whose source does not continue the previous one's
writes the base again (13 cycles), and a short receive run (at most 51 words landing back to back and
contiguously) keeps the ports 5 cycles past its payload. Its ports are busy over ``[s + lead + lat(d), s + lead +
lat(d) + words)``. Every chunk received on port ``d`` is shifted by the same ``lead + lat(d)``, so two chunks overlap
on ``d`` exactly when ``[s, s + words)`` overlap: resources are handled in the transmit frame with one start per
chunk; the lane is busy ``[s, s + lead + words)``.

Dependencies are found per transfer (``placer.streams.dependencies``) and lifted to chunks. Chunks never mix
levels (a transfer's longest dependency chain), so every chunk dependency goes from a lower to a higher level and
the chunk graph is acyclic whatever the listed order was.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from placer.arrays import unique
from placer.capture.model import Phase
from placer.machine import Machine
from placer.streams.balance import incidence
from placer.streams.dependencies import Dependencies, transfer_dependencies, transfer_levels

I64 = npt.NDArray[np.int64]


@dataclass(eq=False)
class Chunks:
    """A phase cut into chunks, with everything a scheduler or a bound needs, as flat arrays.

    ``order[ptr[c]:ptr[c+1]]`` are chunk ``c``'s transfers in send order; ``offset[k]`` is the cycle at which
    transfer ``order[k]`` starts relative to its chunk's start. Chunks are numbered stream by stream, waves in order.
    """

    phase: int
    tiles: int
    words: I64  # (C,) cycles on each receive port (sends, internal base writes, short-receive holds)
    lead: int  # cycles of the chunk's first outgoing base write: the lane is busy for lead + words
    source: I64  # (C,)
    dset: I64  # (C,) destination set id
    stream: I64  # (C,) stream id: streams numbered in (source, destination set) order
    stream_total: I64  # (C,) words of the chunk's whole stream
    wave: I64  # (C,) ⌊words of the stream before the chunk / wave_words⌋
    level: I64  # (C,) dependency depth
    tail: I64  # (C,) payload landed everywhere by start + words + tail (lead + largest latency −
    # the hold that ends the chunk: the port stays busy past the payload)
    hold: int  # the largest such hold (short-receive hold cycles)
    hold_end: I64  # (C,) the hold that ends each chunk's port window (0 or ``hold``)
    ptr: I64  # (C+1,)
    order: I64  # (n,) transfers in chunk order
    offset: I64  # (n,) start of order[k] relative to its chunk
    set_tiles: list[I64]  # destination tiles of each destination set
    set_latency: list[I64]  # their latencies, same order
    latency: I64  # (tiles,) latency of every tile as a destination
    dep_pred: I64  # chunk dependency edges (data: start(b) >= start(a) + words(a) + tail(a))
    dep_succ: I64
    transfer_deps: Dependencies

    @property
    def count(self) -> int:
        return int(self.words.shape[0])

    @property
    def lane_words(self) -> I64:
        """Cycles each chunk holds its transmit lane: the base write, then its sends (the lane does not wait for
        the short-receive hold that ends the chunk's port window)."""
        return self.words + self.lead - self.hold_end

    def stream_edges(self) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
        """Consecutive chunks of a stream: order edges (start(b) >= start(a) + words(a))."""
        same = self.stream[1:] == self.stream[:-1]
        a = np.flatnonzero(same)
        return a, a + 1

    def resources(self) -> tuple[I64, I64]:
        """Incidence (chunk, resource): resource ``s`` is tile s's transmit lane, ``tiles + d`` d's receive port."""
        return incidence(self.tiles, self.source, self.dset, self.set_tiles)


@dataclass(frozen=True)
class Timing:
    """Cycle rules of the exchange hardware the reference scheduler models (docs/reference.md §7); IPU21's defaults."""

    base_write: int = 13  # writing a transmit lane's outgoing base (a send whose source does not continue the last)
    short_receive_words: int = 51  # a receive run of at most this many words is "short" ...
    short_receive_hold: int = 5  # ... and keeps its port this many cycles past its payload


def build_chunks(phase: Phase, machine: Machine, *, wave_words: int = 1024, tiles: int | None = None,
                 timing: Timing = Timing()) -> Chunks:
    """Streams keyed by (source, destination set), each in (dependency depth, first destination address, source
    address) order; transfer k of a stream is in wave ⌊(words of the stream before k) / wave_words⌋; a chunk is
    one (stream, depth, wave). Also the chunk dependency graph and each chunk's internal timing (see ``Chunks``)."""
    n = phase.n
    if tiles is None:
        top = max(int(phase.source.max(initial=-1)), int(phase.dst_tile.max(initial=-1))) + 1
        tiles = max(machine.tiles, top)
    latency = machine.latency(np.arange(tiles)).astype(np.int64)
    deps = transfer_dependencies(phase)
    level = transfer_levels(n, deps)
    dset = phase.dst_set_ids()
    nsets = int(dset.max(initial=-1)) + 1
    stream_key = phase.source.astype(np.int64) * max(nsets, 1) + dset
    src_addr = phase.first_src_addr() if n else np.zeros(0, np.int64)
    dst_addr = phase.dst_addr[phase.dst_ptr[:-1]] if n else np.zeros(0, np.int64)
    order = np.lexsort((np.arange(n), src_addr, dst_addr, level, stream_key))

    words_sorted = phase.words[order].astype(np.int64)
    key_sorted = stream_key[order]
    level_sorted = level[order]
    new_stream = np.ones(n, bool)
    if n > 1:
        new_stream[1:] = key_sorted[1:] != key_sorted[:-1]
    pos = np.arange(n)
    before = np.cumsum(words_sorted) - words_sorted  # words of the whole listing before each transfer
    stream_first = np.maximum.accumulate(np.where(new_stream, pos, 0))
    t_wave = (before - before[stream_first]) // wave_words if n else np.zeros(0, np.int64)
    brk = new_stream.copy()  # a chunk starts at a new stream, a new depth or a new wave
    if n > 1:
        brk[1:] |= (level_sorted[1:] != level_sorted[:-1]) | (t_wave[1:] != t_wave[:-1])
    chunk_of = np.cumsum(brk) - 1
    nchunks = int(chunk_of[-1]) + 1 if n else 0
    ptr = np.zeros(nchunks + 1, np.int64)
    np.cumsum(np.bincount(chunk_of, minlength=nchunks), out=ptr[1:])
    head = order[ptr[:-1]]  # first transfer of each chunk

    offset, length, hold_end = _chunk_timing(phase, order, brk, chunk_of, nchunks, timing)
    c_stream_key = stream_key[head]
    _, c_stream = np.unique(c_stream_key, return_inverse=True)
    c_stream = c_stream.reshape(-1).astype(np.int64)

    # one representative transfer per destination set gives its tiles
    set_rep = np.zeros(nsets, np.int64)
    set_rep[dset[::-1]] = np.arange(n)[::-1]
    set_tiles = [phase.dst_tile[phase.dst_ptr[i]:phase.dst_ptr[i + 1]].astype(np.int64) for i in set_rep.tolist()]
    set_latency = [latency[t] for t in set_tiles]
    set_tail = np.array([int(lat.max(initial=0)) for lat in set_latency], np.int64)
    c_dset = dset[head]
    stream_total = np.bincount(c_stream, weights=np.bincount(chunk_of, weights=words_sorted, minlength=nchunks),
                               minlength=int(c_stream.max(initial=-1)) + 1).astype(np.int64)

    chunk_of_transfer = np.empty(n, np.int64)
    chunk_of_transfer[order] = chunk_of
    cp = chunk_of_transfer[deps.pred]
    cs = chunk_of_transfer[deps.succ]
    key = unique(cp * max(nchunks, 1) + cs)
    return Chunks(
        phase=phase.phase,
        tiles=tiles,
        words=length,
        lead=timing.base_write,
        source=phase.source[head].astype(np.int64),
        dset=c_dset,
        stream=c_stream,
        stream_total=stream_total[c_stream] if nchunks else np.zeros(0, np.int64),
        wave=t_wave[ptr[:-1]].astype(np.int64) if nchunks else np.zeros(0, np.int64),
        level=level[head],
        tail=(set_tail[c_dset] + timing.base_write - hold_end) if nchunks else np.zeros(0, np.int64),
        hold=timing.short_receive_hold,
        hold_end=hold_end,
        ptr=ptr,
        order=order.astype(np.int64),
        offset=offset,
        set_tiles=set_tiles,
        set_latency=set_latency,
        latency=latency,
        dep_pred=key // max(nchunks, 1),
        dep_succ=key % max(nchunks, 1),
        transfer_deps=deps,
    )


def continues_previous(ptr: np.ndarray, addr: np.ndarray, order: np.ndarray, nbytes: np.ndarray,
               same: np.ndarray) -> np.ndarray:
    """``out[k]``: transfer ``order[k]``'s addresses (every CSR entry) are those of ``order[k-1]`` plus its bytes.
    Only asked where ``same[k]`` (consecutive transfers of one stream, so both have as many entries)."""
    n = len(order)
    out = np.zeros(n, bool)
    ks = np.flatnonzero(same)
    if len(ks) == 0:
        return out
    cur, prev = order[ks], order[ks - 1]
    cnt = ptr[cur + 1] - ptr[cur]
    eq = cnt == (ptr[prev + 1] - ptr[prev])
    ks, cur, prev, cnt = ks[eq], cur[eq], prev[eq], cnt[eq]
    if len(ks) == 0:
        return out
    first = np.cumsum(cnt) - cnt
    inner = np.arange(int(cnt.sum())) - np.repeat(first, cnt)
    a = addr[np.repeat(ptr[cur], cnt) + inner]
    b = addr[np.repeat(ptr[prev], cnt) + inner] + np.repeat(nbytes[prev], cnt)
    ok = np.logical_and.reduceat(a == b, first) if len(a) else np.zeros(0, bool)
    out[ks] = ok
    return out


def _chunk_timing(phase: Phase, order: np.ndarray, brk: np.ndarray, chunk_of: np.ndarray, nchunks: int,
                  timing: Timing) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Offsets of each (sorted) transfer's send from its chunk's start, each chunk's port length and the hold
    that ends it.

    A chunk starts with its outgoing base write (``lead`` cycles on the lane only); inside it, a transfer whose
    source does not continue the previous one's writes the base again (13 cycles, held on every resource for
    simplicity), and a receive run (transfers landing back to back and contiguously on every destination) of at
    most ``short_receive_words`` keeps the ports ``short_receive_hold`` cycles past its end."""
    n = len(order)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    nbytes = phase.nbytes
    inside = ~brk
    src_cont = continues_previous(phase.src_ptr, phase.src_addr, order, nbytes, inside)
    dst_cont = continues_previous(phase.dst_ptr, phase.dst_addr, order, nbytes, inside)
    w = phase.words[order].astype(np.int64)
    pre = np.where(inside & ~src_cont, timing.base_write, 0)
    run_start = ~dst_cont
    run_id = np.cumsum(run_start) - 1
    run_words = np.bincount(run_id, weights=w).astype(np.int64)
    run_end = np.ones(n, bool)
    run_end[:-1] = run_start[1:]
    hold = np.where(run_end & (run_words[run_id] <= timing.short_receive_words), timing.short_receive_hold, 0)
    step = pre + w + hold
    before = np.cumsum(step) - step
    chunk_first = np.flatnonzero(brk)
    base = before[chunk_first][chunk_of]
    offset = before - base + pre + timing.base_write
    length = np.bincount(chunk_of, weights=step, minlength=nchunks).astype(np.int64)
    last = np.append(chunk_first[1:], n) - 1
    return offset.astype(np.int64), length, hold[last].astype(np.int64)
