"""The table stage at the cycles bound (``placer.selection.capacity``): the constructive search's plans validate and
keep the cycles at their bound, and the capacity model's bound is never above what a plan at the bound reaches --
checked against every plan of an enumerable instance."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture.model import Capture, PanelHint, Phase
from placer.selection import capacity
from placer.selection.floors import model_slack
from placer.selection.greedy import budget_plan
from placer.selection.problem import SelectionProblem, build_problem
from placer.selection.select import lower_bounds, plan_objectives, prepare
from placer.solver import Cutoff, SolverParams, Status
from placer.validation import validate
from tests.builders import every_plan, group_phase, relay_capture, small_machine

M = small_machine(48)
PARAMS = SolverParams(time_limit=5, workers=1, seed=0)


def _at_bound(cap: Capture, machine: object, budget: int) -> tuple[object, int]:
    prep = prepare(cap, machine, budget, 16384)  # type: ignore[arg-type]
    return prep.problem, lower_bounds(prep.problem)["estimate"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), groups=st.integers(1, 4), fragments=st.integers(6, 40),
       replicas=st.integers(2, 4), budget=st.integers(200, 2000))
def test_constructive_plans_validate_at_the_cycles_bound(seed: int, groups: int, fragments: int, replicas: int,
                                                         budget: int) -> None:
    cap = relay_capture(groups=groups, fragments=fragments, replicas=replicas, phases=2, seed=seed)
    problem, cycles_bound = _at_bound(cap, M, budget)
    caps = capacity.phase_caps(problem)  # type: ignore[arg-type]
    plan = capacity.relay_greedy(problem, caps)  # type: ignore[arg-type]
    obj = plan_objectives(cap, plan)
    assert obj.estimate == cycles_bound  # every relay fits under its phase's caps
    report = validate(cap, plan.to_json(cap), M)
    assert report.valid == obj.fits, report.errors[:3]
    # the same input gives the same plan
    again = capacity.relay_greedy(problem, caps)  # type: ignore[arg-type]
    assert json.dumps(again.to_json(cap)) == json.dumps(plan.to_json(cap))
    # the capacity model's bound is below the plan it was hinted with, and below what its own choice realises
    res = capacity.solve(problem, PARAMS, model_slack(problem), caps, start=plan)  # type: ignore[arg-type]
    assert res.table.status is not Status.INFEASIBLE or not obj.fits
    if res.table.bound is not None and obj.fits:
        assert res.table.bound <= obj.table
    if res.choice is not None:
        found = capacity.place_segments(problem, res.choice, caps)  # type: ignore[arg-type]
        f_obj = plan_objectives(cap, found)
        assert f_obj.estimate == cycles_bound
        assert validate(cap, found.to_json(cap), M).valid == f_obj.fits
        if res.table.bound is not None and f_obj.fits:
            assert res.table.bound <= f_obj.table
        # moving segments off the worst tile keeps the plan at the cycles bound and valid
        relieved = capacity.relieve_hosts(problem, caps, found)  # type: ignore[arg-type]
        r_obj = plan_objectives(cap, relieved)
        assert r_obj.estimate == cycles_bound
        assert validate(cap, relieved.to_json(cap), M).valid == r_obj.fits


def test_capacity_bound_below_the_best_plan_at_the_bound() -> None:
    """Two groups on 8 tiles, small enough to enumerate every plan: the capacity model's proved bound is at most
    the best table any plan at the cycles bound reaches, and the constructive search finds a plan at the bound."""
    a = group_phase(0, [0, 1], [2, 3, 6], 9, holes=(4,))
    b = group_phase(0, [4, 5], [6, 2], 6)
    cap = Capture(tile_count=8, phases=[Phase.concat(0, [a, b])],
                  panels=[PanelHint(0, (0, 1), (0, 96, 192, 288)), PanelHint(0, (4, 5), (0, 96, 192))])
    machine = small_machine(8)
    problem, cycles_bound = _at_bound(cap, machine, 10**5)
    plans = every_plan(cap, problem, machine)  # type: ignore[arg-type]
    at_bound = [t for c, t in plans if c == cycles_bound]
    assert at_bound
    res = capacity.solve(problem, PARAMS, model_slack(problem), capacity.phase_caps(problem))  # type: ignore
    assert res.table.status is Status.OPTIMAL
    assert res.table.bound is not None
    assert res.table.bound <= min(at_bound)
    greedy = plan_objectives(cap, capacity.relay_greedy(problem, capacity.phase_caps(problem)))  # type: ignore
    assert greedy.estimate == cycles_bound
    assert greedy.table >= min(at_bound)


def test_a_sweep_shares_the_scarce_sets_and_builds_the_same_model() -> None:
    """The scarce sets depend on the options and caps, not the budget: a budget whose problem shares them (a sweep,
    ``dataclasses.replace``) builds the model a fresh problem builds, constraint for constraint."""
    cap = relay_capture(seed=3, groups=3, fragments=24, replicas=3, tiles=48)
    problem, _ = _at_bound(cap, M, 1500)
    caps = capacity.phase_caps(problem)  # type: ignore[arg-type]
    capacity.build(problem, caps, model_slack(problem))  # type: ignore[arg-type]
    shared = problem.shared["scarce_sets"]  # type: ignore[attr-defined]
    assert shared
    assert any(sets for _, sets in shared.values())  # the instance has scarce sets
    other = dataclasses.replace(problem, table_budget=1200)  # type: ignore[type-var]
    assert other.shared is problem.shared  # type: ignore[attr-defined]
    again, _ = _at_bound(cap, M, 1200)
    uncached = capacity.build(again, capacity.phase_caps(again), model_slack(again)).model.Proto()  # type: ignore
    cached = capacity.build(other, capacity.phase_caps(other), model_slack(other)).model.Proto()  # type: ignore
    assert str(cached) == str(uncached)  # the text format: every variable and constraint, in order


def test_relieving_the_worst_host_lowers_the_worst_tile(monkeypatch: pytest.MonkeyPatch) -> None:
    # an instance where the constructive search piles segments of several phases on one tile
    cap = relay_capture(groups=5, fragments=22, replicas=4, phases=3, seed=5)
    problem, cycles_bound = _at_bound(cap, M, 1923)
    caps = capacity.phase_caps(problem)  # type: ignore[arg-type]
    relieved = capacity.relay_greedy(problem, caps)  # type: ignore[arg-type]
    monkeypatch.setattr(capacity, "_relieve_hosts", lambda _st, _rounds: 0)
    piled = capacity.relay_greedy(problem, caps)  # type: ignore[arg-type]
    r_obj, p_obj = plan_objectives(cap, relieved), plan_objectives(cap, piled)
    assert r_obj.estimate == p_obj.estimate == cycles_bound
    assert r_obj.table < p_obj.table  # 296 B against 408 B when this test was written
    assert validate(cap, relieved.to_json(cap), M).valid == r_obj.fits
    # relieve_hosts on the piled plan does the same moves
    monkeypatch.undo()
    again = capacity.relieve_hosts(problem, caps, piled)  # type: ignore[arg-type]
    assert plan_objectives(cap, again).table < p_obj.table


def test_the_constructions_return_what_they_have_at_their_cutoff() -> None:
    """A command's time limit bounds the constructions too (PE-core b4 at 64 KiB: 23 s of a 30 s limit before
    they stopped at the cutoff): at a passed cutoff each returns a valid plan at once and says it stopped."""
    cap = relay_capture(groups=4, fragments=40, replicas=4, phases=2, seed=1)
    problem, _ = _at_bound(cap, M, 600)
    caps = capacity.phase_caps(problem)  # type: ignore[arg-type]
    full = capacity.relay_greedy(problem, caps)  # type: ignore[arg-type]
    assert full.relays  # a cutoff that has not fired changes nothing
    assert capacity.relay_greedy(problem, caps, cutoff=Cutoff()).to_json(cap) == full.to_json(cap)  # type: ignore
    stop = Cutoff(0.0)
    cut = capacity.relay_greedy(problem, caps, cutoff=stop)  # type: ignore[arg-type]
    assert stop.fired
    assert not cut.relays
    assert validate(cap, cut.to_json(cap), M).valid == plan_objectives(cap, cut).fits
    scans = prepare(cap, M, 600, 16384).scans
    built = budget_plan(cap, scans, M, 600, 16384)
    assert built.relays
    stop = Cutoff(0.0)
    assert not budget_plan(cap, scans, M, 600, 16384, cutoff=stop).relays
    assert stop.fired


def test_fewer_cuts_offers_the_counts_fewer_segmentations_would() -> None:
    """``fewer_cuts(problem, caps, 4)`` leaves each group the counts a problem built with four segmentations
    offers (here 1, 2, 12 and 24 of 1, 2, 3, 4, 12 and 24), and the construction on it builds a valid plan."""
    cap = relay_capture(groups=2, fragments=48, replicas=4, senders=4, phases=1, seed=3)
    six = build_problem(cap, M, 1200, 16384)
    four = build_problem(cap, M, 1200, 16384, max_counts=4)

    def counts(problem: SelectionProblem, caps: list[capacity.PhaseCaps]) -> list[list[int]]:
        return [sorted(problem.phases[pi].options[gi][oi].count for oi in idx)
                for pi, pc in enumerate(caps) for gi, idx in enumerate(pc.options)]

    fewer = capacity.fewer_cuts(six, capacity.memory_caps(six, True), 4)
    assert fewer is not None
    assert counts(six, capacity.memory_caps(six, True)) != counts(six, fewer)
    assert counts(six, fewer) == counts(four, capacity.memory_caps(four, True))
    assert capacity.fewer_cuts(six, capacity.memory_caps(six, True), 6) is None  # nothing to limit
    plan = capacity.relay_greedy(six, fewer, by_hosts=True)
    assert plan.relays
    assert all(r.segmentation.count in {1, 2, 12, 24} for r in plan.relays)
    assert validate(cap, plan.to_json(cap), M).valid == plan_objectives(cap, plan).fits
