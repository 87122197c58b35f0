"""Compiled canonical search (see placer.placement.canonical)."""

from collections.abc import Callable, Sequence


VERSION: int = 1

def search(*, sizes: Sequence[int], lifetimes: Sequence[int], slo: Sequence[int], shi: Sequence[int], aligns: Sequence[int], capacity: int, sections: int, shares: Sequence[Sequence[str]], time_limit: float, progress: Callable[[float, int], None] | None = None, general: tuple[Sequence[Sequence[int]], Sequence[Sequence[int]], Sequence[int], Sequence[Sequence[int]]] | None = None, seed: int = 0) -> tuple[int, list[int] | None, int, str | None]:
    """
    Canonical search: (status, offsets, nodes, heuristic); status 0 placed, 1 infeasible (a proof), 2 unknown (time limit), 3 unknown (memory ceiling). See placer.placement.canonical.
    """
