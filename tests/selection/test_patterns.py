"""The hosted patterns (g, ``placer.selection.patterns``): the knapsack that prices a tile's hosting finds the best
pattern, the bound never exceeds a plan of small instances enumerated whole, and on SigLIP b2 it rises above the
hosted mass (f) and stays under the host-aware construction's plan."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture.model import Capture, Phase
from placer.machine import Machine
from placer.selection import capacity
from placer.selection.bounds import hosted_mass_bound
from placer.selection.floors import proved_floor
from placer.selection.patterns import _best_patterns, _pattern, _Types, hosted_patterns_bound
from placer.selection.select import plan_objectives, prepare
from placer.validation.table import program_table
from tests.builders import every_rewrite, group_phase, short_of_memory, small_machine

M = small_machine(8)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), phases=st.integers(1, 3), per_phase=st.integers(1, 4), room=st.integers(0, 12),
       classes=st.integers(1, 3))
def test_the_best_pattern_is_the_best_of_every_pattern(seed: int, phases: int, per_phase: int, room: int,
                                                        classes: int) -> None:
    rng = random.Random(seed)
    phase = np.repeat(np.arange(phases), per_phase)
    weight = np.array([rng.randint(0, 6) for _ in phase], np.int64)
    value = np.array([rng.choice([0.0, 0.5, 1.0, 2.5, 4.0]) for _ in phase])
    types = _Types([], [], [], [], phase, weight, np.ones((len(phase), 0), bool))
    # per class, the types its tiles' memory takes
    allowed = np.array([[rng.random() < 0.7 for _ in phase] for _ in range(classes)], bool)
    worth, taken = _best_patterns(types, phases, value, room, allowed)
    for c, r in itertools.product(range(classes), range(room + 1)):
        # at most one type per phase (None: none), each one the class takes, their weights within the room
        choices = [[None, *(s for s in np.flatnonzero(phase == p).tolist() if allowed[c, s])] for p in range(phases)]
        fits = [[s for s in pick if s is not None] for pick in itertools.product(*choices)]
        best = max(sum(value[s] for s in pick) for pick in fits if sum(int(weight[s]) for s in pick) <= r)
        assert worth[c, r] == pytest.approx(best)
        read = _pattern(types, taken, c, r)
        assert len({int(phase[s]) for s in read}) == len(read)
        assert all(allowed[c, s] for s in read)
        assert sum(int(weight[s]) for s in read) <= r
        assert sum(value[s] for s in read) == pytest.approx(best)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), two_phases=st.booleans(), local_pack=st.booleans(), short=st.booleans())
def test_the_hosted_patterns_stay_under_every_plan(seed: int, two_phases: bool, local_pack: bool,
                                                   short: bool) -> None:
    # bisected from the proved floor on their own (not from the hosted mass), then checked against the worst tile
    # of every plan of at most four segments (every plan of two phases takes minutes), counted by the validator;
    # ``short``: most tiles have little or no free memory, and a plan is one whose buffers the production
    # allocator's mirror places
    rng = random.Random(seed)
    phases = []
    for ph in range(2 if two_phases else 1):
        tiles = rng.sample(range(8), 5)
        phases.append(group_phase(ph, tiles[:2], tiles[2:2 + rng.randint(1, 2)], rng.randint(2, 6), seed=seed + ph))
    cap = Capture(tile_count=8, phases=phases)
    if short:
        cap = short_of_memory(cap, M, [rng.choice([0, 0, 64, 128, 256, 4096]) for _ in range(8)])
    problem = prepare(cap, M, 10**6, 16384, local_pack=local_pack).problem
    bound = hosted_patterns_bound(problem, proved_floor(problem), 4 * problem.direct.worst_table())
    best = min(int(program_table(p.phases, cap.tile_count, M)[0].max())
               for p in every_rewrite(cap, problem, M, 4, memory=short))
    assert proved_floor(problem) <= bound <= best


def test_the_hosted_patterns_see_each_tiles_free_memory() -> None:
    # two phases of one operand each (7 and 5 fragments of 32 bytes), local-pack offered; most tiles have 64-96
    # free bytes, which a coarse cut's buffer does not fit: with each tile's memory the patterns rise above the
    # same capture's with memory unlimited, and stay under every plan whose buffers the allocator places
    a = group_phase(0, [2, 4], [6], 7, seed=28)
    b = group_phase(1, [7, 6], [3], 5, seed=29)
    loose = Capture(tile_count=8, phases=[a, b])
    short = short_of_memory(loose, M, [64, 64, 96, 96, 0, 256, 96, 0])
    bounds = []
    for cap in (loose, short):
        problem = prepare(cap, M, 10**6, 16384, local_pack=True).problem
        bound = hosted_patterns_bound(problem, proved_floor(problem), 4 * problem.direct.worst_table())
        best = min(int(program_table(p.phases, cap.tile_count, M)[0].max())
                   for p in every_rewrite(cap, problem, M, 4, memory=cap is short))
        assert proved_floor(problem) <= bound <= best
        bounds.append(bound)
    assert bounds[1] > bounds[0]


def test_the_hosted_patterns_reach_the_hosted_mass_on_its_named_instance() -> None:
    # the hosted mass's named instance (tests/selection/test_table_bounds.py): the patterns, from the proved floor,
    # reach at least as high (one phase: a tile's pattern is one segment, which the mass's levels already count)
    a = group_phase(0, [0, 1], [2, 3, 6], 7, seed=9)
    b = group_phase(0, [4, 5], [6], 4, seed=10)
    cap = Capture(tile_count=8, phases=[Phase.concat(0, [a, b])])
    problem = prepare(cap, M, 10**6, 16384, local_pack=True).problem
    upper = 4 * problem.direct.worst_table()
    hosted = hosted_mass_bound(problem, upper)
    assert hosted > proved_floor(problem)
    assert hosted_patterns_bound(problem, proved_floor(problem), upper) >= hosted
    # given no time, no probe runs, and the bound is the one it started from (on the granule)
    granule = M.cost.table_rounding
    assert hosted_patterns_bound(problem, proved_floor(problem), upper, until=0.0) == \
        -(-proved_floor(problem) // granule) * granule


@pytest.mark.slow
def test_the_hosted_patterns_rise_above_the_hosted_mass_on_siglip_b2(siglip2: Capture, machine: Machine) -> None:
    # a tile's room is shared by what it hosts in every phase: 58 tiles have room for a 7.8 KB MLP-down segment at
    # the hosted mass's bound, and then none for a second large one (docs/selection.md, "Bounds", (g))
    problem = prepare(siglip2, machine, 81920, machine.budget.fragments, local_pack=True).problem
    plan = capacity.relay_greedy(problem, capacity.memory_caps(problem, local_pack=True), by_hosts=True)
    worst = plan_objectives(siglip2, plan).table
    hosted = hosted_mass_bound(problem, worst)
    patterns = hosted_patterns_bound(problem, hosted, worst)
    assert hosted < patterns <= worst
    assert hosted_patterns_bound(problem, hosted, worst) == patterns
