"""Regenerate examples/relay-demo.json: a small program whose replicated operands overflow a 700-byte table budget.

Two phases, each with four replica groups of 48 fragments on disjoint tiles (one of them unbalanced), one Repeat
over both phases, a live allocation per tile. The phases' padding holes differ, so their rows are not the same
instructions and no tile can share one table between them (BRIEF §3). The production rule cannot lower the worst
tile (its groups tie), so the greedy plan does not fit; CP-SAT finds one that does.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from placer.capture import write_capture
from placer.capture.model import Allocations, Capture, Phase, Repeat


def group(phase_id: int, replicas: list[int], senders: list[int], fragments: int, holes: set[int],
          base: int) -> Phase:
    src, dst_tile, dst_addr, src_addr = [], [], [], []
    for j in range(fragments):
        if j in holes:
            continue
        s = senders[j % len(senders)]
        src.append(s)
        src_addr.append(0x50000 + 32 * (j // len(senders)))
        for i, r in enumerate(replicas):
            dst_tile.append(r)
            dst_addr.append(base + 0x1000 * i + 32 * j)
    n = len(src)
    return Phase.build(phase_id, src, [8] * n, [len(replicas)] * n, dst_tile, dst_addr, src_addr)


def demo() -> Capture:
    phases = []
    for pid in (0, 1):
        parts = []
        for g in range(4):
            first = 8 * g
            parts.append(group(pid, list(range(first, first + 4)), list(range(first + 4, first + 8)),
                               48 + 8 * (g == 0), {5 + 2 * pid, 17 + 2 * pid}, 0x60000 + 0x8000 * pid))
        phases.append(Phase.concat(pid, parts))
    tiles = 48
    alloc = Allocations(
        tile=np.arange(tiles, dtype=np.int32),
        start=np.full(tiles, 0x50000, np.int64),
        end=np.full(tiles, 0x58000, np.int64),
        first=np.zeros(tiles, np.int64),
        last=np.ones(tiles, np.int64),
        name=["weights"] * tiles,
    )
    return Capture(tile_count=tiles, phases=phases, phase_labels={0: "activations A", 1: "activations B"},
                   repeat=Repeat((0, 1), 2), allocations=alloc)


if __name__ == "__main__":
    write_capture(demo(), Path(__file__).with_name("relay-demo.json"))
