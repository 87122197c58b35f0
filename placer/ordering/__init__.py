"""Exchange stream ordering, the stage (docs/ordering.md): each phase scheduled under the reference's rules
(``placer.refschedule``) or placer's chunk model (``placer.chunkmodel``), which this package composes
(``schedule``, ``program``); the order file (``orders``); and the independent schedule checker (``check``), which
shares no code with either scheduler. The names below are the stage's public API, the chunk model's included."""

from placer.chunkmodel.bounds import LowerBound, lower_bound
from placer.chunkmodel.chunks import Chunks, build_chunks
from placer.chunkmodel.greedy import greedy_starts
from placer.chunkmodel.rows import Schedule, TimedRows, expand, timed_rows
from placer.ordering.check import check_schedule
from placer.ordering.schedule import OrderingParams, PhaseSchedule, schedule_capture, schedule_phase
from placer.streams.dependencies import Dependencies, transfer_dependencies

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
