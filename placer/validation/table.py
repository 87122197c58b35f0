"""The validator's own recount of exchange-table bytes and fragments (docs/reference.md §3), per tile and phase.

Deliberately written from docs/reference.md, not shared with placer/cost: a plan must not pass because the
optimiser and the validator share a mistake.
"""

from __future__ import annotations

import numpy as np

from placer.capture.model import WORD_BYTES, Allocations, Phase
from placer.machine import Machine


def _allocation_ids(phase: Phase, tile: np.ndarray, addr: np.ndarray, allocations: Allocations | None) -> np.ndarray:
    """For each receive (tile, address), the index of the allocation live in the phase that holds it, -1 for none
    (all -1 without the extension)."""
    ids = np.full(tile.shape, -1, np.int64)
    if allocations is None or not len(allocations):
        return ids
    live = np.flatnonzero((allocations.first <= phase.phase) & (allocations.last >= phase.phase))
    if not live.size:
        return ids
    key = allocations.tile[live].astype(np.int64) * 2**40 + allocations.start[live]
    by_key = np.argsort(key)
    key, live = key[by_key], live[by_key]
    at = np.searchsorted(key, tile.astype(np.int64) * 2**40 + addr, side="right") - 1
    held = live[np.maximum(at, 0)]
    inside = (at >= 0) & (allocations.tile[held] == tile) & (allocations.end[held] > addr)
    ids[inside] = held[inside]
    return ids


def _resets(phase: Phase, t_sorted: np.ndarray, a_sorted: np.ndarray, end_sorted: np.ndarray,
            allocations: Allocations | None) -> np.ndarray:
    """Pointer resets of receives sorted by tile (listed order within a tile): the tile's first receive, one not
    starting where the previous ended, and one in another allocation than the previous (docs/reference.md §3: two
    allocations are never contiguous)."""
    held = _allocation_ids(phase, t_sorted, a_sorted, allocations)
    reset = np.ones(len(t_sorted), bool)
    reset[1:] = (t_sorted[1:] != t_sorted[:-1]) | (a_sorted[1:] != end_sorted[:-1]) | (held[1:] != held[:-1])
    return reset


def phase_table(phase: Phase, tiles: int, machine: Machine,
                allocations: Allocations | None = None) -> tuple[np.ndarray, np.ndarray]:
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
    reset = _resets(phase, t_sorted, a_sorted, end_sorted, allocations)
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


def _rows(phase: Phase, tiles: int, allocations: Allocations | None) -> tuple[list[bytes | None], list[np.ndarray]]:
    """Per tile: an exact description of its row in the phase (sends' word counts; receives' source, word count and
    pointer reset, all in listed order), None if the tile takes no part; and the addresses a shared use patches
    (each send's source address, each pointer reset's destination address)."""
    desc: list[bytes | None] = [None] * tiles
    addrs: list[np.ndarray] = [np.zeros(0, np.int64)] * tiles
    if phase.n == 0:
        return desc, addrs
    src = phase.source.astype(np.int64)
    words = phase.words.astype(np.int64)
    first_addr = phase.src_addr[phase.src_ptr[:-1]]
    s_order = np.argsort(src, kind="stable")
    s_bound = np.searchsorted(src[s_order], np.arange(tiles + 1))
    dt = phase.dst_tile.astype(np.int64)
    owner = np.repeat(np.arange(phase.n), np.diff(phase.dst_ptr))
    r_order = np.argsort(dt, kind="stable")
    t_sorted = dt[r_order]
    a_sorted = phase.dst_addr[r_order]
    end_sorted = a_sorted + WORD_BYTES * words[owner][r_order]
    reset = _resets(phase, t_sorted, a_sorted, end_sorted, allocations)
    r_bound = np.searchsorted(t_sorted, np.arange(tiles + 1))
    r_desc = np.stack([src[owner][r_order], words[owner][r_order], reset.astype(np.int64)], axis=1)
    s_words = words[s_order]
    s_addr = first_addr[s_order]
    for t in np.flatnonzero((np.diff(s_bound) > 0) | (np.diff(r_bound) > 0)).tolist():
        sa, sb, ra, rb = s_bound[t], s_bound[t + 1], r_bound[t], r_bound[t + 1]
        desc[t] = s_words[sa:sb].tobytes() + b"/" + r_desc[ra:rb].tobytes()
        addrs[t] = np.concatenate([s_addr[sa:sb], a_sorted[ra:rb][reset[ra:rb]]])
    return desc, addrs


def _varies_per_iteration(phase: Phase) -> bool:
    counts = np.diff(phase.src_ptr)
    return bool((phase.src_addr != np.repeat(phase.src_addr[phase.src_ptr[:-1]], counts)).any())


def program_table(program: list[Phase], tiles: int, machine: Machine,
                  allocations: Allocations | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per tile, the whole program's table bytes and fragments (each stored phase once), with the reference's
    sharing of identical rows (docs/reference.md §3): the first use of a row costs its bytes, the second 12 bytes per
    patched address, later uses 4 per patched address, rounded up, never more than the row's own bytes; a phase whose
    sources change between Repeat iterations is never shared. ``allocations``: the capture's extension."""
    c = machine.cost
    r = max(c.table_rounding, 1)
    table = np.zeros(tiles, np.int64)
    frags = np.zeros(tiles, np.int64)
    seen: list[dict[bytes, tuple[np.ndarray, int]]] = [{} for _ in range(tiles)]
    for ph in program:
        own, f = phase_table(ph, tiles, machine, allocations)
        frags += f
        if not c.share_phase_tables or _varies_per_iteration(ph):
            table += own
            continue
        desc, addrs = _rows(ph, tiles, allocations)
        charge = own.copy()
        for t, d in enumerate(desc):
            if d is None:
                continue
            first = seen[t].get(d)
            if first is None:
                seen[t][d] = (addrs[t], 1)
                continue
            a0, uses = first
            patches = int((a0 != addrs[t]).sum())
            per = c.shared_second_patch_bytes if uses == 1 else c.shared_later_patch_bytes
            charge[t] = min(int(own[t]), (per * patches + r - 1) // r * r)
            seen[t][d] = (a0, uses + 1)
        table += charge
    return table, frags
