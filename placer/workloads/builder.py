"""Columnar assembly of a synthetic capture: transfers, tile-memory kinds and their layout.

Builders add transfers as numpy columns whose addresses are (kind, offset) pairs; a *kind* is one logical buffer
(say "qkv.x", the replicated QKV activation block) present on a set of tiles with a per-tile size and a phase
lifetime. Only when everything is known are the kinds laid out in tile memory (one base address per kind, the
same on every tile, as a compiler that gives every tile the same layout per tensor role would) and the offsets
turned into addresses. That keeps each builder free of address bookkeeping and makes every replica of a group
receive at the same address (coordinate-preserving, docs/reference.md §4).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from placer.capture.io import MAX_WORDS
from placer.capture.model import Allocations, Capture, PanelHint, Phase, Repeat
from placer.errors import InputError
from placer.machine import Machine
from placer.units import ceil_div, round_up

ANY, R0, R1 = "any", "r0", "r1"
EXACT_LAYOUT_SECONDS = 5.0  # the exact layout's limit (a full-depth program's kinds: about 70 buffers)


@dataclass
class Kind:
    name: str
    tiles: np.ndarray  # int64, unique
    sizes: np.ndarray  # int64 bytes per tile (0 = absent)
    first: int
    last: int
    region: str = ANY
    fixed: int | None = None  # a fixed base address (the code at the bottom of memory)
    layered: bool = False  # a parameter sequence: one copy per layer, ``stride`` bytes apart
    stride: int = 0


@dataclass
class ParamSpace:
    """Parameters held by weight-holder tiles, packed per tile; a layered space repeats per layer (stride)."""

    kind: int
    load: np.ndarray  # bytes of one copy held by each tile so far
    salt: int
    planned: np.ndarray | None = None  # bytes each tile will still get as a weight home (place_at), known up front


@dataclass
class Part:
    source: np.ndarray
    words: np.ndarray
    src_kind: np.ndarray
    src_off: np.ndarray
    dst_counts: np.ndarray
    dst_tile: np.ndarray
    dst_kind: np.ndarray
    dst_off: np.ndarray


class TileMemoryError(InputError):
    """The workload's buffers do not fit in tile memory (``generate`` may retry with a leaner lowering);
    ``phase`` is the phase whose live buffers alone exceed the tile's memory, when that is the reason."""

    def __init__(self, message: str, *, phase: int | None = None) -> None:
        super().__init__(message, where="generate")
        self.phase = phase


def _arr(x: object, n: int) -> np.ndarray:
    a = np.asarray(x, dtype=np.int64)
    return np.broadcast_to(a, (n,)).copy() if a.ndim == 0 else a


class Program:
    """Collects phases, kinds, parameter spaces and panel hints; :meth:`capture` resolves addresses."""

    def __init__(self, machine: Machine, layers: int, seed: int) -> None:
        self.machine = machine
        self.tiles = machine.tiles
        self.layers = layers
        self.rng = np.random.default_rng(seed)
        self.max_words = min(machine.exchange.max_transfer_words, MAX_WORDS)
        self.kinds: list[Kind] = []
        self.parts: dict[int, list[Part]] = defaultdict(list)
        self.labels: dict[int, str] = {}
        self.hints: list[tuple[int, np.ndarray, list[int], str, bool]] = []
        self.spaces: list[ParamSpace] = []
        # free bytes left above each tile's buffers: most tiles keep tens of KB, about a fifth only a little
        small = self.rng.random(self.tiles) < 0.2
        self.gap = np.where(small, self.rng.integers(0, 12 * 1024, self.tiles),
                            self.rng.integers(16 * 1024, 96 * 1024, self.tiles)).astype(np.int64)

    # ---- memory kinds -------------------------------------------------------------------------------------
    def kind(self, name: str, tiles: np.ndarray, sizes: object, first: int, last: int, region: str = ANY,
             fixed: int | None = None) -> int:
        tiles = np.asarray(tiles, dtype=np.int64)
        sizes = _arr(sizes, tiles.shape[0])
        # several requests for one tile (a tile in two roles) keep the largest size
        uniq, inv = np.unique(tiles, return_inverse=True)
        size = np.zeros(uniq.shape[0], np.int64)
        np.maximum.at(size, inv, sizes)
        self.kinds.append(Kind(name, uniq, round_up(size, 32), first, last, region, fixed))
        return len(self.kinds) - 1

    def space(self, name: str, layered: bool, first: int, last: int) -> ParamSpace:
        k = self.kind(name, np.arange(self.tiles), 0, first, last, R1)
        self.kinds[k].layered = layered
        sp = ParamSpace(k, np.zeros(self.tiles, np.int64), int(self.rng.integers(0, self.tiles)))
        self.spaces.append(sp)
        return sp

    def place(self, sp: ParamSpace, nbytes: object) -> tuple[np.ndarray, np.ndarray]:
        """Give each parameter piece a holder tile and an offset in the holder's copy.

        Pieces go to the least-loaded tiles first (ties broken by a seeded rotation), so every tile holds about
        the same bytes, as a compiler balancing parameter memory would; offsets pack each tile's pieces.
        """
        nbytes = np.asarray(nbytes, np.int64)
        size = round_up(nbytes, 8)
        holder = np.empty(nbytes.shape[0], np.int64)
        offset = np.empty(nbytes.shape[0], np.int64)
        rot = (np.arange(self.tiles) - sp.salt) % self.tiles
        ahead = sp.planned if sp.planned is not None else 0
        done = 0
        while done < nbytes.shape[0]:
            take = min(self.tiles, nbytes.shape[0] - done)
            order = np.lexsort((rot, sp.load + ahead))[:take]
            holder[done:done + take] = order
            offset[done:done + take] = sp.load[order]
            sp.load[order] += size[done:done + take]
            done += take
        return holder, offset

    def place_at(self, sp: ParamSpace, holder: object, nbytes: object) -> np.ndarray:
        """Offsets of parameter pieces held by the given tiles (each tile's pieces packed in the order given)."""
        holder = np.asarray(holder, np.int64)
        size = round_up(_arr(nbytes, holder.shape[0]), 8)
        order = np.argsort(holder, kind="stable")
        h, sz = holder[order], size[order]
        first = np.r_[0, np.flatnonzero(np.diff(h)) + 1] if h.size else np.zeros(0, np.int64)
        run = np.repeat(first, np.diff(np.r_[first, h.shape[0]]))
        before = np.cumsum(sz) - sz
        offset = np.empty(holder.shape[0], np.int64)
        offset[order] = sp.load[h] + before - before[run]
        np.add.at(sp.load, holder, size)
        if sp.planned is not None:
            np.subtract.at(sp.planned, holder, size)
        return offset

    # ---- transfers ----------------------------------------------------------------------------------------
    def add(self, phase: int, source: object, nbytes: object, src_kind: object, src_off: object,
            dst_counts: object, dst_tile: object, dst_kind: object, dst_off: object) -> None:
        """Add transfers (listed in the given order); ``nbytes`` over the transfer limit are cut in pieces. A tile
        never sends to itself: a destination equal to the transfer's source is a local copy and is left out (a
        transfer left with no destination is dropped); so is a second mention of one destination tile."""
        source = np.asarray(source, dtype=np.int64)
        n = source.shape[0]
        if n == 0:
            return
        nbytes = _arr(nbytes, n)
        dst_counts = _arr(dst_counts, n)
        dst_tile = np.asarray(dst_tile, dtype=np.int64)
        m = dst_tile.shape[0]
        part = Part(source, nbytes, _arr(src_kind, n), _arr(src_off, n), dst_counts, dst_tile, _arr(dst_kind, m),
                    _arr(dst_off, m))
        part = _without_self(part)  # and without a tile named twice
        if part.source.shape[0] == 0:
            return
        nbytes = part.words
        if (nbytes % 4).any() or (nbytes <= 0).any():
            raise AssertionError("transfer sizes must be positive whole words")
        limit = self.max_words * 4
        if (nbytes > limit).any():
            part = _split(part, limit)
        part.words = part.words // 4
        self.parts[phase].append(part)

    def hint(self, phase: int, tiles: np.ndarray, boundaries: list[int], operand: str, splits: bool = True) -> None:
        self.hints.append((phase, np.asarray(tiles), boundaries, operand, splits))

    # ---- resolution ---------------------------------------------------------------------------------------
    def layout(self) -> np.ndarray:
        """One base address per kind: first fit by (first phase, -size), lifetimes that intersect never share
        bytes, no kind crosses the region boundary. If that order leaves no room, one retry places the largest
        kinds first (as the production allocator's offline retry does), then placer's exact placement engine
        (a full-depth program packs tile memory to within a few per cent); raise InputError when all fail."""
        extent = np.array([int(k.sizes.max(initial=0)) for k in self.kinds], np.int64)
        ks = self.kinds
        orders = (lambda i: (ks[i].fixed is None, ks[i].region != R0, ks[i].first, -extent[i]),
                  lambda i: (ks[i].fixed is None, ks[i].region != R0, -extent[i], ks[i].first))
        first_error: TileMemoryError | None = None
        for key in orders:
            try:
                return self._layout(sorted(range(len(ks)), key=key), extent)
            except TileMemoryError as exc:
                first_error = first_error or exc
        assert first_error is not None
        fullest = self._check_peak(extent)
        exact = self._exact_layout(extent)
        if exact is None:
            raise TileMemoryError(f"{first_error.args[0].removeprefix('generate: ')} (nor did an exact layout in "
                                  f"{EXACT_LAYOUT_SECONDS:g} s; the fullest phase is {fullest})", phase=fullest)
        return exact

    def _check_peak(self, extent: np.ndarray) -> int:
        """The phase whose live kinds (each at its widest) take the most bytes; raise when they exceed the tile's
        memory: no layout can place them, and saying which phase tells what to make leaner."""
        mem = self.machine.memory
        room = mem.loader_limit // 32 * 32 - mem.base
        last = max((k.last for k in self.kinds), default=0)
        live = np.zeros(last + 2, np.int64)
        for i, k in enumerate(self.kinds):
            live[k.first] += extent[i]
            live[k.last + 1] -= extent[i]
        peak = np.cumsum(live)[:-1]
        p = int(np.argmax(peak))
        if peak[p] > room:
            names = sorted(((int(extent[i]), k.name) for i, k in enumerate(self.kinds) if k.first <= p <= k.last),
                           reverse=True)[:3]
            raise TileMemoryError(f"the workload does not fit in tile memory: phase {p}'s live buffers take "
                                  f"{int(peak[p]):,} bytes of {room:,} (largest: "
                                  f"{', '.join(f'{n} {b:,}' for b, n in names)}); try fewer layers or a smaller "
                                  "batch", phase=p)
        return p

    def _exact_layout(self, extent: np.ndarray) -> np.ndarray | None:
        """The kinds as one tile's placement problem (every kind at its widest, the code and the stack fixed at
        the bottom of region 0, the rest standard-class: either region, never across the boundary), solved by
        placer's placement engine; None when it finds no layout within ``EXACT_LAYOUT_SECONDS``."""
        from placer.placement.api import solve_placement
        from placer.placement.model import FixedAllocation, MemoryClass, PlacementProblem, Request
        from placer.solver import SolverParams

        mem = self.machine.memory
        base = np.full(len(self.kinds), mem.base, np.int64)
        fixed: list[FixedAllocation] = []
        todo: list[int] = []
        top = mem.base
        for i, k in enumerate(self.kinds):
            if extent[i] == 0:
                continue
            if k.fixed is not None:
                base[i] = k.fixed
                fixed.append(FixedAllocation(k.fixed, k.fixed + int(extent[i]), k.first, k.last, name=k.name))
                top = max(top, k.fixed + int(extent[i]))
            else:
                todo.append(i)
        # region-0-only kinds (the stack) go right above the fixed code, as first fit puts them
        for i in [i for i in todo if self.kinds[i].region == R0]:
            k = self.kinds[i]
            base[i] = round_up(top, 32)
            top = int(base[i] + extent[i])
            fixed.append(FixedAllocation(int(base[i]), top, k.first, k.last, name=k.name))
        todo = [i for i in todo if self.kinds[i].region != R0]
        requests = tuple(Request(bytes=int(extent[i]), alignment=32, first=self.kinds[i].first,
                                 last=self.kinds[i].last, klass=MemoryClass.STANDARD, aliases=((n, 0),),
                                 name=self.kinds[i].name) for n, i in enumerate(todo))
        problem = PlacementProblem(ranges=((mem.base, mem.loader_limit // 32 * 32),), requests=requests,
                                   fixed=tuple(fixed), region_boundary=mem.region0_end, host_scratch=None,
                                   name="workload layout")
        result = solve_placement(problem, SolverParams(time_limit=EXACT_LAYOUT_SECONDS, workers=1, seed=0))
        if not result.placed or result.addresses is None:
            return None
        for n, i in enumerate(todo):
            base[i] = result.addresses[n]
        return base

    def _layout(self, order: list[int], extent: np.ndarray) -> np.ndarray:
        mem = self.machine.memory
        lo, r0_end, hi = mem.base, mem.region0_end, mem.loader_limit
        base = np.full(len(self.kinds), -1, np.int64)
        placed: list[int] = []
        for i in order:
            k = self.kinds[i]
            if extent[i] == 0:
                base[i] = lo
                continue
            if k.fixed is not None:
                base[i] = k.fixed
                placed.append(i)
                continue
            live = [j for j in placed if self.kinds[j].first <= k.last and k.first <= self.kinds[j].last]
            busy = sorted((int(base[j]), int(base[j] + extent[j])) for j in live)
            regions = {R0: [(lo, r0_end)], R1: [(r0_end, hi)], ANY: [(lo, r0_end), (r0_end, hi)]}[k.region]
            if k.region == R1:
                regions = [*regions, (lo, r0_end)]  # overflow into region 0 rather than fail
            addr = _first_fit(busy, regions, int(extent[i]))
            if addr is None:
                used = sum(b - a for a, b in busy)
                raise TileMemoryError(f"the workload does not fit in tile memory: no room for '{k.name}' "
                                      f"({int(extent[i])} bytes, phases {k.first}..{k.last}) next to {used} live "
                                      "bytes; try fewer layers or a smaller batch")
            base[i] = addr
            placed.append(i)
        return base

    def capture(self, order: list[int], repeat: Repeat | None) -> Capture:
        for sp in self.spaces:
            k = self.kinds[sp.kind]
            k.stride = round_up(int(sp.load.max()), 32)
            k.sizes = np.where(sp.load > 0, sp.load + k.stride * ((self.layers if k.layered else 1) - 1), 0)
        base = self.layout()
        stride = np.array([k.stride if k.layered else 0 for k in self.kinds], np.int64)
        phases = [self._phase(pid, base, stride) for pid in order]
        alloc_parts = [(k, base[i]) for i, k in enumerate(self.kinds)]
        tiles, start, end, first, last, names = [], [], [], [], [], []
        for k, b in alloc_parts:
            keep = k.sizes > 0
            t = k.tiles[keep]
            tiles.append(t)
            start.append(np.full(t.shape[0], b, np.int64))
            end.append(b + k.sizes[keep])
            first.append(np.full(t.shape[0], k.first, np.int64))
            last.append(np.full(t.shape[0], k.last, np.int64))
            names.extend([k.name] * int(t.shape[0]))
        # the rest of the program's memory (compute temporaries a capture does not show) fills each tile from
        # the top of its exchange buffers up to the loader limit, less a seeded gap: relay staging buffers of
        # tens of KB then fit on many tiles but not on all of them
        top = np.zeros(self.tiles, np.int64)
        np.maximum.at(top, np.concatenate(tiles), np.concatenate(end))
        ws_start = round_up(top + self.gap, 32)
        limit = self.machine.memory.loader_limit // 32 * 32
        has = ws_start < limit
        tiles.append(np.flatnonzero(has))
        start.append(ws_start[has])
        end.append(np.full(int(has.sum()), limit, np.int64))
        first.append(np.zeros(int(has.sum()), np.int64))
        last.append(np.full(int(has.sum()), max(order), np.int64))
        names.extend(["workspace"] * int(has.sum()))
        tile_col = np.concatenate(tiles).astype(np.int32)
        srt = np.lexsort((np.concatenate(start), tile_col))
        allocations = Allocations(
            tile=tile_col[srt], start=np.concatenate(start)[srt], end=np.concatenate(end)[srt],
            first=np.concatenate(first)[srt], last=np.concatenate(last)[srt], name=[names[i] for i in srt])
        panels = [PanelHint(p, tuple(sorted(int(t) for t in tl)), tuple(int(b) for b in bd), op, sp)
                  for p, tl, bd, op, sp in self.hints]
        return Capture(tile_count=self.tiles, phases=phases, phase_labels={p: self.labels[p] for p in order},
                       repeat=repeat, allocations=allocations, panels=panels)

    def _phase(self, pid: int, base: np.ndarray, stride: np.ndarray) -> Phase:
        parts = self.parts.get(pid, [])
        if not parts:
            return Phase.empty(pid)
        source = np.concatenate([p.source for p in parts])
        words = np.concatenate([p.words for p in parts])
        skind = np.concatenate([p.src_kind for p in parts])
        soff = np.concatenate([p.src_off for p in parts])
        dcounts = np.concatenate([p.dst_counts for p in parts])
        dtile = np.concatenate([p.dst_tile for p in parts])
        daddr = base[np.concatenate([p.dst_kind for p in parts])] + np.concatenate([p.dst_off for p in parts])
        saddr0 = base[skind] + soff
        layered = stride[skind] > 0
        counts = np.where(layered, self.layers, 1).astype(np.int64)
        if layered.any() and self.layers > 1:
            rep = np.repeat(np.arange(source.shape[0]), counts)
            within = np.arange(rep.shape[0]) - np.repeat(np.cumsum(counts) - counts, counts)
            saddr = saddr0[rep] + within * stride[skind][rep]
        else:
            saddr = saddr0
        return Phase.build(pid, source, words, dcounts, dtile, daddr, saddr, counts)


def _first_fit(busy: list[tuple[int, int]], regions: list[tuple[int, int]], size: int) -> int | None:
    for lo, hi in regions:
        addr = lo
        for a, b in busy:
            if b <= addr or a >= hi:
                continue
            if a >= addr + size:
                break
            addr = max(addr, round_up(b, 32))
        if addr + size <= hi:
            return addr
    return None


def _without_self(part: Part) -> Part:
    """The part with every destination equal to its transfer's source removed, every later mention of a tile the
    transfer already names removed (the tile receives it once and copies it locally, as the source does: a capture
    names a destination tile once per transfer), and transfers left empty dropped."""
    owner = np.repeat(np.arange(part.source.shape[0]), part.dst_counts)
    keep = part.dst_tile != part.source[owner]
    if part.dst_tile.shape[0]:
        # the first mention of each (transfer, tile): a batch's rows of one token can share an owner tile once
        # there are more rows than tiles (the position rows at batch 4)
        key = owner * (int(part.dst_tile.max()) + 1) + part.dst_tile
        first = np.zeros(key.shape[0], bool)
        first[np.unique(key, return_index=True)[1]] = True
        keep &= first
    if keep.all():
        return part
    counts = np.bincount(owner[keep], minlength=part.source.shape[0])
    live = counts > 0
    return Part(part.source[live], part.words[live], part.src_kind[live], part.src_off[live], counts[live],
                part.dst_tile[keep], part.dst_kind[keep], part.dst_off[keep])


def _split(part: Part, limit: int) -> Part:
    """Cut transfers longer than ``limit`` bytes into consecutive pieces (source and destinations advance)."""
    pieces = ceil_div(part.words, limit)
    rows = np.repeat(np.arange(part.source.shape[0]), pieces)
    k = np.arange(rows.shape[0]) - np.repeat(np.cumsum(pieces) - pieces, pieces)
    shift = k * limit
    nbytes = np.minimum(part.words[rows] - shift, limit)
    dptr = np.zeros(part.dst_counts.shape[0] + 1, np.int64)
    np.cumsum(part.dst_counts, out=dptr[1:])
    starts = dptr[:-1][rows]
    counts = part.dst_counts[rows]
    flat = np.repeat(starts - (np.cumsum(counts) - counts), counts) + np.arange(int(counts.sum()))
    return Part(part.source[rows], nbytes, part.src_kind[rows], part.src_off[rows] + shift, counts,
                part.dst_tile[flat], part.dst_kind[flat], part.dst_off[flat] + np.repeat(shift, counts))
