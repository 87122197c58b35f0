"""Load + full cost model on a large capture: time and peak memory.

    python benchmarks/bench_cost.py                         # synthetic 586,368-transfer phase
    python benchmarks/bench_cost.py --capture FILE.json.gz   # any capture (e.g. a generated SigLIP program)

Goal (issue 2): load ≤ 5 s and cost ≤ 1 s for 500k transfers on this 2-core machine. The reference compiler's Rust
estimator costs one phase in 3.6–13.9 ms; the ratio is printed.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from placer.capture import read_capture, write_capture
from placer.capture.model import Capture, Phase
from placer.cost.model import program_cost
from placer.machine import load_machine

RUST_PHASE_MS = (3.6, 13.9)


def synthetic(transfers: int, seed: int = 0) -> Capture:
    """One phase shaped like batch-two SigLIP's largest: 32-byte fragments multicast to small replica sets."""
    rng = np.random.default_rng(seed)
    tiles = 1472
    fan = rng.choice([1, 2, 6], size=transfers, p=[0.5, 0.2, 0.3])
    dst = rng.integers(0, tiles, size=int(fan.sum()))
    addr = 0x60000 + 32 * rng.integers(0, 4096, size=int(fan.sum()))
    phase = Phase.build(0, rng.integers(0, tiles, transfers), np.full(transfers, 8), fan, dst, addr,
                        0x50000 + 32 * rng.integers(0, 4096, transfers))
    return Capture(tile_count=tiles, phases=[phase])


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--capture", type=Path)
    ap.add_argument("--transfers", type=int, default=586_368)
    args = ap.parse_args()
    machine = load_machine()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.capture
        if path is None:
            path = Path(tmp) / "synthetic.json"
            write_capture(synthetic(args.transfers), path)
        base = peak_mib()
        t0 = time.perf_counter()
        cap = read_capture(path)
        t_load = time.perf_counter() - t0
        t0 = time.perf_counter()
        cost = program_cost(cap, machine)
        t_cost = time.perf_counter() - t0
        largest = max(cap.phases, key=lambda p: p.n)
        t0 = time.perf_counter()
        program_cost(cap.with_phases([largest]), machine)
        t_phase = time.perf_counter() - t0
    n = cap.transfer_count()
    print(f"capture: {path.name if args.capture else f'synthetic, {n:,} transfers in one phase'}")
    print(f"  phases {len(cap.phases)}, transfers {n:,}, largest phase {largest.n:,} transfers, "
          f"file {path.stat().st_size / 2**20 if args.capture else 0:.1f} MiB")
    print(f"  load            {t_load:7.3f} s   (goal ≤ 5 s for 500k transfers)")
    print(f"  cost, program   {t_cost:7.3f} s   (goal ≤ 1 s for 500k transfers)")
    print(f"  cost, largest phase {t_phase * 1e3:7.1f} ms  ({t_phase * 1e3 / RUST_PHASE_MS[1]:.1f}×–"
          f"{t_phase * 1e3 / RUST_PHASE_MS[0]:.1f}× the Rust estimator's 3.6–13.9 ms per phase)")
    print(f"  peak memory     {peak_mib():7.0f} MiB (before load {base:.0f} MiB)")
    print(f"  worst tile {cost.worst_tile()}: {cost.worst_table():,} table bytes, {cost.worst_fragments():,} fragments")


if __name__ == "__main__":
    main()
