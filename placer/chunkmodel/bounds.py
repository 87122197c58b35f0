"""Lower bounds on a phase's horizon (makespan, cycles, sync excluded).

All three rest on one fact (see ``chunks``): chunks that share a lane or a receive port have disjoint transmit
windows, and the horizon is at least a chunk's start + words + its largest destination latency.
- port: a lane's words plus the smallest latency tail of its chunks; a port's words plus its own latency;
- clique: destination sets that pairwise intersect make every pair of their chunks conflict (a shared port), so
  all their words are sequential, plus the smallest tail among them; greedy, seeded by the heaviest sets;
- chain: the longest dependency path (stream order and data dependencies with their latency lags).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from placer.arrays import unique
from placer.chunkmodel.chunks import Chunks

_CLIQUE_CANDIDATES = 3000  # heaviest destination sets considered for the clique search
_CLIQUE_SEEDS = 24


@dataclass(frozen=True)
class LowerBound:
    port: int
    clique: int
    chain: int
    head_tail: int = 0
    memory: int = 0  # the reference's rules only: sends and receives on one SRAM element never overlap
    host: int = 0  # the reference's rules only: each relay host alone (``placer.refschedule.hostbound``)

    @property
    def best(self) -> int:
        return max(self.port, self.clique, self.chain, self.head_tail, self.memory, self.host)

    @property
    def kind(self) -> str:
        return max((self.port, "port"), (self.clique, "clique"), (self.chain, "chain"),
                   (self.head_tail, "head-tail"), (self.memory, "memory"), (self.host, "host"))[1]


def lower_bound(chunks: Chunks) -> LowerBound:
    if chunks.count == 0:
        return LowerBound(0, 0, 0, 0)
    return LowerBound(port_bound(chunks), clique_bound(chunks), chain_bound(chunks), head_tail_bound(chunks))


def head_tail_bound(chunks: Chunks) -> int:
    """One-machine bound with heads and tails, on every lane and port.

    A chunk's head ``r`` is its earliest start (dependency chain, resources ignored); its tail ``q`` is the longest
    path from the end of its interval on the resource to the horizon (its own landing, or through successors). On
    one resource, every subset ``S`` of its chunks needs ``min_S r + Σ_S p + min_S q`` cycles; we take the subsets
    "every chunk with a head at least r_k" and "every chunk with a tail at least q_k". On a relayed phase this is
    what the plain port bound misses: a replica cannot receive a forward before the forward's gathers landed."""
    head = _port_aware_heads(chunks, earliest_starts(chunks))
    reach = _reach_to_end(chunks)  # from a chunk's start to the horizon
    chunk, res = chunks.resources()
    lane = res < chunks.tiles
    p = np.where(lane, chunks.lane_words[chunk], chunks.words[chunk])
    r = head[chunk]
    q = reach[chunk] - p
    return max(_one_machine(res, r, p, q), _one_machine(res, q, p, r))


def _port_aware_heads(chunks: Chunks, head: np.ndarray) -> np.ndarray:
    """Raise each chunk's head by its predecessors' shared receive port: the unicast predecessors of ``b`` that
    land on one port (a relay's gathers) take the port one after another, so the last lands no earlier than their
    smallest head + their words + their smallest tail. The dependency chain alone lets them all land at once."""
    a, b = chunks.dep_pred, chunks.dep_succ
    if len(a) == 0:
        return head
    size = np.array([len(t) for t in chunks.set_tiles], np.int64)
    one = size[chunks.dset[a]] == 1
    a, b = a[one], b[one]
    if len(a) == 0:
        return head
    port = np.array([int(t[0]) if len(t) else -1 for t in chunks.set_tiles], np.int64)[chunks.dset[a]]
    key = b * (chunks.tiles + 1) + port
    o = np.argsort(key, kind="stable")
    key, a, b = key[o], a[o], b[o]
    first = np.ones(len(key), bool)
    first[1:] = key[1:] != key[:-1]
    starts = np.flatnonzero(first)
    lo = np.minimum.reduceat(head[a], starts)
    total = np.add.reduceat(chunks.words[a], starts)
    tail = np.minimum.reduceat(chunks.tail[a], starts)
    out = head.copy()
    np.maximum.at(out, b[starts], lo + total + tail)
    return out


def _one_machine(res: np.ndarray, r: np.ndarray, p: np.ndarray, q: np.ndarray) -> int:
    """max over resources and k of r_k + Σ p + min q over the chunks of the resource with r >= r_k."""
    if len(res) == 0:
        return 0
    o = np.lexsort((-r, res))  # per resource, walked from the largest r down
    res, r, p, q = res[o], r[o], p[o], q[o]
    first = np.ones(len(res), bool)
    first[1:] = res[1:] != res[:-1]
    group = np.cumsum(first) - 1
    big = int(p.sum()) + 1
    suffix_p = np.cumsum(p) - np.concatenate([[0], np.cumsum(p)])[np.flatnonzero(first)][group]
    offset = group * (int(q.max()) + big + 1)
    suffix_q = np.minimum.accumulate(q - offset) + offset  # min over the chunks walked so far in this group
    return int((r + suffix_p + suffix_q).max())


def _reach_to_end(chunks: Chunks) -> np.ndarray:
    """Longest path from each chunk's start to the horizon (landing, dependency and stream edges)."""
    count = chunks.count
    reach: np.ndarray = (chunks.words + chunks.tail).astype(np.int64)
    sa, sb = chunks.stream_edges()
    pred = np.concatenate([chunks.dep_pred, sa])
    succ = np.concatenate([chunks.dep_succ, sb])
    lag = np.concatenate([chunks.words[chunks.dep_pred] + chunks.tail[chunks.dep_pred], chunks.lane_words[sa]])
    if len(pred) == 0:
        return reach
    # every edge climbs a level, or stays in one stream and climbs a wave: process successors first
    rank = np.empty(count, np.int64)
    rank[np.lexsort((chunks.wave, chunks.stream, chunks.level))] = np.arange(count)
    e = np.argsort(-rank[pred], kind="stable")
    rl = reach.tolist()
    for a, b, g in zip(pred[e].tolist(), succ[e].tolist(), lag[e].tolist(), strict=True):
        v = g + rl[b]
        if v > rl[a]:
            rl[a] = v
    return np.asarray(rl, np.int64)


def port_bound(chunks: Chunks) -> int:
    t = chunks.tiles
    lane = np.bincount(chunks.source, weights=chunks.lane_words, minlength=t).astype(np.int64)
    min_tail = np.full(t, np.iinfo(np.int64).max)
    np.minimum.at(min_tail, chunks.source, chunks.tail - chunks.lead + chunks.hold_end)  # largest latency
    lane_b = np.where(lane > 0, lane + np.where(lane > 0, min_tail, 0), 0)
    chunk, res = chunks.resources()
    is_port = res >= t
    port = np.bincount(res[is_port] - t, weights=chunks.words[chunk[is_port]], minlength=t).astype(np.int64)
    port_b = np.where(port > 0, port + chunks.lead + chunks.latency - chunks.hold, 0)
    return int(max(lane_b.max(initial=0), port_b.max(initial=0)))


def clique_bound(chunks: Chunks) -> int:
    nsets = len(chunks.set_tiles)
    weight = np.bincount(chunks.dset, weights=chunks.words, minlength=nsets).astype(np.int64)
    tail = np.array([int(lat.max(initial=0)) for lat in chunks.set_latency], np.int64)
    cand = np.argsort(-weight, kind="stable")[:_CLIQUE_CANDIDATES]
    cand = cand[weight[cand] > 0]
    masks = {int(s): _bitset(chunks.set_tiles[s]) for s in cand.tolist()}
    best = 0
    for seed in cand[:_CLIQUE_SEEDS].tolist():
        members = [masks[seed]]
        total = int(weight[seed])
        low_tail = int(tail[seed])
        for s in cand.tolist():
            if s == seed:
                continue
            m = masks[s]
            if all(m & x for x in members):
                members.append(m)
                total += int(weight[s])
                low_tail = min(low_tail, int(tail[s]))
        best = max(best, total + low_tail + chunks.lead - chunks.hold)
    return best


def _bitset(tiles: np.ndarray) -> int:
    out = 0
    for t in tiles.tolist():
        out |= 1 << t
    return out


def chain_bound(chunks: Chunks) -> int:
    """Longest path, level by level: dependency edges always climb a level, stream edges stay in one stream."""
    return int((earliest_starts(chunks) + chunks.words + chunks.tail).max(initial=0))


def earliest_starts(chunks: Chunks) -> np.ndarray:
    """Earliest start of every chunk ignoring resources (heads of the dependency graph)."""
    count = chunks.count
    ready = np.zeros(count, np.int64)
    est = np.zeros(count, np.int64)
    order = np.lexsort((chunks.wave, chunks.stream, chunks.level))
    lv = chunks.level[order]
    big = int(chunks.words.sum() + chunks.tail.sum() + 1) * 2
    sa, sb = chunks.stream_edges()
    cross = chunks.level[sa] != chunks.level[sb]  # stream order edges that leave a level
    pred = np.concatenate([chunks.dep_pred, sa[cross]])
    succ = np.concatenate([chunks.dep_succ, sb[cross]])
    lag = np.concatenate([chunks.tail[chunks.dep_pred], np.zeros(int(cross.sum()), np.int64)])
    for level in unique(lv).tolist():
        idx = order[lv == level]  # stream by stream, waves in order
        w = chunks.lane_words[idx]  # consecutive chunks of a stream follow each other on its lane
        st = chunks.stream[idx]
        new = np.ones(len(idx), bool)
        new[1:] = st[1:] != st[:-1]
        group = np.cumsum(new)
        csum = np.cumsum(w) - w  # words before each chunk since the start of the level
        base = np.maximum.accumulate(np.where(new, csum, 0))
        p = csum - base  # words before the chunk within its stream run
        # est_c = p_c + max over earlier k in the run of (ready_k - p_k); the group offset stops the max leaking
        est[idx] = p + np.maximum.accumulate(ready[idx] - p + group * big) - group * big
        sel = chunks.level[pred] == level
        a = pred[sel]
        np.maximum.at(ready, succ[sel], est[a] + chunks.words[a] + lag[sel])
    return est
