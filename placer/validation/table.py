"""The validator's own recount of exchange-table bytes and fragments (BRIEF §3), per tile and phase.

Deliberately written from the brief, not shared with placer/problem: a plan must not pass because the
optimiser and the validator share a mistake.
"""

from __future__ import annotations

import numpy as np

from placer.capture.model import WORD_BYTES, Phase
from placer.machine import Machine


def phase_table(phase: Phase, tiles: int, machine: Machine) -> tuple[np.ndarray, np.ndarray]:
    """Table bytes and fragments of every tile in one stored phase (int64 arrays of length ``tiles``)."""
    c = machine.cost
    src = phase.source.astype(np.int64)
    words = phase.words.astype(np.int64)
    sends = np.bincount(src, minlength=tiles)
    long_sends = np.bincount(src[words > machine.exchange.send_count_words], minlength=tiles)
    dt = phase.dst_tile.astype(np.int64)
    receives = np.bincount(dt, minlength=tiles)
    # receives in listed order per tile: a stable sort by tile keeps the listed order within each tile
    order = np.argsort(dt, kind="stable")
    t_sorted = dt[order]
    a_sorted = phase.dst_addr[order]
    end_sorted = a_sorted + WORD_BYTES * np.repeat(words, np.diff(phase.dst_ptr))[order]
    reset = np.ones(len(order), bool)
    reset[1:] = (t_sorted[1:] != t_sorted[:-1]) | (a_sorted[1:] != end_sorted[:-1])
    resets = np.bincount(t_sorted[reset], minlength=tiles)
    takes_part = (sends > 0) | (receives > 0)
    raw = (
        takes_part * c.phase_entry_bytes
        + sends * c.send_bytes
        + long_sends * c.long_send_extra_bytes
        + receives * c.receive_bytes
        + resets * c.pointer_reset_extra_bytes
    )
    r = max(c.table_rounding, 1)
    return (raw + r - 1) // r * r, sends + receives
