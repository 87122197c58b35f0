"""Stream orders as a file: what placer's ordering hands a compiler, and how it is checked and replayed.

An order file (docs/plan.md, "The order file") lists, per phase, the phase's transfers in the order the reference's
row builder appends them (``placer.refschedule.reference``: each transfer is timed at the earliest offset its rules
allow, in this order). Transfer ``i`` is the phase's i-th transfer in the program the file names by digest: a
capture as ``placer schedule`` read it, or the program a plan produces (``placer solve --schedule -o``: each
relayed phase lists its kept transfers in capture order, then the gathers, then the forwards, as the plan's
delta appends them).

Checking an order (``placer validate --order``, ``placer schedule --replay``): it must be a permutation of the
phase's transfers that puts every transfer after the transfers it depends on (read-after-write, write-after-read,
write-after-write over byte intervals); it is then timed by the reference's rules, the schedule is checked by the
independent checker (``placer.ordering.check``), and its horizon is compared with the one the file records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import numpy as np

from placer.arrays import unique
from placer.capture.io import capture_digest
from placer.capture.model import Capture, Phase
from placer.errors import InputError
from placer.machine import Machine
from placer.ordering.check import check_reference_schedule
from placer.refschedule.reference import materialize
from placer.streams.dependencies import transfer_dependencies

ORDER_KIND = "placer-order"
ORDER_VERSION = 1
MAX_PHASES = 1 << 20  # more phase entries than any program has: a file claiming more is refused before reading on


class PhaseOrderDoc(TypedDict):
    """One phase of an order file."""

    phase: int
    transfers: int
    horizon: int
    lower_bound: int
    method: str
    order: list[int]


class OrderDoc(TypedDict):
    """An order file (docs/plan.md, "The order file"), keys in the documented order."""

    kind: str
    order_version: int
    rules: str
    program_sha256: str
    machine: str
    machine_sha256: str
    phases: list[PhaseOrderDoc]


@dataclass(frozen=True, eq=False)
class PhaseOrder:
    """One phase's order and the figures it was written with."""

    phase: int
    order: np.ndarray  # transfer indices, in append order
    horizon: int  # under the reference's rules, sync excluded
    lower_bound: int
    method: str  # which step of the ordering found it ("greedy": the reference's own B1024 order)

    def to_json(self) -> PhaseOrderDoc:
        return {"phase": self.phase, "transfers": len(self.order), "horizon": self.horizon,
                "lower_bound": self.lower_bound, "method": self.method, "order": self.order.tolist()}


def order_document(program_digest: str, machine: Machine, phases: list[PhaseOrder]) -> OrderDoc:
    """The order file's document (keys in the documented order)."""
    return {"kind": ORDER_KIND, "order_version": ORDER_VERSION, "rules": "reference",
            "program_sha256": program_digest, "machine": machine.name, "machine_sha256": machine.digest(),
            "phases": [p.to_json() for p in sorted(phases, key=lambda p: p.phase)]}


def parse_orders(doc: Any, path: str) -> tuple[str, str, list[PhaseOrder]]:
    """(program digest, machine digest, phase orders) of an order document; every field checked (``InputError``
    names the file, the field and the value)."""
    def bad(where: str, need: str, value: Any) -> InputError:
        shown = repr(value)
        return InputError(f"must be {need}, got {shown[:60] + '…' if len(shown) > 60 else shown}", path=path,
                          where=where)

    if not isinstance(doc, dict):
        raise bad("the document", "a JSON object", type(doc).__name__)
    if doc.get("kind") != ORDER_KIND:
        raise bad("kind", f"{ORDER_KIND!r} (an order file written by placer)", doc.get("kind"))
    if doc.get("order_version") != ORDER_VERSION:
        raise bad("order_version", str(ORDER_VERSION), doc.get("order_version"))
    if doc.get("rules") != "reference":
        raise bad("rules", "'reference'", doc.get("rules"))
    digests = []
    for key in ("program_sha256", "machine_sha256"):
        v = doc.get(key)
        if not (isinstance(v, str) and len(v) == 64 and all(c in "0123456789abcdef" for c in v)):
            raise bad(key, "a SHA-256 hex digest", v)
        digests.append(v)
    raw = doc.get("phases")
    if not isinstance(raw, list) or len(raw) > MAX_PHASES:
        raise bad("phases", f"a list of at most {MAX_PHASES:,} phase entries", raw if not isinstance(raw, list)
                  else f"{len(raw)} entries")
    out: list[PhaseOrder] = []
    seen: set[int] = set()
    for i, p in enumerate(raw):
        where = f"phases[{i}]"
        if not isinstance(p, dict):
            raise bad(where, "an object", p)
        for key in ("phase", "horizon", "lower_bound"):
            v = p.get(key)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 62:
                raise bad(f"{where}.{key}", "a non-negative integer", v)
        if p["phase"] in seen:
            raise bad(f"{where}.phase", "a phase listed once", p["phase"])
        seen.add(p["phase"])
        method = p.get("method")
        if not isinstance(method, str):
            raise bad(f"{where}.method", "a string", method)
        order = p.get("order")
        if not isinstance(order, list) or any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < 1 << 62
                                              for v in order):
            raise bad(f"{where}.order", "a list of transfer indices", order if not isinstance(order, list)
                      else "a list with a non-integer or a negative or huge index")
        arr = np.asarray(order, dtype=np.int64) if order else np.zeros(0, np.int64)
        out.append(PhaseOrder(int(p["phase"]), arr, int(p["horizon"]), int(p["lower_bound"]), method))
    return digests[0], digests[1], out


@dataclass(frozen=True)
class Replayed:
    """One phase's order timed by the reference's rules and checked."""

    phase: int
    horizon: int  # 0 when the order could not be timed
    recorded: int
    problems: list[str]

    @property
    def valid(self) -> bool:
        return not self.problems


def replay(phase: Phase, order: PhaseOrder, machine: Machine, tiles: int) -> Replayed:
    """Time ``order`` by the reference's rules on ``phase`` and check it (see the module docstring)."""
    n = phase.n
    idx = order.order
    problems: list[str] = []
    if len(idx) != n or (n and (idx.min() < 0 or idx.max() >= n or len(unique(idx)) != n)):
        problems.append(f"phase {phase.phase}: the order lists {len(idx)} transfers, not a permutation of the "
                        f"phase's {n}")
        return Replayed(phase.phase, 0, order.horizon, problems)
    deps = transfer_dependencies(phase)
    position = np.empty(n, np.int64)
    position[idx] = np.arange(n)
    early = np.flatnonzero(position[deps.succ] < position[deps.pred])
    for k in early[:5].tolist():
        problems.append(f"phase {phase.phase}: transfer {int(deps.succ[k])} comes before transfer "
                        f"{int(deps.pred[k])}, whose bytes it depends on")
    if early.size:
        return Replayed(phase.phase, 0, order.horizon, problems)
    timed = materialize(phase, idx, deps, machine, tiles)
    problems += [f"phase {phase.phase}: {p}" for p in
                 check_reference_schedule(phase, timed.tx_start, timed.rx_start, timed.horizon, machine, limit=5)]
    if timed.horizon != order.horizon:
        problems.append(f"phase {phase.phase}: the order times to {timed.horizon:,} cycles, the file records "
                        f"{order.horizon:,}")
    return Replayed(phase.phase, int(timed.horizon), order.horizon, problems)


def read_orders(doc: Any, path: str, program: Capture, machine: Machine) -> list[PhaseOrder]:
    """The phase orders of order document ``doc`` (read from ``path``), refused unless it names ``program`` (by
    digest) and ``machine``."""
    digest, machine_digest, orders = parse_orders(doc, path)
    if digest != capture_digest(program):
        raise InputError(f"the order was written for another program (sha256 {digest[:16]}…): order files name "
                         "the program they index -- the capture given to placer schedule, or the program a plan "
                         "produces", path=path, where="program_sha256")
    if machine_digest != machine.digest():
        raise InputError(f"the order was written for another machine (sha256 {machine_digest[:16]}…), not "
                         f"{machine.name!r}", path=path, where="machine_sha256")
    return orders


def replay_all(program: Capture, orders: list[PhaseOrder], machine: Machine, path: str) -> list[Replayed]:
    """Every listed phase's order replayed on ``program`` (a phase the program lacks is an input error)."""
    known = set(program.phase_ids())
    for o in orders:
        if o.phase not in known:
            raise InputError(f"phase {o.phase} is not in the program", path=path, where="phases")
    tiles = program.tile_count
    return [replay(program.phase_by_id(o.phase), o, machine, tiles) for o in orders]


__all__ = ["ORDER_KIND", "ORDER_VERSION", "OrderDoc", "PhaseOrder", "PhaseOrderDoc", "Replayed", "order_document",
           "parse_orders", "read_orders", "replay", "replay_all"]
