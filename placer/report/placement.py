"""What ``placer place`` reports: the JSON documents of one placement and of several files placed."""

from __future__ import annotations

from placer.placement.formats import SolutionDoc, solution_json
from placer.placement.model import PlacementProblem
from placer.placement.result import PlacementResult, PlacementResultDoc


class PlaceDoc(SolutionDoc):
    """``placer place --json`` (one file): the solution (``placements`` with ``-o`` omitted) and the checker's
    verdict."""

    verified: bool | None  # the independent checker accepted the addresses; None without a placement


class PlaceFileDoc(PlacementResultDoc):
    """One file of ``placer place A B ... --json`` (a list of these)."""

    file: str
    problem: str
    requests: int
    addresses: list[int] | None
    verified: bool | None


def place_json(problem: PlacementProblem, result: PlacementResult, verified: bool | None, *,
               placements: bool = True) -> PlaceDoc:
    """``placer place --json``; ``placements`` adds every request's address (what ``-o X.json`` writes)."""
    return {**solution_json(problem, result, placements=placements), "verified": verified}


def place_file_json(path: str, problem: PlacementProblem, result: PlacementResult) -> PlaceFileDoc:
    """One file of several placed (its placement, if any, re-checked by the caller)."""
    return {"file": path, "problem": problem.name, "requests": problem.n, **result.to_json(),
            "addresses": list(result.addresses) if result.addresses is not None else None,
            "verified": True if result.addresses is not None else None}


__all__ = ["PlaceDoc", "PlaceFileDoc", "place_file_json", "place_json"]
