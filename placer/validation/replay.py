"""Symbolic replay of one phase window: which source byte ends up at every written destination byte.

A window is a list of transfers in program order (a phase, then for local-pack its kernels' copies and
inserted phases). A transfer reads ``nbytes`` at its source address on its source tile. If bytes of that
range were written earlier in the window, it reads those bytes' *provenance*; otherwise it reads the tile's
own memory and the provenance is (source tile, source address). Provenance is tracked per contiguous *piece*
of a transfer's payload: ``(tile, address of the piece's first byte, pattern, root)``, where ``pattern`` names
how the source address varies over Repeat iterations (0: it does not) and ``root`` is the transfer that read
the bytes from memory.

Work is done on byte intervals: every dependent read is cut at all write boundaries on its tile and the latest
earlier writer of each elementary segment is found by one sorted search, so cost grows with the number of
intervals, never with bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import placer.validation.intervals as iv
from placer.capture.model import WORD_BYTES, Phase


@dataclass
class Seq:
    """Transfers of one window in program order, in the validator's own flat layout (lengths in bytes)."""

    source: np.ndarray  # int64 (n,)
    nbytes: np.ndarray  # int64 (n,)
    src_ptr: np.ndarray  # int64 (n+1,)
    src_addr: np.ndarray  # int64
    dst_ptr: np.ndarray  # int64 (n+1,)
    dst_tile: np.ndarray  # int64
    dst_addr: np.ndarray  # int64
    pat: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # pattern id per transfer

    @property
    def n(self) -> int:
        return int(self.source.shape[0])

    def dst_owner(self) -> np.ndarray:
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.dst_ptr))

    def src_owner(self) -> np.ndarray:
        return np.repeat(np.arange(self.n, dtype=np.int64), np.diff(self.src_ptr))

    @staticmethod
    def from_phase(ph: Phase) -> Seq:
        return Seq(
            ph.source.astype(np.int64),
            ph.words.astype(np.int64) * WORD_BYTES,
            ph.src_ptr.astype(np.int64),
            ph.src_addr.astype(np.int64),
            ph.dst_ptr.astype(np.int64),
            ph.dst_tile.astype(np.int64),
            ph.dst_addr.astype(np.int64),
        )

    @staticmethod
    def from_copies(tile: int, copies: np.ndarray) -> Seq:
        """A kernel's on-tile copies behave like single-destination transfers from the tile to itself."""
        m = len(copies)
        ptr = np.arange(m + 1, dtype=np.int64)
        return Seq(
            np.full(m, tile, np.int64),
            copies[:, 2].copy(),
            ptr,
            copies[:, 0].copy(),
            ptr.copy(),
            np.full(m, tile, np.int64),
            copies[:, 1].copy(),
        )

    @staticmethod
    def concat(parts: list[Seq]) -> Seq:
        def ptr(name: str) -> np.ndarray:
            out, base = [np.zeros(1, np.int64)], 0
            for p in parts:
                q = getattr(p, name)
                out.append(q[1:] + base)
                base += int(q[-1])
            return np.concatenate(out)

        def cat(name: str) -> np.ndarray:
            return np.concatenate([getattr(p, name) for p in parts]) if parts else np.zeros(0, np.int64)

        return Seq(
            cat("source"),
            cat("nbytes"),
            ptr("src_ptr"),
            cat("src_addr"),
            ptr("dst_ptr"),
            cat("dst_tile"),
            cat("dst_addr"),
            cat("pat"),
        )


class Patterns:
    """Registry of per-iteration address patterns shared by the windows being compared.

    A transfer with L source addresses reads ``addresses[k mod L]`` in iteration k (one address: every
    iteration). Its pattern is the vector ``addresses[k mod L] - addresses[0]`` over the window's K
    iterations; two reads agree in every iteration iff they agree on the first address and on the pattern id.
    Id 0 is the constant pattern.
    """

    def __init__(self, seqs: list[Seq], iterations: int) -> None:
        lengths = [np.diff(s.src_ptr) for s in seqs]
        k = max([iterations, *[int(x.max()) for x in lengths if len(x)]])
        self.k = k
        rows, where = [], []
        for si, (s, ln) in enumerate(zip(seqs, lengths, strict=True)):
            s.pat = np.zeros(s.n, np.int64)
            for length in np.unique(ln[ln > 1]).tolist():
                ts = np.flatnonzero(ln == length)
                idx = s.src_ptr[ts][:, None] + (np.arange(k) % length)[None, :]
                addr = s.src_addr[idx]
                rows.append(addr - addr[:, :1])
                where.append((si, ts))
        self.rows = np.zeros((1, k), np.int64)
        if rows:
            allrows = np.concatenate([np.zeros((1, k), np.int64), *rows])
            uniq, inv = np.unique(allrows, axis=0, return_inverse=True)
            inv = inv.reshape(-1)
            zero = inv[0]
            # renumber so that the constant pattern is 0 and the others follow
            remap = np.arange(len(uniq)) + 1
            remap[remap > zero + 1] -= 1
            remap[zero] = 0
            order = np.argsort(remap)
            self.rows = uniq[order]
            pos = 1
            for si, ts in where:
                seqs[si].pat[ts] = remap[inv[pos : pos + len(ts)]]
                pos += len(ts)

    def addresses(self, first: int, pat: int) -> list[int]:
        addresses: list[int] = (first + self.rows[pat]).tolist()
        return addresses


@dataclass
class Pieces:
    """Provenance of transfers' payloads: piece i covers payload bytes [off0, off1) of transfer ``t``."""

    t: np.ndarray
    off0: np.ndarray
    off1: np.ndarray
    ptile: np.ndarray
    paddr: np.ndarray
    ppat: np.ndarray
    root: np.ndarray

    NAMES = ("t", "off0", "off1", "ptile", "paddr", "ppat", "root")

    def take(self, idx: np.ndarray) -> Pieces:
        return Pieces(*(getattr(self, k)[idx] for k in self.NAMES))

    @staticmethod
    def cat(parts: list[Pieces]) -> Pieces:
        return Pieces(*(np.concatenate([getattr(p, k) for p in parts]) for k in Pieces.NAMES))


@dataclass
class Writes:
    """Destination byte intervals with their provenance; ``writer`` indexes the window's transfers."""

    tile: np.ndarray
    start: np.ndarray
    end: np.ndarray
    ptile: np.ndarray
    paddr: np.ndarray
    ppat: np.ndarray
    root: np.ndarray
    writer: np.ndarray

    def __len__(self) -> int:
        return int(self.tile.shape[0])


@dataclass
class ReadIssue:
    kind: str  # "before-write" | "unwritten" | "varying-dependent"
    reader: int
    tile: int
    start: int
    end: int
    other: int = -1  # the later writer, for "before-write"


def memory_pieces(seq: Seq) -> Pieces:
    n = seq.n
    t = np.arange(n, dtype=np.int64)
    return Pieces(
        t,
        np.zeros(n, np.int64),
        seq.nbytes.copy(),
        seq.source.copy(),
        seq.src_addr[seq.src_ptr[:-1]],
        seq.pat.copy(),
        t.copy(),
    )


def expand_writes(seq: Seq, pieces: Pieces, entries: np.ndarray | None = None) -> Writes:
    """Cross destination entries with their transfer's pieces (``pieces`` sorted by transfer, then offset)."""
    if entries is None:
        entries = np.arange(len(seq.dst_tile), dtype=np.int64)
    owner = seq.dst_owner()[entries]
    pptr = np.searchsorted(pieces.t, np.arange(seq.n + 1, dtype=np.int64))
    counts = pptr[owner + 1] - pptr[owner]
    pe = np.repeat(entries, counts)
    pi = iv.ranges(pptr[owner], counts)
    base = seq.dst_addr[pe]
    return Writes(
        seq.dst_tile[pe],
        base + pieces.off0[pi],
        base + pieces.off1[pi],
        pieces.ptile[pi],
        pieces.paddr[pi],
        pieces.ppat[pi],
        pieces.root[pi],
        pieces.t[pi],
    )


def _merge(p: Pieces) -> Pieces:
    """Join consecutive pieces of one transfer whose provenance runs on contiguously (fewer, longer
    pieces)."""
    if len(p.t) < 2:
        return p
    joinable = (
        (p.t[1:] == p.t[:-1])
        & (p.off0[1:] == p.off1[:-1])
        & (p.ptile[1:] == p.ptile[:-1])
        & (p.ppat[1:] == p.ppat[:-1])
        & (p.root[1:] == p.root[:-1])
        & (p.paddr[1:] == p.paddr[:-1] + (p.off1[:-1] - p.off0[:-1]))
    )
    new = np.ones(len(p.t), bool)
    new[1:] = ~joinable
    heads, tails = iv.runs(new)
    out = p.take(heads)
    out.off1 = p.off1[tails]
    return out


def replay(seq: Seq, scratch: tuple[np.ndarray, np.ndarray]) -> tuple[Writes, list[ReadIssue]]:
    """Provenance of every write of the window. ``scratch`` = disjoint sorted key union of relay scratch
    space.

    Reads of scratch bytes that no earlier transfer wrote are reported (a forward ahead of its gather); a read
    with per-iteration addresses of bytes written in the window is reported as unsupported and read from
    memory.
    """
    issues: list[ReadIssue] = []
    pieces = memory_pieces(seq)
    n = seq.n
    if n == 0:
        return expand_writes(seq, pieces), issues
    owner = seq.dst_owner()
    wk0 = iv.key(seq.dst_tile, seq.dst_addr)
    wk1 = wk0 + seq.nbytes[owner]
    us, ue = iv.union(np.concatenate([wk0, scratch[0]]), np.concatenate([wk1, scratch[1]]))
    # every read, once per distinct Repeat address
    r_t = seq.src_owner()
    rk0 = iv.key(seq.source[r_t], seq.src_addr)
    rk1 = rk0 + seq.nbytes[r_t]
    dep = iv.overlaps(rk0, rk1, us, ue)
    dep_t = np.unique(r_t[dep])
    varying = dep_t[seq.pat[dep_t] != 0]
    for t in varying.tolist():
        hit = np.flatnonzero(dep & (r_t == t))[0]
        issues.append(
            ReadIssue(
                "varying-dependent",
                t,
                int(seq.source[t]),
                int(iv.key_addr(rk0[hit])),
                int(iv.key_addr(rk1[hit])),
            )
        )
    pending = dep_t[seq.pat[dep_t] == 0]
    first_src = seq.src_ptr[:-1]
    while len(pending):
        qs, qe = rk0[first_src[pending]], rk1[first_src[pending]]
        ps, pe = iv.union(qs, qe)
        hit_entries = np.flatnonzero(iv.overlaps(wk0, wk1, ps, pe))
        w = expand_writes(seq, pieces, hit_entries)
        w0, w1 = iv.key(w.tile, w.start), iv.key(w.tile, w.end)
        sc = iv.overlaps(scratch[0], scratch[1], ps, pe)
        bounds = iv.sorted_unique(np.concatenate([qs, qe, w0, w1, scratch[0][sc], scratch[1][sc]]))
        r_own, r_seg = iv.cut(bounds, qs, qe)
        w_own, w_seg = iv.cut(bounds, w0, w1)
        big = n + 1
        wkey = w_seg * big + w.writer[w_own]
        order = np.argsort(wkey, kind="stable")
        wkey, w_own = wkey[order], w_own[order]
        reader = pending[r_own]
        q = r_seg * big + reader
        pos = np.searchsorted(wkey, q, side="left")
        has_prev = (pos > 0) & (wkey[np.maximum(pos - 1, 0)] // big == r_seg)
        has_next = (
            (pos < len(wkey)) & (wkey[np.minimum(pos, len(wkey) - 1)] // big == r_seg)
            if len(wkey)
            else np.zeros(len(q), bool)
        )
        prev = w_own[np.maximum(pos - 1, 0)] if len(w_own) else np.zeros(len(q), np.int64)
        # a reader whose latest earlier writer is itself still pending must wait for the next round
        waiting = has_prev & np.isin(w.writer[prev], pending) if len(w.writer) else np.zeros(len(q), bool)
        blocked = np.unique(reader[waiting])
        done = ~np.isin(reader, blocked)
        seg_s, seg_e = bounds[r_seg], bounds[r_seg + 1]
        in_scratch = iv.inside(seg_s, seg_e, scratch[0], scratch[1])
        bad = done & ~has_prev & in_scratch
        for j in np.flatnonzero(bad).tolist():
            later = int(w.writer[w_own[pos[j]]]) if has_next[j] else -1
            issues.append(
                ReadIssue(
                    "before-write" if later >= 0 else "unwritten",
                    int(reader[j]),
                    int(iv.key_tile(seg_s[j])),
                    int(iv.key_addr(seg_s[j])),
                    int(iv.key_addr(seg_e[j])),
                    later,
                )
            )
        d = np.flatnonzero(done)
        rd, off0 = reader[d], seg_s[d] - qs[r_own[d]]
        from_w = has_prev[d]
        pw = prev[d]
        shift = seg_s[d] - w0[pw] if len(w0) else np.zeros(len(d), np.int64)

        def pick(
            col: np.ndarray, memory: np.ndarray, pw: np.ndarray = pw, from_w: np.ndarray = from_w
        ) -> np.ndarray:
            return np.where(from_w, col[pw], memory) if len(col) else memory

        new = Pieces(
            rd,
            off0,
            seg_e[d] - qs[r_own[d]],
            pick(w.ptile, seq.source[rd]),
            pick(w.paddr + 0, seq.src_addr[first_src[rd]] + off0) + np.where(from_w, shift, 0),
            pick(w.ppat, np.zeros(len(d), np.int64)),
            pick(w.root, rd),
        )
        resolved = np.setdiff1d(pending, blocked)
        keep = ~np.isin(pieces.t, resolved)
        merged = Pieces.cat([pieces.take(np.flatnonzero(keep)), new])
        order = np.lexsort((merged.off0, merged.t))
        pieces = _merge(merged.take(order))
        if len(blocked) == len(pending):  # cannot happen (the first pending reader never waits); guard anyway
            break
        pending = blocked
    return expand_writes(seq, pieces), issues
