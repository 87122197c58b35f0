"""CP-SAT relay selection over the whole program (see docs/selection.md for the formulation).

Decision variables
- ``x[g, o]``: group g takes option o (direct, direct-receive with k segments, local-pack with k segments);
  exactly one per group.
- ``z[p, c, t]``: tile t hosts one relay segment of host class c in phase p. A class gathers the segments of a
  phase with the same *signature* -- every number a host's cost depends on (rows, fragments, bytes, controls,
  buffer size, kernel cycles) and the tiles barred from it -- so segments of one class are interchangeable and the
  loads are exact. Tiles no option touches and that look alike are aggregated into tile classes (a count ``n``).
  Σ_t z[p, c, t] equals the number of class-c segments chosen, and Σ_c z[p, c, t] ≤ 1 (one segment per tile and
  phase). z exists only where the tile's largest free gap in the phase holds the class's buffer and the tile is
  not barred from the class; which segment goes where is an exact bipartite matching (``realise``), so the model
  never enumerates (segment, tile) pairs. Large programs use the coarse host model (see ``build_model``).

Constraints (hard): per tile, Σ over phases of its rounded table bytes ≤ budget (rounding to 8 modelled with an
integer ``q`` per affected tile and phase: 8·q ≥ raw); per tile, fragments ≤ the limit; per phase, the cycle
variable bounds every affected tile's ⌈tx/4⌉, ⌈rx/4⌉ and controls.

Objective: lexicographic, solved in stages (each stage fixes the previous optimum, or best value on time-out):
by default total cycles, then worst-tile table bytes, then relay scratch, then relay count.

The package is laid out like PyJobShop's CP-SAT backend:

- ``variables`` -- :class:`Variables`, the model under construction (decision variables, per-tile terms), and the
  named types of the model (``ClassMember``, ``ClassCycles``, ``PhaseFixed``, ``ModelHandle``); a segment's host
  class is :class:`placer.selection.options.HostClass`;
- ``constraints`` -- one function per constraint family: ``choose_options`` (choice and each option's own
  effect), ``exact_hosts`` / ``coarse_hosts`` (who hosts), ``tables_and_cycles`` (per-tile rounding and the
  phase's cycles), ``extra_phase`` (local-pack), ``budgets`` (the program-wide hard limits and the worst tile);
- ``objective`` -- the objectives and the lexicographic stages;
- ``model`` -- ``build_model``, the families in order;
- ``solution`` -- :class:`Selection`, apart from the model: reading it back, hinting a model with it;
- ``solve`` -- ``solve_staged``, the staged solve.
"""

from placer.selection.cpsat.constraints import EXACT_HOST_LIMIT, exact_host_pairs
from placer.selection.cpsat.model import build_model
from placer.selection.cpsat.objective import OBJECTIVES
from placer.selection.cpsat.solution import Selection, hint, read_selection
from placer.selection.cpsat.solve import StagedResult, solve_staged
from placer.selection.cpsat.variables import ANY, ClassMember, HostKey, ModelHandle, PhaseFixed, Variables

__all__ = [
    "ANY",
    "EXACT_HOST_LIMIT",
    "OBJECTIVES",
    "ClassMember",
    "HostKey",
    "ModelHandle",
    "PhaseFixed",
    "Selection",
    "StagedResult",
    "Variables",
    "build_model",
    "exact_host_pairs",
    "hint",
    "read_selection",
    "solve_staged",
]
