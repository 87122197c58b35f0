"""The production relay rule (docs/reference.md §5): hand-built phases per verdict; properties on random captures."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from placer.alternatives.groups import DUPLICATE_TILE, OVERLAP, SKEWED, scan_phase
from placer.capture.model import PAIRED64, Allocations, Capture, PanelHint, Phase
from placer.cost.model import tile_counters
from placer.selection.greedy import (
    ACCEPTED,
    CYCLES_ROSE,
    INCOMPLETE_PANEL,
    INELIGIBLE_TRANSFER,
    NO_ELIGIBLE_GROUP,
    NO_HOST,
    NO_MULTICAST,
    PANELS_OUTNUMBER_TILES,
    RECEIVE_THEN_FORWARD,
    ROWS_NOT_LOWER,
    Decision,
    production_plan,
    reads_a_destination,
)
from placer.selection.plan import Plan
from tests.builders import group_phase, small_machine

M = small_machine(48)
BUDGET, LIMIT = 81920, 16384


def rule(cap: Capture, machine=M) -> tuple[Plan, list[Decision]]:  # type: ignore[no-untyped-def]
    return production_plan(cap, machine, BUDGET, LIMIT)


def heavy_group(phase: int = 0, replicas: tuple[int, ...] = (0, 1, 2, 3), senders: tuple[int, ...] = (4, 5, 6, 7),
                fragments: int = 64, **kw: object) -> Phase:
    """A replicated operand in 16 native panels of 4 fragments (one per sender): relaying it pays."""
    return group_phase(phase, list(replicas), list(senders), fragments, **kw)  # type: ignore[arg-type]


def test_accepts_when_cycles_hold_and_rows_fall_strictly() -> None:
    cap = Capture(tile_count=48, phases=[heavy_group()])
    plan, [d] = rule(cap)
    assert d.reason == ACCEPTED and d.accepted
    assert d.relays == 16 and len(plan.relays) == 1
    # hosts: the highest-numbered tiles, one per panel, in panel order
    assert plan.relays[0].hosts.tolist() == list(range(47, 31, -1))
    after = tile_counters(plan.rewritten(cap).phases[0], M, 48)
    scratch = np.zeros(48, np.int64)
    scratch[plan.relays[0].hosts] = plan.relays[0].scratch_bytes
    assert d.rows_after == int((after.table_bytes + scratch).max()) < d.rows_before
    assert d.cycles_after == after.cycles <= d.cycles_before
    assert d.scratch == 16 * 4 * 32  # scratch = panel bytes, no rounding


def test_every_group_relayed_hosts_by_sorted_destination_set() -> None:
    # listed first: the group on tiles 20..23; but the group on tiles 0..3 sorts first and takes the top tiles
    late = heavy_group(0, (20, 21, 22, 23), (24, 25, 26, 27), 32)
    early = heavy_group(0, (0, 1, 2, 3), (4, 5, 6, 7), 32)
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [late, early])])
    plan, [d] = rule(cap)
    assert d.accepted and sorted(d.groups) == [0, 1]
    by_replicas = {tuple(r.group.replicas.tolist()): r.hosts.tolist() for r in plan.relays}
    assert by_replicas[(0, 1, 2, 3)] == list(range(47, 39, -1))
    assert by_replicas[(20, 21, 22, 23)] == list(range(39, 31, -1))


def test_small_group_vetoes_the_whole_phase() -> None:
    # a one-fragment broadcast beside the heavy group: its relay's scratch (a 4 KiB panel) outweighs every row the
    # heavy group saves, so nothing in the phase is relayed -- all or nothing
    broadcast = Phase.build(0, [10], [1024], [2], [11, 12], [0x60000, 0x60000], [0x50000])
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [heavy_group(), broadcast])])
    plan, [d] = rule(cap)
    assert d.reason == ROWS_NOT_LOWER and len(d.groups) == 2
    assert d.rows_after is not None and d.rows_after >= 4096
    assert not plan.relays


def test_no_multicast_and_no_eligible_group() -> None:
    unicast = Phase.build(0, [1], [8], [1], [2], [0x60000], [0x50000])
    # the only group's operand has no native panels (a group-level rejection): it stays direct, nothing is left
    unsplit = PanelHint(1, (0, 1, 2, 3), (), "w", splits=False)
    cap = Capture(tile_count=48, phases=[unicast, heavy_group(1, fragments=8)], panels=[unsplit])
    plan, decisions = rule(cap)
    assert [d.reason for d in decisions] == [NO_MULTICAST, NO_ELIGIBLE_GROUP]
    assert decisions[1].direct_groups == 1 and not plan.relays


def _skew(g: Phase) -> Phase:
    g.dst_addr[g.dst_ptr[2] + 1] += 4  # transfer 2 lands 4 bytes further on its second replica than on the others
    return g


def _overlap(g: Phase) -> Phase:
    g.dst_addr[g.dst_ptr[3]: g.dst_ptr[4]] -= 4  # transfer 3 starts inside transfer 2, on every replica
    return g


def _duplicate(g: Phase) -> Phase:
    g.dst_tile[g.dst_ptr[:-1] + 1] = g.dst_tile[g.dst_ptr[:-1]]  # every transfer names its first replica twice
    return g


@pytest.mark.parametrize(("spoil", "why"), [(_skew, SKEWED), (_overlap, OVERLAP), (_duplicate, DUPLICATE_TILE)])
def test_transfer_level_rejection_keeps_the_whole_phase_direct(spoil: Callable[[Phase], Phase], why: str) -> None:
    # the reference drops (or double-counts) the offending transfer, so its group's panels miss (or exceed) bytes
    # and it abandons the phase's candidate: the healthy group beside it is not relayed either
    healthy = heavy_group(0, (8, 9, 10, 11), (12, 13, 14, 15))
    spoilt = spoil(heavy_group())
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [spoilt, healthy])])
    assert [r.reason for r in scan_phase(cap.phases[0], gainful_only=False).rejected] == [why]
    plan, [d] = rule(cap)
    assert d.reason == INELIGIBLE_TRANSFER and not plan.relays
    assert d.detail.startswith(f"group 0: {why}") and d.direct_groups == 1 and d.groups == (1,)
    # without the spoilt group the healthy one is relayed
    _, [alone] = rule(Capture(tile_count=48, phases=[healthy]))
    assert alone.accepted


def test_receive_then_forward_phase_is_skipped() -> None:
    g = heavy_group()
    # tile 8 receives at 0x61000 and another transfer reads that address on tile 8 in the same phase
    fwd = Phase.build(0, [9, 8], [4, 4], [1, 1], [8, 40], [0x61000, 0x61000], [0x50000, 0x61008])
    assert reads_a_destination(fwd) == (8, 0x61008)
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [g, fwd])])
    plan, [d] = rule(cap)
    assert d.reason == RECEIVE_THEN_FORWARD and "tile 8" in d.detail and not plan.relays
    # reading right after the written range is no overlap
    apart = Phase.build(0, [9, 8], [4, 4], [1, 1], [8, 40], [0x61000, 0x61000], [0x50000, 0x61010])
    assert reads_a_destination(apart) is None


def _allocs(*rows: tuple[int, int, int, int, int]) -> Allocations:
    tile, start, end, first, last = (np.array(c, np.int64) for c in zip(*rows, strict=True))
    return Allocations(tile.astype(np.int32), start, end, first, last, [""] * len(rows))


def test_receive_then_forward_is_per_allocation_when_allocations_are_known() -> None:
    # tile 8 writes [0x61000, 0x61010) and reads [0x61010, 0x61020): no byte in common, one allocation in common
    apart = Phase.build(0, [9, 8], [4, 4], [1, 1], [8, 40], [0x61000, 0x61000], [0x50000, 0x61010])
    one = _allocs((8, 0x61000, 0x62000, 0, 0))
    assert reads_a_destination(apart, one) == (8, 0x61010)
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [heavy_group(), apart])], allocations=one)
    plan, [d] = rule(cap)
    assert d.reason == RECEIVE_THEN_FORWARD and "allocation" in d.detail and not plan.relays
    # two allocations meeting at 0x61010, the same allocation on another tile, or one not live in the phase:
    # the written and the read bytes are apart, so is everything else
    assert reads_a_destination(apart, _allocs((8, 0x61000, 0x61010, 0, 0), (8, 0x61010, 0x62000, 0, 0))) is None
    assert reads_a_destination(apart, _allocs((7, 0x61000, 0x62000, 0, 0))) is None
    assert reads_a_destination(apart, _allocs((8, 0x61000, 0x62000, 1, 3))) is None
    # a read in no allocation still meets a written byte
    fwd = Phase.build(0, [9, 8], [4, 4], [1, 1], [8, 40], [0x61000, 0x61000], [0x50000, 0x61008])
    assert reads_a_destination(fwd, _allocs((8, 0x70000, 0x71000, 0, 0))) == (8, 0x61008)


def test_incomplete_panel_keeps_the_phase_direct() -> None:
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [heavy_group(holes=(5,)), heavy_group(
        0, (8, 9, 10, 11), (12, 13, 14, 15))])])
    plan, [d] = rule(cap)
    assert d.reason == INCOMPLETE_PANEL and "panel 1" in d.detail and not plan.relays
    # a panel hint whose panel runs past the data is incomplete too
    g = heavy_group(fragments=8, senders=(4, 5))
    hint = PanelHint(0, (0, 1, 2, 3), (0, 64, 128, 256, 320))
    plan, [d] = rule(Capture(tile_count=48, phases=[g], panels=[hint]))
    assert d.reason == INCOMPLETE_PANEL


def test_group_not_splitting_into_its_panels_stays_direct_alone() -> None:
    # the hint cuts group (8..11) inside a fragment: that group stays direct, the other is still relayed
    other = heavy_group(0, (8, 9, 10, 11), (12, 13, 14, 15), 8)
    hint = PanelHint(0, (8, 9, 10, 11), (0, 48, 256))
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [heavy_group(), other])], panels=[hint])
    plan, [d] = rule(cap)
    assert d.accepted and d.direct_groups == 1 and "crosses the panel boundary at offset 48" in d.direct_reasons[0]
    assert [r.group.replicas.tolist() for r in plan.relays] == [[0, 1, 2, 3]]


def test_no_host_and_panels_outnumber_tiles() -> None:
    small = small_machine(12)
    # 8 tiles take part, 4 are free, the operand has 16 panels: more panels than tiles? no (16 > 12 yes)
    cap = Capture(tile_count=12, phases=[heavy_group()])
    _, [d] = rule(cap, small)
    assert d.reason == PANELS_OUTNUMBER_TILES
    # 8 panels on 12 tiles, only 4 of which are neither replica nor sender
    cap = Capture(tile_count=12, phases=[heavy_group(fragments=32)])
    plan, [d] = rule(cap, small)
    assert d.reason == NO_HOST and "panel 4" in d.detail and not plan.relays


def test_full_tile_passed_over_and_said() -> None:
    mem = M.memory
    top = min(mem.end, mem.loader_limit)
    alloc = Allocations(np.array([47], np.int32), np.array([mem.base], np.int64), np.array([top], np.int64),
                        np.array([0], np.int64), np.array([0], np.int64), ["full"])
    cap = Capture(tile_count=48, phases=[heavy_group()], allocations=alloc)
    plan, [d] = rule(cap)
    assert d.accepted and d.skipped_hosts == 1 and "47" in d.detail
    assert 47 not in plan.relays[0].hosts.tolist() and plan.relays[0].hosts[0] == 46


def test_cycles_rise_rejects_even_when_rows_fall() -> None:
    # tile 47, the first host, already receives the phase's heaviest load: its panel pushes the phase's cycles up
    busy = Phase.build(0, [40], [1000], [1], [47], [0x68000], [0x50000])
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [heavy_group(), busy])])
    plan, [d] = rule(cap)
    assert d.reason == CYCLES_ROSE and not plan.relays
    assert d.cycles_after is not None and d.cycles_after > d.cycles_before
    assert d.rows_after is not None and d.rows_after < d.rows_before


def test_paired64_multicasts_are_estimated_on_the_source_lane_alone() -> None:
    # Paired64 multicasts from tiles 4, 6, 8, 10 (partners 5, 7, 9, 11 send nothing) and 1,900 B more from tile 4.
    # The reference's estimate charges a Paired64 transfer's bytes to its source (no width term), so the Word32
    # gathers that replace the multicasts load tile 4 exactly as much as before: cycles hold and the phase is
    # relayed. Charging half of each multicast to the partner lane would make the gathers look like a rise.
    g = heavy_group(senders=(4, 6, 8, 10))
    g.width[:] = PAIRED64
    unicast = Phase.build(0, [4], [475], [1], [30], [0x68000], [0x58000])
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [g, unicast])])
    plan, [d] = rule(cap)
    assert d.reason == ACCEPTED and d.cycles_after == d.cycles_before and len(plan.relays) == 1
    assert tile_counters(cap.phases[0], M, 48).tx_bytes[[4, 5]].tolist() == [16 * 32 + 1900, 0]


# -- properties on random small captures -----------------------------------------------------------------------


@st.composite
def captures(draw: st.DrawFn) -> Capture:
    """1-3 phases, each with 1-3 replica groups on disjoint tiles (some with holes, some with few fragments, a few
    not coordinate-preserving), maybe unicast traffic, maybe a receive-then-forward pair, on 48 tiles with the top
    ones free."""
    phases = []
    for pid in range(draw(st.integers(1, 3))):
        parts = []
        first = 0
        for _ in range(draw(st.integers(1, 3))):
            replicas = draw(st.integers(2, 4))
            senders = draw(st.integers(1, 4))
            fragments = draw(st.integers(1, 40))
            holes = (draw(st.integers(0, fragments - 1)),) if fragments > 2 and draw(st.integers(0, 4)) == 0 else ()
            g = group_phase(pid, list(range(first, first + replicas)),
                            list(range(first + replicas, first + replicas + senders)), fragments,
                            frag_words=draw(st.sampled_from([4, 8, 64])), holes=holes,
                            interleave=draw(st.booleans()), seed=draw(st.integers(0, 99)))
            if fragments > 3 and draw(st.integers(0, 7)) == 0:
                _skew(g)
            parts.append(g)
            first += replicas + senders
        if draw(st.booleans()):
            parts.append(Phase.build(pid, [first], [draw(st.integers(1, 300))], [1], [first + 1], [0x68000],
                                     [0x50000]))
        if draw(st.integers(0, 5)) == 0:
            parts.append(Phase.build(pid, [first + 2, first + 3], [4, 4], [1, 1], [first + 3, first + 4],
                                     [0x61000, 0x62000], [0x50000, 0x61000]))
        phases.append(Phase.concat(pid, parts))
    return Capture(tile_count=48, phases=phases, allocations=Allocations.empty())


def _kept_groups(phase: Phase) -> set[int]:
    return {g.index for g in scan_phase(phase, gainful_only=False).groups}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cap=captures())
def test_rule_properties(cap: Capture) -> None:
    from placer.validation import validate

    plan, decisions = rule(cap)
    rewritten = plan.rewritten(cap)
    assert [d.phase for d in decisions] == cap.phase_ids()
    for phase, new, d in zip(cap.phases, rewritten.phases, decisions, strict=True):
        relayed = {r.group.index for r in plan.relays if r.group.phase == phase.phase}
        event(d.reason)
        if any(r.transfer_level for r in scan_phase(phase, gainful_only=False).rejected):
            assert not d.accepted and d.reason in (INELIGIBLE_TRANSFER, RECEIVE_THEN_FORWARD)
        if not d.accepted:
            # a rejected phase is byte-identical to the input
            assert not relayed and new.equals(phase)
            continue
        # accepted only when both conditions hold, on figures recomputed from the rewritten phase
        before = tile_counters(phase, M, cap.tile_count)
        after = tile_counters(new, M, cap.tile_count)
        scratch = np.zeros(cap.tile_count, np.int64)
        for r in plan.relays:
            if r.group.phase == phase.phase:
                np.add.at(scratch, r.hosts, r.scratch_bytes)
        assert after.cycles <= before.cycles == d.cycles_before and after.cycles == d.cycles_after
        assert int((after.table_bytes + scratch).max()) == d.rows_after < d.rows_before == before.worst_table()
        # never splits a phase: every kept group is relayed, at its native panels, on distinct eligible hosts
        assert relayed == set(d.groups) == _kept_groups(phase)
        hosts = [t for r in plan.relays if r.group.phase == phase.phase for t in r.hosts.tolist()]
        assert len(hosts) == len(set(hosts))
        for r in plan.relays:
            if r.group.phase == phase.phase:
                assert not set(r.hosts.tolist()) & (set(r.group.replicas.tolist()) | set(r.group.sources.tolist()))
                assert r.scratch_bytes.sum() == r.group.extent == r.group.covered_bytes
    if plan.relays:
        report = validate(cap, plan.to_json(cap), M)
        assert report.valid, report.errors[:5]


def test_solve_greedy_reports_every_phase_decision(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """`placer solve --mode greedy --json --schedule`: one decision per phase, the horizons of accepted phases."""
    import json
    import subprocess
    import sys

    from placer.capture import write_capture

    unicast = Phase.build(1, [1], [8], [1], [2], [0x60000], [0x50000])
    path = tmp_path / "cap.json"
    write_capture(Capture(tile_count=48, phases=[heavy_group(), unicast], allocations=Allocations.empty()), path)
    res = subprocess.run([sys.executable, "-m", "placer.cli", "solve", str(path), "--mode", "greedy", "--json",
                          "--schedule"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    rule_doc = json.loads(res.stdout)["production_rule"]
    first, second = rule_doc["decisions"]
    assert first["accepted"] and first["reason"] == ACCEPTED and first["relays"] == 16
    assert first["rows_after"] < first["rows_before"] and first["cycles_after"] <= first["cycles_before"]
    assert second["reason"] == NO_MULTICAST and second["cycles_after"] is None
    [changed] = json.loads(res.stdout)["schedule"]["changed_phases"]
    assert changed["phase"] == 0 and changed["direct"]["b1024"] > 0 and changed["production_rule"]["b1024"] > 0
