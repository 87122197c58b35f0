"""Local-pack relays a held table forces: what they add to the cycles bound of the stage after the table.

With the table first (``--objective table,...``) the cycles stage minimises the Σ scheduled lower bound among the
plans at the table stage's worst tile ``T``. The bound it is reported against, ``timing.relay_free_bound`` per
phase, holds for every plan whatever its table: it cannot see that a low ``T`` leaves the plans no choice but
relays that cost cycles. The costliest are local-pack relays: a phase with one gets an extra exchange phase, its
sync and the packing kernel, which on SigLIP b2's table-first plan are 18,735 and 25,594 cycles in phases 60 and 9.

A local-pack relay is *forced* in a phase when the table bounds prove it: with every local-pack option of the
phase whose kernel is ``k`` cycles or more taken away (the other phases keep every option), the floors (a), the
mass (b), the hosted mass (f) or the hosted patterns (g) at ``T`` are above ``T`` (docs/selection.md, "Bounds").
Those bounds hold for every plan over the options offered, so every plan whose worst tile is at most ``T`` relays
a group of the phase by local-pack with a kernel of at least ``k``, and the phase's lower bound is then at least
its relay-free bound plus the sync and ``k``: the measured figure of a phase with local-pack relays is the main
phase's bound plus the extra phase's plus the sync plus the largest kernel (``columns.Pool.add``), and the main
and the extra phase together receive and send no fewer words on any tile than the direct phase did, each with
its landing latency. The largest ``k`` so proved is found by bisection over the kernels the phase's options have
(taking more away only makes a proof easier). Each phase's proof is about every plan at ``T``, so their cycles
add up.

Budget-independent for a given ``T`` (the table bounds are), so a sweep's budgets share what one of them proved.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from placer.selection.bounds import hosted_mass_at
from placer.selection.floors import mass_floor, tile_floors
from placer.selection.options import Option
from placer.selection.patterns import hosted_patterns_at
from placer.selection.problem import SelectionProblem


@dataclass(frozen=True)
class ForcedPacking:
    """In one selection phase, every plan at or under ``target`` relays a group by local-pack with a kernel of at
    least ``kernel`` cycles: the phase's lower bound is at least its relay-free bound plus ``cycles``."""

    phase: int  # capture phase id
    target: int  # the worst tile the proof is at
    kernel: int
    cycles: int  # the sync and the kernel


def kernel_cycles(problem: SelectionProblem, op: Option) -> int:
    """The packing kernel a local-pack option adds to its phase, as the measurement charges it (its largest
    segment's); 0 for the other variants."""
    if op.variant != "local-pack" or op.seg is None:
        return 0
    return int(problem.machine.local_pack.estimate(op.seg.segment_bytes()).max())


def without_packing(problem: SelectionProblem, index: int, kernel: int) -> SelectionProblem:
    """The problem with the local-pack options of selection phase ``index`` whose kernel is ``kernel`` cycles or
    more taken away (each group keeps its direct option). Of the original's ``shared`` results it keeps only the
    other phases' floor terms: the rest depend on every phase's options."""
    pd = problem.phases[index]
    options = [[opts[0], *(op for op in opts[1:] if op.variant != "local-pack" or kernel_cycles(problem, op) < kernel)]
               for opts in pd.options]
    phases = [*problem.phases[:index], replace(pd, options=options), *problem.phases[index + 1:]]
    terms = {i: t for i, t in problem.shared.get("phase_floor_terms", {}).items() if i != index}
    return replace(problem, phases=phases, shared={"phase_floor_terms": terms})


# the table bounds a proof tries, cheapest first (``above``'s ``level``): the floors and the mass (a few hundredths
# of a second on SigLIP b2), the hosted mass at the target (one linear program, about 0.4 s), the hosted patterns
# at the target (column generation, about a second)
LEVELS = 3


def above(problem: SelectionProblem, target: int, until: float | None = None, level: int = LEVELS - 1) -> bool:
    """Whether the table bounds up to ``level`` prove that every plan's worst tile is above ``target``: the
    floors and the mass (0), the hosted mass at ``target`` (1), the hosted patterns at ``target`` (2, while
    ``until``, a ``time.perf_counter()`` time, allows)."""
    if int(tile_floors(problem).max(initial=0)) > target or mass_floor(problem).floor > target:
        return True
    if level >= 1:
        hosted = hosted_mass_at(problem, target)
        if hosted is not None and hosted.floor > target:
            return True
    if level < 2 or (until is not None and time.perf_counter() > until):
        return False
    at = hosted_patterns_at(problem, target, until=until)
    return at is not None and at > target


def forced_packing(problem: SelectionProblem, target: int, until: float | None = None) -> list[ForcedPacking]:
    """Per selection phase in which the table bounds force a local-pack relay on every plan at or under
    ``target``, the largest kernel so proved (the module docstring); phases where nothing is proved are left out.
    Every phase is tried with the cheapest bounds first, then again with the costlier ones, each try going on
    from what the one before proved. ``until`` (``time.perf_counter()`` time): no proof starts after it, and what
    was proved by then stands (each entry is proved on its own)."""
    kernels = [sorted({kernel_cycles(problem, op) for opts in pd.options for op in opts[1:]
                       if op.variant == "local-pack"}) for pd in problem.phases]
    proved: dict[int, int] = {}  # phase index -> index into its kernels of the largest proved

    def out_of_time() -> bool:
        return until is not None and time.perf_counter() > until

    for level in range(LEVELS):
        for index, ks in enumerate(kernels):
            if not ks or out_of_time():
                continue
            lo = proved.get(index, -1)
            if lo < 0 and not above(without_packing(problem, index, ks[0]), target, until, level):
                continue  # a plan without any local-pack relay in the phase is not ruled out
            lo, hi = max(lo, 0), len(ks) - 1  # ks[lo] is proved
            while lo < hi and not out_of_time():
                mid = (lo + hi + 1) // 2
                if above(without_packing(problem, index, ks[mid]), target, until, level):
                    lo = mid
                else:
                    hi = mid - 1
            proved[index] = lo
    sync = problem.machine.exchange.sync_cycles
    return [ForcedPacking(problem.phases[index].phase.phase, target, kernels[index][lo], sync + kernels[index][lo])
            for index, lo in sorted(proved.items())]


__all__ = ["LEVELS", "ForcedPacking", "above", "forced_packing", "kernel_cycles", "without_packing"]
