"""Hand-built captures and plans for the validator tests, written from docs/plan.md and docs/reference.md §4 only."""

from __future__ import annotations

import copy
from typing import Any

from placer.capture.io import capture_from_json
from placer.capture.model import Capture

REPLICAS = [10, 11, 12, 13]
BASES = [0x50000, 0x50000, 0x50100, 0x50000]
EXTENT = 288
GROUP_PHASE = 1
# (offset, bytes, source tile, source addresses): a padding hole at [96, 128) and a trailing one at [256,
# 288);
# the fragment at 128 is read from a different address in each of the two Repeat iterations
FRAGMENTS = [
    (0, 32, 1, [0x60000]),
    (32, 32, 2, [0x60000]),
    (64, 32, 1, [0x60020]),
    (128, 32, 3, [0x61000, 0x62000]),
    (160, 64, 2, [0x60040]),
    (224, 32, 1, [0x60040]),
]
# relay segments: [start, end) -> (tile, buffer)
SEGMENTS = [(0, 128, 30, 0x58000), (128, 288, 31, 0x58000)]


def transfer(src: int, addrs: list[int], dsts: list[tuple[int, int]], nbytes: int) -> dict[str, Any]:
    return {
        "source": src,
        "source_addresses": list(addrs),
        "destinations": [{"tile": t, "address": a} for t, a in dsts],
        "words": nbytes // 4,
        "width": "Word32",
    }


def capture_doc() -> dict[str, Any]:
    group = [
        transfer(src, addrs, [(t, b + off) for t, b in zip(REPLICAS, BASES, strict=True)], n)
        for off, n, src, addrs in FRAGMENTS
    ]
    other = [
        transfer(30, [0x60000], [(40, 0x60000)], 32),  # the relay tile 30 reads [0x60000, 0x60020)
        transfer(5, [0x50000], [(31, 0x59000)], 64),  # the relay tile 31 is written at [0x59000, 0x59040)
        transfer(6, [0x50000], [(7, 0x50000), (8, 0x50000)], 512),  # a long multicast (128 words)
    ]
    # interleave the group with the other traffic so indices are not trivially contiguous
    phase1 = [other[0], group[0], group[1], other[1], group[2], group[3], group[4], other[2], group[5]]
    return {
        "schema_version": 1,
        "tile_count": 64,
        "phases": [
            {"phase": 0, "transfers": [transfer(20, [0x50000], [(21, 0x60000)], 64)]},
            {"phase": GROUP_PHASE, "transfers": phase1},
            {"phase": 2, "transfers": [transfer(21, [0x60000], [(20, 0x50000)], 64)]},
        ],
        "placer": {
            "version": 1,
            "repeat": {"phases": [1, 2], "iterations": 2},
            "allocations": [
                {"tile": 30, "start": 0x70000, "end": 0x71000, "first": 0, "last": 2, "name": "act30"},
                {"tile": 31, "start": 0x58000, "end": 0x58100, "first": 2, "last": 2, "name": "later31"},
            ],
        },
    }


def make_capture() -> Capture:
    return capture_from_json(capture_doc(), "<test>")


def group_indices() -> list[int]:
    """Indices of the group's fragments in the original phase, in fragment order."""
    return [1, 2, 4, 5, 6, 8]


def empty_plan() -> dict[str, Any]:
    return {
        "plan_version": 1,
        "kind": "placer-plan",
        "mode": "greedy",
        "machine": "ipu21",
        "budget": {"table_bytes": 81920, "fragments": 16384},
        "relays": [],
        "delta": [],
    }


def relay_plan(segments: list[tuple[int, int, int, int]] = SEGMENTS, max_words: int = 4148) -> dict[str, Any]:
    """The direct-receive relay of docs/reference.md §4: gathers at buffer + (offset - start), then forwards of every
    maximal covered interval of each segment to every replica at base + offset, cut at ``max_words``."""
    gathers, forwards = [], []
    for start, end, tile, buf in segments:
        mine = [f for f in FRAGMENTS if start <= f[0] < end]
        for off, n, src, addrs in mine:
            gathers.append(transfer(src, addrs, [(tile, buf + off - start)], n))
        runs: list[list[int]] = []
        for off, n, _, _ in mine:
            if runs and runs[-1][1] == off:
                runs[-1][1] = off + n
            else:
                runs.append([off, off + n])
        for a, b in runs:
            for c in range(a, b, 4 * max_words):
                d = min(b, c + 4 * max_words)
                forwards.append(
                    transfer(
                        tile,
                        [buf + c - start],
                        [(t, base + c) for t, base in zip(REPLICAS, BASES, strict=True)],
                        d - c,
                    )
                )
    plan = empty_plan()
    plan["relays"] = [
        {
            "phase": GROUP_PHASE,
            "group": 0,
            "variant": "direct-receive",
            "replicas": REPLICAS,
            "bases": BASES,
            "extent": EXTENT,
            "segments": [
                {"start": s, "end": e, "tile": t, "buffer": b, "phase": GROUP_PHASE}
                for s, e, t, b in segments
            ],
        }
    ]
    plan["delta"] = [{"phase": GROUP_PHASE, "remove": group_indices(), "append": gathers + forwards}]
    return plan


def n_gathers(plan: dict[str, Any]) -> int:
    relay_tiles = {s["tile"] for r in plan["relays"] for s in r["segments"]}
    return sum(1 for t in plan["delta"][0]["append"] if t["source"] not in relay_tiles)


def clone(plan: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(plan)
