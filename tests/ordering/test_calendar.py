"""The calendar list (``placer.refschedule.calendar``): each transfer in the first gap of every lane and port it needs,
the traffic the relays wait for first; a topological order whose schedule keeps every rule (independent checker)
and repeats itself, and which beats the other list rules where the replicas share their direct traffic."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.machine import load_machine
from placer.ordering.check import check_reference_schedule
from placer.refschedule.calendar import TURN, Calendar, calendar_order, calendar_priority, replicas_take_direct
from placer.refschedule.reference import materialize, reference_schedule
from placer.streams.dependencies import transfer_dependencies, transfer_levels
from tests.ordering.test_improve import TILES, _start, host_phase, map_phase

MACHINE = load_machine()


def test_a_calendar_takes_the_first_gap_long_enough_and_merges_what_touches() -> None:
    c = Calendar()
    c.book(10, 20)
    c.book(30, 40)
    assert c.earliest(0, 10) == 0  # [0, 10) ends where the first busy interval starts
    assert c.earliest(0, 11) == 40  # too long for either gap
    assert c.earliest(15, 10) == 20  # the gap between, exactly
    c.book(20, 30)
    assert (c.starts, c.ends) == ([10], [40])


def _calendar(phase: object) -> tuple[np.ndarray, np.ndarray, object]:
    deps = transfer_dependencies(phase)  # type: ignore[arg-type]
    levels = transfer_levels(phase.n, deps)  # type: ignore[attr-defined]
    greedy = reference_schedule(phase, MACHINE, tiles=TILES, deps=deps)  # type: ignore[arg-type]
    order = calendar_order(phase, deps, levels, greedy)  # type: ignore[arg-type]
    place = np.empty(len(order), np.int64)
    place[order] = np.arange(len(order))
    assert sorted(order.tolist()) == list(range(len(order)))
    assert (place[deps.pred] < place[deps.succ]).all()
    schedule = materialize(phase, order, deps, MACHINE, TILES)  # type: ignore[arg-type]
    assert check_reference_schedule(phase, schedule.tx_start, schedule.rx_start, schedule.horizon,  # type: ignore
                                    MACHINE) == []
    return order, place, schedule


def test_the_priority_puts_the_replicas_direct_receives_then_the_hosts_own_sends_then_the_relays_first() -> None:
    phase = map_phase(hosts=3, replicas=4, fragments=32, owned=24, mixed=96, others=8)
    deps = transfer_dependencies(phase)
    levels = transfer_levels(phase.n, deps)
    priority = calendar_priority(phase, deps, levels, reference_schedule(phase, MACHINE, tiles=TILES, deps=deps))
    rank = np.empty(phase.n, np.int64)
    rank[priority] = np.arange(phase.n)
    words = phase.words
    mixed, owned = words == 24, (words == 8) & (levels == 0) & (phase.source >= 40)
    gathers, forwards, others = np.unique(deps.pred), np.unique(deps.succ), words == 64
    assert rank[mixed].max() < rank[owned].min()
    assert rank[owned].max() < rank[gathers].min()
    assert rank[gathers].max() < rank[forwards].min()
    assert rank[forwards].max() < rank[others].min()
    # the hosts take turns of TURN rows: each host's first run before any host's second
    runs = [np.sort(rank[owned & (phase.source == h)]) for h in (40, 41, 42)]
    assert max(r[TURN - 1] for r in runs) < min(r[TURN] for r in runs)
    assert runs[0][TURN - 1] < runs[1][0]  # a run is not interleaved with another host's


def test_the_calendar_list_beats_the_other_lists_where_the_replicas_share_their_direct_traffic() -> None:
    # the CP-SAT plan's phase 60 in miniature: every 24-word transfer into a replica also goes to one of eight other
    # tiles, which take the hosts' own rows too; placed first, they go while the gathers land
    phase = map_phase(hosts=3, replicas=4, fragments=32, owned=24, mixed=192, others=8)
    order, _, schedule = _calendar(phase)
    others = []
    for step in ("group", "forwards", "hosts", "aligned", "relay_tiles", "windows", "nondelay"):
        alone = _start(phase, TILES)
        getattr(alone, step)()
        others.append(alone.best.horizon)
    search = _start(phase, TILES)
    search.calendar()
    assert search.found == "calendar list"
    assert search.best.horizon == schedule.horizon < min(others)  # type: ignore
    assert np.array_equal(_calendar(phase)[0], order)  # the same list again


def test_the_step_applies_only_where_the_replicas_take_direct_traffic() -> None:
    mixed = map_phase(mixed=96)
    deps = transfer_dependencies(mixed)
    assert replicas_take_direct(mixed, deps, transfer_levels(mixed.n, deps))
    lone = host_phase(fragments=16, direct=0)
    deps = transfer_dependencies(lone)
    assert not replicas_take_direct(lone, deps, transfer_levels(lone.n, deps))
    search = _start(lone, TILES)
    search.calendar()
    assert search.found == "greedy"  # not tried


def test_a_transfer_waits_for_its_predecessors_whatever_its_priority() -> None:
    # one host whose four segments overlap (each 21 fragments long, from bases 21, 21 and 20 fragments apart): two
    # gathers write the same bytes of tile 40, the second after the first in program order (a write-after-write);
    # in priority order alone (the gathers re-sorted by their senders' busy time) the second went first and the
    # schedule broke the rule (found by CI through the search's property test)
    sizes, start = [21, 21, 20, 4], 12
    bases = [0x6000 + 256 * (start + sum(sizes[:k])) for k in range(len(sizes))]
    _calendar(host_phase(bases, fragments=max(sizes), direct=5))


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(4, 32), min_size=2, max_size=4), st.integers(0, 60), st.integers(0, 6))
def test_the_calendar_list_keeps_the_rules_on_random_segments(sizes: list[int], start: int, direct: int) -> None:
    bases = [0x6000 + 256 * (start + sum(sizes[:k])) for k in range(len(sizes))]
    _calendar(host_phase(bases, fragments=max(sizes), direct=direct))


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(2, 24), st.integers(0, 24), st.integers(0, 96),
       st.integers(0, 8))
def test_the_calendar_list_keeps_the_rules_on_random_hosts(hosts: int, replicas: int, fragments: int, owned: int,
                                                           mixed: int, others: int) -> None:
    _calendar(map_phase(hosts, replicas, fragments, owned, mixed, others))
