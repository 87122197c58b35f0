"""``validate``: check a plan against the original capture, independently of the code that produced the plan.

Every check is stated in docs/plan.md ("Semantics the validator checks", "Validator notes"). A phase whose
transfers the plan leaves untouched (no delta, no inserted phase, no kernel) is identical in both programs,
so only its table is recounted; every changed phase is replayed symbolically in both programs and the results
compared byte interval by byte interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from placer.capture.model import Capture, Phase
from placer.errors import InputError
from placer.machine import Machine
from placer.progress import task, track
from placer.validation import intervals as iv
from placer.validation.plan import Kernel, Plan, Relay, Segment, bind_plan, parse_plan
from placer.validation.replay import Patterns, ReadIssue, Seq, Writes, replay
from placer.validation.table import program_table

MAX_LINES = 20


class ValidationStats(TypedDict, total=False):
    """The figures of the program a plan produces, against the budget checked (all present after a validation)."""

    phases: int
    transfers: int
    worst_tile: int
    worst_table_bytes: int
    budget_table_bytes: int
    worst_fragments_tile: int
    worst_fragments: int
    budget_fragments: int
    machine_budget_table_bytes: int
    machine_budget_fragments: int


class ValidationReportDoc(ValidationStats):
    """``ValidationReport.to_json``: the verdict, every finding, and the figures."""

    valid: bool
    errors: list[str]


@dataclass
class ValidationReport:
    valid: bool
    errors: list[str]
    stats: ValidationStats = field(default_factory=ValidationStats)

    def lines(self, limit: int = MAX_LINES) -> list[str]:
        if self.valid:
            s = self.stats
            return [
                f"valid: {s['phases']} phases, {s['transfers']:,} transfers, worst tile {s['worst_tile']} "
                f"table {s['worst_table_bytes']:,} / budget {s['budget_table_bytes']:,} bytes, fragments "
                f"{s['worst_fragments']:,} / {s['budget_fragments']:,}"
            ]
        out = self.errors[:limit]
        if len(self.errors) > limit:
            out.append(f"and {len(self.errors) - limit} more")
        return out

    def to_json(self) -> ValidationReportDoc:
        return {"valid": self.valid, "errors": self.errors, **self.stats}


def _hexr(a: int, b: int) -> str:
    return f"[{a:#x}, {b:#x})"


@dataclass
class _SegRef:
    relay: Relay
    k: int  # segment index within the relay
    seg: Segment

    def name(self) -> str:
        return f"relay {self.relay.index} segment {self.k}"


class _Window:
    """One original phase and what the plan puts in its place: rewritten phase, kernels, inserted phases."""

    def __init__(
        self,
        capture: Capture,
        orig: Phase,
        rew: Phase,
        kept: np.ndarray,
        kernels: list[Kernel],
        inserted: list[tuple[int, Phase]],
        segrefs: list[_SegRef],
    ) -> None:
        self.p = orig.phase
        self.orig = orig
        self.rew = rew
        self.kept = kept
        self.segrefs = segrefs
        parts = [Seq.from_phase(rew)]
        # (start in the window, count, what) for kernels and inserted phases, in program order
        self.parts: list[tuple[int, int, str, int]] = []
        pos = rew.n
        for k in kernels:
            parts.append(Seq.from_copies(k.tile, k.copies))
            self.parts.append((pos, len(k.copies), "kernel", k.index))
            pos += len(k.copies)
        for pid, ph in inserted:
            parts.append(Seq.from_phase(ph))
            self.parts.append((pos, ph.n, "inserted", pid))
            pos += ph.n
        self.seq = Seq.concat(parts)
        self.oseq = Seq.from_phase(orig)
        self.patterns = Patterns([self.oseq, self.seq], capture.iterations(self.p))

    def role(self, j: int) -> str:
        """Which relay segment an appended transfer serves, recognised by its buffer addresses."""
        s = self.seq
        src, a = int(s.source[j]), int(s.src_addr[s.src_ptr[j]])
        dt = s.dst_tile[s.dst_ptr[j] : s.dst_ptr[j + 1]]
        da = s.dst_addr[s.dst_ptr[j] : s.dst_ptr[j + 1]]
        for ref in self.segrefs:
            b0, b1 = ref.seg.buffer, ref.seg.buffer_end
            if src == ref.seg.tile and b0 <= a < b1:
                return f"; {ref.name()} forward"
            if ((dt == ref.seg.tile) & (da >= b0) & (da < b1)).any():
                return f"; {ref.name()} gather"
        return ""

    def describe(self, j: int) -> str:
        n_kept = len(self.kept)
        if j < self.rew.n:
            if j < n_kept:
                return f"transfer {j} (original {int(self.kept[j])})"
            return f"transfer {j} (appended #{j - n_kept}{self.role(j)})"
        for start, count, what, ident in self.parts:
            if start <= j < start + count:
                if what == "kernel":
                    return f"kernel {ident} copy {j - start}"
                return f"inserted phase {ident} transfer {j - start}{self.role(j)}"
        return f"window item {j}"

    def prov(self, tile: int, addr: int, pat: int) -> str:
        if pat == 0:
            return f"tile {tile} address {addr:#x}"
        addrs = self.patterns.addresses(addr, pat)
        shown = ", ".join(f"{x:#x}" for x in addrs[:4]) + (", ..." if len(addrs) > 4 else "")
        return f"tile {tile} addresses [{shown}] over iterations"


def validate(capture: Capture, plan: Mapping[str, object] | Plan, machine: Machine) -> ValidationReport:
    """Check ``plan`` against ``capture``. Raises :class:`InputError` if the plan is malformed or does not
    refer to this capture; returns a report (``valid`` False with precise error lines) if it is well formed
    but wrong."""
    if not isinstance(plan, Plan):
        plan = parse_plan(plan, "<plan>")
        bind_plan(plan, capture, "<plan>")
    elif any(d.append is None for d in plan.delta) or any(i.transfers is None for i in plan.inserted):
        bind_plan(plan, capture, "<plan>")
    _check_address_range(capture, plan)

    errors: list[str] = []
    delta = {d.phase: d for d in plan.delta}
    inserted: dict[int, list[tuple[int, Phase]]] = defaultdict(list)
    for ins in plan.inserted:
        assert ins.transfers is not None
        inserted[ins.after].append((ins.phase, ins.transfers))
    kernels: dict[int, list[Kernel]] = defaultdict(list)
    for kern in plan.kernels:
        kernels[kern.after].append(kern)
    segrefs: dict[int, list[_SegRef]] = defaultdict(list)
    for r in plan.relays:
        for k, s in enumerate(r.segments):
            segrefs[r.phase].append(_SegRef(r, k, s))

    program: list[Phase] = []
    max_words = machine.exchange.max_transfer_words
    for orig in track(capture.phases, "validate phases", unit="phases"):
        p = orig.phase
        d = delta.get(p)
        if d is None:
            rew, kept = orig, np.arange(orig.n, dtype=np.int64)
        else:
            assert d.append is not None
            kept = np.setdiff1d(np.arange(orig.n, dtype=np.int64), d.remove)
            rew = _concat_phases(p, [_take(orig, kept), d.append])
        program.append(rew)
        program.extend(ph for _, ph in inserted.get(p, []))
        if d is None and p not in inserted and p not in kernels:
            continue
        win = _Window(capture, orig, rew, kept, kernels.get(p, []), inserted.get(p, []), segrefs.get(p, []))
        new_rows = [np.arange(len(kept), rew.n)] + [
            np.arange(a, a + c) for a, c, what, _ in win.parts if what == "inserted"
        ]
        rows = np.concatenate(new_rows)
        too_long = rows[win.seq.nbytes[rows] > 4 * max_words]
        for j in too_long.tolist():
            errors.append(
                f"phase {p} {win.describe(j)}: {int(win.seq.nbytes[j]) // 4} words exceeds the "
                f"machine's {max_words}-word transfer limit"
            )
        errors.extend(_check_window(win, kernels.get(p, [])))

    with task("validate relays and budget"):
        errors.extend(_check_relays(capture, plan, machine, kernels))
        stats, budget_errors = _check_budget(capture, program, plan, machine)
    errors.extend(budget_errors)
    return ValidationReport(not errors, errors, stats)


# --- the rewritten program


def _take(ph: Phase, rows: np.ndarray) -> Phase:
    def csr(ptr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        counts = ptr[1:][rows] - ptr[:-1][rows]
        return counts, iv.ranges(ptr[:-1][rows], counts)

    sc, si = csr(ph.src_ptr)
    dc, di = csr(ph.dst_ptr)
    return Phase.build(
        ph.phase,
        ph.source[rows],
        ph.words[rows],
        dc,
        ph.dst_tile[di],
        ph.dst_addr[di],
        ph.src_addr[si],
        sc,
        ph.width[rows],
    )


def _concat_phases(pid: int, parts: list[Phase]) -> Phase:
    def cat(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts])

    return Phase.build(
        pid,
        cat("source"),
        cat("words"),
        np.concatenate([np.diff(p.dst_ptr) for p in parts]),
        cat("dst_tile"),
        cat("dst_addr"),
        cat("src_addr"),
        np.concatenate([np.diff(p.src_ptr) for p in parts]),
        cat("width"),
    )


def _check_address_range(capture: Capture, plan: Plan) -> None:
    # keys pack (tile, address) into one int64; absurd addresses must fail loudly, not alias another tile
    def high(ph: Phase) -> int:
        top = [int(a.max()) for a in (ph.src_addr, ph.dst_addr) if len(a)]
        return max(top, default=0) + 4 * 4148

    phases = (
        [("capture", p) for p in capture.phases]
        + [("plan", d.append) for d in plan.delta if d.append]
        + [("plan", i.transfers) for i in plan.inserted if i.transfers]
    )
    for where, ph in phases:
        if high(ph) >= iv.ADDRESS_LIMIT:
            raise InputError(f"phase {ph.phase} has an address >= {iv.ADDRESS_LIMIT:#x}", path=f"<{where}>")
    for r in plan.relays:
        for s in r.segments:
            if s.buffer_end >= iv.ADDRESS_LIMIT:
                raise InputError(
                    f"buffer {s.buffer:#x} is out of range",
                    path="<plan>",
                    where=f"relays[{r.index}].segments",
                )
    for k in plan.kernels:
        if len(k.copies) and int(k.copies.max()) * 2 >= iv.ADDRESS_LIMIT:
            raise InputError("copy address out of range", path="<plan>", where=f"kernels[{k.index}]")


# --- checks 1-3: provenance, overlapping writes, forwards after gathers


def _scratch(win: _Window, kernels: list[Kernel]) -> tuple[np.ndarray, np.ndarray]:
    """Relay scratch of the window: declared segment buffers, plus (local-pack) the kernels' copy ranges."""
    t, s, e = [], [], []
    for ref in win.segrefs:
        t.append(ref.seg.tile)
        s.append(ref.seg.buffer)
        e.append(ref.seg.buffer_end)
    for k in kernels:
        for a, b, n in k.copies.tolist():
            t += [k.tile, k.tile]
            s += [a, b]
            e += [a + n, b + n]
    tt = np.array(t, np.int64)
    return iv.union(iv.key(tt, np.array(s, np.int64)), iv.key(tt, np.array(e, np.int64)))


def _check_window(win: _Window, kernels: list[Kernel]) -> list[str]:
    p = win.p
    out: list[str] = []
    scratch = _scratch(win, kernels)
    o_writes, o_issues = replay(win.oseq, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
    r_writes, r_issues = replay(win.seq, scratch)
    for issue in r_issues:
        out.append(_read_issue(win, issue, rewritten=True))
    for issue in o_issues:
        out.append(_read_issue(win, issue, rewritten=False))
    out.extend(_check_overlaps(win))
    out.extend(_compare(win, o_writes, r_writes, scratch))
    # lines that start with the culprit transfer read "phase P transfer ..."; the others "phase P: ..."
    return [
        line
        if line.startswith("phase ")
        else f"phase {p} {line}"
        if line.startswith(("transfer ", "inserted ", "kernel "))
        else f"phase {p}: {line}"
        for line in out
    ]


def _read_issue(win: _Window, x: ReadIssue, rewritten: bool) -> str:
    who = win.describe(x.reader) if rewritten else f"original transfer {x.reader}"
    rng = _hexr(x.start, x.end)
    if x.kind == "before-write":
        return f"phase {win.p} {who}: reads {rng} on tile {x.tile} before {win.describe(x.other)} writes it"
    if x.kind == "unwritten":
        return f"phase {win.p} {who}: reads {rng} on tile {x.tile} (relay scratch) which no transfer writes"
    return (
        f"phase {win.p} {who}: reads {rng} on tile {x.tile} with per-iteration source addresses from bytes "
        f"written earlier in the phase (not supported by the validator)"
    )


def _self_overlaps(tile: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, ...]:
    """Pairs (later, earlier) of intervals that overlap, with the overlapping key range; sorted by start."""
    k0, k1 = iv.key(tile, start), iv.key(tile, end)
    order = np.argsort(k0, kind="stable")
    k0s, k1s = k0[order], k1[order]
    if len(k0s) < 2:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    reach = np.maximum.accumulate(k1s)
    holder = np.maximum.accumulate(np.where(k1s == reach, np.arange(len(k1s)), 0))
    i = np.flatnonzero(k0s[1:] < reach[:-1]) + 1
    j = holder[i - 1]
    return order[i], order[j], k0s[i], np.minimum(k1s[i], reach[i - 1])


def _check_overlaps(win: _Window) -> list[str]:
    """No destination byte is written twice in one phase (unless the original phase already did so)."""
    out: list[str] = []
    o = win.oseq
    oo = o.dst_owner()
    _, _, os_, oe = _self_overlaps(o.dst_tile, o.dst_addr, o.dst_addr + o.nbytes[oo])
    ous, oue = iv.union(os_, oe)
    s = win.seq
    owner = s.dst_owner()
    phases = [(0, win.rew.n, f"phase {win.p}")] + [
        (a, n, f"inserted phase {ident}") for a, n, what, ident in win.parts if what == "inserted"
    ]
    for first, count, name in phases:
        ent = np.flatnonzero((owner >= first) & (owner < first + count))
        if len(ent) < 2:
            continue
        a, b, ks, ke = _self_overlaps(
            s.dst_tile[ent], s.dst_addr[ent], s.dst_addr[ent] + s.nbytes[owner[ent]]
        )
        fresh = ~iv.inside(ks, ke, ous, oue)
        for x, y, k0, k1 in zip(
            a[fresh].tolist(), b[fresh].tolist(), ks[fresh].tolist(), ke[fresh].tolist(), strict=True
        ):
            tx, ty = int(owner[ent[x]]), int(owner[ent[y]])
            later, earlier = max(tx, ty), min(tx, ty)
            what = "again" if later != earlier else "twice (two destinations of one transfer)"
            out.append(
                f"{name} {win.describe(later)}: writes tile {int(iv.key_tile(k0))} "
                f"{_hexr(int(iv.key_addr(k0)), int(iv.key_addr(k1)))} {what}, already written by "
                f"{win.describe(earlier)}"
            )
    return out


def _last_writer(own: np.ndarray, seg: np.ndarray, writer: np.ndarray, nseg: int) -> np.ndarray:
    """Per elementary segment, the write listed last (index into the writes), -1 where none."""
    res = np.full(nseg, -1, np.int64)
    if len(own) == 0:
        return res
    order = np.lexsort((writer[own], seg))
    ss, oo = seg[order], own[order]
    last = np.append(ss[1:] != ss[:-1], True)
    res[ss[last]] = oo[last]
    return res


def _compare(win: _Window, o: Writes, r: Writes, scratch: tuple[np.ndarray, np.ndarray]) -> list[str]:
    """Every replica byte outside relay scratch must carry the same provenance in both programs."""
    ok0, ok1 = iv.key(o.tile, o.start), iv.key(o.tile, o.end)
    rk0, rk1 = iv.key(r.tile, r.start), iv.key(r.tile, r.end)
    bounds = iv.sorted_unique(np.concatenate([ok0, ok1, rk0, rk1, scratch[0], scratch[1]]))
    if len(bounds) < 2:
        return []
    nseg = len(bounds) - 1
    o_own, o_seg = iv.cut(bounds, ok0, ok1)
    r_own, r_seg = iv.cut(bounds, rk0, rk1)
    o_last = _last_writer(o_own, o_seg, o.writer, nseg)
    r_last = _last_writer(r_own, r_seg, r.writer, nseg)
    s, e = bounds[:-1], bounds[1:]
    free = ~iv.inside(s, e, scratch[0], scratch[1])
    has_o, has_r = o_last >= 0, r_last >= 0
    oi, ri = np.maximum(o_last, 0), np.maximum(r_last, 0)
    o_addr = o.paddr[oi] + (s - ok0[oi]) if len(o_last) and len(o.paddr) else np.zeros(nseg, np.int64)
    r_addr = r.paddr[ri] + (s - rk0[ri]) if len(r.paddr) else np.zeros(nseg, np.int64)
    differs = np.zeros(nseg, bool)
    both = has_o & has_r
    if both.any():
        differs[both] = (
            (o.ptile[oi[both]] != r.ptile[ri[both]])
            | (o_addr[both] != r_addr[both])
            | (o.ppat[oi[both]] != r.ppat[ri[both]])
        )
    kinds = np.zeros(nseg, np.int8)  # 0 fine, 1 extra, 2 missing, 3 wrong provenance
    kinds[free & has_r & ~has_o] = 1
    kinds[free & has_o & ~has_r] = 2
    kinds[free & differs] = 3
    bad = np.flatnonzero(kinds)
    if len(bad) == 0:
        return []
    # one line per run of adjacent bad segments with the same kind and the same writers
    new = np.ones(len(bad), bool)
    new[1:] = (
        (bad[1:] != bad[:-1] + 1)
        | (kinds[bad[1:]] != kinds[bad[:-1]])
        | (o_last[bad[1:]] != o_last[bad[:-1]])
        | (r_last[bad[1:]] != r_last[bad[:-1]])
    )
    heads, tails = iv.runs(new)
    out = []
    for h, t in zip(heads.tolist(), tails.tolist(), strict=True):
        g0, g1 = int(bad[h]), int(bad[t])
        tile = int(iv.key_tile(s[g0]))
        rng = _hexr(int(iv.key_addr(s[g0])), int(iv.key_addr(e[g1])))
        kind = int(kinds[g0])
        if kind != 2:
            w = int(r_last[g0])
            got = win.prov(int(r.ptile[w]), int(r_addr[g0]), int(r.ppat[w]))
            via = win.describe(int(r.writer[w]))
            if int(r.root[w]) != int(r.writer[w]):
                via += f", read by {win.describe(int(r.root[w]))}"
        if kind != 1:
            w0 = int(o_last[g0])
            want = win.prov(int(o.ptile[w0]), int(o_addr[g0]), int(o.ppat[w0]))
            orig = f"original transfer {int(o.writer[w0])}"
        if kind == 1:
            out.append(f"{via}: writes tile {tile} {rng} (from {got}), which the original phase never writes")
        elif kind == 2:
            out.append(f"tile {tile} {rng} is no longer written (original: {want} by {orig})")
        else:
            out.append(f"{via}: writes tile {tile} {rng} from {got}; the original wrote {want} ({orig})")
    return out


# --- checks 4-5: relay tiles and relay buffers


class _ByTile:
    """Destination entries of one phase grouped by tile, so each relay looks only at its own replicas'
    rows."""

    def __init__(self, ph: Phase) -> None:
        self.owner = np.repeat(np.arange(ph.n, dtype=np.int64), np.diff(ph.dst_ptr))
        self.order = np.argsort(ph.dst_tile, kind="stable")
        self.tiles = ph.dst_tile[self.order]

    def transfers_to(self, tile: int) -> np.ndarray:
        lo, hi = np.searchsorted(self.tiles, [tile, tile + 1])
        return np.unique(self.owner[self.order[lo:hi]])


def _group_transfers(
    orig: Phase, by_tile: _ByTile, relay: Relay, tiles: int
) -> tuple[np.ndarray, np.ndarray]:
    """The relay's replica group in the original phase: transfers to exactly the replica set, at one common
    offset from each replica's base, inside the extent. Returns (transfer indices, offsets)."""
    m = len(relay.replicas)
    base = np.full(tiles, -1, np.int64)
    rank = np.full(tiles, -1, np.int64)
    base[list(relay.replicas)] = relay.bases
    rank[list(relay.replicas)] = np.arange(m)
    cand = by_tile.transfers_to(relay.replicas[0])  # every group transfer reaches the first replica
    cand = cand[np.diff(orig.dst_ptr)[cand] == m]
    if len(cand) == 0:
        return cand, cand
    ent = iv.ranges(orig.dst_ptr[cand], np.full(len(cand), m)).reshape(-1, m)
    rk = rank[orig.dst_tile[ent]]
    exact = (np.sort(rk, axis=1) == np.arange(m)).all(axis=1)
    off = orig.dst_addr[ent] - base[orig.dst_tile[ent]]
    same = (off == off[:, :1]).all(axis=1)
    nbytes = orig.words[cand].astype(np.int64) * 4
    inside = (off[:, 0] >= 0) & (off[:, 0] + nbytes <= relay.extent)
    keep = exact & same & inside
    return cand[keep], off[keep, 0]


def _check_relays(
    capture: Capture, plan: Plan, machine: Machine, kernels: dict[int, list[Kernel]]
) -> list[str]:
    out: list[str] = []
    mem = machine.memory
    hosts: dict[tuple[int, int], list[str]] = defaultdict(list)
    by_phase: dict[int, list[tuple[_SegRef, int, int, str]]] = defaultdict(list)  # scratch ranges per phase
    by_tile: dict[int, _ByTile] = {}
    for r in plan.relays:
        orig = capture.phase_by_id(r.phase)
        if r.phase not in by_tile:
            by_tile[r.phase] = _ByTile(orig)
        group, offs = _group_transfers(orig, by_tile[r.phase], r, capture.tile_count)
        if len(group) == 0:
            out.append(
                f"phase {r.phase} relay {r.index}: no original transfer delivers to exactly its replicas "
                f"{list(r.replicas)} at base + offset inside the extent {r.extent}"
            )
        ends = offs + orig.words[group].astype(np.int64) * 4
        for k, s in enumerate(r.segments):
            ref = _SegRef(r, k, s)
            name = f"phase {r.phase} {ref.name()} (tile {s.tile})"
            hosts[(r.phase, s.tile)].append(ref.name())
            if s.tile in r.replicas:
                out.append(f"{name}: relay tile {s.tile} is in the group's replica set")
            mine = group[(offs < s.end) & (ends > s.start)]
            senders = mine[orig.source[mine] == s.tile]
            if len(senders):
                out.append(
                    f"{name}: relay tile {s.tile} sends original transfer {int(senders[0])} of its own "
                    f"segment ({len(senders)} such transfers)"
                )
            b0, b1 = s.buffer, s.buffer_end
            by_phase[r.phase].append((ref, b0, b1, "buffer"))
            for kern in kernels.get(r.phase, []):
                if kern.tile == s.tile:
                    for a, b, n in kern.copies.tolist():
                        by_phase[r.phase] += [
                            (ref, a, a + n, f"kernel {kern.index} source"),
                            (ref, b, b + n, f"kernel {kern.index} destination"),
                        ]
    for (p, t), names in hosts.items():
        if len(names) > 1:
            out.append(
                f"phase {p}: tile {t} hosts {len(names)} relay segments ({', '.join(names)}); at most one "
                f"per phase"
            )
    relay_tiles = {p: {ref.seg.tile for ref, *_ in v} for p, v in by_phase.items()}
    for kern in plan.kernels:
        if kern.tile not in relay_tiles.get(kern.after, set()):
            out.append(
                f"kernels[{kern.index}]: tile {kern.tile} hosts no relay segment of phase {kern.after}"
            )
    for p, items in by_phase.items():
        out.extend(_check_scratch(capture, capture.phase_by_id(p), items, mem))
    return out


def _check_scratch(
    capture: Capture, orig: Phase, items: list[tuple[_SegRef, int, int, str]], mem: Any
) -> list[str]:
    """Relay scratch lies in SRAM, in one region, clear of live allocations and of the original phase's
    traffic."""
    out: list[str] = []
    p = orig.phase
    alloc = capture.allocations
    tiles = np.array([ref.seg.tile for ref, *_ in items], np.int64)
    lo = np.array([b0 for _, b0, _, _ in items], np.int64)
    hi = np.array([b1 for _, _, b1, _ in items], np.int64)
    q0, q1 = iv.key(tiles, lo), iv.key(tiles, hi)
    # which items to look at one by one: those outside SRAM, across the region boundary, or on a live allocation
    # (one sorted pass over the phase's live allocations: SigLIP b2's local-pack plan has 268k scratch ranges)
    outside = (lo < mem.base) | (hi > mem.end)
    crosses = ~outside & (lo < mem.region0_end) & (hi > mem.region0_end)
    live = np.flatnonzero((alloc.first <= p) & (alloc.last >= p)) if len(alloc) else np.zeros(0, np.int64)
    look = outside | crosses | (hi <= lo)  # an empty range is in no union either: looked at like the old loop did
    if live.size:
        live0 = iv.key(alloc.tile[live], alloc.start[live])
        live1 = iv.key(alloc.tile[live], alloc.end[live])
        # an empty allocation is in no union, but a range around its address still meets it: look at every item
        look |= iv.overlaps(q0, q1, *iv.union(live0, live1)) | bool((live1 <= live0).any())
    for i in np.flatnonzero(look).tolist():
        ref, b0, b1, what = items[i]
        name = f"phase {p} {ref.name()} {what} {_hexr(b0, b1)} on tile {ref.seg.tile}"
        if outside[i]:
            out.append(f"{name}: outside SRAM {_hexr(mem.base, mem.end)}")
        elif crosses[i]:
            out.append(f"{name}: crosses the region boundary {mem.region0_end:#x}")
        on = live[alloc.tile[live] == ref.seg.tile]
        for a in on[(alloc.start[on] < b1) & (alloc.end[on] > b0)].tolist():
            label = alloc.name[a] if alloc.name and alloc.name[a] else f"allocation {a}"
            out.append(
                f"{name}: overlaps {label} {_hexr(int(alloc.start[a]), int(alloc.end[a]))} live in "
                f"phases {int(alloc.first[a])}..{int(alloc.last[a])}"
            )
    # the original phase's reads (every Repeat address) and writes on the relay tiles
    s = Seq.from_phase(orig)
    rt = s.src_owner()
    dt = s.dst_owner()
    traffic = [
        ("reads", iv.key(s.source[rt], s.src_addr), s.nbytes[rt], rt),
        ("writes", iv.key(s.dst_tile, s.dst_addr), s.nbytes[dt], dt),
    ]
    for verb, k0, nb, owner in traffic:
        us, ue = iv.union(k0, k0 + nb)
        # cheap pre-filter: only scratch ranges touched by some traffic at all
        for i in np.flatnonzero(iv.overlaps(q0, q1, us, ue)).tolist():
            hit = np.flatnonzero((k0 < q1[i]) & (k0 + nb > q0[i]))
            ref, b0, b1, what = items[i]
            first = int(hit[0])
            a0 = int(iv.key_addr(k0[first]))
            out.append(
                f"phase {p} {ref.name()} {what} {_hexr(b0, b1)} on tile {ref.seg.tile}: overlaps "
                f"{_hexr(a0, a0 + int(nb[first]))} which original transfer {int(owner[first])} {verb}"
                + (f" (and {len(hit) - 1} more)" if len(hit) > 1 else "")
            )
    return out


# --- check 6: budget


def _check_budget(
    capture: Capture, program: list[Phase], plan: Plan, machine: Machine
) -> tuple[ValidationStats, list[str]]:
    tiles = capture.tile_count
    table, frags = program_table(program, tiles, machine, capture.allocations)
    wt = int(np.argmax(table))
    wf = int(np.argmax(frags))
    stats: ValidationStats = {
        "phases": len(program),
        "transfers": sum(ph.n for ph in program),
        "worst_tile": wt,
        "worst_table_bytes": int(table[wt]),
        "budget_table_bytes": plan.table_bytes,
        "worst_fragments_tile": wf,
        "worst_fragments": int(frags[wf]),
        "budget_fragments": plan.fragments,
        "machine_budget_table_bytes": machine.budget.table_bytes,
        "machine_budget_fragments": machine.budget.fragments,
    }
    errors = []
    over_t = int((table > plan.table_bytes).sum())
    if over_t:
        errors.append(
            f"budget: worst tile {wt} needs {int(table[wt]):,} table bytes, "
            f"{int(table[wt]) - plan.table_bytes:,} over the budget of {plan.table_bytes:,} "
            f"({over_t} tiles over)"
        )
    over_f = int((frags > plan.fragments).sum())
    if over_f:
        errors.append(
            f"budget: worst tile {wf} has {int(frags[wf]):,} fragments, {int(frags[wf]) - plan.fragments:,} "
            f"over the limit of {plan.fragments:,} ({over_f} tiles over)"
        )
    return stats, errors
