"""The table bounds that hold for every plan (``select.lower_bounds``: per-tile floors, the average table mass, the
whole-program linear relaxation, the hosted mass, the hosted patterns) are never above the best plan, checked
against every plan of random instances small enough to enumerate; a budget under the hosted mass is proved
infeasible."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture.model import Capture, PanelHint, Phase
from placer.report.selection import render_certificate
from placer.selection import bounds, patterns
from placer.selection.floors import model_slack, proved_floor
from placer.selection.select import SelectionSettings, lower_bounds, prepare, select
from placer.solver import SolverParams, Status
from placer.validation.table import program_table
from tests.builders import every_plan, every_rewrite, group_phase, small_machine

M = small_machine(8)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), a_frags=st.integers(3, 9), b_frags=st.integers(2, 8),
       a_senders=st.sampled_from([[2, 3], [2, 3, 6], [6]]), b_senders=st.sampled_from([[6, 2], [6], [7, 3]]),
       panels=st.booleans(), local_pack=st.booleans())
def test_table_bounds_never_above_the_best_plan(seed: int, a_frags: int, b_frags: int, a_senders: list[int],
                                                b_senders: list[int], panels: bool, local_pack: bool) -> None:
    # the plans enumerated are of every option offered (local-pack ones too); without local-pack options
    # (``--no-local-pack``) the bounds are tighter (fewer options to take rows off a tile): never below those with
    # them
    a = group_phase(0, [0, 1], a_senders, a_frags, seed=seed)
    b = group_phase(0, [4, 5], b_senders, b_frags, seed=seed + 1)
    hints = [PanelHint(0, (0, 1), (0, 32 * a_frags)), PanelHint(0, (4, 5), (0, 32 * b_frags))] if panels else []
    cap = Capture(tile_count=8, phases=[Phase.concat(0, [a, b])], panels=hints)
    problem = prepare(cap, M, 10**6, 16384, local_pack=local_pack).problem
    plans = every_plan(cap, problem, M, max_segments=3)
    best = min(t for _c, t in plans)  # over a subset of the plans: at least the true optimum
    lp = bounds.table_lp_bound(problem, model_slack(problem), time_limit=5.0)
    assert lp is not None
    assert lp <= best
    problem.shared["table_lp"] = lp
    hosted = bounds.hosted_mass_bound(problem, 4 * problem.direct.worst_table())  # searched far above the plans
    assert hosted <= best
    problem.shared["hosted_mass"] = hosted
    hosted_patterns = patterns.hosted_patterns_bound(problem, hosted, 4 * problem.direct.worst_table())
    assert hosted_patterns <= best
    problem.shared["hosted_patterns"] = hosted_patterns
    assert lower_bounds(problem)["table"] <= best
    if not local_pack:
        offered = prepare(cap, M, 10**6, 16384).problem
        assert proved_floor(problem) >= proved_floor(offered)


@pytest.mark.parametrize(("seed", "b_senders", "b_frags", "local_pack"),
                         [(9, [6], 4, True), (40, [7, 3], 2, True), (44, [7, 3], 7, False)])
def test_the_hosted_mass_rises_above_the_floors_and_stays_under_every_plan(seed: int, b_senders: list[int],
                                                                           b_frags: int, local_pack: bool) -> None:
    # a seven-fragment operand sent by three of the eight tiles: the tiles with room for its larger segments are
    # few, so the least total the tables can add up to, with every segment where it fits, is above the mass (b) and
    # every tile floor (a) -- and, counted by the validator, under every plan
    a = group_phase(0, [0, 1], [2, 3, 6], 7, seed=seed)
    b = group_phase(0, [4, 5], b_senders, b_frags, seed=seed + 1)
    cap = Capture(tile_count=8, phases=[Phase.concat(0, [a, b])])
    problem = prepare(cap, M, 10**6, 16384, local_pack=local_pack).problem
    hosted = bounds.hosted_mass_bound(problem, 4 * problem.direct.worst_table())
    assert hosted > proved_floor(problem)
    for program in every_rewrite(cap, problem, M):
        table, _frags = program_table(program.phases, cap.tile_count, M)
        assert int(table.max()) >= hosted


@pytest.mark.parametrize(("seed", "b_senders", "b_frags", "local_pack"), [(9, [6], 4, True), (44, [7, 3], 7, False)])
def test_a_budget_under_the_hosted_mass_is_proved_infeasible(seed: int, b_senders: list[int], b_frags: int,
                                                             local_pack: bool) -> None:
    # the instances above, one granule under their hosted mass: the tile floors and the mass leave room for a plan,
    # the hosted mass at the budget does not -- the selection says so without search, and no plan fits
    a = group_phase(0, [0, 1], [2, 3, 6], 7, seed=seed)
    b = group_phase(0, [4, 5], b_senders, b_frags, seed=seed + 1)
    cap = Capture(tile_count=8, phases=[Phase.concat(0, [a, b])])
    problem = prepare(cap, M, 10**6, 16384, local_pack=local_pack).problem
    budget = bounds.hosted_mass_bound(problem, 4 * problem.direct.worst_table()) - M.cost.table_rounding
    assert budget >= proved_floor(problem)
    params = SolverParams(time_limit=10, workers=1, seed=0)
    out = select(cap, M, budget, 16384, SelectionSettings(params=params, local_pack=local_pack))
    assert out.status is Status.INFEASIBLE
    assert out.certificate is not None
    assert out.certificate.hosted is not None
    assert not out.certificate.tiles
    assert out.certificate.mass is None
    hosted = out.certificate.hosted
    assert hosted.target == budget
    assert hosted.floor > budget
    assert hosted.total == hosted.direct + hosted.relief - hosted.slack
    doc = out.certificate.to_json()
    assert doc["hosted"] is not None
    assert doc["hosted"]["floor"] == hosted.floor
    assert "relay segment must sit on a tile" in render_certificate(out.certificate)
    for program in every_rewrite(cap, problem, M):
        table, _frags = program_table(program.phases, cap.tile_count, M)
        assert int(table.max()) > budget
