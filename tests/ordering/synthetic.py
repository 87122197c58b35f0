"""Synthetic phases shaped like the reference workloads (docs/reference.md §8), for scheduler tests and benchmarks.

- ``replica_phase``: ``groups`` replica groups of ``replicas`` tiles each; every group's operand arrives as
  ``fragments`` strided runs of ``fragment_bytes`` from ``sources`` owner tiles, each multicast to the group at the
  same offset (coordinate-preserving); optionally every replica also receives ``weight_words`` of weights in
  transfers of at most 4,148 words from a weight-owner tile, read from ``layers`` per-layer addresses (one replica
  per owner tile unless ``weight_owner_tiles`` concentrates them).
  QKV: 40 × 36, MLP-up: 27 × 54, MLP-down: 240 × 6.
- ``relay_phase``: a replica phase rewritten with direct-receive relays: the fragments of each group are gathered to
  a spare tile at buffer + offset, then the relay multicasts its buffer to the replicas (RAW dependencies).
"""

from __future__ import annotations

import numpy as np

from placer.capture.model import Phase
from placer.units import ceil_div

BASE = 0x4C000
MAX_WORDS = 4148


def replica_phase(  # noqa: PLR0913
    *,
    groups: int = 40,
    replicas: int = 36,
    fragments: int = 1312,
    fragment_bytes: int = 32,
    sources: int = 36,
    weight_words: int = 0,
    weight_owner_tiles: int | None = None,
    layers: int = 27,
    tiles: int = 1472,
    seed: int = 0,
    phase: int = 0,
) -> Phase:
    rng = np.random.default_rng(seed)
    if groups * replicas > tiles:
        raise ValueError("more replicas than tiles")
    members = np.arange(groups * replicas).reshape(groups, replicas)
    fw = fragment_bytes // 4
    src_l: list[np.ndarray] = []
    words_l: list[np.ndarray] = []
    cnt_l: list[np.ndarray] = []
    dtile_l: list[np.ndarray] = []
    daddr_l: list[np.ndarray] = []
    saddr_l: list[np.ndarray] = []
    scnt_l: list[np.ndarray] = []
    dst_base = 0xA0000  # clear of the reads below, so the phase has no dependencies
    per_owner = fragments // sources + 1
    for g in range(groups):
        # owners outside the group: a tile never sends to itself
        owners = rng.choice(np.setdiff1d(np.arange(tiles), members[g]), size=sources, replace=False)
        k = np.arange(fragments)
        src = owners[k % sources]  # strided: consecutive fragments come from different owners
        off = k * fragment_bytes
        src_l.append(src)
        words_l.append(np.full(fragments, fw))
        cnt_l.append(np.full(fragments, replicas))
        dtile_l.append(np.tile(members[g], fragments))
        daddr_l.append(np.repeat(dst_base + off, replicas))
        saddr_l.append(BASE + 0x2000 + (g * per_owner + k // sources) * fragment_bytes)
        scnt_l.append(np.ones(fragments, np.int64))
    if weight_words:
        w_base = dst_base + fragments * fragment_bytes + 0x100
        # weights are spread over owner tiles (by default one replica per owner), never sent to the owner itself
        receivers = members.reshape(-1)
        n_owners = len(receivers) if weight_owner_tiles is None else weight_owner_tiles
        owners = rng.permutation(tiles)[:n_owners][np.arange(len(receivers)) % n_owners]
        owners = np.where(owners == receivers, (owners + 1) % tiles, owners)
        for t, owner in zip(receivers.tolist(), owners.tolist(), strict=True):
            left = weight_words
            w_off = 0  # words of the weight sent so far
            while left > 0:
                w = min(left, MAX_WORDS)
                src_l.append(np.array([owner]))
                words_l.append(np.array([w]))
                cnt_l.append(np.array([1]))
                dtile_l.append(np.array([t]))
                daddr_l.append(np.array([w_base + 4 * w_off]))
                saddr_l.append(0xC0000 + 0x100 * np.arange(layers) + 4 * w_off)
                scnt_l.append(np.array([layers]))
                left -= w
                w_off += w
    return Phase.build(phase, np.concatenate(src_l), np.concatenate(words_l), np.concatenate(cnt_l),
                       np.concatenate(dtile_l), np.concatenate(daddr_l), np.concatenate(saddr_l),
                       src_counts=np.concatenate(scnt_l))


def relay_phase(
    *,
    groups: int = 4,
    replicas: int = 6,
    fragments: int = 64,
    fragment_bytes: int = 32,
    sources: int = 8,
    segments: int = 2,
    tiles: int = 1472,
    seed: int = 0,
    phase: int = 0,
) -> Phase:
    """Gathers first, forwards after (listed order), with relays on the highest free tiles."""
    rng = np.random.default_rng(seed)
    members = np.arange(groups * replicas).reshape(groups, replicas)
    fw = fragment_bytes // 4
    relay = tiles - 1
    gathers: list[tuple[int, int, int, int]] = []  # (source, words, relay tile, relay addr) + src addr below
    gsrc_addr: list[int] = []
    forwards: list[tuple[int, int, list[int], int, int]] = []
    buf = BASE + 0x8000
    for g in range(groups):
        owners = rng.choice(groups * replicas + np.arange(tiles - groups * replicas - 2 * groups * segments),
                            size=sources, replace=False)
        per_seg = ceil_div(fragments, segments)
        for s in range(segments):
            lo, hi = s * per_seg, min(fragments, (s + 1) * per_seg)
            if lo >= hi:
                continue
            r = relay
            relay -= 1
            for k in range(lo, hi):
                gathers.append((int(owners[k % sources]), fw, r, buf + (k - lo) * fragment_bytes))
                gsrc_addr.append(BASE + 0x2000 + k * fragment_bytes)
            left = (hi - lo) * fw
            pos = 0
            while left > 0:
                w = min(left, MAX_WORDS)
                forwards.append((r, w, members[g].tolist(), BASE + 0x10000 + lo * fragment_bytes + 4 * pos,
                                 buf + 4 * pos))
                left -= w
                pos += w
    src = [g[0] for g in gathers] + [f[0] for f in forwards]
    words = [g[1] for g in gathers] + [f[1] for f in forwards]
    cnt = [1] * len(gathers) + [len(f[2]) for f in forwards]
    dtile = [g[2] for g in gathers] + [t for f in forwards for t in f[2]]
    daddr = [g[3] for g in gathers] + [f[3] for f in forwards for _ in f[2]]
    saddr = gsrc_addr + [f[4] for f in forwards]
    return Phase.build(phase, src, words, cnt, dtile, daddr, saddr)
