"""A chunk schedule as per-transfer times (``expand``), and the table rows those times encode (``timed_rows``).

Timed rows (the table bytes of a scheduled phase, docs/reference.md §7), per tile, from its events in
time order:
- instructions are 4-byte words; a send is one word for up to 64 words plus one per further 4,096, preceded by an
  outgoing base write (one word) when its source does not continue the lane's previous send;
- a receive is one receive control (two words: source select and count), plus one incoming base word when its
  address is not the end of the tile's previous receive *in scheduled order* (the pointer reset);
- an idle gap before a send or a base write costs one DELAY word per 2^19 cycles (no minimum gap); a lone receive
  control (no base write) absorbs gaps up to ``receive_gap_absorb`` cycles (128, PIC; 4,096 on XPIC);
- each active tile's row ends with a delay to the horizon and a RETURN (two words); the total is rounded to 8 bytes.
A tile's activity: a send from its base write to its last word; a receive from its control (the sender's send
cycle) to its payload's end plus the short-receive hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from placer.capture.model import Phase
from placer.chunkmodel.chunks import Chunks, Timing, continues_previous
from placer.machine import Machine
from placer.units import ceil_div

RECEIVE_GAP_ABSORB = 128  # idle cycles a lone receive control absorbs (PIC; XPIC: 4,096)
DELAY_MAX = 1 << 19  # cycles one DELAY word covers


class RowParams(Protocol):
    """What the row encoding reads of its parameters; :class:`placer.ordering.OrderingParams` has it (the stage's
    knobs live a layer above this package)."""

    @property
    def timing(self) -> Timing: ...
    @property
    def receive_gap_absorb(self) -> int: ...
    @property
    def delay_max(self) -> int: ...


@dataclass(eq=False)
class Schedule:
    """Per-transfer times of one phase: ``tx_start[i]`` on the source's lane (``words[i]`` cycles), and
    ``rx_start[e]`` for destination entry ``e`` (the phase's ``dst_*`` order) on that tile's receive port."""

    tx_start: npt.NDArray[np.int64]  # (n,)
    rx_start: npt.NDArray[np.int64]  # (destination entries,)
    horizon: int

    def to_json(self) -> dict[str, Any]:
        return {"horizon": self.horizon, "tx_start": self.tx_start.tolist(), "rx_start": self.rx_start.tolist()}


def expand(phase: Phase, chunks: Chunks, starts: npt.NDArray[np.int64]) -> Schedule:
    """Chunk starts → transfer times: a chunk's transfers go back to back in its send order."""
    tx = np.zeros(phase.n, np.int64)
    chunk_of = np.repeat(np.arange(chunks.count), np.diff(chunks.ptr))
    tx[chunks.order] = starts[chunk_of] + chunks.offset
    rx = tx[phase.dst_transfer()] + chunks.latency[phase.dst_tile]
    ends = rx + phase.words[phase.dst_transfer()]
    horizon = int(max(ends.max(initial=0), (tx + phase.words).max(initial=0)))
    return Schedule(tx, rx, horizon)


@dataclass(eq=False)
class TimedRows:
    table_bytes: npt.NDArray[np.int64]  # per tile, rounded
    delay_words: npt.NDArray[np.int64]  # per tile
    resets: npt.NDArray[np.int64]  # per tile, in scheduled receive order
    base_writes: npt.NDArray[np.int64]  # per tile, outgoing


def timed_rows(phase: Phase, schedule: Schedule, machine: Machine, tiles: int,
               params: RowParams | None = None) -> TimedRows:
    """The table bytes (and their parts) of every tile of ``phase`` scheduled at ``schedule`` (the module
    docstring); ``params`` (an :class:`placer.ordering.OrderingParams`) defaults to IPU21's PIC rules."""
    tim = params.timing if params is not None else Timing()
    receive_gap_absorb = params.receive_gap_absorb if params is not None else RECEIVE_GAP_ABSORB
    delay_max = params.delay_max if params is not None else DELAY_MAX
    n = phase.n
    words = phase.words.astype(np.int64)
    nbytes = 4 * words
    dt = phase.dst_transfer()
    send_words_limit = machine.exchange.send_count_words

    # sends in lane order: a base write unless the source continues the previous send's (every Repeat address)
    s_order = np.lexsort((schedule.tx_start, phase.source))
    s_tile = phase.source[s_order].astype(np.int64)
    same = np.zeros(n, bool)
    same[1:] = s_tile[1:] == s_tile[:-1]
    base = ~continues_previous(phase.src_ptr, phase.src_addr, s_order, nbytes, same)
    s_start = schedule.tx_start[s_order] - np.where(base, tim.base_write, 0)
    s_end = schedule.tx_start[s_order] + words[s_order]
    extra = np.maximum(0, words[s_order] - send_words_limit)
    s_words = base + 1 + (extra + 4095) // 4096

    # receives in port order: pointer resets, receive runs and their short-receive holds
    r_order = np.lexsort((schedule.rx_start, phase.dst_tile))
    r_tile = phase.dst_tile[r_order].astype(np.int64)
    r_tr = dt[r_order]
    rx = schedule.rx_start[r_order]
    a = phase.dst_addr[r_order]
    w = words[r_tr]
    m = len(r_order)
    prev_same = np.zeros(m, bool)
    prev_same[1:] = r_tile[1:] == r_tile[:-1]
    contiguous = np.zeros(m, bool)
    contiguous[1:] = prev_same[1:] & (a[1:] == a[:-1] + 4 * w[:-1])
    reset = ~contiguous
    cont_run = np.zeros(m, bool)
    cont_run[1:] = contiguous[1:] & (phase.source[r_tr][1:] == phase.source[r_tr][:-1]) & (rx[1:] == rx[:-1] + w[:-1])
    run_id = np.cumsum(~cont_run) - 1
    run_words = np.bincount(run_id, weights=w).astype(np.int64) if m else np.zeros(0, np.int64)
    run_end = np.ones(m, bool)
    run_end[:-1] = ~cont_run[1:]
    hold = np.where(run_end & (run_words[run_id] <= tim.short_receive_words), tim.short_receive_hold, 0)
    lat = machine.latency(r_tile).astype(np.int64)
    r_start = rx - lat
    r_end = r_start + w + hold
    r_words = 2 + reset

    # every event of a tile in time order; the gap before it is from the latest end of the events before it
    tile = np.concatenate([s_tile, r_tile])
    start = np.concatenate([s_start, r_start])
    end = np.concatenate([s_end, r_end])
    absorbs = np.concatenate([np.zeros(n, np.int64), np.where(reset, 0, receive_gap_absorb)])
    ev_words = np.concatenate([s_words, r_words])
    o = np.lexsort((start, tile))
    tile, start, end, absorbs, ev_words = tile[o], start[o], end[o], absorbs[o], ev_words[o]
    k = len(o)
    first = np.ones(k, bool)
    first[1:] = tile[1:] != tile[:-1]
    group = np.cumsum(first) - 1
    offset = (group * (int(end.max(initial=0)) + 1)) if k else group
    running = np.maximum.accumulate(end + offset) - offset  # latest end so far within the tile
    prev_end = np.zeros(k, np.int64)
    prev_end[1:] = running[:-1]
    prev_end[first] = 0
    gap = start - prev_end
    delays = np.where(gap > absorbs, ceil_div(gap, delay_max), 0)
    total = np.bincount(tile, weights=ev_words + delays, minlength=tiles).astype(np.int64)
    delay_words = np.bincount(tile, weights=delays, minlength=tiles).astype(np.int64)
    active = np.bincount(tile, minlength=tiles) > 0
    total += 2 * active  # delay to the horizon and RETURN
    table = machine.cost.rounded(4 * total)
    return TimedRows(table.astype(np.int64), delay_words,
                     np.bincount(r_tile, weights=reset, minlength=tiles).astype(np.int64),
                     np.bincount(s_tile, weights=base, minlength=tiles).astype(np.int64))
