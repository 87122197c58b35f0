"""The reference's B1024 order (``placer.refschedule.reference.reference_order``) with the balancing heap compiled
and in Python (its test oracle, ``balance._balanced_picks_python``), on real phases: the times, their ratios, and
whether the orders are identical. The compiled heap is timed twice: with the tiered queues (the default; every
capture's words are positive) and with the line queues, ported line by line from the Python heap.

    placer generate siglip-so400m --batch 2 -o /tmp/siglip-b2.json.gz
    python benchmarks/bench_balance.py /tmp/siglip-b2.json.gz 16,50 [--tiles 1472] [--repeat 1]

Each time is the whole ``reference_order`` call (best of ``--repeat``), the phase's dependency depths computed
once beforehand; the balancing heap (``balance.balanced_picks``) is most of it in Python, and the rest (the streams,
waves and destination-list ids, with numpy) is what is left compiled. Exit 1 if any order differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from placer.capture.io import read_capture
from placer.capture.model import Phase
from placer.refschedule import reference
from placer.refschedule.reference import reference_order
from placer.streams import balance
from placer.streams.dependencies import transfer_dependencies, transfer_levels

HEAPS = {"python": balance._balanced_picks_python, "line": partial(balance.balanced_picks, tiered=False),
         "tiered": partial(balance.balanced_picks, tiered=True)}


def timed(phase: Phase, levels: np.ndarray, tiles: int, heap: str, repeat: int) -> tuple[float, np.ndarray]:
    """Best time of ``repeat`` calls with the heap ``heap`` (of ``HEAPS``), and the order."""
    best = float("inf")
    order = np.zeros(0, np.int64)
    try:
        vars(reference)["balanced_picks"] = HEAPS[heap]  # reference_order calls the balancing heap by this name
        for _ in range(repeat):
            t0 = time.perf_counter()
            order = reference_order(phase, levels, tiles=tiles)
            best = min(best, time.perf_counter() - t0)
    finally:
        vars(reference)["balanced_picks"] = balance.balanced_picks
    return best, order


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture", type=Path)
    ap.add_argument("phases", help="comma-separated phase ids, e.g. 16,50")
    ap.add_argument("--tiles", type=int, default=1472)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    capture = read_capture(args.capture)
    print(f"{args.capture.name}: reference_order, best of {args.repeat}")
    print("| phase | transfers × receivers | Python | compiled, line queues | compiled, tiered | Python / tiered "
          "| line / tiered | orders |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    same_all = True
    for pid in (int(p) for p in args.phases.split(",")):
        phase = capture.phase_by_id(pid)
        levels = transfer_levels(phase.n, transfer_dependencies(phase))
        python, line, tiered = (timed(phase, levels, args.tiles, heap, args.repeat) for heap in HEAPS)
        same = np.array_equal(python[1], line[1]) and np.array_equal(python[1], tiered[1])
        same_all &= same
        receivers = float(np.diff(phase.dst_ptr).mean())
        print(f"| {pid} | {phase.n:,} × {receivers:.1f} | {python[0]:.2f} s | {line[0]:.3f} s | {tiered[0]:.3f} s | "
              f"{python[0] / tiered[0]:.0f} | {line[0] / tiered[0]:.2f} | {'identical' if same else 'DIFFERENT'} |",
              flush=True)
    sys.exit(0 if same_all else 1)


if __name__ == "__main__":
    main()
