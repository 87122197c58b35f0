"""The reference timing loop (``placer.refschedule.reference.materialize``) compiled and in Python (its test oracle,
``_materialize_python``), on real phases: both times, their ratio, and whether the two schedules are identical
(every array, and the horizon).

    placer generate siglip-so400m --batch 2 -o /tmp/siglip-b2.json.gz
    python benchmarks/bench_materialize.py /tmp/siglip-b2.json.gz 16,50 [--tiles 1472] [--repeat 1]

Each phase is timed in its B1024 order (``reference_order``), the order the search starts from, and each time is
the whole call: Python (best of ``--repeat``), compiled on a phase seen for the first time (its numpy preparation
included) and compiled again (best of ``--repeat``; the phase's order-free arrays are kept between calls, as in an
order search). Exit 1 if any schedule differs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np

from placer.capture.io import read_capture
from placer.machine import load_machine
from placer.refschedule import reference
from placer.refschedule.reference import ReferenceSchedule, materialize, reference_order
from placer.streams.dependencies import transfer_dependencies, transfer_levels

FIELDS = ("order", "tx_start", "rx_start", "cutover", "carries", "tile_horizon")


def identical(a: ReferenceSchedule, b: ReferenceSchedule) -> bool:
    return a.horizon == b.horizon and all(
        getattr(a, f).dtype == getattr(b, f).dtype and np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELDS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("capture", type=Path)
    ap.add_argument("phases", help="comma-separated phase ids, e.g. 16,50")
    ap.add_argument("--tiles", type=int, default=1472)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    capture = read_capture(args.capture)
    machine = load_machine()
    same_all = True
    for pid in (int(p) for p in args.phases.split(",")):
        phase = capture.phase_by_id(pid)
        deps = transfer_dependencies(phase)
        order = reference_order(phase, transfer_levels(phase.n, deps), tiles=args.tiles)
        timed: dict[str, tuple[float, ReferenceSchedule]] = {}
        # compiled twice: the first call prepares the phase's order-free arrays, later calls (an order search's)
        # reuse them; what the Python loop (the test oracle) kept of the phase (its plan, the hazard pairs) is
        # forgotten before the first
        for label, loop in (("python", reference._materialize_python), ("compiled", materialize),
                            ("again", materialize)):
            if label == "compiled":
                vars(reference._SLOTS).clear()
            for _ in range(args.repeat if label != "compiled" else 1):
                t0 = time.perf_counter()
                schedule = loop(phase, order, deps, machine, args.tiles)
                took = time.perf_counter() - t0
                if label not in timed or took < timed[label][0]:
                    timed[label] = (took, schedule)
        python, compiled, again = timed["python"], timed["compiled"], timed["again"]
        same = identical(python[1], compiled[1]) and identical(python[1], again[1])
        same_all &= same
        receivers = float(np.diff(phase.dst_ptr).mean())
        print(f"phase {pid}: {phase.n:,} transfers x {receivers:.1f} receivers, horizon {python[1].horizon:,}: "
              f"python {python[0]:.2f} s, compiled {compiled[0]:.2f} s (ratio {python[0] / compiled[0]:.1f}), "
              f"prepared {again[0]:.3f} s (ratio {python[0] / again[0]:.0f}), {'identical' if same else 'DIFFERENT'}")
    sys.exit(0 if same_all else 1)


if __name__ == "__main__":
    main()
