"""Validator timing on a synthetic MLP-down-like phase (~197k transfers, 240 groups x 6 replicas).

    PYTHONPATH=. python benchmarks/bench_validate.py [--groups 240]   (or after pip install -e .)

Times three plans: the empty plan (untouched phases are only recounted), an identity rewrite of the whole
phase
(forces the full symbolic replay of ~1.2M destination intervals) and a relay of every group (one segment
each).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from placer.capture.model import Capture, Phase
from placer.machine import load_machine
from placer.validation import validate
from placer.validation.plan import bind_plan, parse_plan

M = 6  # replicas per group
SLOTS = 940  # 32-byte slots per replica extent; every 8th is a padding hole
BASE, BUFFER, SOURCE = 0x50000, 0x60000, 0x80000


def build(groups: int) -> tuple[Capture, dict[str, Any], dict[str, Any], dict[str, Any]]:
    slots = np.arange(SLOTS)
    slots = slots[slots % 8 != 7]
    g = np.repeat(np.arange(groups), len(slots))
    k = np.tile(slots, groups)
    n = len(g)
    src = M * ((g + 5) % groups) + k % M
    src_addr = SOURCE + 32 * k
    dst_tile = (M * g)[:, None] + np.arange(M)[None, :]
    dst_addr = np.broadcast_to((BASE + 32 * k)[:, None], (n, M))
    phase = Phase.build(
        0, src, np.full(n, 8), np.full(n, M), dst_tile.reshape(-1), dst_addr.reshape(-1), src_addr
    )
    capture = Capture(tile_count=1472, phases=[phase])

    def js(s: int, a: int, dsts: list[tuple[int, int]], words: int) -> dict[str, Any]:
        return {
            "source": s,
            "source_addresses": [a],
            "destinations": [{"tile": t, "address": x} for t, x in dsts],
            "words": words,
            "width": "Word32",
        }

    head = {"plan_version": 1, "kind": "placer-plan", "budget": {"table_bytes": 81920, "fragments": 16384}}
    empty = {**head, "relays": [], "delta": []}
    rows = list(zip(src.tolist(), src_addr.tolist(), g.tolist(), k.tolist(), strict=True))
    identity = {
        **head,
        "delta": [
            {
                "phase": 0,
                "remove": list(range(n)),
                "append": [
                    js(s, a, [(M * gg + i, BASE + 32 * kk) for i in range(M)], 8) for s, a, gg, kk in rows
                ],
            }
        ],
    }
    gathers = [js(s, a, [(M * ((gg + 1) % groups), BUFFER + 32 * kk)], 8) for s, a, gg, kk in rows]
    forwards, relays = [], []
    for gg in range(groups):
        relay_tile = M * ((gg + 1) % groups)
        for start in range(0, SLOTS, 8):  # runs of 7 covered slots between holes
            length = min(7, SLOTS - start)
            forwards.append(
                js(
                    relay_tile,
                    BUFFER + 32 * start,
                    [(M * gg + i, BASE + 32 * start) for i in range(M)],
                    8 * length,
                )
            )
        relays.append(
            {
                "phase": 0,
                "group": gg,
                "variant": "direct-receive",
                "replicas": list(range(M * gg, M * gg + M)),
                "bases": [BASE] * M,
                "extent": 32 * SLOTS,
                "segments": [
                    {"start": 0, "end": 32 * SLOTS, "tile": relay_tile, "buffer": BUFFER, "phase": 0}
                ],
            }
        )
    relay = {
        **head,
        "relays": relays,
        "delta": [{"phase": 0, "remove": list(range(n)), "append": gathers + forwards}],
    }
    return capture, empty, identity, relay


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=240)
    args = ap.parse_args()
    machine = load_machine("ipu21")
    t0 = time.perf_counter()
    capture, *plans = build(args.groups)
    print(f"built {capture.transfer_count():,} transfers in {time.perf_counter() - t0:.2f} s")
    for name, doc in zip(("empty", "identity", "relay"), plans, strict=True):
        t0 = time.perf_counter()
        plan = parse_plan(doc)
        bind_plan(plan, capture)
        t1 = time.perf_counter()
        report = validate(capture, plan, machine)
        t2 = time.perf_counter()
        print(f"{name:9s} parse {t1 - t0:6.2f} s  validate {t2 - t1:6.2f} s  -> {report.lines(3)[0]}")


if __name__ == "__main__":
    main()
