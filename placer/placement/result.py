"""The outcome of one placement: status, addresses or proof, which engine answered, and how long it took."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

from placer.solver import Status


class PlacementResultDoc(TypedDict):
    """A placement's outcome as JSON (without the addresses)."""

    status: str
    placed: bool
    engine: str
    runtime_s: float
    reason: str | None
    peak_address: int | None
    bound: int | None
    nodes: int
    greedy: str | None
    search_cpu_s: float | None


@dataclass(frozen=True)
class PlacementResult:
    """``status`` is FEASIBLE/OPTIMAL with ``addresses``, INFEASIBLE with a ``reason`` (always a proof), or UNKNOWN.

    ``objective`` is the peak address (highest end) of the placement; ``bound`` a proved lower bound on it when one
    is known (for flat problems: the peak live bytes above the base).
    """

    status: Status
    addresses: tuple[int, ...] | None
    engine: str  # "greedy-online", "greedy-offline", "canonical", "cp-sat", "bound", ...
    runtime: float
    reason: str | None = None
    objective: int | None = None
    bound: int | None = None
    nodes: int = 0
    greedy: str | None = None  # what the production mirror did on the same input (for reports)
    search_cpu: float | None = None  # CPU seconds of the canonical search that answered (load-independent)

    @property
    def placed(self) -> bool:
        return self.addresses is not None and self.status in (Status.OPTIMAL, Status.FEASIBLE)

    def describe(self) -> str:
        if self.placed:
            return f"placed by {self.engine}, peak address {self.objective:#x} ({self.runtime:.3f} s)"
        if self.status is Status.INFEASIBLE:
            return f"infeasible (proved by {self.engine}: {self.reason}) ({self.runtime:.3f} s)"
        return f"unknown: no placement and no proof within {self.runtime:.2f} s ({self.reason or 'time limit'})"

    def to_json(self) -> PlacementResultDoc:
        return {
            "status": self.status.value,
            "placed": self.placed,
            "engine": self.engine,
            "runtime_s": round(self.runtime, 4),
            "reason": self.reason,
            "peak_address": self.objective,
            "bound": self.bound,
            "nodes": self.nodes,
            "greedy": self.greedy,
            "search_cpu_s": None if self.search_cpu is None else round(self.search_cpu, 4),
        }
