"""What a capture costs, phase by phase, against the budgets (``placer inspect``, ``placer.inspect``)."""

from __future__ import annotations

from collections import Counter
from typing import NotRequired, TypedDict

import numpy as np

from placer.capture.headroom import headroom
from placer.capture.model import Capture, Phase
from placer.cost.model import program_cost
from placer.machine import Machine, load_machine
from placer.progress import task, track


class InspectPhaseDoc(TypedDict):
    """One phase of ``placer inspect --json``."""

    phase: int
    label: str
    transfers: int
    words: int
    payload_bytes: int
    multicast_groups: dict[str, int]  # replica count -> distinct destination sets
    worst_tile: int
    worst_table_bytes: int
    worst_fragments: int
    cycles: int
    iterations: int
    shared_tiles: int  # tiles whose row reuses an earlier phase's table (docs/reference.md §3)


class InspectProgramDoc(TypedDict):
    """The program of ``placer inspect --json``: worst tile, row estimate, budgets, verdict."""

    transfers: int
    worst_tile: int
    worst_table_bytes: int
    shared_savings_bytes: int
    row_estimate_bytes: int
    table_budget: int
    worst_fragment_tile: int
    worst_fragments: int
    fragment_limit: int
    fits: bool
    cycles: int
    ms: float
    memory: NotRequired[dict[str, int | None]]  # when the capture has allocations (``Headroom.to_json``)
    memory_line: NotRequired[str]


class InspectDoc(TypedDict):
    """``placer inspect --json``."""

    tile_count: int
    machine: str
    phases: list[InspectPhaseDoc]
    program: InspectProgramDoc


def multicast_groups(phase: Phase) -> Counter[int]:
    """Replica count -> number of distinct destination sets with at least two tiles."""
    if phase.n == 0:
        return Counter()
    ids = phase.dst_set_ids()
    first = np.unique(ids, return_index=True)[1]
    fan = phase.fanout[first]
    return Counter(int(f) for f in fan[fan >= 2])


def describe_groups(groups: Counter[int]) -> str:
    return ", ".join(f"{n}×{r}" for r, n in sorted(groups.items(), key=lambda kv: -kv[1] * kv[0])[:3]) + (
        " …" if len(groups) > 3 else ""
    )


def inspect_summary(capture: Capture, machine: Machine | str, budget: int | None) -> InspectDoc:
    """``placer inspect --json``: per phase and for the program, what the capture costs against the budgets."""
    machine = machine if isinstance(machine, Machine) else load_machine(machine)
    with task("cost model"):
        cost = program_cost(capture, machine)
    table_budget = machine.budget.table_bytes if budget is None else budget
    phases: list[InspectPhaseDoc] = []
    shared = cost.sharing.first_use >= 0 if cost.sharing is not None else None
    for pi, (phase, pc, iters) in enumerate(track(zip(capture.phases, cost.phases, cost.iterations, strict=True),
                                                  "multicast groups", len(capture.phases), "phases")):
        groups = multicast_groups(phase)
        phases.append({
            "phase": phase.phase,
            "label": capture.label(phase.phase),
            "transfers": phase.n,
            "words": int(phase.words.sum()),
            "payload_bytes": phase.payload_bytes(),
            "multicast_groups": {str(r): n for r, n in sorted(groups.items())},
            "worst_tile": pc.worst_tile(),
            "worst_table_bytes": pc.worst_table(),
            "worst_fragments": int(pc.fragments.max(initial=0)),
            "cycles": pc.cycles,
            "iterations": iters,
            # tiles whose row in this phase reuses an earlier phase's table (docs/reference.md §3, shared phase tables)
            "shared_tiles": int(shared[pi].sum()) if shared is not None else 0,
        })
    worst = cost.worst_tile()
    room = headroom(capture, machine)
    program: InspectProgramDoc = {
        "transfers": capture.transfer_count(),
        "worst_tile": worst,
        "worst_table_bytes": cost.worst_table(),
        "shared_savings_bytes": cost.shared_savings(),
        "row_estimate_bytes": cost.row_estimate,
        "table_budget": table_budget,
        "worst_fragment_tile": int(np.argmax(cost.fragments)),
        "worst_fragments": cost.worst_fragments(),
        "fragment_limit": machine.budget.fragments,
        "fits": cost.fits(table_budget),
        "cycles": cost.cycles,
        "ms": machine.cycles_to_ms(cost.cycles),
    }
    if room is not None:
        program["memory"] = room.to_json()
        program["memory_line"] = room.describe()
    return {"tile_count": capture.tile_count, "machine": machine.name, "phases": phases, "program": program}
