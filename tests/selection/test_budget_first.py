"""The construction for programs the production rule's plan does not fit (``capacity.relay_greedy`` with
``memory_caps`` and ``by_hosts``): no cycle caps, each group's option judged by its hosts as well as its replicas.
Its plans validate, never raise the worst tile above the direct program's by more than the exact re-costing's
seams, and are the same plan on every run."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture.model import Allocations, Capture, Phase
from placer.selection import capacity
from placer.selection.floors import model_slack
from placer.selection.plan import Plan
from placer.selection.select import OBJECTIVES, SelectionSettings, plan_objectives, prepare, select
from placer.solver import SolverParams
from placer.validation import validate
from tests.builders import group_phase, relay_capture, small_machine

M = small_machine(48)


def _heavy_and_light() -> Capture:
    """A 96-fragment operand on six replicas and an 8-fragment one on four; 32 tiles idle."""
    phase = Phase.concat(0, [group_phase(0, [0, 1, 2, 3, 4, 5], [6, 7], 96),
                             group_phase(0, [8, 9, 10, 11], [12, 13], 8, seed=1)])
    return Capture(tile_count=48, phases=[phase], allocations=Allocations.empty())


def test_a_heavy_operand_is_cut_so_that_no_host_takes_it_whole() -> None:
    # a 96-fragment operand on six replicas, a light one on four, 32 idle tiles: judged by its replicas alone the
    # heavy operand goes whole to one idle tile, which then holds all 96 rows (the worst tile rises); judged by its
    # host too it is cut in two
    cap = _heavy_and_light()
    problem = prepare(cap, M, 10**6, 16384).problem
    direct = problem.direct.worst_table()
    by_replicas = plan_objectives(cap, capacity.relay_greedy(problem, capacity.memory_caps(problem)))
    plan = capacity.relay_greedy(problem, capacity.memory_caps(problem), by_hosts=True)
    by_hosts = plan_objectives(cap, plan)
    assert by_replicas.table >= direct  # the whole operand on one host
    assert by_hosts.table < 0.6 * direct
    heavy = next(r for r in plan.relays if r.group.fragments == 96)
    assert heavy.segmentation.count > 1
    assert validate(cap, plan.to_json(cap), M).valid


@pytest.mark.parametrize("local_pack", [False, True])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), groups=st.integers(1, 5), fragments=st.integers(4, 60),
       replicas=st.integers(2, 5), senders=st.integers(1, 4), phases=st.integers(1, 3),
       budget=st.integers(100, 1200))
def test_budget_first_plans_validate_and_never_raise_the_worst_tile(local_pack: bool, seed: int, groups: int,
                                                                   fragments: int, replicas: int, senders: int,
                                                                   phases: int, budget: int) -> None:
    cap = relay_capture(groups=groups, fragments=fragments, replicas=replicas, senders=senders, phases=phases,
                        seed=seed)
    problem = prepare(cap, M, budget, 16384).problem
    plan = capacity.relay_greedy(problem, capacity.memory_caps(problem, local_pack), by_hosts=True)
    obj = plan_objectives(cap, plan)
    report = validate(cap, plan.to_json(cap), M)
    assert report.valid == obj.fits, report.errors[:3]
    if not obj.fits:  # the only errors are the budget's
        assert all(e.startswith("budget:") for e in report.errors), report.errors[:3]
    # a relay is taken only when no touched tile rises above the worst; the model's tables differ from the exact
    # ones by at most its slack (seams, phase entries, rounding)
    slack = max(model_slack(problem).values(), default=0)
    assert obj.table <= problem.direct.worst_table() + slack
    again = capacity.relay_greedy(problem, capacity.memory_caps(problem, local_pack), by_hosts=True)
    assert again.to_json(cap) == plan.to_json(cap)


def test_local_pack_relieves_the_sender_a_gather_cannot() -> None:
    """One 19-fragment operand from a single sender on three replicas: the sender, with 19 sends, is the worst
    tile. A direct-receive relay gathers the fragments one for one, so the sender keeps its sends (160 B, as
    direct); a local-pack relay gathers the sender's one source run whole, and the worst tile halves."""
    cap = relay_capture(groups=1, fragments=19, replicas=3, senders=1, phases=1, seed=0)
    problem = prepare(cap, M, 10**6, 16384).problem
    gathers = capacity.relay_greedy(problem, capacity.memory_caps(problem), by_hosts=True)
    packed = capacity.relay_greedy(problem, capacity.memory_caps(problem, local_pack=True), by_hosts=True)
    assert problem.direct.worst_table() == plan_objectives(cap, gathers).table == 160
    assert plan_objectives(cap, packed).table == 80
    assert [r.variant for r in packed.relays] == ["local-pack"]
    assert validate(cap, packed.to_json(cap), M).valid


# Each of the construction's closing moves on an instance where it lowers the worst tile on its own:
# - re-cut: three operands on replica pairs, four senders each; the construction cuts them fine so that their
#   hosts stay light, and its worst tile is then a replica a coarser cut relieves, with room for the larger segments;
# - packing: five operands over three phases; hosted phase by phase, as each group is relayed, the early segments
#   take the roomiest tiles whatever their size, and packed together, the largest first, they leave less on top;
# - coarsening: five operands over two phases; a coarser cut of a relayed operand adds fewer rows in all, and where
#   its segments find hosts under the worst tile the construction takes it;
# - cutting finer: two operands over two phases; the worst tile hosts a segment no other tile can take under it,
#   and the second close, which cuts that segment's operand finer, ends lower (``_close_both``).
# per move: (groups, replicas, phases, seed) of 19-fragment operands with four senders each, the other moves turned
# off in both runs, and the worst tile with the move and without it.
CLOSING_MOVES = {
    "recut": ((3, 2, 1, 22), ("_repack", "_coarsen"), 80, 104),
    "repack": ((5, 3, 3, 6), ("_coarsen",), 192, 232),
    "coarsen": ((5, 2, 2, 4), ("_repack",), 184, 224),
    "cut_finer": ((2, 2, 2, 28), (), 120, 184),
}


@pytest.mark.parametrize("move", list(CLOSING_MOVES))
def test_each_closing_move_lowers_the_worst_tile(monkeypatch: pytest.MonkeyPatch, move: str) -> None:
    (groups, replicas, phases, seed), off, with_it, without_it = CLOSING_MOVES[move]
    cap = relay_capture(groups=groups, fragments=19, replicas=replicas, senders=4, phases=phases, seed=seed)
    problem = prepare(cap, M, 10**6, 16384).problem
    _without(monkeypatch, *off)
    plan = capacity.relay_greedy(problem, capacity.memory_caps(problem), by_hosts=True)
    _without(monkeypatch, f"_{move}")
    without = capacity.relay_greedy(problem, capacity.memory_caps(problem), by_hosts=True)
    assert plan_objectives(cap, plan).table == with_it
    assert plan_objectives(cap, without).table == without_it
    assert validate(cap, plan.to_json(cap), M).valid


def test_the_construction_hands_back_the_close_it_did_not_keep() -> None:
    """On the cutting-finer instance above the two closes differ: the kept plan is the lower, and the other (the
    combination may want its phases) is handed back, valid too."""
    (groups, replicas, phases, seed), _off, with_it, without_it = CLOSING_MOVES["cut_finer"]
    cap = relay_capture(groups=groups, fragments=19, replicas=replicas, senders=4, phases=phases, seed=seed)
    problem = prepare(cap, M, 10**6, 16384).problem
    other: list[Plan] = []
    plan = capacity.relay_greedy(problem, capacity.memory_caps(problem), by_hosts=True, other=other)
    assert [plan_objectives(cap, p).table for p in (plan, *other)] == [with_it, without_it]
    assert all(validate(cap, p.to_json(cap), M).valid for p in (plan, *other))


def _without(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    """Turn off some of the construction's closing moves (``_recut``, ``_repack``, ``_coarsen``, ``_cut_finer``)."""
    for name in names:
        off = False if name in ("_repack", "_cut_finer") else 0  # what each returns when it does nothing
        monkeypatch.setattr(capacity, name, lambda *_args, off=off: off)


def test_select_keeps_the_construction_when_the_rule_does_not_fit() -> None:
    """On the instance above with a budget the production rule's plan breaks, the selection fits it (the host-aware
    plan is one of its candidates), and with the table first it is never above the construction's table."""
    cap = _heavy_and_light()
    problem = prepare(cap, M, 600, 16384).problem
    built = plan_objectives(cap, capacity.relay_greedy(problem, capacity.memory_caps(problem), by_hosts=True))
    params = SolverParams(time_limit=10, workers=1, seed=0)
    for order in (OBJECTIVES, ("table", "cycles", "scratch", "relays")):
        out = select(cap, M, 600, 16384, SelectionSettings(params=params, order=order))
        assert not out.greedy_objectives.fits
        assert out.objectives.fits
        assert validate(cap, out.plan.to_json(cap), M).valid
        if order[0] == "table":
            assert out.objectives.table <= built.table
