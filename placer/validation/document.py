"""A plan document checked end to end (``placer validate``, :func:`placer.api.validate`): read, refused when it
was made for another capture or machine, bound to the capture, validated against the budget asked for (never the
plan's own record), and the program it produces (for an order file's replay)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from placer.capture.io import capture_digest
from placer.capture.model import Capture, Phase, Repeat
from placer.errors import InputError
from placer.machine import Machine
from placer.validation.plan import Plan, bind_plan, parse_plan
from placer.validation.validator import ValidationReport, validate


@dataclass(frozen=True, eq=False)
class CheckedPlan:
    """A plan document bound to its capture and validated."""

    plan: Plan  # parsed and bound (its budget replaced by the one checked)
    report: ValidationReport
    notes: list[str]  # what the plan does not record (digests), and which budget it was checked against


def check_provenance(doc: Any, capture: Capture, capture_path: str | Path, machine: Machine,
                     plan_path: str | Path) -> list[str]:
    """Refuse a plan recorded for another capture or machine; return notes for what the plan does not record."""
    notes = []
    rec = doc.get("capture") if isinstance(doc, dict) else None
    if isinstance(rec, dict) and "sha256" in rec:
        digest = capture_digest(capture)
        if rec["sha256"] != digest:
            raise InputError(f"the plan was made for another capture (sha256 {str(rec['sha256'])[:16]}…, "
                             f"{rec.get('transfers', '?')} transfers); {capture_path} has sha256 {digest[:16]}… "
                             f"({capture.transfer_count()} transfers)", path=str(plan_path), where="capture.sha256")
    else:
        notes.append("note: the plan records no capture digest; it is checked against this capture as given")
    recorded = doc.get("machine_sha256") if isinstance(doc, dict) else None
    if recorded is not None:
        if recorded != machine.digest():
            raise InputError(f"the plan was made for machine {doc.get('machine')!r} (sha256 {str(recorded)[:16]}…); "
                             f"--machine {machine.name!r} has sha256 {machine.digest()[:16]}…: pass the machine "
                             "the plan was made for", path=str(plan_path), where="machine_sha256")
    else:
        notes.append("note: the plan records no machine digest; it is checked against --machine as given")
    return notes


def check_document(doc: Any, capture: Capture, machine: Machine, table_bytes: int, fragments: int, *,
                   capture_name: str, plan_name: str) -> CheckedPlan:
    """Parse the plan document ``doc`` (every ``InputError`` names ``plan_name``), refuse it when it was made for
    another capture or machine (before binding: a foreign plan fails there, not on a transfer index), bind it to
    ``capture`` and validate it against ``table_bytes``/``fragments``."""
    parsed = parse_plan(doc, plan_name)
    notes = check_provenance(doc, capture, capture_name, machine, plan_name)
    bind_plan(parsed, capture, plan_name)
    recorded = (parsed.table_bytes, parsed.fragments)
    parsed.table_bytes, parsed.fragments = table_bytes, fragments
    report = validate(capture, parsed, machine)
    if recorded != (table_bytes, fragments):
        notes.append(f"note: the plan records budget {recorded[0]:,} bytes / {recorded[1]:,} fragments; checked "
                     f"against {table_bytes:,} / {fragments:,}")
    return CheckedPlan(parsed, report, notes)


def program_of(capture: Capture, plan: Plan) -> Capture:
    """The program a bound plan produces: each phase of its delta with the removed transfers dropped and the
    appended ones after the rest, each inserted phase after its phase."""
    delta = {d.phase: d for d in plan.delta}
    inserted: dict[int, list[Phase]] = {}
    for ins in plan.inserted:
        assert ins.transfers is not None  # bound
        inserted.setdefault(ins.after, []).append(ins.transfers)
    phases: list[Phase] = []
    body = set(capture.repeat.phases) if capture.repeat is not None else set()
    for p in capture.phases:
        d = delta.get(p.phase)
        if d is None:
            phases.append(p)
        else:
            assert d.append is not None  # bound
            keep = np.setdiff1d(np.arange(p.n), d.remove)
            phases.append(Phase.concat(p.phase, [p.take(keep), d.append], extra=p.extra))
        for extra in inserted.get(p.phase, []):
            phases.append(extra)
            if p.phase in body:
                body.add(extra.phase)
    out = capture.with_phases(phases)
    if capture.repeat is not None:
        out.repeat = Repeat(tuple(ph.phase for ph in phases if ph.phase in body), capture.repeat.iterations)
    return out


__all__ = ["CheckedPlan", "check_document", "check_provenance", "program_of"]
