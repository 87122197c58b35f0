"""A solution of the selection model, apart from the model: which option each group takes and who hosts.

A :class:`Selection` is what the driver keeps between solves (incumbents, neighbourhoods), what it hints a new
model with (:func:`hint`) and what ``placer.selection.realise`` turns into a plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from placer.selection.cpsat.variables import ANY, HostKey, ModelHandle
from placer.solver import lazy_module

if TYPE_CHECKING:
    from ortools.sat.python import cp_model
else:  # loaded when the first model is built (``placer.solver.lazy_module``)
    cp_model = lazy_module("ortools.sat.python.cp_model")


@dataclass(eq=False)
class Selection:
    """A choice of option per group (indices into each group's option list) and host tiles per class."""

    choice: list[list[int]]  # per selection phase, per group: option index
    hosts: list[dict[HostKey, list[int]]] = field(default_factory=list)  # per phase: class -> named tiles
    counts: list[dict[tuple[HostKey, int], int]] = field(default_factory=list)  # per phase: (class, tile class)


def hint(handle: ModelHandle, selection: Selection) -> None:
    """Hint every variable of the model with ``selection`` (a coarse model's hosts: any class's tiles)."""
    for pi, gx in enumerate(handle.x):
        for gi, opts in enumerate(gx):
            for oi, v in enumerate(opts):
                handle.model.add_hint(v, 1 if selection.choice[pi][gi] == oi else 0)
    for pi, pz in enumerate(handle.z):
        chosen = selection.hosts[pi] if pi < len(selection.hosts) else {}
        for key, zc in pz.items():
            tiles = set(chosen.get(key, [])) if key != ANY else {t for lst in chosen.values() for t in lst}
            for t, v in zc.items():
                handle.model.add_hint(v, 1 if t in tiles else 0)
    for pi, pn in enumerate(handle.n):
        counts = selection.counts[pi] if pi < len(selection.counts) else {}
        for (cls, ei), v in pn.items():
            if cls == ANY:
                handle.model.add_hint(v, sum(n for (_, e), n in counts.items() if e == ei))
            else:
                handle.model.add_hint(v, counts.get((cls, ei), 0))


def read_selection(handle: ModelHandle, solver: cp_model.CpSolver, start: Selection | None) -> Selection:
    """The solver's solution; phases the model held fixed (no variables) keep ``start``'s choice."""
    choice, hosts, counts = [], [], []
    for pi, gx in enumerate(handle.x):
        if not gx and start is not None:
            choice.append(list(start.choice[pi]))
            hosts.append(dict(start.hosts[pi]) if pi < len(start.hosts) else {})
            counts.append(dict(start.counts[pi]) if pi < len(start.counts) else {})
            continue
        choice.append([int(np.argmax([solver.boolean_value(v) for v in opts])) for opts in gx])
        hosts.append({key: [t for t, v in zc.items() if solver.boolean_value(v)] for key, zc in handle.z[pi].items()})
        counts.append({key: int(solver.value(v)) for key, v in handle.n[pi].items() if solver.value(v)})
    return Selection(choice, hosts, counts)
