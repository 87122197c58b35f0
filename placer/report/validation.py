"""What ``placer validate`` and ``placer schedule --replay`` report: the JSON documents and the lines printed."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from placer.ordering.orders import Replayed
from placer.validation.validator import ValidationReport, ValidationReportDoc


class ReplayPhaseDoc(TypedDict):
    """One phase of an order file, replayed by the reference's rules."""

    phase: int
    horizon: int  # 0 when the order could not be timed
    recorded: int  # the horizon the file records
    valid: bool
    problems: list[str]  # the first five


class ReplayDoc(TypedDict):
    """``placer schedule --replay --json``; ``order`` of ``placer validate --order --json``."""

    order: str  # the order file
    valid: bool
    phases: list[ReplayPhaseDoc]


class ValidationDoc(ValidationReportDoc):
    """``placer validate --json``: the verdict, every finding, the figures of the program the plan produces, the
    notes, and (``--order``) the order replayed."""

    notes: list[str]
    order: NotRequired[ReplayDoc]


class _Order(TypedDict, total=False):
    order: ReplayDoc


def replay_json(path: str, phases: list[Replayed]) -> ReplayDoc:
    """An order file's phases replayed."""
    return {"order": path, "valid": all(r.valid for r in phases),
            "phases": [{"phase": r.phase, "horizon": r.horizon, "recorded": r.recorded, "valid": r.valid,
                        "problems": r.problems[:5]} for r in phases]}


def validation_json(report: ValidationReport, notes: list[str], order: ReplayDoc | None = None) -> ValidationDoc:
    """``placer validate --json``; with an order file, ``valid`` covers its replay too."""
    replayed: _Order = {} if order is None else {"order": order}
    doc: ValidationDoc = {"valid": report.valid, "errors": report.errors, **report.stats, "notes": notes, **replayed}
    if order is not None:
        doc["valid"] = report.valid and order["valid"]
    return doc


def validation_lines(report: ValidationReport, notes: list[str], order: list[Replayed] | None = None) -> list[str]:
    """The report as ``placer validate`` prints it: the verdict or the errors, the notes, the order's replay."""
    out = [*report.lines(), *notes]
    if order is not None:
        valid = all(r.valid for r in order)
        total = sum(r.horizon for r in order)
        out.append(f"order {'valid' if valid else 'INVALID'}: {len(order)} phases replayed by the reference's "
                   f"rules, Σ horizon {total:,} cycles")
        out += [f"  order: {p}" for p in [p for r in order for p in r.problems][:20]]
    return out


__all__ = ["ReplayDoc", "ReplayPhaseDoc", "ValidationDoc", "replay_json", "validation_json", "validation_lines"]
