"""The production relay rule (docs/reference.md §5): hand-built phases per verdict; properties on random captures."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from placer.alternatives.groups import DUPLICATE_TILE, SKEWED, scan_buffers
from placer.capture.model import PAIRED64, Allocations, Capture, PanelHint, Phase
from placer.cost.model import tile_counters
from placer.selection.greedy import (
    ACCEPTED,
    CYCLES_ROSE,
    INCOMPLETE_PANEL,
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
    assert d.reason == ACCEPTED
    assert d.accepted
    assert d.relays == 16
    assert len(plan.relays) == 1
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
    assert d.accepted
    assert sorted(d.groups) == [0, 1]
    by_replicas = {tuple(r.group.replicas.tolist()): r.hosts.tolist() for r in plan.relays}
    assert by_replicas[(0, 1, 2, 3)] == list(range(47, 39, -1))
    assert by_replicas[(20, 21, 22, 23)] == list(range(39, 31, -1))


def test_small_group_vetoes_the_whole_phase() -> None:
    # a one-fragment broadcast beside the heavy group: its relay's scratch (a 4 KiB panel) outweighs every row the
    # heavy group saves, so nothing in the phase is relayed -- all or nothing
    broadcast = Phase.build(0, [10], [1024], [2], [11, 12], [0x60000, 0x60000], [0x50000])
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [heavy_group(), broadcast])])
    plan, [d] = rule(cap)
    assert d.reason == ROWS_NOT_LOWER
    assert len(d.groups) == 2
    assert d.rows_after is not None
    assert d.rows_after >= 4096
    assert not plan.relays


def test_no_multicast_and_no_eligible_group() -> None:
    unicast = Phase.build(0, [1], [8], [1], [2], [0x60000], [0x50000])
    # the only group's operand has no native panels (a group-level rejection): it stays direct, nothing is left
    unsplit = PanelHint(1, (0, 1, 2, 3), (), "w", splits=False)
    cap = Capture(tile_count=48, phases=[unicast, heavy_group(1, fragments=8)], panels=[unsplit])
    plan, decisions = rule(cap)
    assert [d.reason for d in decisions] == [NO_MULTICAST, NO_ELIGIBLE_GROUP]
    assert decisions[1].direct_groups == 1
    assert not plan.relays


def _skew(g: Phase) -> Phase:
    g.dst_addr[g.dst_ptr[2] + 1] += 4  # transfer 2 lands 4 bytes further on its second replica than on the others
    return g


def _overlap(g: Phase) -> Phase:
    g.dst_addr[g.dst_ptr[3]: g.dst_ptr[4]] -= 4  # transfer 3 starts inside transfer 2, on every replica
    return g


def _duplicate(g: Phase) -> Phase:
    g.dst_tile[g.dst_ptr[:-1] + 1] = g.dst_tile[g.dst_ptr[:-1]]  # every transfer names its first replica twice
    return g


def test_an_ineligible_transfer_stays_direct_alone() -> None:
    # the reference judges each transfer: one that is not eligible stays direct and the rest of the phase is still
    # considered (relay.rs, candidate()). Here the spoilt multicast (it names tile 20 twice) is the only transfer
    # to its buffers: the healthy group beside it is relayed, the spoilt one stays direct. (placer kept the whole
    # phase direct: "ineligible transfer".)
    why = DUPLICATE_TILE
    healthy = heavy_group(0, (8, 9, 10, 11), (12, 13, 14, 15))
    lone = Phase.build(0, [16], [8], [3], [20, 20, 22], [0x60000, 0x60000, 0x60000], [0x50000])
    allocs = _allocs(*[(t, 0x60000, 0x60040, 0, 0) for t in (20, 21, 22)])
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [healthy, lone])], allocations=allocs)
    scan = scan_buffers(cap.phases[0], {}, allocs)
    assert [r.reason for r in scan.dropped] == [why] * len(scan.dropped)
    assert scan.dropped_count >= 1
    plan, [d] = rule(cap)
    assert d.accepted
    assert d.direct_transfers == scan.dropped_count
    assert any(why in r for r in d.direct_reasons)
    assert [r.group.replicas.tolist() for r in plan.relays] == [[8, 9, 10, 11]]
    # the spoilt multicast is left in the rewritten phase as it was
    new = plan.rewritten(cap).phases[0]
    assert (new.source == 16).sum() == 1
    assert new.fanout[new.source == 16].tolist() == [3]


@pytest.mark.parametrize(("spoil", "why"), [(_skew, SKEWED), (_duplicate, DUPLICATE_TILE)])
def test_an_ineligible_transfer_inside_a_group_leaves_its_panel_incomplete(spoil: Callable[[Phase], Phase],
                                                                           why: str) -> None:
    # the spoilt transfer stays direct; its group's panel then misses its bytes and the reference abandons the
    # phase's candidate at that panel: the healthy group beside it is not relayed either
    healthy = heavy_group(0, (8, 9, 10, 11), (12, 13, 14, 15))
    g = heavy_group()
    if spoil is _duplicate:
        g.dst_tile[g.dst_ptr[2] + 1] = g.dst_tile[g.dst_ptr[2]]  # transfer 2 alone names its first replica twice
    else:
        spoil(g)
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [g, healthy])])
    assert [r.reason for r in scan_buffers(cap.phases[0]).dropped] == [why]
    plan, [d] = rule(cap)
    assert d.reason == INCOMPLETE_PANEL
    assert not plan.relays
    assert d.direct_transfers == 1
    assert "panel 0:" in d.detail
    assert "96 of 128 bytes covered" in d.detail


def test_overlapping_transfers_leave_their_panel_incomplete() -> None:
    # both overlapping transfers are eligible (the reference has no per-transfer test for overlap); cut at the panel
    # bounds, their pieces are not contiguous runs of the panel, so the phase stays direct at that panel
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [_overlap(heavy_group()),
                                                          heavy_group(0, (8, 9, 10, 11), (12, 13, 14, 15))])])
    plan, [d] = rule(cap)
    assert d.reason == INCOMPLETE_PANEL
    assert not plan.relays
    assert d.direct_transfers == 0
    assert "not as contiguous rows" in d.detail
    # a transfer listed twice (the reference's own test: transfer 0 replaced by a copy of transfer 1)
    twice = heavy_group()
    twice.dst_addr[twice.dst_ptr[0]: twice.dst_ptr[1]] = twice.dst_addr[twice.dst_ptr[1]: twice.dst_ptr[2]]
    twice.source[0] = twice.source[1]
    plan, [d] = rule(Capture(tile_count=48, phases=[twice]))
    assert d.reason == INCOMPLETE_PANEL
    assert not plan.relays


def test_groups_are_destination_buffers_not_tile_sets() -> None:
    # two operands multicast to the same four tiles, each into its own allocation: the reference groups by
    # destination buffers (sorted shard lists), so they are two groups, each complete, both relayed; grouped by
    # tile set (placer before) they are one group whose single panel has a hole between the two operands
    a = heavy_group(0, fragments=16)
    b = heavy_group(0, fragments=16, bases=[0x64000 + 0x1000 * i for i in range(4)])
    allocs = _allocs(*[(t, 0x60000 + 0x1000 * t, 0x60000 + 0x1000 * t + 512, 0, 0) for t in range(4)],
                     *[(t, 0x64000 + 0x1000 * t, 0x64000 + 0x1000 * t + 512, 0, 0) for t in range(4)])
    phase = Phase.concat(0, [a, b])
    cap = Capture(tile_count=48, phases=[phase], allocations=allocs)
    assert len(scan_buffers(phase, {}, allocs).groups) == 2
    plan, [d] = rule(cap)
    assert d.accepted
    assert len(d.groups) == 2
    assert d.relays == 8
    assert len(plan.relays) == 2
    # the group sorted first (its buffers at the lower addresses) takes the highest-numbered hosts
    first, second = sorted(plan.relays, key=lambda r: int(r.group.bases[0]))
    assert first.hosts.tolist() == [47, 46, 45, 44]
    assert second.hosts.tolist() == [43, 42, 41, 40]
    from placer.validation import validate

    assert validate(cap, plan.to_json(cap), M).valid
    # without the allocations extension the destinations have no buffers: grouped by tile set as before, one
    # group with a hole, and the phase stays direct
    _, [alone] = rule(Capture(tile_count=48, phases=[phase]))
    assert alone.reason == INCOMPLETE_PANEL
    assert len(alone.groups) == 1


def test_receive_then_forward_phase_is_skipped() -> None:
    g = heavy_group()
    # tile 8 receives at 0x61000 and another transfer reads that address on tile 8 in the same phase
    fwd = Phase.build(0, [9, 8], [4, 4], [1, 1], [8, 40], [0x61000, 0x61000], [0x50000, 0x61008])
    assert reads_a_destination(fwd) == (8, 0x61008)
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [g, fwd])])
    plan, [d] = rule(cap)
    assert d.reason == RECEIVE_THEN_FORWARD
    assert "tile 8" in d.detail
    assert not plan.relays
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
    assert d.reason == RECEIVE_THEN_FORWARD
    assert "allocation" in d.detail
    assert not plan.relays
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
    assert d.reason == INCOMPLETE_PANEL
    assert "panel 1" in d.detail
    assert not plan.relays
    # a panel hint whose panel runs past the data is incomplete too
    g = heavy_group(fragments=8, senders=(4, 5))
    hint = PanelHint(0, (0, 1, 2, 3), (0, 64, 128, 256, 320))
    plan, [d] = rule(Capture(tile_count=48, phases=[g], panels=[hint]))
    assert d.reason == INCOMPLETE_PANEL


def test_transfers_are_split_at_panel_bounds_before_panels_are_checked() -> None:
    # the hint cuts group (8..11) inside its second fragment ([32, 64) at 48): the reference intersects every
    # transfer with every panel before it checks a panel (relay.rs, intersection()), so that fragment becomes two
    # pieces, one per panel, both panels are complete and the group is relayed with the other (placer left it
    # direct: "a fragment crosses the panel boundary")
    from placer.validation import validate

    other = heavy_group(0, (8, 9, 10, 11), (12, 13, 14, 15), 8)
    hint = PanelHint(0, (8, 9, 10, 11), (0, 48, 256))
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [heavy_group(), other])], panels=[hint])
    plan, [d] = rule(cap)
    assert d.accepted
    assert d.direct_groups == 0
    assert len(d.groups) == 2
    [cut] = [r for r in plan.relays if r.group.replicas.tolist() == [8, 9, 10, 11]]
    assert cut.segmentation.bounds.tolist() == [0, 48, 256]
    assert cut.scratch_bytes.tolist() == [48, 208]
    # the crossing transfer is gathered as two pieces, to two hosts, each from its part of the source
    crossing = int(other.n and np.flatnonzero(cut.group.offsets == 32)[0])
    t = int(cut.group.transfers[crossing])
    pieces = np.flatnonzero(cut.group.transfers == t)
    assert cut.group.nbytes[pieces].tolist() == [16, 16]
    assert cut.group.skip is not None
    assert cut.group.skip[pieces].tolist() == [0, 16]
    g = cut.rewrite.gathers
    src = cap.phases[0].src_addr[cap.phases[0].src_ptr[t]]
    assert sorted(g.src_addr[g.nbytes == 16].tolist()) == [src, src + 16]
    assert len(set(g.dst_tile[g.nbytes == 16].tolist())) == 2
    report = validate(cap, plan.to_json(cap), M)
    assert report.valid, report.errors[:3]
    # a bound inside a word of a fragment cannot be cut: that group alone stays direct
    odd = PanelHint(0, (8, 9, 10, 11), (0, 50, 256))
    plan, [d] = rule(Capture(tile_count=48, phases=[Phase.concat(0, [heavy_group(), other])], panels=[odd]))
    assert d.accepted
    assert d.direct_groups == 1
    assert "inside a word" in d.direct_reasons[0]
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
    assert d.reason == NO_HOST
    assert "panel 4" in d.detail
    assert not plan.relays


def _full(*tiles: int, free: int = 0) -> Allocations:
    """One allocation per tile filling its memory but for ``free`` bytes at the top."""
    top = min(M.memory.end, M.memory.loader_limit)
    return _allocs(*[(t, M.memory.base, top - free, 0, 0) for t in tiles])


def test_hosts_are_chosen_without_looking_at_memory_and_a_buffer_that_does_not_fit_is_reported() -> None:
    # tile 47, the first host, has no free byte. The reference chooses hosts without looking at memory and places
    # the staging buffers afterwards, with the rest of the program: 47 still hosts panel 0, and its buffer fails
    # to place -- the reference's allocation failure, "tile 47 has insufficient Standard SRAM for 128 bytes". The
    # phase is accepted by the rule, but its plan cannot be built: no relay of it is in the plan. (placer passed
    # over tile 47 and hosted on 46.)
    cap = Capture(tile_count=48, phases=[heavy_group()], allocations=_full(47))
    plan, [d] = rule(cap)
    assert d.accepted
    assert not d.built
    assert d.unplaced == 1
    assert not plan.relays
    [why] = d.placement
    assert why.startswith("tile 47 has insufficient Standard SRAM for 128 bytes (phase 0, relay buffer of group 0 "
                          "panel 0; live: 1 allocation (unnamed) and the phase's reads and writes")
    assert "largest free gap 0 B" in why
    assert d.detail.startswith("accepted, but the plan cannot be built: tile 47")
    assert d.to_json()["placement_failures"] == [why]
    assert d.to_json()["unplaced_buffers"] == 1
    # the figures it was accepted on are the same as with room on every tile: memory plays no part in the choice
    _, [roomy] = rule(Capture(tile_count=48, phases=[heavy_group()], allocations=Allocations.empty()))
    assert (roomy.rows_after, roomy.cycles_after, roomy.scratch) == (d.rows_after, d.cycles_after, d.scratch)


def test_relay_buffers_are_placed_by_the_production_allocator() -> None:
    # tile 47 keeps exactly one panel's 128 bytes free at the top of its memory, above a busy first part: the
    # allocator puts the buffer there (the lowest address that holds it), the trial used the same address, and
    # the plan validates
    from placer.alternatives.memory import PhaseMemory
    from placer.placement.api import tile_problem
    from placer.placement.greedy import greedy_place
    from placer.validation import validate

    top = min(M.memory.end, M.memory.loader_limit) // 8 * 8
    cap = Capture(tile_count=48, phases=[heavy_group()], allocations=_allocs((47, M.memory.base, top - 128, 0, 0)))
    plan, [d] = rule(cap)
    assert d.built
    assert plan.relays[0].hosts[0] == 47
    assert plan.relays[0].buffers[0] == top - 128
    memory = PhaseMemory(cap, cap.phases[0], M)
    assert memory.allocate(47, 128) == memory.first_fit(47, 128) == top - 128
    problem = tile_problem([(M.memory.base, top)], [(M.memory.base, top - 128, 0, 0)], [(128, 8, 0, 0)])
    assert greedy_place(problem).addresses == (top - 128,)
    assert validate(cap, plan.to_json(cap), M).valid


def test_scratch_is_the_panels_storage_bytes() -> None:
    # one panel of 73 rows of 32 bytes (an odd row count, as a QKV block of 73 tokens): its relay buffer is the
    # panel's storage, 2,336 bytes -- panel_views() sets the row axis's physical end to its logical end, so the
    # destination's row padding is not in it, and nothing rounds it (not to an even row count: 2,368; not to the
    # allocator's granule). The acceptance figure and the placement use the same 2,336 bytes: a host whose only
    # gap is exactly that size takes it.
    big = small_machine(128)
    top = min(big.memory.end, big.memory.loader_limit) // 8 * 8
    exact = _allocs((127, big.memory.base, top - 2336, 0, 0))  # tile 127's only gap: 2,336 bytes
    one = Capture(tile_count=128, phases=[group_phase(0, [0, 1, 2, 3], list(range(4, 77)), 73)], allocations=exact)
    plan, [d] = production_plan(one, big, BUDGET, LIMIT)
    # one panel: its host (127) is the worst tile after, at its rows plus exactly 2,336 bytes -- not enough
    assert d.relays == 1
    assert d.scratch == 2336
    assert d.reason == ROWS_NOT_LOWER
    assert not plan.relays
    assert d.table_after is not None
    assert d.rows_after == d.table_after + 2336
    # eight such panels (eight images' worth): accepted, and the 2,336-byte buffer goes in 127's 2,336-byte gap
    eight = Capture(tile_count=128, phases=[group_phase(0, [0, 1, 2, 3], list(range(4, 77)), 8 * 73)],
                    allocations=exact)
    plan, [d] = production_plan(eight, big, BUDGET, LIMIT)
    assert d.built
    assert d.relays == 8
    assert d.scratch == 8 * 2336
    assert plan.relays[0].hosts[0] == 127
    assert plan.relays[0].buffers[0] == top - 2336
    assert plan.relays[0].scratch_bytes.tolist() == [2336] * 8


def test_cycles_rise_rejects_even_when_rows_fall() -> None:
    # tile 47, the first host, already receives the phase's heaviest load: its panel pushes the phase's cycles up
    busy = Phase.build(0, [40], [1000], [1], [47], [0x68000], [0x50000])
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [heavy_group(), busy])])
    plan, [d] = rule(cap)
    assert d.reason == CYCLES_ROSE
    assert not plan.relays
    assert d.cycles_after is not None
    assert d.cycles_after > d.cycles_before
    assert d.rows_after is not None
    assert d.rows_after < d.rows_before


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
    assert d.reason == ACCEPTED
    assert d.cycles_after == d.cycles_before
    assert len(plan.relays) == 1
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


def _kept_groups(phase: Phase, allocations: Allocations) -> set[int]:
    return {g.index for g in scan_buffers(phase, {}, allocations).groups}


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
        scan = scan_buffers(phase, {}, cap.allocations)
        if d.reason != RECEIVE_THEN_FORWARD and (phase.fanout >= 2).any():
            # ineligible transfers are counted, stay direct, and never end the phase's candidate by themselves
            assert d.direct_transfers == scan.dropped_count
        if not d.accepted:
            # a rejected phase is byte-identical to the input
            assert not relayed
            assert new.equals(phase)
            continue
        # accepted only when both conditions hold, on figures recomputed from the rewritten phase
        before = tile_counters(phase, M, cap.tile_count)
        after = tile_counters(new, M, cap.tile_count)
        scratch = np.zeros(cap.tile_count, np.int64)
        for r in plan.relays:
            if r.group.phase == phase.phase:
                np.add.at(scratch, r.hosts, r.scratch_bytes)
        assert after.cycles <= before.cycles == d.cycles_before
        assert after.cycles == d.cycles_after
        assert d.rows_after is not None
        assert int((after.table_bytes + scratch).max()) == d.rows_after < d.rows_before == before.worst_table()
        # never splits a phase: every kept group is relayed, at its native panels, on distinct eligible hosts
        assert relayed == set(d.groups) == _kept_groups(phase, cap.allocations)
        dropped = {int(t) for t in range(phase.n)} - {int(t) for r in plan.relays if r.group.phase == phase.phase
                                                      for t in r.group.transfers}
        assert len(dropped) >= scan.dropped_count
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
                          "--schedule"], capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    rule_doc = json.loads(res.stdout)["production_rule"]
    first, second = rule_doc["decisions"]
    assert first["accepted"]
    assert first["reason"] == ACCEPTED
    assert first["relays"] == 16
    assert first["rows_after"] < first["rows_before"]
    assert first["cycles_after"] <= first["cycles_before"]
    assert second["reason"] == NO_MULTICAST
    assert second["cycles_after"] is None
    [changed] = json.loads(res.stdout)["schedule"]["changed_phases"]
    assert changed["phase"] == 0
    assert changed["direct"]["b1024"] > 0
    assert changed["production_rule"]["b1024"] > 0


def test_solve_greedy_exits_3_when_a_rule_buffer_does_not_fit(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The reference compiler stops at placement when a relay buffer it chose does not fit: so does `placer solve
    --mode greedy` (exit 3, the allocation failure on stderr, no plan file), and the decision says it in --json."""
    import json
    import subprocess
    import sys

    from placer.capture import write_capture

    path, out = tmp_path / "cap.json", tmp_path / "plan.json"
    write_capture(Capture(tile_count=48, phases=[heavy_group()], allocations=_full(47)), path)
    res = subprocess.run([sys.executable, "-m", "placer.cli", "solve", str(path), "--mode", "greedy", "--json",
                          "--machine", "ipu21", "-o", str(out)], capture_output=True, text=True, timeout=300,
                         check=False)
    assert res.returncode == 3, res.stderr
    assert "tile 47 has insufficient Standard SRAM for 128 bytes (phase 0" in res.stderr
    assert "cannot be built" in res.stderr
    assert not out.exists()
    [d] = json.loads(res.stdout)["production_rule"]["decisions"]
    assert d["accepted"]
    assert d["unplaced_buffers"] == 1
    assert d["placement_failures"][0].startswith("tile 47 has")


def test_a_group_whose_bytes_another_transfer_writes_stays_direct() -> None:
    # a unicast writes 8 bytes inside the first group's operand on one replica: the original's last writer is the
    # later-listed transfer, and a relay would deliver the group's bytes after it. placer's scan leaves that group
    # direct; the rule's mirror, once the reference's own checks pass, keeps the phase direct (all or nothing)
    from placer.alternatives.groups import SHARED_BYTES, scan_phase
    from placer.selection.greedy import BYTES_WRITTEN_TWICE
    from placer.validation import validate

    spoilt = heavy_group(0, (0, 1, 2, 3), (4, 5, 6, 7))
    healthy = heavy_group(0, (8, 9, 10, 11), (12, 13, 14, 15))
    stray = Phase.build(0, [40], [2], [1], [0], [int(spoilt.dst_addr[0])], [0x50000])
    cap = Capture(tile_count=48, phases=[Phase.concat(0, [spoilt, healthy, stray])])
    scan = scan_phase(cap.phases[0], gainful_only=False)
    assert [r.reason for r in scan.rejected] == [SHARED_BYTES]
    assert [g.replicas.tolist() for g in scan.groups] == [[8, 9, 10, 11]]
    plan, [d] = rule(cap)
    assert d.reason == BYTES_WRITTEN_TWICE
    assert f"transfer {spoilt.n + healthy.n} also writes" in d.detail  # the stray, listed last
    assert not plan.relays
    assert validate(cap, plan.to_json(cap), M).valid
    # without the stray write the same phase is relayed whole
    clean = Capture(tile_count=48, phases=[Phase.concat(0, [spoilt, healthy])])
    plan, [d] = rule(clean)
    assert d.accepted
    assert len(plan.relays) == 2
