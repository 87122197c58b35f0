"""Load + full cost model on a large capture: time and peak memory; or the load alone, per reader.

    python benchmarks/bench_cost.py                         # synthetic 586,368-transfer phase
    python benchmarks/bench_cost.py --capture FILE.json.gz   # any capture (e.g. a generated SigLIP program)
    python benchmarks/bench_cost.py --load A.json.gz B.json.gz [--repeat 3] [--readers scanner,orjson]
        # load only, each capture with the compiled scanner (read_capture) and with the orjson path alone (what
        # read_capture falls back to when the scanner declines), each run in a fresh process: wall and CPU seconds
        # (all threads), peak RSS, the machine's load average

Goals: load ≤ 5 s and cost ≤ 1 s for 500k transfers (issue 2); the batch-two SigLIP capture (3.64 M transfers,
900 MB of JSON) loaded in ≤ 4 s wall on this 2-core machine. The reference compiler's Rust estimator costs one
phase in 3.6–13.9 ms; the ratio is printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from placer.capture import read_capture, write_capture
from placer.capture.io import capture_from_json
from placer.capture.model import Capture, Phase
from placer.cost.model import program_cost
from placer.machine import load_machine

RUST_PHASE_MS = (3.6, 13.9)


def synthetic(transfers: int, seed: int = 0) -> Capture:
    """One phase shaped like batch-two SigLIP's largest: 32-byte fragments multicast to small replica sets."""
    rng = np.random.default_rng(seed)
    tiles = 1472
    fan = rng.choice([1, 2, 6], size=transfers, p=[0.5, 0.2, 0.3])
    src = rng.integers(0, tiles, transfers)
    total = int(fan.sum())
    row = np.repeat(np.arange(transfers), fan)
    # The reader rejects a transfer naming its own source or one tile twice, so each transfer's destinations are
    # src + distinct offsets in 1..tiles-1 (mod tiles). k distinct offsets without a per-transfer loop: k draws
    # from 0..tiles-1-k, sorted, plus 0..k-1 are strictly increasing and stay within 0..tiles-2.
    draw = rng.integers(0, tiles - fan[row])
    draw = draw[np.lexsort((draw, row))]
    rank = np.arange(total) - np.repeat(np.cumsum(fan) - fan, fan)
    dst = (src[row] + 1 + draw + rank) % tiles
    addr = 0x60000 + 32 * rng.integers(0, 4096, size=total)
    phase = Phase.build(0, src, np.full(transfers, 8), fan, dst, addr, 0x50000 + 32 * rng.integers(0, 4096, transfers))
    return Capture(tile_count=tiles, phases=[phase])


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    """User + system CPU of this process, every thread included (the inflating thread counts too)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def orjson_read(path: Path) -> Capture:
    """The orjson path alone: the whole text in memory, every transfer a Python dict, then the columns."""
    import orjson

    from placer.fileio import read_bytes

    raw = read_bytes(path)
    doc = orjson.loads(raw)
    del raw
    return capture_from_json(doc, str(path))


READERS = {"scanner": read_capture, "orjson": orjson_read}


def load_one(path: Path, reader: str) -> None:
    """Child process of --load: one timed read, the figures as one JSON line."""
    base = peak_mib()
    t0, c0 = time.perf_counter(), cpu_seconds()
    cap = READERS[reader](path)
    wall, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    print(json.dumps({"wall": wall, "cpu": cpu, "peak": peak_mib(), "base": base, "transfers": cap.transfer_count()}))


def load_table(paths: list[Path], repeat: int, readers: list[str]) -> None:
    print(f"{'capture':<24} {'reader':<9} {'wall s':>7} {'CPU s':>7} {'peak MiB':>9} {'base MiB':>9}  load average")
    for path in paths:
        for name in readers:
            for _ in range(repeat):
                before = os.getloadavg()[0]
                out = subprocess.run([sys.executable, __file__, "--load-one", str(path), "--reader", name],
                                     check=True, text=True, capture_output=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                print(f"{path.name:<24} {name:<9} {r['wall']:7.2f} {r['cpu']:7.2f} {r['peak']:9.0f} {r['base']:9.0f}  "
                      f"{before:.2f} -> {os.getloadavg()[0]:.2f}   ({r['transfers']:,} transfers)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capture", type=Path)
    ap.add_argument("--transfers", type=int, default=586_368)
    ap.add_argument("--load", type=Path, nargs="+", help="load only: these captures, with each reader")
    ap.add_argument("--repeat", type=int, default=1, help="--load: runs per capture and reader")
    ap.add_argument("--readers", default="scanner,orjson", help="--load: the readers to time (scanner, orjson)")
    ap.add_argument("--load-one", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--reader", default="scanner", choices=sorted(READERS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.load_one:
        return load_one(args.load_one, args.reader)
    if args.load:
        return load_table(args.load, args.repeat, [r for r in args.readers.split(",") if r])
    machine = load_machine()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.capture
        if path is None:
            path = Path(tmp) / "synthetic.json"
            write_capture(synthetic(args.transfers), path)
        base = peak_mib()
        t0, c0 = time.perf_counter(), cpu_seconds()
        cap = read_capture(path)
        t_load, c_load = time.perf_counter() - t0, cpu_seconds() - c0
        load_peak = peak_mib()
        t0 = time.perf_counter()
        cost = program_cost(cap, machine)
        t_cost = time.perf_counter() - t0
        largest = max(cap.phases, key=lambda p: p.n)
        # a copy of the phase: the counters are cached per phase object, and the program above counted this one
        alone = cap.with_phases([dataclasses.replace(largest)])
        t0 = time.perf_counter()
        program_cost(alone, machine)
        t_phase = time.perf_counter() - t0
    n = cap.transfer_count()
    print(f"capture: {path.name if args.capture else f'synthetic, {n:,} transfers in one phase'}")
    print(f"  phases {len(cap.phases)}, transfers {n:,}, largest phase {largest.n:,} transfers, "
          f"file {path.stat().st_size / 2**20 if args.capture else 0:.1f} MiB")
    print(f"  load            {t_load:7.3f} s   (goal ≤ 5 s for 500k transfers; {c_load:.2f} CPU s, compiled "
          f"scanner, peak {load_peak:.0f} MiB)")
    print(f"  cost, program   {t_cost:7.3f} s   (goal ≤ 1 s for 500k transfers)")
    print(f"  cost, largest phase {t_phase * 1e3:7.1f} ms  ({t_phase * 1e3 / RUST_PHASE_MS[1]:.1f}×–"
          f"{t_phase * 1e3 / RUST_PHASE_MS[0]:.1f}× the Rust estimator's 3.6–13.9 ms per phase)")
    print(f"  peak memory     {peak_mib():7.0f} MiB (before load {base:.0f} MiB)")
    print(f"  worst tile {cost.worst_tile()}: {cost.worst_table():,} table bytes, {cost.worst_fragments():,} fragments")


if __name__ == "__main__":
    main()
