"""Exchange stream ordering (docs/reference.md §7): streams and dependencies, the production B1024 scheduler mirrored,
lower bounds, CP-SAT improvement, timed table rows and an independent schedule checker. See docs/ordering.md."""

from placer.ordering.bounds import LowerBound, lower_bound
from placer.ordering.check import check_schedule
from placer.ordering.greedy import greedy_starts
from placer.ordering.schedule import (
    OrderingParams,
    PhaseSchedule,
    Schedule,
    TimedRows,
    expand,
    schedule_capture,
    schedule_phase,
    timed_rows,
)
from placer.ordering.streams import Chunks, Dependencies, build_chunks, transfer_dependencies

__all__ = [
    "Chunks",
    "Dependencies",
    "LowerBound",
    "OrderingParams",
    "PhaseSchedule",
    "Schedule",
    "TimedRows",
    "build_chunks",
    "check_schedule",
    "expand",
    "greedy_starts",
    "lower_bound",
    "schedule_capture",
    "schedule_phase",
    "timed_rows",
    "transfer_dependencies",
]
