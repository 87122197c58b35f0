"""Embarrassingly parallel pieces of single commands, as Ray tasks: every phase of `placer schedule --ray` and every
file (one tile's buffers each) of `placer place A.json B.json ... --ray`.

Each task runs exactly the function the serial command runs on the same inputs, so the results are the serial ones;
only the order of execution changes (the largest pieces are submitted first, results come back in input order).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from placer.modes import PlacementMode, ScheduleMode
from placer.sweep.cluster import ray_map


def schedule_phases(capture: Any, machine: Any, mode: ScheduleMode, params: Any, phase_ids: Sequence[int],
                    ordering: Any, address: str | None, use_ray: bool = True) -> list[Any]:
    """``schedule_capture(..., phases=phase_ids)`` here, or with ``use_ray`` ``schedule_capture(..., phases=[p])``
    for every ``p`` in ``phase_ids``, one Ray task each (the capture is put in the object store once). Returns the
    PhaseSchedules in ``phase_ids`` order."""
    from placer.ordering.schedule import schedule_capture
    from placer.progress import task

    if not use_ray:
        return schedule_capture(capture, machine, mode, params, phases=list(phase_ids), ordering=ordering)
    sizes = {p.phase: p.n for p in capture.phases}
    biggest_first = sorted(phase_ids, key=lambda pid: (-sizes[pid], pid))
    cpus = params.workers if mode == ScheduleMode.CPSAT else 1
    with task(f"schedule {len(phase_ids)} phase(s) as Ray tasks"):
        done = ray_map(_schedule_one, biggest_first, shared=(capture, machine, mode, params, ordering), cpus=cpus,
                       address=address)
    by_phase = dict(zip(biggest_first, done, strict=True))
    return [by_phase[pid] for pid in phase_ids]


def _schedule_one(capture: Any, machine: Any, mode: ScheduleMode, params: Any, ordering: Any, phase_id: int) -> Any:
    from placer.ordering.schedule import schedule_capture

    return schedule_capture(capture, machine, mode, params, phases=[phase_id], ordering=ordering)[0]


def place_files(files: Sequence[Path], capacity: int | None, params: Any, mode: PlacementMode, address: str | None,
                use_ray: bool = True) -> list[Any]:
    """Read every file here (a bad one is an InputError naming it), place each (as a Ray task with ``use_ray``);
    (problem, result) pairs in ``files`` order."""
    from placer.placement.formats import read_problem

    problems = [read_problem(f, capacity=capacity) for f in files]
    if not use_ray:
        return [(p, _place_one(params, mode, p)) for p in problems]
    order = sorted(range(len(problems)), key=lambda i: (-problems[i].n, i))
    done = ray_map(_place_one, [problems[i] for i in order], shared=(params, mode), cpus=params.workers,
                   address=address)
    results: list[Any] = [None] * len(problems)
    for i, result in zip(order, done, strict=True):
        results[i] = result
    return list(zip(problems, results, strict=True))


def _place_one(params: Any, mode: PlacementMode, problem: Any) -> Any:
    from placer.placement.api import solve_placement

    return solve_placement(problem, params, mode=mode)
