"""The reference's B1024 order (``placer.refschedule.reference.reference_order``) with the balancing heap compiled
and in Python (its test oracle, ``balance._balanced_picks_python``), on real phases: the times, their ratios, and
whether the orders are identical. The compiled heap is timed twice: with the tiered queues (the default; every
capture's words are positive) and with the line queues, ported line by line from the Python heap.

    placer generate siglip-so400m --batch 2 -o /tmp/siglip-b2.json.gz
    python benchmarks/bench_balance.py /tmp/siglip-b2.json.gz 16,50 [--tiles 1472] [--repeat 1]
    python benchmarks/bench_balance.py /tmp/siglip-b2.json.gz --solve [--objective table,cycles]

``--solve`` runs relay selection (80 KiB, one worker, 300 s) instead, and times every call of the compiled heap it
makes, the B1024 orders of the phases it measures, with the tiered and with the line queues: their sums, and
whether every call gave the same picks.

Each time is the whole ``reference_order`` call (best of ``--repeat``), the phase's dependency depths computed
once beforehand; the balancing heap (``balance.balanced_picks``) is most of it in Python, and the rest (the streams,
waves and destination-list ids, with numpy) is what is left compiled. Exit 1 if any order differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from placer.capture.io import read_capture
from placer.capture.model import Capture, Phase
from placer.machine import load_machine
from placer.refschedule import reference
from placer.refschedule.reference import reference_order
from placer.selection.select import SelectionSettings, select
from placer.solver import SolverParams
from placer.streams import balance
from placer.streams.dependencies import transfer_dependencies, transfer_levels

HEAPS: dict[str, Callable[..., np.ndarray]] = {
    "python": balance._balanced_picks_python, "line": partial(balance.balanced_picks, tiered=False),
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


def in_a_solve(capture: Capture, objective: str) -> bool:
    """Run relay selection, timing each of its heap calls with both queues; True if every call's picks agree."""
    seconds = {"tiered": 0.0, "line": 0.0}
    calls, differ = 0, 0

    def both(*items: Any) -> np.ndarray:
        nonlocal calls, differ
        picks = []
        for heap in seconds:
            t0 = time.perf_counter()
            picks.append(HEAPS[heap](*items))
            seconds[heap] += time.perf_counter() - t0
        calls += 1
        differ += not np.array_equal(picks[0], picks[1])
        return picks[0]

    settings = SelectionSettings(order=tuple(objective.split(",")), params=SolverParams(time_limit=300, workers=1))
    try:
        vars(reference)["balanced_picks"] = both
        out = select(capture, load_machine(), 81920, 16384, settings)
    finally:
        vars(reference)["balanced_picks"] = balance.balanced_picks
    print(f"{objective} at 80 KiB: worst tile {out.objectives.table:,} B, {out.objectives.cycles:,} cycles; "
          f"{calls} heap calls: tiered {seconds['tiered']:.2f} s, line {seconds['line']:.2f} s "
          f"(line / tiered {seconds['line'] / max(seconds['tiered'], 1e-9):.2f}); "
          + ("every call the same picks" if differ == 0 else f"{differ} calls DIFFER"))
    return differ == 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture", type=Path)
    ap.add_argument("phases", nargs="?", default="", help="comma-separated phase ids, e.g. 16,50")
    ap.add_argument("--tiles", type=int, default=1472)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--solve", action="store_true", help="time the heap's calls in relay selection instead")
    ap.add_argument("--objective", default="table,cycles", help="the selection's order with --solve")
    args = ap.parse_args()
    capture = read_capture(args.capture)
    if args.solve:
        print(f"{args.capture.name}: relay selection, one worker")
        sys.exit(0 if in_a_solve(capture, args.objective) else 1)
    if not args.phases:
        ap.error("give the phases, or --solve")
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
