"""Relay rewrites (``placer.alternatives.relay``) conserve the data: every byte of every transfer a rewrite removes
reaches every replica, at the same address, from the same source bytes (in every Repeat iteration), through the
gathers, the local-pack copies and the forwards -- and nothing else is written on a replica.

The check replays the transfers word by word (``replay`` below, written from docs/reference.md §4, sharing no code
with the rewrite); a whole plan is also checked by the independent validator."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.alternatives.groups import ReplicaGroup, scan_phase
from placer.alternatives.relay import RelayRewrite, Variant, direct_receive, direct_receive_all, local_pack
from placer.alternatives.segments import Segmentation, candidates, native, with_count
from placer.capture.model import Capture, Phase
from placer.modes import PlanMode
from placer.selection.plan import Plan, RelayChoice
from placer.validation import validate
from tests.builders import BASE, group_phase, small_capture, small_machine

Word = tuple[int, int]  # (tile, address) of a 4-byte word
Origin = tuple[Word, ...]  # the source words a word holds, one per Repeat iteration

HOSTS = 100  # relay tiles from here up: no other traffic touches them
BUFFER = 0x70000
M = small_machine(256)
Relay = tuple[ReplicaGroup, Segmentation, np.ndarray, np.ndarray]  # a group, its segments, hosts and buffers


def replay(phase: Phase, memory: dict[Word, Origin], rows: Iterable[int] | None = None) -> dict[Word, Origin]:
    """Run ``rows`` of ``phase`` (all of them by default) in listing order on ``memory`` (a word nobody wrote holds
    its own source data) and return what they wrote."""
    written: dict[Word, Origin] = {}
    for t in range(phase.n) if rows is None else rows:
        src = int(phase.source[t])
        addrs = phase.src_addr[phase.src_ptr[t]: phase.src_ptr[t + 1]].tolist()
        dsts = zip(phase.dst_tile[phase.dst_ptr[t]: phase.dst_ptr[t + 1]].tolist(),
                   phase.dst_addr[phase.dst_ptr[t]: phase.dst_ptr[t + 1]].tolist(), strict=True)
        for tile, addr in dsts:
            for w in range(int(phase.words[t])):
                if len(addrs) == 1:  # one address for every iteration: what the word holds now
                    value = memory.get((src, addrs[0] + 4 * w), ((src, addrs[0] + 4 * w),))
                else:  # a source address per iteration: source data only (a relay never reads it back)
                    value = tuple((src, a + 4 * w) for a in addrs)
                written[(tile, addr + 4 * w)] = value
    memory.update(written)
    return written


def check_conserved(phase: Phase, groups: list[ReplicaGroup], rewrite: RelayRewrite) -> None:
    """Exactly what the removed transfers wrote on the replicas, the relayed program writes there."""
    want = replay(phase, {}, rewrite.remove.tolist())
    memory: dict[Word, Origin] = {}
    staged = replay(rewrite.gathers, memory)
    for tile, frm, to, nbytes in rewrite.copies:  # local-pack's kernel, on the relay tile between the phases
        for w in range(nbytes // 4):
            memory[(tile, to + 4 * w)] = memory[(tile, frm + 4 * w)]
    got = replay(rewrite.forwards, memory)
    assert got == want
    replicas = {int(t) for g in groups for t in g.replicas}
    hosts = {t for t, _ in staged}
    assert hosts.isdisjoint(replicas)
    assert {t for t, _ in got} <= replicas
    assert set(rewrite.forwards.source.tolist()) <= hosts  # the relays forward what they gathered


def group_of(phase: Phase) -> ReplicaGroup:
    groups = scan_phase(phase, gainful_only=False).groups
    assert len(groups) == 1
    return groups[0]


def relay_tiles(seg: Segmentation, first: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A relay tile and a staging buffer per segment, no two buffers sharing a byte."""
    k = np.arange(first, first + seg.count, dtype=np.int64)
    return HOSTS + k, BUFFER + 0x1000 * k


@pytest.mark.parametrize("count", [1, 2, 3, 6, 12])
@pytest.mark.parametrize("max_bytes", [32, 40, 1 << 20])  # a fragment is a transfer: never above the limit
def test_direct_receive_delivers_every_byte_to_every_replica(count: int, max_bytes: int) -> None:
    # twelve 32-byte slots from two senders, slot 5 a hole; other traffic listed around the group
    phase = Phase.concat(0, [Phase.build(0, [9], [3], [1], [10], [BASE], [0x50000]),
                             group_phase(0, [1, 2, 3], [4, 5], 12, holes=(5,), interleave=True, seed=1)])
    group = group_of(phase)
    seg = with_count(group, native(group), count)
    hosts, buffers = relay_tiles(seg)
    rw = direct_receive(group, seg, hosts, buffers, phase, max_bytes)
    assert rw.remove.tolist() == group.transfers.tolist()
    assert 0 not in rw.remove  # the unicast stays
    assert rw.gathers.n == group.fragments
    assert (rw.gathers.fanout == 1).all()  # one receive per fragment
    assert (rw.forwards.nbytes <= max_bytes).all()
    check_conserved(phase, [group], rw)
    # the gathers fill each segment's buffer at the fragments' offsets from the segment start, holes left open
    seg_of = np.repeat(np.arange(seg.count), np.diff(seg.frag_start))
    assert rw.gathers.dst_tile.tolist() == hosts[seg_of].tolist()
    assert rw.gathers.dst_addr.tolist() == (buffers[seg_of] + group.offsets - seg.bounds[seg_of]).tolist()


def test_forwards_skip_the_holes_and_are_cut_at_the_transfer_limit() -> None:
    # one segment [0, 384) with a hole at [160, 192): two covered intervals, [0, 160) and [192, 384); cut at 64
    # bytes they are 64+64+32 and 64+64+64 bytes, each multicast to the three replicas
    phase = group_phase(0, [1, 2, 3], [4, 5], 12, holes=(5,))
    group = group_of(phase)
    seg = with_count(group, native(group), 1)
    rw = direct_receive(group, seg, np.array([HOSTS]), np.array([BUFFER]), phase, 64)
    assert rw.forwards.nbytes.tolist() == [64, 64, 32, 64, 64, 64]
    assert rw.forwards.src_addr.tolist() == [BUFFER + o for o in (0, 64, 128, 192, 256, 320)]
    assert rw.forwards.fanout.tolist() == [3] * 6
    bases = group.bases.tolist()
    assert rw.forwards.dst_addr.reshape(6, 3).tolist() == [[b + o for b in bases] for o in (0, 64, 128, 192, 256,
                                                                                             320)]


def test_local_pack_delivers_every_byte_through_its_kernel() -> None:
    # one sender whose slots lie back to back in its memory (slot 5 a hole there too): gathered as source runs
    # into scratch, copied into place by the kernel, then forwarded in the extra phase
    phase = group_phase(0, [1, 2, 3], [4], 12, holes=(5,))
    group = group_of(phase)
    segs = candidates(group)
    assert sorted(segs) == [1, 11]  # the one sender repeats at every fragment: eleven one-fragment panels
    for k, runs in ((1, 2), (11, 11)):  # one segment: the runs of slots 0-4 and 6-11; else one per fragment
        hosts, buffers = relay_tiles(segs[k])
        rw = local_pack(group, segs[k], hosts, buffers, phase, 1 << 20, extra_phase=7)
        assert rw.forwards.phase == 7
        assert rw.gathers.n == runs
        assert len(rw.copies) == group.fragments
        check_conserved(phase, [group], rw)
    # runs are cut where they would exceed one transfer: 64 bytes, two slots
    rw = local_pack(group, segs[1], *relay_tiles(segs[1]), phase, 64, extra_phase=7)
    assert rw.gathers.nbytes.tolist() == [64, 64, 32, 64, 64, 64]
    check_conserved(phase, [group], rw)


def test_a_source_read_from_other_addresses_in_each_iteration_is_gathered_with_them() -> None:
    # a Repeat body: fragment 2 is read from another address in each of the three iterations
    phase = group_phase(0, [1, 2], [4], 4)
    src_counts = [1, 1, 3, 1]
    addrs = phase.src_addr.tolist()
    phase = Phase.build(0, phase.source, phase.words, phase.fanout, phase.dst_tile, phase.dst_addr,
                        [*addrs[:2], 0x58000, 0x59000, 0x5a000, *addrs[3:]], src_counts=src_counts)
    group = group_of(phase)
    seg = native(group)
    hosts, buffers = relay_tiles(seg)
    for rw in (direct_receive(group, seg, hosts, buffers, phase, 1 << 20),
               local_pack(group, seg, hosts, buffers, phase, 1 << 20, extra_phase=1)):
        check_conserved(phase, [group], rw)


@st.composite
def relay_cases(draw: st.DrawFn) -> tuple[Phase, list[Relay]]:
    """One to three replica groups on disjoint destination sets (fragments of 1-6 words, some holes, one to three
    senders whose consecutive fragments are sometimes back to back in their memory, a few read per iteration),
    plus unicasts, in a random listing order; each group cut into a random candidate segmentation."""
    rows: list[tuple[int, list[int], int, list[tuple[int, int]]]] = []  # source, addresses, words, destinations
    tiles = iter(range(40))
    for _ in range(draw(st.integers(1, 3))):
        replicas = [next(tiles) for _ in range(draw(st.integers(2, 4)))]
        senders = [next(tiles) for _ in range(draw(st.integers(1, 3)))]
        bases = [0x60000 + 0x800 * draw(st.integers(0, 7)) for _ in replicas]
        cursor = {s: 0x50000 + 0x400 * draw(st.integers(0, 3)) for s in senders}
        offset = 0
        for _ in range(draw(st.integers(1, 12))):
            offset += 4 * draw(st.sampled_from([0, 0, 0, 1, 3]))  # a hole before the fragment, sometimes
            words = draw(st.integers(1, 6))
            s = draw(st.sampled_from(senders))
            if draw(st.integers(0, 5)) == 0:
                addrs = [0x5c000 + 0x100 * draw(st.integers(0, 15)) for _ in range(draw(st.integers(2, 3)))]
            else:
                cursor[s] += 4 * draw(st.sampled_from([0, 0, 2]))  # back to back with its last one, or not
                addrs = [cursor[s]]
                cursor[s] += 4 * words
            rows.append((s, addrs, words, [(r, b + offset) for r, b in zip(replicas, bases, strict=True)]))
            offset += 4 * words
    for _ in range(draw(st.integers(0, 3))):
        rows.append((next(tiles), [0x50000], draw(st.integers(1, 4)), [(next(tiles), 0x60000)]))
    rows = [rows[i] for i in draw(st.permutations(range(len(rows))))]
    phase = Phase.build(0, [r[0] for r in rows], [r[2] for r in rows], [len(r[3]) for r in rows],
                        [t for r in rows for t, _ in r[3]], [a for r in rows for _, a in r[3]],
                        [a for r in rows for a in r[1]], src_counts=[len(r[1]) for r in rows])
    relays = []
    first = 0
    for g in scan_phase(phase, gainful_only=False).groups:
        segs = candidates(g)
        seg = segs[draw(st.sampled_from(sorted(segs)))]
        hosts, buffers = relay_tiles(seg, first)
        first += seg.count
        relays.append((g, seg, hosts, buffers))
    return phase, relays


@settings(max_examples=150, deadline=None)
@given(relay_cases(), st.sampled_from([24, 28, 32, 64, 1 << 20]))  # a fragment (a transfer) is 24 bytes at most
def test_any_rewrite_conserves_bytes_and_destinations(case: tuple[Phase, list[Relay]], max_bytes: int) -> None:
    phase, relays = case
    groups = [g for g, _, _, _ in relays]
    assert sum(g.fragments for g in groups) == int((phase.fanout >= 2).sum())  # every multicast is in a group
    together = direct_receive_all(relays, phase, max_bytes)
    assert (together.forwards.nbytes <= max_bytes).all()
    assert (together.forwards.words > 0).all()
    check_conserved(phase, groups, together)
    for g, seg, hosts, buffers in relays:
        check_conserved(phase, [g], local_pack(g, seg, hosts, buffers, phase, max_bytes, extra_phase=1))


def _plan(cap: Capture, count: int, variant: Variant) -> Plan:
    phase = cap.phases[0]
    group = group_of(phase)
    seg = with_count(group, native(group), count)
    hosts, buffers = np.arange(10, 10 + seg.count, dtype=np.int64), np.full(seg.count, BUFFER, np.int64)
    if variant == "direct-receive":
        choice = RelayChoice(group, variant, seg, hosts, buffers, direct_receive(group, seg, hosts, buffers, phase,
                                                                                 M.exchange.max_transfer_words * 4))
    else:
        choice = RelayChoice(group, variant, seg, hosts, buffers, local_pack(group, seg, hosts, buffers, phase,
                                                                            M.exchange.max_transfer_words * 4, 2),
                             extra_phase=2)
    return Plan(PlanMode.CPSAT, M, 81920, 16384, [choice])


@pytest.mark.parametrize("variant", ["direct-receive", "local-pack"])
@pytest.mark.parametrize("count", [1, 2, 3, 6])
def test_the_validator_accepts_the_relayed_program(variant: Variant, count: int) -> None:
    """The tiny capture's group (twelve slots, two senders, a hole) relayed through spare tiles 10..15: the
    independent validator replays both programs and finds the same bytes on every replica."""
    cap = small_capture()
    report = validate(cap, _plan(cap, count, variant).to_json(cap), M)
    assert report.valid, report.errors[:5]


def test_the_validator_rejects_a_rewrite_that_drops_a_forward() -> None:
    cap = small_capture()
    doc = _plan(cap, 2, "direct-receive").to_json(cap)
    appended = doc["delta"][0]["append"]
    assert isinstance(appended, list)  # not pre-rendered: to_json(rendered=False)
    forwards = [i for i, t in enumerate(appended) if isinstance(src := t["source"], int) and src >= 10]
    del appended[forwards[-1]]
    assert not validate(cap, doc, M).valid
