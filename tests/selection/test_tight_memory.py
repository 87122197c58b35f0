"""Relays when tile memory is nearly full (the full-depth case): a relay buffer goes only where its host has free
bytes in that phase, for the production rule and for CP-SAT alike. Checked independently of both: every relay
buffer of every plan lies in its host's free bytes, and the validator passes exactly the plans that fit."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture.headroom import headroom
from placer.capture.model import Allocations, Capture, Phase
from placer.selection.plan import Plan
from placer.selection.select import SelectionSettings, plan_objectives, select
from placer.solver import SolverParams
from placer.validation import validate
from tests.builders import group_phase, relay_capture, short_of_memory, small_machine

M = small_machine(48)
FREE = (0, 0, 64, 256, 512, 2048, 8192)  # bytes left at the top of a tile: many tiles have (almost) none


def _nearly_full(cap: Capture, rng: np.random.Generator) -> tuple[Capture, np.ndarray]:
    """``cap`` with each tile's SRAM taken by one allocation live in every phase, except a random few bytes at the
    top; and per tile, the first free address."""
    free = rng.choice(FREE, size=cap.tile_count)
    return short_of_memory(cap, M, free), min(M.memory.end, M.memory.loader_limit) // 32 * 32 - free


def _buffers_in_free_bytes(plan: Plan, free_from: np.ndarray) -> None:
    top = min(M.memory.end, M.memory.loader_limit)
    for r in plan.relays:
        for host, start, nbytes in zip(r.hosts.tolist(), r.buffers.tolist(), r.scratch_bytes.tolist(), strict=True):
            assert free_from[host] <= start, (r.group.phase, host, start, nbytes)
            assert start + nbytes <= top, (r.group.phase, host, start, nbytes)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), groups=st.integers(1, 3), fragments=st.integers(4, 40),
       replicas=st.integers(2, 4), budget=st.integers(150, 900))
def test_no_relay_buffer_over_live_data(seed: int, groups: int, fragments: int, replicas: int, budget: int) -> None:
    rng = np.random.default_rng(seed)
    cap, free_from = _nearly_full(relay_capture(groups=groups, fragments=fragments, replicas=replicas, phases=2,
                                                seed=seed), rng)
    out = select(cap, M, budget, 16384, SelectionSettings(params=SolverParams(time_limit=5, workers=2, seed=0)))
    for plan in (out.plan, out.greedy):
        _buffers_in_free_bytes(plan, free_from)
        fits = plan_objectives(cap, plan).fits
        report = validate(cap, plan.to_json(cap), M)
        assert report.valid == fits, report.errors[:3]
        if not fits:
            # refused with the tile and the bytes that did not fit
            assert any("tile" in e and "bytes" in e for e in report.errors), report.errors[:3]
        room = headroom(cap, M, plan.buffers())
        assert room is not None
        assert room.free >= 0
        assert room.hosts_free is None or room.hosts_free >= 0


def test_a_full_machine_relays_nothing_and_says_why() -> None:
    # two complete groups (no holes): the rule relays them both when memory allows
    phase = Phase.concat(0, [group_phase(0, [0, 1, 2], [3, 4, 5, 6], 24),
                             group_phase(0, [7, 8, 9], [10, 11, 12, 13], 24, seed=1)])
    cap = Capture(tile_count=48, phases=[phase], allocations=Allocations.empty())
    full, _ = _nearly_full(cap, np.random.default_rng(0))
    full = Capture(tile_count=full.tile_count, phases=full.phases,
                   allocations=Allocations(full.allocations.tile, full.allocations.start,
                                           np.full(len(full.allocations), min(M.memory.end, M.memory.loader_limit)),
                                           full.allocations.first, full.allocations.last, full.allocations.name))
    roomy = select(cap, M, 200, 16384, SelectionSettings(params=SolverParams(time_limit=5, workers=2, seed=0)))
    assert roomy.greedy.relays
    assert roomy.plan.relays  # with memory to spare both relay
    out = select(full, M, 200, 16384, SelectionSettings(params=SolverParams(time_limit=5, workers=2, seed=0)))
    assert not out.greedy.relays
    assert not out.plan.relays
    # the rule chooses its hosts without looking at memory, as the reference does, and accepts the phase; its
    # buffers then fail to place -- the reference's allocation failure -- so its plan cannot be built, and the
    # decision says so with the tile and the bytes
    why = [d for d in out.decisions if d.accepted and not d.built]
    assert why, [d.detail for d in why]
    assert all(d.placement and all("has insufficient Standard SRAM for" in p for p in d.placement)
               for d in why), [d.detail for d in why]
