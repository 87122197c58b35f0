"""The local-pack relays a held table forces (``placer.selection.forced``): every plan at or under the target pays
for them in its measured lower bound, checked against every plan of instances small enough to enumerate, and the
table-first solve reports the cycles bound they raise."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture.model import Capture, Phase
from placer.selection.columns import Pool
from placer.selection.floors import mass_floor, tile_floors
from placer.selection.forced import ForcedPacking, above, forced_packing, kernel_cycles, without_packing
from placer.selection.plan import Plan
from placer.selection.problem import SelectionProblem
from placer.selection.select import SelectionSettings, plan_objectives, prepare, select
from placer.selection.timing import other_bounds, relay_free_bound
from placer.solver import SolverParams
from placer.validation import validate
from tests.builders import every_relay_plan, group_phase, relay_capture, small_machine

M = small_machine(8)


def _single_sender() -> Capture:
    """One 19-fragment operand from a single sender on three replicas, four spare tiles: the sender, with 19
    sends, is the worst tile (160 B); a direct-receive relay keeps its sends, a local-pack one halves it (80 B)."""
    return relay_capture(tiles=8, groups=1, fragments=19, replicas=3, senders=1, phases=1, seed=0)


def _phase_bounds(problem: SelectionProblem, plan: Plan) -> dict[int, int]:
    """Per selection phase: the plan's measured lower bound, as the selection measures it."""
    ids = [pd.phase.phase for pd in problem.phases]
    pool = Pool(problem, ids)
    choice = pool.add(plan, "enumerated")
    return {pid: pool.columns[k][c].figures.bound for k, (pid, c) in enumerate(zip(ids, choice, strict=True))}


def _plans_at(cap: Capture, problem: SelectionProblem, target: int, packs: list[ForcedPacking]) -> int:
    """Check every plan at or under ``target`` against the bound; return how many there are."""
    bound = {pd.phase.phase: relay_free_bound(problem, pd.phase.phase) for pd in problem.phases}
    for f in packs:
        bound[f.phase] += f.cycles
    seen = 0
    for plan in every_relay_plan(cap, problem, M, max_segments=3):
        if plan_objectives(cap, plan).table > target:
            continue
        seen += 1
        measured = _phase_bounds(problem, plan)
        assert all(measured[pid] >= bound[pid] for pid in bound), (measured, bound)
    return seen


def test_a_table_only_local_pack_reaches_forces_its_kernel() -> None:
    cap = _single_sender()
    problem = prepare(cap, M, 10**6, 16384).problem
    kernels = sorted(kernel_cycles(problem, op) for op in problem.phases[0].options[0] if op.variant == "local-pack")
    assert not above(problem, 80)
    assert above(without_packing(problem, 0, kernels[0]), 80)  # no local-pack option left: 160 B at best
    # and a finer local-pack cut cannot reach 80 B either: the one-segment relay's kernel, the larger, is forced
    assert len(kernels) == 2
    assert above(without_packing(problem, 0, kernels[1]), 80)
    packs = forced_packing(problem, 80)
    assert packs == [ForcedPacking(0, 80, kernels[1], M.exchange.sync_cycles + kernels[1])]
    assert _plans_at(cap, problem, 80, packs) >= 1
    # every plan is at 160 B or less: nothing is forced there
    assert forced_packing(problem, 160) == []


def test_a_problem_without_packing_keeps_the_other_phases_floors() -> None:
    # two phases: taking phase k's local-pack options away leaves the other phase's options, and the floor terms
    # it keeps of the other phase are the ones a fresh computation gives
    cap = relay_capture(tiles=16, groups=2, fragments=9, replicas=2, senders=2, phases=2, seed=3)
    problem = prepare(cap, small_machine(16), 10**6, 16384).problem
    tile_floors(problem)
    for index in range(2):
        r = without_packing(problem, index, 0)
        assert all(op.variant != "local-pack" for opts in r.phases[index].options for op in opts)
        assert r.phases[1 - index] is problem.phases[1 - index]
        fresh = replace(r, shared={})
        assert np.array_equal(tile_floors(r), tile_floors(fresh))
        assert mass_floor(r) == mass_floor(fresh)
        assert mass_floor(r).floor >= mass_floor(problem).floor


def test_the_table_first_solve_reports_the_raised_cycles_bound() -> None:
    cap = _single_sender()
    params = SolverParams(time_limit=20, workers=1, seed=0)
    out = select(cap, M, 10**6, 16384, SelectionSettings(params=params, order=("table", "cycles", "scratch", "relays")))
    assert out.objectives.table == 80
    assert validate(cap, out.plan.to_json(cap), M).valid
    assert out.staged is not None
    cycles = dict(out.staged.stages)["cycles"]
    problem = out.problem
    assert problem is not None
    kernel = max(kernel_cycles(problem, op) for op in problem.phases[0].options[0] if op.variant == "local-pack")
    relay_free = other_bounds(problem, [0]) + relay_free_bound(problem, 0)
    assert cycles.bound == relay_free + M.exchange.sync_cycles + kernel
    assert out.objectives.cycles >= cycles.bound
    assert "the local-pack relays the table forces (phase, kernel cycles: 0: " in out.note


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), a_frags=st.integers(3, 9), b_frags=st.integers(2, 8),
       a_senders=st.sampled_from([[2, 3], [2], [6]]), b_senders=st.sampled_from([[6], [7, 3]]))
def test_every_plan_at_the_best_table_pays_for_what_is_forced(seed: int, a_frags: int, b_frags: int,
                                                              a_senders: list[int], b_senders: list[int]) -> None:
    # two operands on two replicas each, local-pack offered: at the best table any enumerated plan reaches (at
    # least the optimum), whatever is proved forced is paid for by every plan at or under it
    a = group_phase(0, [0, 1], a_senders, a_frags, seed=seed)
    b = group_phase(0, [4, 5], b_senders, b_frags, seed=seed + 1)
    cap = Capture(tile_count=8, phases=[Phase.concat(0, [a, b])])
    problem = prepare(cap, M, 10**6, 16384).problem
    best = min(plan_objectives(cap, plan).table for plan in every_relay_plan(cap, problem, M, max_segments=3))
    packs = forced_packing(problem, best)
    assert all(f.target == best and f.cycles == M.exchange.sync_cycles + f.kernel for f in packs)
    assert _plans_at(cap, problem, best, packs) >= 1
