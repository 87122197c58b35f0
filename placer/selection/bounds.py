"""A lower bound on the worst tile's table from a linear relaxation of the whole-program selection model.

Every phase is free at once. Per group, the option literals become fractions that sum to one; per phase, the relay
segments the chosen options create must be hosted somewhere: their summed host rows are spread over tiles, each
taking at most the heaviest segment of the phase, and only where the segment's buffer fits; and since a tile hosts
at most one segment per phase, the phase's segments number at most its possible hosts. Each tile's table is then
its direct table, plus the exact effect of every option touching it (weighted by its fraction), plus what it
hosts, minus the model's slack (a seam's pointer reset, a local-pack replica's phase entry, the rounding to
8 bytes: ``select.model_slack``); the worst tile is at least that for every tile. Aggregated tile classes (tiles no
option touches and that look alike) share one host variable per phase.

What this bound ignores (so it stays a bound, and why it is far from tight on real programs): the integrality of
the choices and of the hosting -- a segment's rows land on one tile, they are not spread thinly over many -- the
tiles barred from hosting a segment (its replicas and senders), the phase-entry bytes a host pays when it had no
traffic, and the cycle objective ranked before it.
"""

from __future__ import annotations

import math

import numpy as np
from ortools.linear_solver import pywraplp

from placer.selection.problem import SelectionProblem


def table_lp_bound(problem: SelectionProblem, slack: dict[int, int], time_limit: float = 20.0) -> int | None:
    """The relaxation's optimum rounded down to the table rounding, or None if GLOP did not finish in time."""
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
    base = problem.direct.table_bytes[:tiles].astype(np.int64).copy()
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
    for pd in problem.phases:
        hosted = lp.Constraint(0.0, inf)  # Σ hosted rows - Σ chosen segments' rows ≥ 0
        segments = lp.Constraint(-inf, 0.0)  # Σ chosen segments ≤ the tiles that can host one (set below)
        cap = 0
        smallest = None
        for opts in pd.options:
            pick = lp.Constraint(1.0, 1.0)
            for op in opts:
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
    return max(0, -(-value // r) * r) if value > 0 else 0
