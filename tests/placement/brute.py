"""Brute force for tiny placement problems: is there any placement the checker accepts?

``exhaustive`` tries every combination of aligned addresses. ``brute_force`` gives the same answer by depth-first
search, extending a placement of the first k requests only while the checker accepts it as a placement of those k
(every rule ``check_placement`` applies concerns one request, or two of those placed): an invalid prefix has no
valid extension, so pruning it loses nothing, and the checker has the last word on every full placement. On the
infeasible instances the property tests draw it is hundreds of times faster (seconds per test, not minutes on an
unlucky draw).
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from placer.placement import PlacementProblem, check_placement


def choices(problem: PlacementProblem) -> list[range]:
    lo = min(a for a, _ in problem.ranges)
    hi = max(b for _, b in problem.ranges)
    return [range(lo, hi, r.alignment) for r in problem.requests]


def exhaustive(problem: PlacementProblem) -> bool:
    return any(not check_placement(problem, combo) for combo in itertools.product(*choices(problem)))


def brute_force(problem: PlacementProblem) -> bool:
    roots = {root for r in problem.requests for root, _ in r.aliases}
    if roots & {f.root for f in problem.fixed if f.root is not None}:
        return exhaustive(problem)  # a conflict's root would name a fixed allocation in a prefix, a request in all
    options = choices(problem)
    prefixes = [replace(problem, requests=problem.requests[:k]) for k in range(1, problem.n + 1)]
    placed: list[int] = []

    def extend(k: int) -> bool:
        if k == problem.n:
            return not check_placement(problem, placed)
        for address in options[k]:
            placed.append(address)
            if not check_placement(prefixes[k], placed) and extend(k + 1):
                return True
            placed.pop()
        return False

    return extend(0)
