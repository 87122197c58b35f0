"""Perfect-packing instances: buffers cut out of a full capacity × time rectangle, so a zero-slack placement exists.

As in the TelaMalloc and MiniMalloc papers: start from one rectangle (addresses ``[0, capacity)`` × steps
``[0, steps)``) and cut a random piece in two, in time or in address, until there are ``n`` pieces; each piece is a
buffer whose lifetime is its time extent and whose size is its address extent. Live bytes equal the capacity at
every step, so the instance is as tight as it can be and its known placement (the pieces' own addresses) proves it
feasible. Address cuts fall on multiples of ``granule`` and every buffer's alignment divides its known offset.

The **infeasible twin** makes one buffer live at a zero-slack step 32 bytes larger: live bytes then exceed the
capacity there, so no placement exists (the peak bound proves it at once).

In the reference dump format (:func:`ipu_dump`) the rectangle straddles the region boundary (the first cut is at the
boundary, so no buffer crosses it), some region-1 buffers are of the interleaved class, and pairs of buffers whose
known placements share no memory element are declared conflicting: the known placement satisfies every rule of
:mod:`placer.placement.checker`.

    python -m placer.placement.generate OUT_DIR [--sizes 50,100,200,500] [--seeds 0,1] [--no-ipu] [--holes 0.4]
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placer.fileio import atomic_write_text, write_json
from placer.placement.model import REGION0_ELEMENT, REGION1_ELEMENT, REGION_BOUNDARY

CAPACITY = 1 << 20


@dataclass(frozen=True)
class Piece:
    """A buffer of the known solution: ``[offset, offset + size)`` during steps ``[lower, upper)``."""

    offset: int
    size: int
    lower: int
    upper: int
    alignment: int = 1


def _cut(rng: random.Random, rects: list[tuple[int, int, int, int]], granule: int, n: int) -> None:
    """Cut rectangles (offset, size, lower, upper) until there are ``n``; the piece to cut is drawn by area, so
    pieces stay comparable in size, as buffers of one program do."""
    while len(rects) < n:
        weights = []
        for _o, size, lo, hi in rects:
            splittable = size >= 2 * granule or hi - lo >= 2
            weights.append(size * (hi - lo) if splittable else 0)
        if not any(weights):
            raise ValueError(f"cannot cut {n} pieces: capacity or steps too small")
        k = rng.choices(range(len(rects)), weights=weights)[0]
        offset, size, lo, hi = rects.pop(k)
        in_time = hi - lo >= 2 and (size < 2 * granule or rng.random() < 0.5)
        if in_time:
            t = rng.randrange(lo + 1, hi)
            rects += [(offset, size, lo, t), (offset, size, t, hi)]
        else:
            a = rng.randrange(1, size // granule) * granule
            rects += [(offset, a, lo, hi), (offset + a, size - a, lo, hi)]


def _alignment(rng: random.Random, offset: int, granule: int, max_alignment: int) -> int:
    """A power of two dividing ``offset`` (so the known placement stays legal): 1, the granule or larger."""
    largest = offset & -offset if offset else max_alignment
    choices = [1] + [a for a in (8, granule, 64, 128, max_alignment) if a <= min(largest, max_alignment)]
    return rng.choice(choices)


def perfect_packing(n: int, *, capacity: int = CAPACITY, steps: int | None = None, seed: int = 0,
                    granule: int = 32, max_alignment: int = 256, first_cut: int | None = None,
                    holes: float = 0.0) -> list[Piece]:
    """``n`` pieces tiling ``[0, capacity)`` × ``[0, steps)`` (default ``steps = n``), ordered by a seeded shuffle.

    ``first_cut``: an address at which the rectangle is cut across all steps before anything else (the region
    boundary of a dump). ``holes``: the fraction of pieces removed afterwards, except those live at the middle
    step, which stays a zero-slack peak (cutting ``n / (1 - holes)`` pieces keeps about ``n`` buffers)."""
    if n < 1 or capacity % granule or capacity < granule:
        raise ValueError("need n >= 1 and a capacity that is a positive multiple of the granule")
    rng = random.Random(seed)
    steps = steps or max(n, 2)
    rects = [(0, capacity, 0, steps)]
    if first_cut is not None and 0 < first_cut < capacity:
        if first_cut % granule:
            raise ValueError("first_cut must be a multiple of the granule")
        rects = [(0, first_cut, 0, steps), (first_cut, capacity - first_cut, 0, steps)]
    _cut(rng, rects, granule, round(n / (1 - holes)) if holes else n)
    if holes:
        peak = steps // 2
        spare = [r for r in rects if not r[2] <= peak < r[3]]
        drop = set(rng.sample(range(len(spare)), min(len(spare), len(rects) - n)))
        rects = [r for r in rects if r[2] <= peak < r[3]] + [r for k, r in enumerate(spare) if k not in drop]
    rng.shuffle(rects)
    return [Piece(o, s, lo, hi, _alignment(rng, o, granule, max_alignment)) for o, s, lo, hi in rects]


def twin(pieces: list[Piece], *, seed: int = 0, extra: int = 32) -> list[Piece]:
    """The infeasible twin: one buffer (drawn by ``seed`` among those live at the first zero-slack step) ``extra``
    bytes larger, so live bytes exceed the capacity there."""
    pieces = list(pieces)
    steps = max(p.upper for p in pieces)
    live = [0] * steps
    for p in pieces:
        for t in range(p.lower, p.upper):
            live[t] += p.size
    peak = live.index(max(live))
    k = random.Random(seed).choice([k for k, p in enumerate(pieces) if p.lower <= peak < p.upper])
    p = pieces[k]
    pieces[k] = Piece(p.offset, p.size + extra, p.lower, p.upper, p.alignment)
    return pieces


def minimalloc_csv(pieces: list[Piece]) -> str:
    """MiniMalloc's CSV (``id,lower,upper,size,alignment``); the capacity goes in the file name."""
    lines = ["id,lower,upper,size,alignment"]
    lines += [f"{k},{p.lower},{p.upper},{p.size},{p.alignment}" for k, p in enumerate(pieces)]
    return "\n".join(lines) + "\n"


def _elements(address: int, size: int) -> range:
    """Memory element indices touched (region 0: 16 KiB elements, region 1: 32 KiB pairs), disjoint per region."""
    unit = REGION1_ELEMENT if address >= REGION_BOUNDARY else REGION0_ELEMENT
    tag = 1 << 40 if address >= REGION_BOUNDARY else 0
    return range(tag + address // unit, tag + -(-(address + size) // unit))


def ipu_dump(pieces: list[Piece], base: int, capacity: int, *, seed: int = 0, conflicts: int = 8,
             interleaved: float = 0.1) -> dict[str, Any]:
    """A reference dump ("version 1") whose known placement is ``base + piece.offset``.

    ``conflicts`` pairs of buffers that share no memory element in the known placement are declared conflicting;
    about ``interleaved`` of the region-1 buffers are of the interleaved class."""
    rng = random.Random(seed)
    spans = [set(_elements(base + p.offset, p.size)) for p in pieces]
    conflict: dict[int, list[int]] = {k: [] for k in range(len(pieces))}
    pairs = [(i, j) for i in range(len(pieces)) for j in range(i + 1, len(pieces)) if not spans[i] & spans[j]]
    for i, j in rng.sample(pairs, min(conflicts, len(pairs))):
        conflict[i].append(j)
    requests = []
    for k, p in enumerate(pieces):
        in_region1 = base + p.offset >= REGION_BOUNDARY
        klass = "Ipu21Interleaved" if in_region1 and rng.random() < interleaved else "Ipu21Standard"
        requests.append({
            "class": klass, "region1_stride": None, "lifetime": {"first": p.lower, "last": p.upper - 1},
            "bytes": p.size, "alignment": p.alignment, "assignments": [[k, 0]], "conflicts": conflict[k],
        })
    return {"version": 1, "tile": 0, "ranges": [[base, base + capacity]], "interleaved_offset": 0,
            "requests": requests}


def write_set(out: Path, sizes: list[int], seeds: list[int], *, ipu: bool = True, plain: bool = True,
              holes: float | None = None) -> list[Path]:
    """The benchmark set: per (size, seed) a MiniMalloc CSV and its infeasible twin (``plain``); with ``ipu`` a dump
    of 256 KiB straddling the region boundary and its twin; with ``holes`` a CSV whose only zero-slack step is the
    peak (``pph-...``) and its twin. File names carry the capacity (``pp-100-s0.1048576.csv``)."""
    out.mkdir(parents=True, exist_ok=True)
    written = []

    def csv_pair(name: str, pieces: list[Piece], seed: int) -> None:
        for stem, ps in ((name, pieces), (f"{name}-twin", twin(pieces, seed=seed))):
            path = out / f"{stem}.{CAPACITY}.csv"
            atomic_write_text(path, minimalloc_csv(ps))
            written.append(path)

    for n in sizes:
        for seed in seeds:
            if plain:
                csv_pair(f"pp-{n}-s{seed}", perfect_packing(n, seed=seed), seed)
            if holes:
                csv_pair(f"pph-{n}-s{seed}", perfect_packing(n, seed=seed, holes=holes), seed)
            if ipu:
                cap = 256 * 1024
                base = REGION_BOUNDARY - cap // 2
                ipu_pieces = perfect_packing(n, capacity=cap, seed=seed, first_cut=REGION_BOUNDARY - base)
                for name, ps in ((f"ipu-{n}-s{seed}", ipu_pieces),
                                 (f"ipu-{n}-s{seed}-twin", twin(ipu_pieces, seed=seed))):
                    path = out / f"{name}.json"
                    write_json(path, ipu_dump(ps, base, cap, seed=seed), indent=1)
                    written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write perfect-packing instances and their infeasible twins.")
    ap.add_argument("out", type=Path)
    ap.add_argument("--sizes", default="50,100,200,500")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--no-ipu", action="store_true", help="MiniMalloc CSVs only")
    ap.add_argument("--holes", type=float, default=None, help="also write pph-* files: this fraction of pieces "
                    "removed away from the zero-slack peak")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s]
    seeds = [int(s) for s in args.seeds.split(",") if s]
    for path in write_set(args.out, sizes, seeds, ipu=not args.no_ipu, holes=args.holes):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
