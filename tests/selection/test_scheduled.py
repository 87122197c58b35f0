"""Selection by scheduled cycles (``placer.selection.timing``, ``placer.selection.columns``): the cycle figures the
selection uses are lower bounds that no schedule beats, the combined plan is never worse than the production
rule's and validates, and the same input gives the same plan."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from placer.modes import OrderingRules
from placer.ordering.schedule import OrderingParams, schedule_phase
from placer.selection import capacity
from placer.selection.select import SLACKS, SelectionContext, SelectionSettings, prepare, select
from placer.selection.timing import direct_timings, phase_figures, relay_free_bound, schedule_caps
from placer.solver import SolverParams
from placer.validation import validate
from tests.builders import relay_capture, small_machine

M = small_machine(48)
FAST = SolverParams(time_limit=10, workers=2, seed=0)
ORDER = SolverParams(time_limit=2, workers=1, seed=0)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), groups=st.integers(1, 3), fragments=st.integers(8, 40),
       replicas=st.integers(2, 4), long_words=st.sampled_from([0, 600, 2000]), slack=st.sampled_from(SLACKS),
       uniform=st.booleans())
def test_the_cycle_bounds_never_exceed_a_scheduled_horizon(seed: int, groups: int, fragments: int, replicas: int,
                                                            long_words: int, slack: float, uniform: bool) -> None:
    """On every phase a schedule-true construction relays: the relay-free bound (the cycles stage's bound) is at
    most the phase's measured lower bound, which is at most the reference's B1024 horizon and the horizon of
    placer's best order -- checked by scheduling the rewritten phase."""
    cap = relay_capture(groups=groups, fragments=fragments, replicas=replicas, phases=2, seed=seed,
                        long_words=long_words)
    problem = prepare(cap, M, 10**6, 16384).problem
    ids = [pd.phase.phase for pd in problem.phases]
    timings = direct_timings(problem, ids)
    caps = schedule_caps(problem, timings, [timings[i].figures.bound + int(slack * timings[i].figures.bound)
                                            for i in ids])
    if uniform:
        plan = capacity.place_segments(problem, capacity.uniform_choice(problem, caps, 1), caps, prefer="highest")
    else:
        plan = capacity.relay_greedy(problem, caps)
    for pid in sorted({r.group.phase for r in plan.relays}):
        main, _ = plan.phase_rewrite(cap.phase_by_id(pid))
        figures = phase_figures(main, M, cap.tile_count)
        best = schedule_phase(main, M, "cpsat", ORDER, OrderingParams(rules=OrderingRules.REFERENCE),
                              tiles=cap.tile_count)
        assert best.greedy_horizon == figures.b1024
        assert relay_free_bound(problem, pid) <= figures.bound <= min(figures.b1024, best.horizon), pid
    # every plan it builds is a correct rewrite (the caps never put a buffer or a host where it may not go)
    report = validate(cap, plan.to_json(cap), M)
    assert report.valid, report.errors[:3]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), groups=st.integers(1, 3), fragments=st.integers(8, 40),
       long_words=st.sampled_from([0, 2000]), budget=st.integers(150, 1500))
def test_the_combined_plan_is_never_worse_than_the_rule_and_validates(seed: int, groups: int, fragments: int,
                                                                    long_words: int, budget: int) -> None:
    cap = relay_capture(groups=groups, fragments=fragments, phases=2, seed=seed, long_words=long_words)
    out = select(cap, M, budget, 16384, SelectionSettings(params=FAST))
    obj, rule = out.objectives, out.greedy_objectives
    assert out.scheduled is not None
    assert out.greedy_scheduled is not None
    assert validate(cap, out.plan.to_json(cap), M).valid == obj.fits
    # a plan that fits beats one that does not; within the caps the table decides, then the cycles
    if rule.fits:
        assert obj.fits
        assert obj.table <= rule.table
    if out.caps is not None and out.caps.held:
        assert obj.b1024 <= rule.b1024
        assert obj.cycles <= out.caps.lower_bound
        assert "the caps are not in it" in out.note  # the table bound's gap explained where the caps held
    elif out.caps is not None:
        assert "the caps are not in it" not in out.note
    for name, res in out.staged.stages if out.staged is not None else []:
        assert res.bound is not None, name
        assert res.objective is not None, name
        assert res.bound <= res.objective, name
    again = select(cap, M, budget, 16384, SelectionSettings(params=FAST))
    assert json.dumps(again.plan.to_json(cap)) == json.dumps(out.plan.to_json(cap))


def test_room_in_the_schedule_buys_a_smaller_plan_at_the_same_cycles() -> None:
    """With a long transfer setting each phase's length, placer relays without adding a scheduled cycle; without
    it every relay would lengthen the phase and nothing is relayed under the caps but what the budget needs."""
    roomy = relay_capture(groups=3, fragments=40, phases=2, seed=4, long_words=2000)
    out = select(roomy, M, 10**5, 16384, SelectionSettings(params=FAST))
    assert out.plan.relays
    assert out.caps is not None
    assert out.caps.held
    assert out.objectives.table < out.greedy_objectives.table
    assert out.objectives.cycles == out.scheduled.direct_bound  # type: ignore[union-attr]
    tight = relay_capture(groups=3, fragments=40, phases=2, seed=4)
    assert not select(tight, M, 10**5, 16384, SelectionSettings(params=FAST)).plan.relays


def test_measuring_stops_at_the_search_end_and_says_so() -> None:
    """When the clock has passed the search's end before the production rule's plan is measured, the selection
    keeps the rule's plan (it fits) unmeasured instead of overrunning the time limit (hardening round two)."""
    import time

    from placer.selection.select import UNMEASURED
    from placer.selection.timing import OutOfTime, in_time
    from placer.solver import Deadline

    with pytest.raises(OutOfTime):
        in_time(lambda x: x, time.perf_counter() - 1)(0)

    def increment(x: int) -> int:
        return x + 1

    assert in_time(increment, None)(1) == 2
    cap = relay_capture(groups=3, fragments=40, phases=2, seed=4, long_words=2000)
    for mode in ("cpsat", "greedy"):
        # a clock that started long ago: the search's end is behind it
        out = select(cap, M, 10**5, 16384, SelectionSettings(mode=mode, params=FAST),
                     SelectionContext(deadline=Deadline(10, time.perf_counter() - 60)))
        assert out.scheduled is None
        assert UNMEASURED in out.note
        assert out.objectives.cycles == 0
        assert validate(cap, out.plan.to_json(cap), M).valid == out.objectives.fits


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), groups=st.integers(1, 3), fragments=st.integers(8, 40),
       budget=st.integers(150, 1500), held=st.booleans())
@example(seed=5, groups=1, fragments=29, budget=160, held=False)  # the improvement reaches a tighter level
def test_a_combination_cp_sat_cannot_settle_keeps_the_best_measured_plan(seed: int, groups: int, fragments: int,
                                                                         budget: int, held: bool) -> None:
    """When every CP-SAT solve of the combination ends unknown (its share of a second ran out, as on SigLIP b4),
    the answer is still a measured plan -- the best by the model's own order, improved phase by phase -- and
    never the production rule's by default: a plan that fits is kept (it validates)."""
    from unittest import mock

    from placer.selection import columns
    from placer.solver import SolveResult, Status

    cap = relay_capture(groups=groups, fragments=fragments, phases=2, seed=seed)
    out = select(cap, M, budget, 16384, SelectionSettings(params=FAST))
    assume(out.certificate is None)  # proved infeasible before any search (seed 0, one group, budget 150): no pool
    pool = out.pool
    assert pool is not None
    assert pool.plans
    rule_bound, rule_b = pool.figures(out.greedy_choice)
    caps = columns.Caps(rule_bound, rule_b) if held else columns.Caps()
    unknown = (None, SolveResult(Status.UNKNOWN, None, None, 0.0))
    with mock.patch.object(columns, "run", return_value=unknown):
        comb = columns.combine(pool, caps, FAST, ("table", "cycles"))
    assert comb is not None
    got = columns._valued(pool, comb.choice, caps)
    measured = [columns._valued(pool, c, caps) for c in pool.plans]
    level = min(v.level for v in measured)
    # improved phase by phase, the answer may reach a tighter level than any plan measured whole (seed 5, one
    # group, budget 160: the best measured plan breaks the budget, its improvement fits); its flags say which
    assert got.level <= level
    assert (comb.fits, comb.capped) == ((True, True), (True, False), (False, False))[got.level]
    level = got.level
    stages = ["table", "cycles"] if level == 0 else ["cycles", "table"] if level == 1 else ["excess", "table",
                                                                                             "cycles"]
    assert all(columns._rank(got, stages) <= columns._rank(v, stages) for v in measured if v.level == level)
    assert validate(cap, pool.plan(comb.choice).to_json(cap), M).valid == comb.fits
    # the phase-by-phase improvement keeps the level, is never worse, and leaves no single phase's change better
    for v in measured:
        order = ["table", "cycles"] if v.level == 0 else ["cycles", "table"] if v.level == 1 else ["excess", "table"]
        d = columns._descend(pool, v, caps, v.level, order)
        assert d.level <= v.level
        assert columns._rank(d, order) <= columns._rank(v, order)
        for k, cols in enumerate(pool.columns):
            for c in range(len(cols)):
                trial = columns._valued(pool, [*d.choice[:k], c, *d.choice[k + 1:]], caps)
                assert trial.level > v.level or columns._rank(trial, order) >= columns._rank(d, order)


def test_the_loosest_constructions_come_first_when_the_rule_does_not_fit() -> None:
    """The order of the schedule-true constructions: tightest target first, or loosest first (what a plan that
    must fit without the caps is made of, so a clock that stops the list early still has it)."""
    import time

    from placer.selection.select import SearchClock, scheduled_constructions
    from placer.solver import Deadline

    cap = relay_capture(groups=2, fragments=20, phases=2, seed=3)
    problem = prepare(cap, M, 10**5, 16384).problem
    clock = SearchClock(Deadline(10, time.perf_counter()), 1.0, 10.0)
    tight = [name for name, _ in scheduled_constructions(problem, clock)]
    loose = [name for name, _ in scheduled_constructions(problem, clock, loosest_first=True)]
    assert sorted(tight) == sorted(loose)
    assert tight[0] == f"construction at +{min(SLACKS):.0%}"
    assert loose[:2] == [f"construction at +{max(SLACKS):.0%}",
                         f"construction at +{max(SLACKS):.0%}, hosts in the rule's order"]


def test_the_combinations_work_does_not_follow_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """With little of the search's time left when the measurements end, a deterministic combination still gets its
    COMBINE_SECONDS of work (its answer must not depend on the machine's speed), backstopped by the wall clock at
    COMBINE_END of the limit; not deterministic, it gets what is left."""
    from dataclasses import replace

    from placer.selection import columns
    from placer.selection import select as sel

    seen: list[tuple[float, float | None]] = []
    real = columns.combine

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append((args[2].time_limit, kwargs.get("until")))
        return real(*args, **kwargs)

    monkeypatch.setattr(sel, "combine", spy)  # the name select calls
    monkeypatch.setattr(sel.SearchClock, "wall_left", lambda _self: 1.0)
    cap = relay_capture(groups=3, fragments=40, phases=2, seed=4, long_words=2000)
    for deterministic in (True, False):
        seen.clear()
        out = select(cap, M, 10**5, 16384, SelectionSettings(params=replace(FAST, deterministic=deterministic)))
        assert validate(cap, out.plan.to_json(cap), M).valid
        [(seconds, until)] = seen
        if deterministic:
            assert seconds == sel.COMBINE_SECONDS
            assert until is not None
        else:
            assert seconds == 1.0
            assert until is None


def test_a_plan_counts_only_the_configurations_not_yet_measured() -> None:
    """``Pool.unmeasured`` is what ``add`` would measure: a construction that adds nothing new is taken without
    asking the clock (SigLIP b4's last one was skipped for nothing, and the run reported a backstop)."""
    import time

    from placer.selection.columns import Pool

    cap = relay_capture(groups=3, fragments=40, phases=2, seed=4, long_words=2000)
    out = select(cap, M, 10**5, 16384, SelectionSettings(params=FAST))
    assert out.plan.relays
    problem = prepare(cap, M, 10**5, 16384).problem
    pool = Pool(problem, sorted({pd.phase.phase for pd in problem.phases}), 1, time.perf_counter() + 60)
    relayed = len({r.group.phase for r in out.plan.relays})
    assert pool.unmeasured(out.plan) == relayed
    before = pool.size()
    pool.add(out.plan, "test")
    assert pool.size() == before + relayed
    assert pool.unmeasured(out.plan) == 0
    pool.add(out.plan, "again")
    assert pool.size() == before + relayed
