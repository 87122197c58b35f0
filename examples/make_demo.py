"""Regenerate examples/relay-demo.json: a small program whose replicated operands overflow a 640-byte table budget.

Two phases on 80 tiles, one Repeat over both. Each phase has four replica groups (4 replicas, 4 senders, 64
fragments of 32 bytes; one group 72) on disjoint tiles, and one 1,000-word transfer between two other tiles,
which sets the phase's length: the groups' relays have room in its schedule. Phase 0's groups are complete, with
8 native panels each (panel hints): the production rule relays the phase and the program fits 700 B but not 640 B.
Phase 1's groups have two padding holes each (so the two phases' rows differ and no tile shares one table between
them): the rule leaves the phase direct ("incomplete panel"). placer relays both phases with fewer segments, and
the plan is half the rule's size at the same scheduled cycles.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from placer.capture import write_capture
from placer.capture.model import Allocations, Capture, PanelHint, Phase, Repeat

TILES = 80
FRAGMENTS = 64
PANELS = 8
LONG_WORDS = 1000  # the transfer that sets each phase's length


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
    phases, panels = [], []
    for pid in (0, 1):
        parts = []
        for g in range(4):
            first = 8 * g
            replicas = list(range(first, first + 4))
            fragments = FRAGMENTS + 8 * (g == 0)
            holes = set() if pid == 0 else {5, 17}
            parts.append(group(pid, replicas, list(range(first + 4, first + 8)), fragments, holes,
                               0x60000 + 0x8000 * pid))
            if pid == 0:
                step = fragments * 32 // PANELS
                panels.append(PanelHint(pid, tuple(replicas), tuple(range(0, fragments * 32 + 1, step))))
        parts.append(Phase.build(pid, [32], [LONG_WORDS], [1], [33], [0x70000 + 0x4000 * pid], [0x50000]))
        phases.append(Phase.concat(pid, parts))
    alloc = Allocations(
        tile=np.arange(TILES, dtype=np.int32),
        start=np.full(TILES, 0x50000, np.int64),
        end=np.full(TILES, 0x58000, np.int64),
        first=np.zeros(TILES, np.int64),
        last=np.ones(TILES, np.int64),
        name=["weights"] * TILES,
    )
    return Capture(tile_count=TILES, phases=phases, phase_labels={0: "activations A", 1: "activations B"},
                   repeat=Repeat((0, 1), 2), allocations=alloc, panels=panels)


if __name__ == "__main__":
    write_capture(demo(), Path(__file__).with_name("relay-demo.json"))
