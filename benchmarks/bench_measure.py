"""Measuring phases as relay selection does (``placer.selection.timing.phase_figures``: the lower bound, then the
B1024 schedule) on one worker and on two, as the selection's measurements run: wall seconds and the figures'
sums, which must not depend on the workers.

    placer generate siglip-so400m --batch 4 -o /tmp/siglip-b4.json.gz
    python benchmarks/bench_measure.py /tmp/siglip-b4.json.gz [--min-transfers 1000] [--workers 1,2]

The phases are the capture's direct phases of at least ``--min-transfers`` transfers, in capture order. Exit 1 if
the figures differ between worker counts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from placer.capture.io import read_capture
from placer.cost.model import program_tiles
from placer.machine import load_machine
from placer.selection.timing import phase_figures
from placer.threads import ordered_map


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture", type=Path)
    ap.add_argument("--min-transfers", type=int, default=1000)
    ap.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    args = ap.parse_args()
    capture = read_capture(args.capture)
    machine = load_machine()
    tiles = program_tiles(capture, machine)
    phases = [p for p in capture.phases if p.n >= args.min_transfers]
    sums = set()
    for workers in (int(w) for w in args.workers.split(",")):
        start = time.perf_counter()
        figures = list(ordered_map(lambda p: phase_figures(p, machine, tiles), phases, workers))
        took = time.perf_counter() - start
        bound, b1024 = sum(f.bound for f in figures), sum(f.b1024 for f in figures)
        sums.add((bound, b1024))
        print(f"{len(phases)} phases, {workers} worker(s): {took:.2f} s, Σ lower bound {bound:,}, Σ B1024 {b1024:,}")
    sys.exit(0 if len(sums) == 1 else 1)


if __name__ == "__main__":
    main()
