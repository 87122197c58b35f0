"""The validator on a hand-built replica group and a hand-built direct-receive relay plan (docs/plan.md)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.io import capture_from_json
from placer.machine import load_machine
from placer.validation import ValidationReport, validate

from .builders import (
    BASES,
    FRAGMENTS,
    GROUP_PHASE,
    REPLICAS,
    SEGMENTS,
    capture_doc,
    clone,
    empty_plan,
    group_indices,
    make_capture,
    n_gathers,
    relay_plan,
    transfer,
)

MACHINE = load_machine("ipu21")
CAPTURE = make_capture()


def check(plan: dict[str, Any]) -> ValidationReport:
    return validate(CAPTURE, plan, MACHINE)


def assert_invalid(report: ValidationReport, *needles: str) -> None:
    assert not report.valid
    text = "\n".join(report.errors)
    for needle in needles:
        assert needle in text, f"{needle!r} not in:\n{text}"


def test_empty_plan_is_valid() -> None:
    report = check(empty_plan())
    assert report.valid, report.errors
    assert report.stats["phases"] == 3
    assert report.stats["transfers"] == 11
    assert report.lines()[0].startswith("valid: 3 phases, 11 transfers, worst tile ")


def test_identity_rewrite_is_valid() -> None:
    """Removing every transfer of the group phase and appending them again unchanged is a no-op."""
    doc = capture_doc()
    plan = empty_plan()
    ts = doc["phases"][GROUP_PHASE]["transfers"]
    plan["delta"] = [{"phase": GROUP_PHASE, "remove": list(range(len(ts))), "append": ts}]
    assert check(plan).valid


def test_relay_plan_is_valid() -> None:
    report = check(relay_plan())
    assert report.valid, report.errors
    # replicas drop from 6 receive rows (two pointer resets) to 2 (two resets): 8 + 6*8 + 8 = 64 -> 8 + 2*8 +
    # 8 = 32
    assert report.stats["transfers"] == 11 - 6 + 6 + 2


def test_relay_plan_cut_into_short_forwards_is_valid() -> None:
    assert check(relay_plan(max_words=5)).valid


def test_table_recount_by_hand() -> None:
    report = check(empty_plan())
    # tile 10 in phase 1: entry 8 + 6 receives * 8 + 2 pointer resets (first receive, after the hole) * 4 = 64
    assert report.stats["worst_tile"] == 10
    assert report.stats["worst_table_bytes"] == 64
    assert report.stats["worst_fragments"] == 6


# --- mutations of the valid relay plan

KINDS = ("drop", "duplicate", "dst", "src", "overlap", "reorder")


def mutate(plan: dict[str, Any], kind: str, i: int, bump: int) -> tuple[dict[str, Any], list[str]]:
    """Apply one mutation to appended transfer ``i``; return the plan and substrings the report must
    contain."""
    plan = clone(plan)
    app = plan["delta"][0]["append"]
    g = n_gathers(plan)
    is_gather = i < g
    t = app[i]
    if kind == "drop":
        del app[i]
        return plan, ["no transfer writes" if is_gather else "is no longer written"]
    if kind == "duplicate":
        app.insert(i + 1, clone(t))
        return plan, ["again, already written by", "relay 0 segment"]
    if kind == "dst":
        d = t["destinations"][bump % len(t["destinations"])]
        d["address"] += 4 * (1 + bump % 3)
        return plan, [f"phase {GROUP_PHASE}", "tile "]
    if kind == "src":
        k = bump % len(t["source_addresses"])
        t["source_addresses"][k] += 4 * (1 + bump % 3)
        return plan, [f"phase {GROUP_PHASE} transfer", "the original wrote"]
    if kind == "overlap":
        # point it at another transfer's destination on the same tile
        if is_gather:
            tile = t["destinations"][0]["tile"]
            other = next(o for j, o in enumerate(app[:g]) if j != i and o["destinations"][0]["tile"] == tile)
            t["destinations"][0]["address"] = other["destinations"][0]["address"]
        else:
            other = next(o for j, o in enumerate(app[g:], g) if j != i)
            t["destinations"][0]["address"] = other["destinations"][0]["address"]
        return plan, ["again, already written by"]
    assert kind == "reorder"
    del app[i]
    if is_gather:
        app.append(t)  # the gather now lands after the forward that reads it
    else:
        app.insert(0, t)  # the forward now runs before every gather
    return plan, ["before transfer", "writes it", "relay 0 segment"]


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_any_single_mutation_is_rejected_precisely(data: st.DataObject) -> None:
    plan = relay_plan()
    n = len(plan["delta"][0]["append"])
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    i = data.draw(st.integers(0, n - 1), label="transfer")
    bump = data.draw(st.integers(0, 11), label="bump")
    bad, needles = mutate(plan, kind, i, bump)
    report = check(bad)
    assert_invalid(report, *needles)
    # every line names a phase and an address range or a tile
    assert all(line.startswith("phase ") for line in report.errors)


@pytest.mark.parametrize("kind", KINDS)
def test_each_mutation_kind_on_every_transfer(kind: str) -> None:
    plan = relay_plan()
    for i in range(len(plan["delta"][0]["append"])):
        bad, needles = mutate(plan, kind, i, 1)
        assert_invalid(check(bad), *needles)


def test_forward_of_a_hole_is_rejected() -> None:
    """Forwarding the whole segment (hole included) writes padding the original never wrote."""
    plan = relay_plan()
    fwd = plan["delta"][0]["append"][n_gathers(plan)]
    assert fwd["words"] == 24
    fwd["words"] = 32
    assert_invalid(check(plan), "which the original phase never writes", "no transfer writes")


def test_unremoved_original_is_a_double_write() -> None:
    plan = relay_plan()
    plan["delta"][0]["remove"] = group_indices()[1:]
    assert_invalid(check(plan), "again, already written by")


# --- relay tiles and buffers


def test_relay_tile_in_replica_set_is_rejected() -> None:
    segs = [(0, 128, 12, 0x58000), SEGMENTS[1]]
    assert_invalid(check(relay_plan(segs)), "relay tile 12 is in the group's replica set")


def test_relay_tile_that_sends_its_segment_is_rejected() -> None:
    segs = [(0, 128, 1, 0x58000), SEGMENTS[1]]
    assert_invalid(check(relay_plan(segs)), "relay tile 1 sends original transfer 1 of its own segment")


def test_relay_tile_hosting_two_segments_is_rejected() -> None:
    segs = [SEGMENTS[0], (128, 288, 30, 0x59000)]
    assert_invalid(check(relay_plan(segs)), "tile 30 hosts 2 relay segments")


def test_relay_buffer_over_live_allocation_is_rejected() -> None:
    segs = [(0, 128, 30, 0x70F80), SEGMENTS[1]]
    assert_invalid(check(relay_plan(segs)), "overlaps act30 [0x70000, 0x71000) live in phases 0..2")


def test_relay_buffer_over_allocation_not_live_is_accepted() -> None:
    # tile 31's allocation at 0x58000 lives in phase 2 only; the default plan already uses it in phase 1
    assert check(relay_plan()).valid


def test_relay_buffer_over_other_traffic_is_rejected() -> None:
    reads = [(0, 128, 30, 0x60010), SEGMENTS[1]]
    assert_invalid(check(relay_plan(reads)), "which original transfer 0 reads")
    writes = [SEGMENTS[0], (128, 288, 31, 0x59020)]
    assert_invalid(check(relay_plan(writes)), "which original transfer 3 writes")


def test_relay_buffer_outside_sram_is_rejected() -> None:
    segs = [(0, 128, 30, 0x1000), SEGMENTS[1]]
    assert_invalid(check(relay_plan(segs)), "outside SRAM")


def test_relay_buffer_across_region_boundary_is_rejected() -> None:
    segs = [(0, 128, 30, 0x80000 - 64), SEGMENTS[1]]
    assert_invalid(check(relay_plan(segs)), "crosses the region boundary")


def test_write_outside_declared_buffer_is_rejected() -> None:
    plan = relay_plan()
    # gather 0 lands just before the declared buffer of segment 0
    plan["delta"][0]["append"][0]["destinations"][0]["address"] = 0x58000 - 32
    assert_invalid(check(plan), "writes tile 30 [0x57fe0, 0x58000)", "which the original phase never writes")


def test_budget_overflow_is_rejected() -> None:
    plan = relay_plan()
    plan["budget"] = {"table_bytes": 40, "fragments": 4}
    report = check(plan)
    assert_invalid(
        report,
        "budget: worst tile 30 needs 56 table bytes, 16 over the budget of 40",
        "budget: worst tile 30 has 5 fragments, 1 over the limit of 4",
    )


def test_transfer_longer_than_the_machine_allows_is_rejected() -> None:
    plan = relay_plan()
    fwd = plan["delta"][0]["append"][n_gathers(plan)]
    fwd["words"] = 4148
    assert_invalid(check(plan))
    long_plan = empty_plan()
    long_plan["delta"] = [
        {"phase": 0, "remove": [0], "append": [transfer(20, [0x50000], [(21, 0x60000)], 64)]}
    ]
    assert check(long_plan).valid


def test_error_output_is_capped() -> None:
    plan = relay_plan()
    plan["delta"][0]["remove"] = []  # every fragment now arrives twice
    report = check(plan)
    lines = report.lines(limit=3)
    assert len(lines) == 4
    assert lines[-1].startswith("and ")


# --- the original's own semantics


def test_repeat_addresses_must_match_per_iteration() -> None:
    plan = relay_plan()
    g = next(t for t in plan["delta"][0]["append"] if len(t["source_addresses"]) == 2)
    g["source_addresses"] = g["source_addresses"][:1]  # same first address, but constant over iterations
    assert_invalid(check(plan), "addresses [0x61000, 0x62000] over iterations")


def test_capture_with_in_phase_chain_replays_itself() -> None:
    """An original phase that already forwards bytes it received in the same phase validates against
    itself."""
    doc = capture_doc()
    doc["phases"][0]["transfers"].append(transfer(21, [0x60000], [(22, 0x60000)], 64))
    cap = capture_from_json(doc)
    plan = empty_plan()
    ts = doc["phases"][0]["transfers"]
    plan["delta"] = [{"phase": 0, "remove": [0, 1], "append": ts}]
    assert validate(cap, plan, MACHINE).valid
    plan["delta"][0]["append"] = ts[::-1]  # now the forward reads tile 21's old memory
    assert_invalid(
        validate(cap, plan, MACHINE),
        "writes tile 22 [0x60000, 0x60040) from tile 21 address 0x60000; "
        "the original wrote tile 20 address 0x50000",
    )


def test_fragments_fixture_is_consistent() -> None:
    # guards the hand-built data: fragments are sorted, disjoint and inside the extent, with two holes
    ends = [off + n for off, n, _, _ in FRAGMENTS]
    assert all(a <= b for a, b in zip(ends, [f[0] for f in FRAGMENTS[1:]], strict=False))


# --- local-pack


def local_pack_plan() -> dict[str, Any]:
    """Segment [0, 128) gathered unpacked into scratch on tile 30, packed by a kernel into the buffer at
    0x58000, then multicast in a phase inserted after the group phase; the rest of the group stays direct."""
    seg = [f for f in FRAGMENTS if f[0] < 128]
    plan = empty_plan()
    plan["relays"] = [
        {
            "phase": GROUP_PHASE,
            "group": 0,
            "variant": "local-pack",
            "replicas": REPLICAS,
            "bases": BASES,
            "extent": 288,
            "segments": [{"start": 0, "end": 128, "tile": 30, "buffer": 0x58000, "phase": 1001}],
        }
    ]
    gathers = [transfer(src, addrs, [(30, 0x5A000 + 64 * k)], n) for k, (_, n, src, addrs) in enumerate(seg)]
    plan["delta"] = [{"phase": GROUP_PHASE, "remove": group_indices()[:3], "append": gathers}]
    plan["kernels"] = [
        {
            "after": GROUP_PHASE,
            "tile": 30,
            "cycles": 100,
            "copies": [[0x5A000 + 64 * k, 0x58000 + off, n] for k, (off, n, _, _) in enumerate(seg)],
        }
    ]
    fwd = transfer(30, [0x58000], [(t, b) for t, b in zip(REPLICAS, BASES, strict=True)], 96)
    plan["inserted_phases"] = [
        {"after": GROUP_PHASE, "phase": 1001, "label": "local-pack", "transfers": [fwd]}
    ]
    return plan


def test_local_pack_plan_is_valid() -> None:
    report = check(local_pack_plan())
    assert report.valid, report.errors
    assert report.stats["phases"] == 4


def test_local_pack_wrong_kernel_copy_is_rejected() -> None:
    plan = local_pack_plan()
    plan["kernels"][0]["copies"][1][0] += 4
    assert_invalid(check(plan), "inserted phase 1001 transfer 0", "the original wrote tile 2 address 0x60000")
    plan = local_pack_plan()
    del plan["kernels"][0]["copies"][2]
    assert_invalid(
        check(plan), "reads [0x58040, 0x58060) on tile 30 (relay scratch) which no transfer writes"
    )


def test_local_pack_kernel_on_a_non_relay_tile_is_rejected() -> None:
    plan = local_pack_plan()
    plan["kernels"].append({"after": GROUP_PHASE, "tile": 33, "copies": [[0x5B000, 0x5C000, 4]]})
    assert_invalid(check(plan), "kernels[1]: tile 33 hosts no relay segment of phase 1")


def test_forward_with_every_gather_dropped_is_rejected() -> None:
    plan = relay_plan()
    app = plan["delta"][0]["append"]
    g = n_gathers(plan)
    # segment 0's buffer on tile 30 now receives nothing, yet its forward still reads it
    plan["delta"][0]["append"] = [t for t in app[:g] if t["destinations"][0]["tile"] != 30] + app[g:]
    assert_invalid(check(plan), "phase 1 transfer", "on tile 30 (relay scratch) which no transfer writes")
