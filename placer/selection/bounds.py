"""A lower bound on the worst tile's table from a linear relaxation of the whole-program selection model.

Every phase is free at once. Per group, the option literals become fractions that sum to one; per phase, the relay
segments the chosen options create must be hosted somewhere: their summed host rows are spread over tiles, each
taking at most the heaviest segment of the phase, and only where the segment's buffer fits; and since a tile hosts
at most one segment per phase, the phase's segments number at most its possible hosts. Each tile's table is then
its direct table, plus the exact effect of every option touching it (weighted by its fraction), plus what it
hosts, minus the model's slack (a seam's pointer reset, a local-pack replica's phase entry, the rounding to
8 bytes: ``floors.model_slack``; on a host no option touches, what the rounding can save:
``floors.host_rounding``); the worst tile is at least that for every tile. Aggregated tile classes (tiles no
option touches and that look alike) share one host variable per phase.

What this bound ignores (so it stays a bound): the integrality of the choices and of the hosting -- a segment's
rows land on one tile, they are not spread thinly over many -- the tiles barred from hosting a segment (its
replicas and senders) and the phase-entry bytes a host pays when it had no traffic.

**With the cycles stage proved** (``caps``): when the plan's cycles equal their lower bound, every selection phase
runs at exactly its own bound (each phase's cycles are at least its bound, and the sum is at the sum), so a
lexicographically optimal plan keeps every tile's receive and transmit bytes under the phase's cap: no local-pack
option (its extra phase adds a sync), and a tile can host only if its bytes leave room for the phase's smallest
relay segment. On the bundled workloads that is what limits the table stage -- in the embed, proj and MLP-down
inputs almost every tile is at the phase's busiest port, so few of their groups can be relayed at all -- and the
bound without it stays far below every plan.

``hosted_mass_bound`` is the other LP bound here: the average table mass (``floors.mass_floor``) with every relay
segment on a tile that has room for it under the worst tile.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from placer.arrays import unique
from placer.selection.floors import HostedLevel, HostedMass, host_rounding, mass_floor, tile_floors
from placer.selection.problem import SelectionProblem
from placer.solver import lazy_module
from placer.units import round_up

if TYPE_CHECKING:
    from ortools.linear_solver import pywraplp
else:  # loaded when the first model is built (``placer.solver.lazy_module``)
    pywraplp = lazy_module("ortools.linear_solver.pywraplp")


def table_lp_bound(problem: SelectionProblem, slack: dict[int, int], time_limit: float = 20.0,  # noqa: PLR0912
                   caps: dict[int, tuple[np.ndarray, np.ndarray]] | None = None) -> int | None:
    """The relaxation's optimum rounded down to the table rounding, or None if GLOP did not finish in time.
    ``caps`` (selection phase index -> per tile, the bytes it may receive and transmit) restricts it to plans that keep
    every phase's cycles at their bound (see the module docstring)."""
    tiles = problem.tiles
    lp = pywraplp.Solver.CreateSolver("GLOP")
    if lp is None:
        return None
    lp.SetTimeLimit(int(time_limit * 1000))
    inf = lp.infinity()
    worst = lp.NumVar(0, inf, "W")
    # per explicit tile (or tile class): W - Σ coefficient·var ≥ base
    class_of = np.full(tiles, -1, np.int64)
    for ei, tc in enumerate(problem.tile_classes):
        class_of[tc.tiles] = ei
    # a host's rows are counted raw on top of its rounded direct row: give back what the rounding can save there
    base = problem.direct.table_bytes[:tiles].astype(np.int64) - host_rounding(problem)
    for t, s in slack.items():
        base[t] -= s
    rows: dict[int, pywraplp.Constraint] = {}

    def row(t: int) -> pywraplp.Constraint:
        key = t if class_of[t] < 0 else tiles + int(class_of[t])
        if key not in rows:
            members = problem.tile_classes[int(class_of[t])].tiles if class_of[t] >= 0 else [t]
            c = lp.Constraint(float(base[members].max()), inf)
            c.SetCoefficient(worst, 1.0)
            rows[key] = c
        return rows[key]

    for t in range(tiles):
        if class_of[t] < 0:
            row(t)
    for tc in problem.tile_classes:
        row(int(tc.tiles[0]))
    for pi, pd in enumerate(problem.phases):
        hosted = lp.Constraint(0.0, inf)  # Σ hosted rows - Σ chosen segments' rows ≥ 0
        segments = lp.Constraint(-inf, 0.0)  # Σ chosen segments ≤ the tiles that can host one (set below)
        cap = 0
        smallest = None
        byte_cap = None if caps is None else caps.get(pi)
        seg_rx = seg_tx = None  # the smallest relay segment's receive and transmit bytes, under a cap
        for opts in pd.options:
            pick = lp.Constraint(1.0, 1.0)
            for op in opts:
                if byte_cap is not None and op.variant == "local-pack":
                    continue  # its extra phase would add a sync: not in a plan at the cycles bound
                v = lp.NumVar(0.0, 1.0, "")
                pick.SetCoefficient(v, 1.0)
                if op.variant == "direct":
                    continue
                assert op.host is not None
                seg_rows = op.host.raw.astype(np.int64)
                if op.ext_host is not None:
                    seg_rows = seg_rows + op.ext_host.raw
                hosted.SetCoefficient(v, -float(seg_rows.sum()))
                segments.SetCoefficient(v, float(op.count))
                cap = max(cap, int(seg_rows.max()))
                small = int(op.buffer_bytes.min())
                smallest = small if smallest is None else min(smallest, small)
                rx_min, tx_min = int(op.host.rx.min()), int(op.host.tx.min())
                seg_rx = rx_min if seg_rx is None else min(seg_rx, rx_min)
                seg_tx = tx_min if seg_tx is None else min(seg_tx, tx_min)
                per_tile: dict[int, int] = {}
                for t, d in zip(op.tiles.tolist(), op.delta.raw.tolist(), strict=True):
                    if t < tiles:
                        per_tile[t] = per_tile.get(t, 0) + int(d)
                if op.ext is not None:
                    for t, d in zip(op.ext_tiles.tolist(), op.ext.raw.tolist(), strict=True):
                        if t < tiles:
                            per_tile[t] = per_tile.get(t, 0) + int(d)
                for t, d in per_tile.items():
                    if d:
                        r = row(t)
                        r.SetCoefficient(v, r.GetCoefficient(v) - float(d))
        if cap == 0 or smallest is None:
            continue
        fits = pd.largest_gap >= smallest
        if byte_cap is not None and seg_rx is not None and seg_tx is not None:
            # a host's receive and transmit bytes grow by its segment's (a direct-receive relay leaves every other
            # tile's bytes as they were), and must stay under the phase's cap
            st = pd.state
            fits &= (st.rx[:tiles] + seg_rx <= byte_cap[0]) & (st.tx[:tiles] + seg_tx <= byte_cap[1])
        segments.SetUb(float(int(fits.sum())))  # a tile hosts at most one segment per phase
        for t in np.flatnonzero(fits & (class_of < 0)).tolist():
            h = lp.NumVar(0.0, float(cap), "")
            hosted.SetCoefficient(h, 1.0)
            rows[t].SetCoefficient(h, -1.0)
        for ei, tc in enumerate(problem.tile_classes):
            if not fits[tc.tiles].any():
                continue
            h = lp.NumVar(0.0, float(cap), "")
            hosted.SetCoefficient(h, float(int(fits[tc.tiles].sum())))
            rows[tiles + ei].SetCoefficient(h, -1.0)
    lp.Minimize(worst)
    if lp.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    value = lp.Objective().Value()
    # GLOP's tolerances are relative (about 1e-7): step below them before rounding down
    value = math.floor(value * (1 - 1e-6)) - 1
    r = problem.machine.cost.table_rounding
    return max(0, round_up(value, r)) if value > 0 else 0


HOSTED_LEVELS = 16  # segment sizes at which the hosted mass counts the tiles with room (a geometric grid)


def hosted_mass_bound(problem: SelectionProblem, upper: int) -> int:
    """The least worst tile ``T`` at which the tables' least total, with every segment on a tile that has room for
    it under ``T``, averages at most ``T`` -- a bound on the worst tile of every plan, between the largest of the
    floors (a) and (b) and ``upper`` (a plan's worst tile). docs/selection.md, "Bounds", (f).

    ``hosted_mass_at`` gives the least mean at a given ``T``; it only falls as ``T`` grows (the room grows), so the
    least ``T`` at or above its mean is found by bisection; every ``T`` the bisection rejects is below every plan's
    worst tile. Deterministic: no time limit, a fixed number of LPs (about log2 of ``upper`` less the floors)."""
    lo = max(int(tile_floors(problem).max(initial=0)), mass_floor(problem).floor)
    if upper <= lo or not problem.tiles or not hosted_segments(problem)[0]:
        return lo
    # every table is a sum of rows rounded to the granule, so the worst tile is a multiple of it: search those
    step = max(problem.machine.cost.table_rounding, 1)
    lo, hi = -(-lo // step), upper // step
    while lo < hi:
        mid = (lo + hi) // 2
        at = hosted_mass_at(problem, mid * step)
        if at is not None and at.floor > mid * step:
            lo = mid + 1  # no plan's worst tile is ``mid`` granules or less
        else:
            hi = mid
    return lo * step


# per relay option: phase index, group index, total change, segment sizes (sorted), their buffers (in that order)
_Hosted = tuple[list[tuple[int, int, int, np.ndarray, np.ndarray]], np.ndarray]


def hosted_segments(problem: SelectionProblem) -> _Hosted:
    """Every relay option as the hosted mass sees it -- (phase index, group index, total change, its segments'
    sizes less the hosting margin, sorted, and their buffers' bytes in the same order) -- and the sizes the levels
    are cut at (computed once per problem)."""
    cached: _Hosted | None = problem.shared.get("hosted_segments")
    if cached is not None:
        return cached
    c = problem.machine.cost
    # a segment adds at least its rows less a reset its first gather may save and two rows' rounding
    margin = c.pointer_reset_extra_bytes + 2 * (c.table_rounding - 1)
    options: list[tuple[int, int, int, np.ndarray, np.ndarray]] = []
    for pi, pd in enumerate(problem.phases):
        for gi, opts in enumerate(pd.options):
            for op in opts[1:]:
                assert op.host is not None
                sizes = op.host.raw.astype(np.int64)
                total = int(op.delta.raw.sum()) + int(op.host.raw.sum())
                if op.ext is not None and op.ext_host is not None:
                    sizes = sizes + op.ext_host.raw
                    total += int(op.ext.raw.sum())
                order = np.argsort(sizes, kind="stable")
                options.append((pi, gi, total, np.maximum(sizes[order] - margin, 0),
                                op.buffer_bytes.astype(np.int64)[order]))
    sizes = np.concatenate([o[3] for o in options]) if options else np.zeros(0, np.int64)
    sizes = sizes[sizes > 0]
    levels = (unique(np.geomspace(max(1, int(sizes.min())), int(sizes.max()), HOSTED_LEVELS).astype(np.int64))
              if sizes.size else np.zeros(0, np.int64))
    cached = problem.shared["hosted_segments"] = (options if sizes.size else [], levels)
    return cached


def hosted_mass_at(problem: SelectionProblem, target: int) -> HostedMass | None:
    """The hosted mass (f) at a worst tile of ``target``; None if GLOP did not solve it.

    At ``target`` a tile ``t`` has room ``target - floor_t`` for the segments it hosts, each of which adds at least
    its rows less a margin (a reset its first gather could save, the rounding of the phase's row and the extra
    phase's) to the tile's table. So for every size ``L`` of a grid, segments of at least ``L`` bytes (after the
    margin) number at most Σ ⌊room / L⌋ over the tiles, per phase at most the tiles with room ``L`` (a tile hosts
    one segment per phase), and add up to at most the room of the tiles with room ``L``. Each group's options are
    fractions that sum to at most one (the rest direct); the least total change under those cuts (GLOP), added to
    the direct total less the model's slack, is the least the tables can add up to in a plan whose worst tile is
    ``target`` or less."""
    options, levels = hosted_segments(problem)
    mass = mass_floor(problem)
    room = np.maximum(target - tile_floors(problem).astype(np.int64), 0)
    cuts = tuple(HostedLevel(int(level), int((room >= level).sum()), int((room // level).sum()),
                             int(room[room >= level].sum())) for level in levels.tolist())
    lp = pywraplp.Solver.CreateSolver("GLOP")
    if lp is None:
        return None
    inf = lp.infinity()
    objective = lp.Objective()
    count = [lp.Constraint(-inf, float(cut.segments)) for cut in cuts]
    volume = [lp.Constraint(-inf, float(cut.room)) for cut in cuts]
    per_phase: dict[tuple[int, int], pywraplp.Constraint] = {}
    pick: dict[tuple[int, int], pywraplp.Constraint] = {}
    for pi, gi, total, seg, _buffers in options:
        if (pi, gi) not in pick:
            pick[(pi, gi)] = lp.Constraint(-inf, 1.0)
        v = lp.NumVar(0.0, 1.0, "")
        pick[(pi, gi)].SetCoefficient(v, 1.0)
        objective.SetCoefficient(v, float(total))
        at = np.searchsorted(seg, levels)  # per level, the first segment at least that large
        for k, first in enumerate(at.tolist()):
            if first >= seg.size:
                break
            big = seg[first:]
            count[k].SetCoefficient(v, float(big.size))
            volume[k].SetCoefficient(v, float(big.sum()))
            if (pi, k) not in per_phase:
                per_phase[(pi, k)] = lp.Constraint(-inf, float(cuts[k].tiles))
            per_phase[(pi, k)].SetCoefficient(v, float(big.size))
    objective.SetMinimization()
    if lp.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    value = float(objective.Value())
    # GLOP's tolerances are relative (about 1e-7): step below them
    least = math.floor(value - abs(value) * 1e-6) - 1
    return HostedMass(direct=mass.direct, relief=least, slack=mass.slack, tiles=problem.tiles, target=target,
                      levels=cuts)
