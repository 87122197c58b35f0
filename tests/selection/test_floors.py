"""Infeasibility certificates (``floors.certificate``): a tile named in one is over the budget in every plan, and the
tables' total is never under the mass floor, checked against every plan of random instances small enough to
enumerate, each costed by the independent validator's table count; a certificate's parts add up to its floors;
``select`` claims infeasibility with it, and says why."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture.model import Capture, PanelHint, Phase
from placer.machine import Machine
from placer.report.selection import outcome_json, render_certificate
from placer.selection import bounds
from placer.selection.floors import certificate, host_rounding, mass_floor, model_slack, proved_floor, tile_floors
from placer.selection.select import SelectionSettings, lower_bounds, prepare, select
from placer.solver import SolverParams, Status
from placer.validation.table import program_table
from tests.builders import every_rewrite, group_phase, small_machine

M = small_machine(8)
FAST = SolverParams(time_limit=5.0, workers=1, seed=0)


def _two_groups(seed: int, a_frags: int, b_frags: int, a_senders: list[int], b_senders: list[int],
                panels: bool) -> Capture:
    a = group_phase(0, [0, 1], a_senders, a_frags, seed=seed)
    b = group_phase(0, [4, 5], b_senders, b_frags, seed=seed + 1)
    hints = [PanelHint(0, (0, 1), (0, 32 * a_frags)), PanelHint(0, (4, 5), (0, 32 * b_frags))] if panels else []
    return Capture(tile_count=8, phases=[Phase.concat(0, [a, b])], panels=hints)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), a_frags=st.integers(3, 9), b_frags=st.integers(2, 8),
       a_senders=st.sampled_from([[2, 3], [2, 3, 6], [6]]), b_senders=st.sampled_from([[6, 2], [6], [7, 3]]),
       panels=st.booleans(), below=st.integers(1, 64))
def test_a_certificate_holds_for_every_plan(seed: int, a_frags: int, b_frags: int, a_senders: list[int],
                                            b_senders: list[int], panels: bool, below: int) -> None:
    cap = _two_groups(seed, a_frags, b_frags, a_senders, b_senders, panels)
    floors = tile_floors(prepare(cap, M, 10**6, 16384).problem)
    budget = max(int(floors.max()) - below, 0)  # under the highest floor: at least one tile is certified
    problem = prepare(cap, M, budget, 16384).problem
    cert = certificate(problem)
    assert cert is not None
    assert cert.tiles
    for c in cert.tiles:
        assert c.floor > budget
        assert c.floor == floors[c.tile]  # the phases add up to the floor the search uses
        assert c.bytes_over == c.floor - budget
    mass = mass_floor(problem)
    assert (cert.mass is not None) == (mass.floor > budget)
    plans = 0
    for program in every_rewrite(cap, problem, M, max_segments=3):
        table, _frags = program_table(program.phases, cap.tile_count, M)
        for c in cert.tiles:
            assert table[c.tile] >= c.floor, (c.tile, int(table[c.tile]), c.floor)
        assert int(table.sum()) >= mass.total  # so the worst tile is at least the mean floor
        plans += 1
    assert plans > 1  # relays were tried, not only the direct program
    assert lower_bounds(problem)["table"] >= max(int(floors.max()), mass.floor)


@pytest.mark.parametrize("local_pack", [True, False])
@pytest.mark.parametrize("seed", [0, 3])
def test_a_tile_one_group_touches_per_phase_gets_its_least_table_as_floor(local_pack: bool, seed: int) -> None:
    # two operands on disjoint replica pairs, one phase: no tile receives from two groups, so nothing seams and every
    # option's change is exact; each tile's floor is then the least its table is in any plan (local-pack ones
    # included: a replica a local-pack relay leaves idle loses its entry and pays the extra phase's), not a
    # byte less
    a = group_phase(0, [0, 1], [2, 3], 5, seed=seed)
    b = group_phase(0, [4, 5], [6], 6, seed=seed + 1)
    cap = Capture(tile_count=8, phases=[Phase.concat(0, [a, b])])
    problem = prepare(cap, M, 10**6, 16384, local_pack=local_pack).problem
    least = None
    for program in every_rewrite(cap, problem, M, max_segments=2):
        table, _frags = program_table(program.phases, cap.tile_count, M)
        least = table if least is None else np.minimum(least, table)
    assert least is not None
    assert tile_floors(problem).tolist() == least.tolist()


def test_select_claims_infeasibility_with_its_certificate() -> None:
    cap = _two_groups(7, 9, 6, [2, 3, 6], [6, 2], True)
    floors = tile_floors(prepare(cap, M, 10**6, 16384).problem)
    budget = int(floors.max()) - 8
    out = select(cap, M, budget, 16384, SelectionSettings(params=FAST, local_pack=False))
    assert out.status is Status.INFEASIBLE
    assert out.certificate is not None
    assert out.certificate.tiles[0].tile == int(floors.argmax())
    assert not out.objectives.fits
    doc = json.loads(json.dumps(outcome_json(cap, out, None)))
    first = doc["certificate"]["tiles"][0]
    assert first["floor"] == sum(p["floor"] for p in first["phases"]) == first["budget"] + first["bytes_over"]
    assert all(p["direct"] + p["relief"] - p["seams"] + p["rounding"] == p["floor"] for p in first["phases"])
    text = render_certificate(out.certificate).splitlines()
    assert text[1].startswith(f"  tile {first['tile']}: at least {first['floor']:,} B against {budget:,} B")
    assert "phase 0" in text[2]


def _every_tile_busy(frags: int, shift: int) -> Capture:
    """Four operands on replica pairs covering all eight tiles, each sent by two tiles of other pairs: every tile
    could lose rows, but every host gains them."""
    pairs = [[0, 1], [2, 3], [4, 5], [6, 7]]
    groups = [group_phase(0, pairs[i], [pairs[(i + 1 + shift) % 4][0], pairs[(i + 2 + shift) % 4][1]], frags,
                          seed=i) for i in range(4)]
    return Capture(tile_count=8, phases=[Phase.concat(0, groups)])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frags=st.integers(3, 6), shift=st.integers(0, 3))
def test_the_mass_floor_alone_can_prove_it(frags: int, shift: int) -> None:
    # every tile could fit on its own, but the tables cannot all shrink at once: their least total is above the
    # budget on average
    cap = _every_tile_busy(frags, shift)
    problem = prepare(cap, M, 10**6, 16384).problem
    mass = mass_floor(problem)
    assert mass.floor > int(tile_floors(problem).max())  # the instance is built for it
    at = dataclasses.replace(problem, table_budget=mass.floor - 1)
    cert = certificate(at)
    assert cert is not None
    assert cert.mass is not None
    assert not cert.tiles
    assert cert.mass.total == mass.direct + mass.relief - mass.slack
    assert "some tile holds at least" in render_certificate(cert)
    for program in every_rewrite(cap, problem, M, max_segments=2):
        table, _frags = program_table(program.phases, cap.tile_count, M)
        assert int(table.sum()) >= mass.total
        assert int(table.max()) >= mass.floor


@pytest.mark.parametrize("seed", [1, 2, 5])
def test_hosting_rounds_with_the_direct_row(seed: int) -> None:
    # tile 6 takes part in the phase (an interleaved point-to-point operand: a pointer reset makes its row a multiple
    # of 4, not of 8) and no option touches it: a segment hosted there rounds together with its direct row, so the
    # mass and the relaxation give that back; both stay under every plan
    a = group_phase(0, [0, 1], [2, 3], 6, seed=seed)
    lone = group_phase(0, [6], [7], 3, interleave=True, seed=seed + 5)
    cap = Capture(tile_count=8, phases=[Phase.concat(0, [a, lone])])
    problem = prepare(cap, M, 10**6, 16384).problem
    assert host_rounding(problem).tolist() == [0, 0, 0, 0, 0, 0, 4, 0]
    mass = mass_floor(problem)
    lp = bounds.table_lp_bound(problem, model_slack(problem), time_limit=5.0)
    assert lp is not None
    for program in every_rewrite(cap, problem, M):
        table, _frags = program_table(program.phases, cap.tile_count, M)
        assert int(table.sum()) >= mass.total
        assert int(table.max()) >= max(lp, mass.floor)


@pytest.mark.parametrize("shift", [0, 8])
def test_no_certificate_when_nothing_proves_it(shift: int) -> None:
    cap = _two_groups(7, 9, 6, [2, 3, 6], [6, 2], True)
    problem = prepare(cap, M, 10**6, 16384).problem
    budget = max(int(tile_floors(problem).max()), mass_floor(problem).floor) + shift
    assert certificate(dataclasses.replace(problem, table_budget=budget)) is None


@pytest.mark.slow
@pytest.mark.parametrize("model", ["siglip-so400m", "pe-core-l14"])
def test_a_batch_four_certificate_survives_the_validators_count(model: str, machine: Machine) -> None:
    """Batch four, one layer, a byte under the proved floor: the certificate's direct parts are what the validator
    counts for the direct program, and every plan placer builds there -- the production rule's, the budget-aware
    construction at four targets, the host-aware construction (both its closes where they differ) -- rewritten
    and counted by the validator has each certified tile at or above its floor and the tables' total at or above
    the mass (so no plan fits)."""
    from placer.modes import PlanMode
    from placer.selection.greedy import budget_plan, production_plan
    from placer.selection.plan import Plan
    from placer.selection.select import _host_aware_plans
    from placer.solver import Cutoff
    from placer.workloads.generate import generate

    cap = generate(model, batch=4, machine=machine)
    prepared = prepare(cap, machine, 10**6, 16384, workers=2)
    floor = proved_floor(prepared.problem)
    problem = prepared.for_budget(floor - 1)
    cert = certificate(problem)
    assert cert is not None
    direct, _frags = program_table(cap.phases, cap.tile_count, machine, cap.allocations)
    for c in cert.tiles:
        assert sum(p.direct for p in c.phases) == direct[c.tile], c.tile
    if cert.mass is not None:
        assert cert.mass.direct == int(direct[: problem.tiles].sum())
    plans = [production_plan(cap, machine, floor - 1, 16384, direct=problem.direct, workers=2)[0],
             *(plan for plan, _name in _host_aware_plans(problem, Cutoff()))]
    for share in (1.0, 0.8, 0.7, 0.5):
        built = budget_plan(cap, prepared.scans, machine, int(share * (floor - 1)), 16384)
        plans.append(Plan(PlanMode.CPSAT, machine, floor - 1, 16384, built.relays))
    for plan in plans:
        assert plan.relays
        program = plan.rewritten(cap)
        table, _frags = program_table(program.phases, cap.tile_count, machine, program.allocations)
        for c in cert.tiles:
            assert table[c.tile] >= c.floor, (c.tile, int(table[c.tile]), c.floor)
        if cert.mass is not None:
            assert int(table[: problem.tiles].sum()) >= cert.mass.total
        assert int(table.max()) >= floor
