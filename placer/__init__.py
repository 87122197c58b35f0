"""placer: data-movement plan optimiser for tile-array accelerators with a compiled exchange.

The public API (:mod:`placer.api`) is re-exported here: ``placer.read_capture``, ``placer.load_machine``,
``placer.generate``, ``placer.inspect``, ``placer.solve``, ``placer.compare``, ``placer.validate``,
``placer.replay``, ``placer.place``, ``placer.place_many``, ``placer.schedule`` and their result types
(:mod:`placer.results`); ``placer.api.report`` is not (``placer.report`` is the report package).
``help(placer.solve)`` shows how to call it. The names are loaded on first use, so ``import placer`` (and the
command line's start-up) stays cheap.
"""

from __future__ import annotations

from placer import startup  # noqa: F401 - first of all: a signal while the command line starts ends it quietly

# isort: split
from placer import clock  # noqa: F401 - next: a command's --time-limit counts from this import

# isort: split
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> module that defines it (every one is documented there)
_EXPORTS = {
    **dict.fromkeys(
        ("read_capture", "write_capture", "load_machine", "generate", "inspect", "solve", "compare", "validate",
         "replay", "place", "place_many", "schedule", "objective_order", "OBJECTIVES"), "placer.api"),
    **dict.fromkeys(
        ("InspectResult", "SelectionResult", "ComparisonResult", "ValidationResult", "ReplayResult", "PlaceResult",
         "PlaceManyResult", "ScheduleResult", "ReportResult"), "placer.results"),
    **dict.fromkeys(("SelectionMode", "PlacementMode", "ScheduleMode"), "placer.modes"),
    **dict.fromkeys(("ExitCode", "InputError"), "placer.errors"),
    **dict.fromkeys(("SolverParams", "RunConfig", "Status", "SolveResult", "Deadline"), "placer.solver"),
    "Capture": "placer.capture.model",
    "Machine": "placer.machine",
    "Plan": "placer.selection.plan",
    "Objectives": "placer.selection.select",
    "ValidationReport": "placer.validation.validator",
    "PlacementProblem": "placer.placement.model",
    "PlacementResult": "placer.placement.result",
    "PhaseSchedule": "placer.ordering.schedule",
}
__all__ = [
    "OBJECTIVES",
    "Capture",
    "ComparisonResult",
    "Deadline",
    "ExitCode",
    "InputError",
    "InspectResult",
    "Machine",
    "Objectives",
    "PhaseSchedule",
    "PlaceManyResult",
    "PlaceResult",
    "PlacementMode",
    "PlacementProblem",
    "PlacementResult",
    "Plan",
    "ReplayResult",
    "ReportResult",
    "RunConfig",
    "ScheduleMode",
    "ScheduleResult",
    "SelectionMode",
    "SelectionResult",
    "SolveResult",
    "SolverParams",
    "Status",
    "ValidationReport",
    "ValidationResult",
    "__version__",
    "compare",
    "generate",
    "inspect",
    "load_machine",
    "objective_order",
    "place",
    "place_many",
    "read_capture",
    "replay",
    "schedule",
    "solve",
    "validate",
    "write_capture",
]

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ imports on first use
    from placer.api import (
        OBJECTIVES,
        compare,
        generate,
        inspect,
        load_machine,
        objective_order,
        place,
        place_many,
        read_capture,
        replay,
        schedule,
        solve,
        validate,
        write_capture,
    )
    from placer.capture.model import Capture
    from placer.errors import ExitCode, InputError
    from placer.machine import Machine
    from placer.modes import PlacementMode, ScheduleMode, SelectionMode
    from placer.ordering.schedule import PhaseSchedule
    from placer.placement.model import PlacementProblem
    from placer.placement.result import PlacementResult
    from placer.results import (
        ComparisonResult,
        InspectResult,
        PlaceManyResult,
        PlaceResult,
        ReplayResult,
        ReportResult,
        ScheduleResult,
        SelectionResult,
        ValidationResult,
    )
    from placer.selection.plan import Plan
    from placer.selection.select import Objectives
    from placer.solver import Deadline, RunConfig, SolveResult, SolverParams, Status
    from placer.validation.validator import ValidationReport


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'placer' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
