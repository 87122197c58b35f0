"""Schedulers, bounds and the checker, on random small phases and on synthetic workload shapes."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import placer.chunkmodel.cpsat as cpsat_module
import placer.chunkmodel.search as search_module
import placer.ordering.schedule as schedule_module
from placer.capture.model import Phase
from placer.chunkmodel.bounds import lower_bound
from placer.chunkmodel.chunks import build_chunks
from placer.chunkmodel.cpsat import horizon_of, improve_lns, solve_exact
from placer.chunkmodel.greedy import RULES, greedy_starts, retime
from placer.chunkmodel.justify import forward_backward
from placer.chunkmodel.rows import expand
from placer.machine import load_machine
from placer.modes import OrderingRules
from placer.ordering.check import check_reference_schedule, check_schedule
from placer.ordering.schedule import OrderingParams, schedule_phase
from placer.refschedule.improve import OrderSearch
from placer.refschedule.reference import reference_table_bytes
from placer.solver import SolverParams, Status
from tests.ordering.synthetic import relay_phase, replica_phase

from .helpers import brute_force_horizon, small_phases

MACHINE = load_machine()
MODEL = OrderingParams(rules=OrderingRules.MODEL)  # placer's chunk model (these tests pin its rules)
FAST = SolverParams(time_limit=5.0, workers=2, seed=0)


def _valid(phase: Phase, starts: np.ndarray) -> int:
    chunks = build_chunks(phase, MACHINE)
    sched = expand(phase, chunks, starts)
    assert check_schedule(phase, sched.tx_start, sched.rx_start, sched.horizon, MACHINE) == []
    assert sched.horizon == horizon_of(chunks, starts)
    return sched.horizon


@settings(max_examples=40, deadline=None)
@given(small_phases(), st.sampled_from([64, 1024]))
def test_every_schedule_is_valid_and_bounded(phase: Phase, wave: int) -> None:
    chunks = build_chunks(phase, MACHINE, wave_words=wave)
    lb = lower_bound(chunks).best
    for rule in RULES:
        starts = greedy_starts(chunks, rule)
        sched = expand(phase, chunks, starts)
        assert check_schedule(phase, sched.tx_start, sched.rx_start, sched.horizon, MACHINE) == []
        assert sched.horizon >= lb
    fb = forward_backward(chunks, greedy_starts(chunks))
    assert horizon_of(chunks, fb) <= horizon_of(chunks, greedy_starts(chunks))
    sched = expand(phase, chunks, retime(chunks, fb))  # control-event cycles are resolved by the row builder
    assert check_schedule(phase, sched.tx_start, sched.rx_start, sched.horizon, MACHINE) == []


@settings(max_examples=25, deadline=None)
@given(small_phases(max_transfers=6))
def test_cpsat_never_worse_than_greedy(phase: Phase) -> None:
    ps = schedule_phase(phase, MACHINE, "cpsat", FAST, MODEL)
    assert ps.horizon <= ps.greedy_horizon
    assert ps.horizon >= ps.lower
    assert ps.cpsat is not None
    assert ps.cpsat.status in (Status.OPTIMAL, Status.FEASIBLE)
    s = ps.schedule
    assert check_schedule(phase, s.tx_start, s.rx_start, s.horizon, MACHINE) == []


@settings(max_examples=30, deadline=None)
@given(small_phases(max_transfers=4, max_words=120))
def test_exact_equals_brute_force(phase: Phase) -> None:
    chunks = build_chunks(phase, MACHINE, wave_words=64)
    assume(2 <= chunks.count <= 4)
    starts, res = solve_exact(chunks, greedy_starts(chunks), lower_bound(chunks).best, FAST)
    assert res.status is Status.OPTIMAL
    optimum = brute_force_horizon(chunks)
    assert horizon_of(chunks, starts) == optimum
    bound = lower_bound(chunks)
    assert max(bound.port, bound.clique, bound.chain, bound.head_tail) <= optimum


def test_relay_phase_forwards_after_gathers() -> None:
    phase = relay_phase(groups=3, replicas=5, fragments=40, segments=2)
    ps = schedule_phase(phase, MACHINE, ordering=MODEL)
    s = ps.schedule
    assert check_schedule(phase, s.tx_start, s.rx_start, s.horizon, MACHINE) == []
    deps = build_chunks(phase, MACHINE).transfer_deps
    # a forward starts only after its gathers have landed on the relay
    dt = phase.dst_transfer()
    landed = np.zeros(phase.n, np.int64)
    np.maximum.at(landed, dt, s.rx_start + phase.words[dt])
    assert (s.tx_start[deps.succ] >= landed[deps.pred]).all()


@pytest.mark.parametrize("mode", ["greedy", "cpsat"])
def test_workload_shapes(mode: str) -> None:
    phase = replica_phase(groups=6, replicas=8, fragments=120, sources=10, weight_words=1500, tiles=128)
    ps = schedule_phase(phase, MACHINE, mode, SolverParams(time_limit=3.0, workers=2), MODEL)
    s = ps.schedule
    assert check_schedule(phase, s.tx_start, s.rx_start, s.horizon, MACHINE) == []
    assert ps.lower <= ps.horizon <= ps.greedy_horizon
    assert 0.0 <= ps.gap < 1.0


def test_large_phase_uses_neighbourhoods_and_keeps_incumbent() -> None:
    phase = replica_phase(groups=8, replicas=10, fragments=200, sources=16, weight_words=2500, tiles=256)
    ps = schedule_phase(phase, MACHINE, "cpsat", SolverParams(time_limit=1.5, workers=2),
                        OrderingParams(exact_chunks=10, rules=OrderingRules.MODEL))
    assert ps.method == "neighbourhood"
    assert ps.horizon <= ps.greedy_horizon
    assert ps.cpsat is not None
    assert ps.cpsat.objective == ps.horizon
    assert ps.cpsat.bound == ps.lower
    s = ps.schedule
    assert check_schedule(phase, s.tx_start, s.rx_start, s.horizon, MACHINE) == []


def test_checker_catches_each_violation() -> None:
    phase = relay_phase(groups=1, replicas=3, fragments=8, segments=1)
    ps = schedule_phase(phase, MACHINE, ordering=MODEL)
    s = ps.schedule
    ok = (s.tx_start.copy(), s.rx_start.copy())

    def problems(tx: np.ndarray, rx: np.ndarray, horizon: int | None = None) -> str:
        h = s.horizon if horizon is None else horizon
        return " ".join(check_schedule(phase, tx, rx, h, MACHINE))

    assert problems(*ok) == ""
    # break latency of one receive
    rx = ok[1].copy()
    rx[0] += 1
    assert "expected" in problems(ok[0], rx)
    # two gathers into the relay at the same time (latency kept consistent): receive port overlap
    dt = phase.dst_transfer()
    lat = ok[1] - ok[0][dt]
    tx = ok[0].copy()
    tx[1] = tx[0]
    assert "receive port" in problems(tx, tx[dt] + lat)
    # the same transfer sent twice over its own lane window: lane overlap
    twice = Phase.concat(0, [phase.take(np.array([0])), phase.take(np.array([0]))])
    t2 = np.array([5, 6], np.int64)
    rx2 = t2[twice.dst_transfer()] + np.repeat(lat[:1], 2)
    assert "lane" in " ".join(check_schedule(twice, t2, rx2, int(rx2.max() + twice.words[0]), MACHINE))
    # a forward moved before its gathers: RAW
    fwd = int(np.flatnonzero(phase.fanout > 1)[0])
    tx = ok[0].copy()
    tx[fwd] = 0
    assert "RAW" in problems(tx, tx[dt] + lat)
    # wrong horizon, and a missing send
    assert "horizon" in problems(*ok, horizon=s.horizon + 1)
    tx = ok[0].copy()
    tx[0] = -1
    assert "not sent" in problems(tx, ok[1])


def test_empty_phase() -> None:
    phase = Phase.empty(4)
    ps = schedule_phase(phase, MACHINE, "cpsat", FAST, MODEL)
    assert ps.horizon == ps.lower == ps.greedy_horizon == 0
    assert ps.chunks == 0
    assert check_schedule(phase, ps.schedule.tx_start, ps.schedule.rx_start, 0, MACHINE) == []


@settings(max_examples=15, deadline=None)
@given(small_phases(max_transfers=6))
def test_same_seed_same_schedule(phase: Phase) -> None:
    a = schedule_phase(phase, MACHINE, "cpsat", FAST, MODEL)
    b = schedule_phase(phase, MACHINE, "cpsat", FAST, MODEL)
    assert a.schedule.tx_start.tolist() == b.schedule.tx_start.tolist()
    assert a.horizon == b.horizon


def test_neighbourhood_search_is_deterministic() -> None:
    phase = replica_phase(groups=4, replicas=6, fragments=80, sources=8, weight_words=1200, tiles=128)
    params = SolverParams(time_limit=1.5, workers=2, seed=3)
    ordering = OrderingParams(exact_chunks=10, rules=OrderingRules.MODEL)
    runs = [schedule_phase(phase, MACHINE, "cpsat", params, ordering) for _ in range(2)]
    assert runs[0].method == "neighbourhood"
    assert runs[0].schedule.tx_start.tolist() == runs[1].schedule.tx_start.tolist()
    s = runs[0].schedule
    assert check_schedule(phase, s.tx_start, s.rx_start, s.horizon, MACHINE) == []
    assert runs[0].horizon <= runs[0].greedy_horizon


def test_the_time_limit_bounds_the_whole_call_row_encoding_included(monkeypatch: pytest.MonkeyPatch) -> None:
    # the winner's row encoding runs after the search: its time is reserved up front (timed on the greedy's), so a
    # slow encoding shortens the search instead of overrunning the limit. Checked on the deadline the search gets
    # and on when its steps start, not on the clock of a possibly busy machine: when the search starts, the
    # greedy's encoding (``encode`` s or more here) has elapsed and as much again is held back, so at most the limit
    # less twice that is left (without the reservation: the limit less one encoding and the preparation)
    limit, encode = 2.0, 0.5
    real_encoding, real_search = reference_table_bytes, OrderSearch
    encodings: list[float] = []
    searches: list[tuple[float, float]] = []  # (seconds left to the search's deadline when it starts, deadline)
    timings: list[float] = []  # when each order the search tries is timed

    def slow_encoding(*args: object, **kwargs: object) -> np.ndarray:
        encodings.append(time.perf_counter())
        time.sleep(encode)
        return real_encoding(*args, **kwargs)  # type: ignore[arg-type]

    def recorded_search(phase: Phase, deps: object, levels: object, time_order: Callable[[np.ndarray], object],
                        *args: object) -> object:
        def timed(order: np.ndarray) -> object:
            timings.append(time.perf_counter())
            return time_order(order)

        search = real_search(phase, deps, levels, timed, *args)  # type: ignore[arg-type]
        searches.append((search.deadline - time.perf_counter(), search.deadline))
        return search

    monkeypatch.setattr(schedule_module, "reference_table_bytes", slow_encoding)
    monkeypatch.setattr(schedule_module, "OrderSearch", recorded_search)
    phase = relay_phase(groups=24, replicas=24, fragments=400, segments=4, sources=24, seed=1)
    ps = schedule_phase(phase, MACHINE, "cpsat", SolverParams(time_limit=limit, workers=2))
    assert len(searches) == 1, searches
    assert searches[0][0] <= limit - 2 * encode, searches
    assert timings
    assert max(timings) < searches[0][1]  # every order was timed before the deadline, none after it
    assert 1 <= len(encodings) <= 2  # the greedy's before the search; the winner's after it, if another won
    assert ps.horizon <= ps.greedy_horizon
    assert ps.cpsat is not None
    s = ps.schedule
    assert check_reference_schedule(phase, s.tx_start, s.rx_start, s.horizon, MACHINE) == []


def test_the_neighbourhoods_get_the_same_work_however_long_the_passes_took(monkeypatch: pytest.MonkeyPatch) -> None:
    # deterministic mode: the neighbourhood search's budget is work (the limit less the passes' work), not what
    # the clock left after the passes, so a slow machine does not change the schedule
    phase = replica_phase(groups=8, replicas=10, fragments=200, sources=16, weight_words=2500, tiles=256)
    passes, search = forward_backward, improve_lns
    budgets: list[float] = []

    def slow_passes(*args: object, **kwargs: object) -> np.ndarray:
        time.sleep(0.5)
        return passes(*args, **kwargs)  # type: ignore[arg-type]

    def recorded_search(chunks: object, incumbent: np.ndarray, lower: int, params: SolverParams,
                        **kwargs: object) -> tuple[np.ndarray, bool]:
        budgets.append(params.time_limit)
        return search(chunks, incumbent, lower, params, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(search_module, "forward_backward", slow_passes)
    monkeypatch.setattr(search_module, "improve_lns", recorded_search)
    ps = schedule_phase(phase, MACHINE, "cpsat", SolverParams(time_limit=2.0, workers=2, seed=0),
                        OrderingParams(exact_chunks=10, rules=OrderingRules.MODEL))
    assert budgets == [1.5]
    assert ps.horizon <= ps.greedy_horizon


def test_the_chunk_models_neighbourhoods_stop_at_the_time_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    # a deterministic work budget that the clock cannot honour is stopped at the limit and says so (backstop),
    # instead of running to its own backstop at three times the limit (plus 5 s). Checked on the deadline the
    # neighbourhoods get and on when their CP-SAT solves start and must stop, then, generously, on the clock
    limit = 2.0
    real_search, real_window = improve_lns, cpsat_module._solve_window
    deadlines: list[float | None] = []
    windows: list[tuple[float, float]] = []  # each CP-SAT solve: when it began, its wall-clock backstop

    def recorded_search(*args: object, **kwargs: object) -> object:
        deadlines.append(kwargs.get("deadline"))  # type: ignore[arg-type]
        return real_search(*args, **kwargs)  # type: ignore[arg-type]

    def recorded_window(*args: object) -> object:
        step = args[-1]
        assert isinstance(step, SolverParams)
        assert step.backstop is not None
        windows.append((time.perf_counter(), step.backstop))
        return real_window(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(search_module, "improve_lns", recorded_search)
    monkeypatch.setattr(cpsat_module, "_solve_window", recorded_window)
    phase = replica_phase(groups=16, replicas=12, fragments=300, sources=24, weight_words=4000, tiles=512)
    clock = time.perf_counter()
    ps = schedule_phase(phase, MACHINE, "cpsat", SolverParams(time_limit=limit, workers=2, seed=0),
                        OrderingParams(exact_chunks=10, rules=OrderingRules.MODEL))
    wall = time.perf_counter() - clock
    assert len(deadlines) == 1, (clock, deadlines)
    assert deadlines[0] is not None, (clock, deadlines)
    assert deadlines[0] <= clock + limit, (clock, deadlines)
    deadline = deadlines[0]  # the call's limit, not the neighbourhood search's own backstop
    # each solve starts before the deadline and must stop by it (give or take the moment between the backstop's
    # computation and the call)
    assert windows
    assert all(start < deadline and start + backstop <= deadline + 0.01 for start, backstop in windows)
    # about the limit on an idle machine; the slack is for a busy one (the steps after the search are timed on
    # the greedy's, and take longer there too). Without the deadline: 3 x 2 + 5 = 11 s
    assert wall <= limit + 4.0, wall
    assert ps.cpsat is not None
    assert ps.horizon <= ps.greedy_horizon
    s = ps.schedule
    assert check_schedule(phase, s.tx_start, s.rx_start, s.horizon, MACHINE) == []
