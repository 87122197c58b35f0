"""What ``placer schedule`` reports: the JSON document of every scheduled phase."""

from __future__ import annotations

from typing import Any, TypedDict

from placer.ordering.schedule import PhaseSchedule


class ScheduleDoc(TypedDict):
    """``placer schedule --json``."""

    capture: str  # the capture file's name as given
    machine: str
    mode: str
    # per phase, ``PhaseSchedule.to_json`` and ``valid`` (the checker's verdict; None without the check)
    phases: list[dict[str, Any]]


def schedule_doc(capture_name: str, machine: str, mode: str, phases: list[PhaseSchedule],
                 invalid: dict[int, list[str]], checked: bool) -> ScheduleDoc:
    """``placer schedule --json``: each phase's figures and whether its schedule passed the checker."""
    return {"capture": capture_name, "machine": machine, "mode": mode,
            "phases": [dict(ps.to_json(), valid=(ps.phase not in invalid) if checked else None) for ps in phases]}


__all__ = ["ScheduleDoc", "schedule_doc"]
