"""Buffer placement in tile SRAM (docs/reference.md §6): production allocator mirrored, exact engines, proofs, formats.

Public API for integration::

    from placer.placement import place_requests, tile_problem
    result = place_requests(tile_problem(free_ranges, live, requests), SolverParams(time_limit=5, workers=2))
    if result.placed: result.addresses
    elif result.status is Status.INFEASIBLE: result.reason   # always a proof
"""

from placer.placement.api import PlacementBug, greedy_summary, place_requests, solve_placement, tile_problem
from placer.placement.checker import check_placement
from placer.placement.formats import read_problem, write_solution
from placer.placement.greedy import greedy_place
from placer.placement.model import FixedAllocation, MemoryClass, PlacementProblem, Request
from placer.placement.result import PlacementResult

__all__ = [
    "FixedAllocation",
    "MemoryClass",
    "PlacementBug",
    "PlacementProblem",
    "PlacementResult",
    "Request",
    "check_placement",
    "greedy_place",
    "greedy_summary",
    "place_requests",
    "read_problem",
    "solve_placement",
    "tile_problem",
    "write_solution",
]
