"""Per-tile floors: the least a tile's program table can be under any plan, and the certificate built from them.

A tile's table under a plan is its direct table, plus for each group touching it the change the group's chosen
option makes there, plus the rows of every segment it hosts, less at most the model's slack. An option's change is
exact on its own (``placer.selection.options``), so the slack is only what two options can do together on one tile
in one phase -- a seam between their receives saving a pointer reset -- a host's first gather continuing the tile's
last receive, and what the model's sum gives away by adding raw changes to the rounded direct row (the row's
padding to the table granule). Taking every group at its most favourable option for the tile, hosting nothing and
rounding each phase's row up from its direct raw bytes plus that relief less the seams gives a floor no plan goes
under (docs/selection.md, "Bounds", (a)). Summed over the tiles, the same argument with each group at the option
whose total change (hosts included) is least floors the program's whole table mass, and the worst tile is at least
its mean ((b)). A tile whose floor is over the budget, or a mean floor over it, proves that no plan fits:
:class:`Certificate` says which, in figures a person can add up. Where neither is, the hosted mass at the budget
(``bounds.hosted_mass_at``: the mass with every segment in room under the budget) can still be over it; its part of
the certificate (:class:`HostedMass`) is checked with a linear program.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypedDict

import numpy as np

from placer.selection.problem import PhaseData, SelectionProblem

CERTIFIED_TILES = 20  # a certificate names at most this many tiles, the furthest over the budget first


def _phase_seams(problem: SelectionProblem, pd: PhaseData) -> dict[int, int]:
    """Per tile, the most the phase's options can save on it beyond the sum of their changes: where it receives
    from two or more of the groups, per group a pointer reset at a seam between their receives. Each change is
    exact on the tile's receive sequence alone, and nothing else adds up differently:
    - senders only send, and sends have no resets;
    - a local-pack change keeps the phase entry of a replica it leaves idle, but that replica then takes part in
      the extra phase, whose entry its extra-phase rows leave out (``options.group_options``): the two entries
      cancel, for one group or several;
    - hosting never seams: a staging buffer is an allocation of its own, so its first receive resets (or, without
      the capture's allocations, it may continue the tile's last receive: ``model_slack`` gives that back)."""
    reset = problem.machine.cost.pointer_reset_extra_bytes
    receiving: dict[int, int] = {}
    for opts in pd.options:
        for t in {int(t) for t in opts[0].group.replicas if t < problem.tiles}:
            receiving[t] = receiving.get(t, 0) + 1
    return {t: groups * reset for t, groups in receiving.items() if groups >= 2}


def _phase_touched(problem: SelectionProblem, pd: PhaseData) -> np.ndarray:
    """The tiles some option of the phase changes (its groups' replicas and senders)."""
    touched = np.zeros(problem.tiles, bool)
    for opts in pd.options:
        for op in opts[1:]:
            touched[op.tiles[op.tiles < problem.tiles]] = True
    return touched


def _padding(problem: SelectionProblem, pd: PhaseData) -> np.ndarray:
    """Per tile, the bytes its direct row in the phase was rounded up by: the model counts changes raw on top of
    the rounded row, while the realised row rounds them together, so it can come out that much lower."""
    raw = pd.raw[: problem.tiles].astype(np.int64)
    return np.asarray((-raw) % problem.machine.cost.table_rounding)


def _phase_relief(problem: SelectionProblem, pd: PhaseData) -> dict[int, int]:
    """Per tile, the most the phase's groups can take off its rows (≤ 0): each group at its most favourable
    option for that tile, nothing hosted."""
    relief: dict[int, int] = {}
    for opts in pd.options:
        per_tile: dict[int, int] = {}
        for op in opts[1:]:
            # the option's whole effect on each of its tiles: the phase's change plus, for local-pack, the rows its
            # replicas get in the extra phase (without that phase's entry, which only adds)
            effect: dict[int, int] = {}
            for t, d in zip(op.tiles.tolist(), op.delta.raw.tolist(), strict=True):
                effect[t] = effect.get(t, 0) + int(d)
            if op.ext is not None:
                for t, d in zip(op.ext_tiles.tolist(), op.ext.raw.tolist(), strict=True):
                    effect[t] = effect.get(t, 0) + int(d)
            for t in {*per_tile, *effect}:
                if t < problem.tiles:
                    per_tile[t] = min(per_tile.get(t, 0), effect.get(t, 0))
        for t, d in per_tile.items():
            relief[t] = relief.get(t, 0) + d
    return relief


def model_slack(problem: SelectionProblem) -> dict[int, int]:
    """Per tile, the most the model can overstate its table, in every phase with relay options: the seams between
    groups (``_phase_seams``); where an option touches the tile, its direct row's padding (``_padding``); and
    where the tile receives and has room for a staging buffer, one pointer reset -- without the capture's
    allocations a buffer may start where the tile's last receive ended, and its first gather then continues it
    (with them, the receive's allocation ends there, which resets). Computed once per prepared problem: it does
    not depend on the budget."""
    cached = problem.shared.get("model_slack")
    if cached is None:
        reset = problem.machine.cost.pointer_reset_extra_bytes
        slack = np.zeros(problem.tiles, np.int64)
        for pd in problem.phases:
            if not any(len(opts) > 1 for opts in pd.options):
                continue
            slack += np.where(_phase_touched(problem, pd), _padding(problem, pd), 0)
            slack += np.where((pd.state.receives[: problem.tiles] > 0) & (pd.largest_gap > 0), reset, 0)
            for t, s in _phase_seams(problem, pd).items():
                slack[t] += s
        cached = problem.shared["model_slack"] = {int(t): int(slack[t]) for t in np.flatnonzero(slack)}
    return dict(cached)


def host_rounding(problem: SelectionProblem) -> np.ndarray:
    """Per tile, the most hosting can take off its rows through the rounding, in the phases where no option touches
    it (where one does, ``model_slack`` has it): a relay's rows are counted raw on top of the tile's rounded direct
    row, and the realised row rounds the two together, so it can come out by the direct row's padding lower per
    phase. (Zero on the bundled workloads: every row there is a multiple of the rounding.)"""
    cached = problem.shared.get("host_rounding")
    if cached is None:
        cached = np.zeros(problem.tiles, np.int64)
        for pd in problem.phases:
            if any(len(opts) > 1 for opts in pd.options):
                cached += np.where(_phase_touched(problem, pd), 0, _padding(problem, pd))
        problem.shared["host_rounding"] = cached
    return np.asarray(cached).copy()


def _phase_floors(problem: SelectionProblem, pd: PhaseData) -> dict[int, tuple[int, int, int]]:
    """Per tile the phase's options touch: (relief, seams, rounding), where the tile's row in the phase is at least
    its direct charge + relief − seams + rounding. The row is rounded up from its raw bytes, and the raw bytes are at
    least the direct raw bytes plus the relief less the seams, so the rounding term is the row's padding then, less
    its padding now (between −(granule − 1) and granule − 1). A local-pack option's relief also holds the extra
    phase's rows; rounding their sum with the phase's is still a floor (a sum of rounded rows is at least the
    rounded sum)."""
    relief, seams, pad = _phase_relief(problem, pd), _phase_seams(problem, pd), _padding(problem, pd)
    rnd = problem.machine.cost.table_rounding
    out = {}
    for t in sorted({*np.flatnonzero(_phase_touched(problem, pd)).tolist(), *relief}):
        raw = int(pd.raw[t]) + relief.get(t, 0) - seams.get(t, 0)
        out[t] = (relief.get(t, 0), seams.get(t, 0), (-raw) % rnd - int(pad[t]))
    return out


def phase_floor_terms(problem: SelectionProblem, index: int) -> np.ndarray:
    """Per tile, what selection phase ``index`` adds to its floor over its direct table (relief − seams +
    rounding, ``_phase_floors``); computed once per prepared problem. A problem that differs from another in one
    phase's options shares the other phases' terms (``forced.without_packing``)."""
    cached: dict[int, np.ndarray] = problem.shared.setdefault("phase_floor_terms", {})
    if index not in cached:
        term = np.zeros(problem.tiles, np.int64)
        for t, (relief, seams, rounding) in _phase_floors(problem, problem.phases[index]).items():
            term[t] += relief - seams + rounding
        cached[index] = term
    return cached[index]


def tile_floors(problem: SelectionProblem) -> np.ndarray:
    """Per tile, a lower bound on its program table under any plan (the module docstring); computed once per
    prepared problem (it does not depend on the budget)."""
    cached = problem.shared.get("best_tables")
    if cached is None:
        best = problem.direct.table_bytes[: problem.tiles].astype(np.int64).copy()
        for index in range(len(problem.phases)):
            best += phase_floor_terms(problem, index)
        cached = problem.shared["best_tables"] = best
    return np.asarray(cached).copy()


class PhaseFloorDoc(TypedDict):
    phase: int
    label: str
    direct: int
    relief: int
    groups: int
    seams: int
    rounding: int
    floor: int


class TileCertificateDoc(TypedDict):
    """``TileCertificate.to_json`` (``placer solve --json``'s ``irreducible_tiles``)."""

    tile: int
    bytes_over: int
    floor: int
    budget: int
    phases: list[PhaseFloorDoc]


class _MassDoc(TypedDict):
    direct: int
    relief: int
    slack: int
    total: int
    tiles: int
    floor: int


class MassFloorDoc(_MassDoc):
    budget: int


class HostedLevelDoc(TypedDict):
    size: int
    tiles: int
    segments: int
    room: int


class HostedMassDoc(_MassDoc):
    target: int
    levels: list[HostedLevelDoc]


class CertificateDoc(TypedDict):
    """``Certificate.to_json`` (``placer solve --json``'s ``certificate``)."""

    tiles: list[TileCertificateDoc]
    mass: MassFloorDoc | None
    hosted: HostedMassDoc | None


@dataclass(frozen=True)
class PhaseFloor:
    """One phase's part of a tile's floor."""

    phase: int  # phase id
    label: str  # the capture's name for the phase ("" when it has none)
    direct: int  # the tile's rows in the phase, all direct, as charged after table sharing
    relief: int  # the most the phase's relays can take off them (≤ 0)
    groups: int  # groups touching the tile in the phase (each offered at least one relay)
    seams: int  # the most two or more of those groups' options together can save beyond their changes, given back
    rounding: int  # the row's padding to the table granule after relief and seams, less its padding direct

    @property
    def floor(self) -> int:
        return self.direct + self.relief - self.seams + self.rounding

    def to_json(self) -> PhaseFloorDoc:
        return {"phase": self.phase, "label": self.label, "direct": self.direct, "relief": self.relief,
                "groups": self.groups, "seams": self.seams, "rounding": self.rounding, "floor": self.floor}


@dataclass(frozen=True)
class TileCertificate:
    """Why a tile cannot fit: its floor -- the sum of its phases' floors -- is over the budget whatever is chosen.

    Checking it needs no search: the phases' figures add up to the floor, and each relief is the least change
    any option of the phase's groups makes to the tile (``tests/selection/test_floors.py`` checks the claim
    against every plan of small captures, costed by the independent validator)."""

    tile: int
    budget: int
    phases: tuple[PhaseFloor, ...]  # every phase with rows on the tile, in capture order

    @property
    def floor(self) -> int:
        return sum(p.floor for p in self.phases)

    @property
    def bytes_over(self) -> int:
        return self.floor - self.budget

    def lines(self, most: int = 3) -> list[str]:
        """The certificate in words: the floor, its parts, and the phases that weigh most on it."""
        direct = sum(p.direct for p in self.phases)
        relief = sum(p.relief for p in self.phases)
        seams = sum(p.seams for p in self.phases)
        rounding = sum(p.rounding for p in self.phases)
        heavy = sorted(self.phases, key=lambda p: (-p.floor, p.phase))[:most]
        parts = ", ".join(f"phase {p.phase}{f' ({p.label})' if p.label else ''} {p.direct:,} B"
                          + (f" − {-p.relief:,} B by its {p.groups} group{'s' if p.groups != 1 else ''}"
                             if p.relief else "") for p in heavy)
        return [f"tile {self.tile}: at least {self.floor:,} B against {self.budget:,} B "
                f"({self.bytes_over:,} B over) = {direct:,} B direct − {-relief:,} B at most relays take off"
                f" − {seams:,} B seams {'+' if rounding >= 0 else '−'} {abs(rounding):,} B rounding",
                f"  heaviest phases: {parts}"]

    def to_json(self) -> TileCertificateDoc:
        return {"tile": self.tile, "bytes_over": self.bytes_over, "floor": self.floor, "budget": self.budget,
                "phases": [p.to_json() for p in self.phases]}


@dataclass(frozen=True)
class _Mass:
    """A least total of the tiles' tables, and its mean: some tile holds at least that much."""

    direct: int  # Σ over tiles of the direct tables
    relief: int  # the most relays can take off the total (≤ 0)
    slack: int  # Σ over tiles of the model's slack and of ``host_rounding``, given back
    tiles: int

    @property
    def total(self) -> int:
        return self.direct + self.relief - self.slack

    @property
    def floor(self) -> int:
        """The worst tile's floor: the total's mean over the tiles, rounded up."""
        return max(0, -(-self.total // self.tiles)) if self.tiles else 0


@dataclass(frozen=True)
class MassFloor(_Mass):
    """The least the tiles' tables can add up to under any plan, and so the least the worst tile can be: their mean.

    The total is the direct tables' plus, per group, the least total change any of its options makes (replicas,
    senders and, since every segment is hosted somewhere, hosts), less every tile's model slack and what hosting can
    save through the rounding (``host_rounding``)."""

    budget: int

    def lines(self) -> list[str]:
        return [f"the tiles' tables add up to at least {self.total:,} B = {self.direct:,} B direct − "
                f"{-self.relief:,} B at most relays take off in total (hosts' rows included) − {self.slack:,} B model "
                f"slack; over {self.tiles:,} tiles some tile holds at least {self.floor:,} B against {self.budget:,} B"]

    def to_json(self) -> MassFloorDoc:
        return {"direct": self.direct, "relief": self.relief, "slack": self.slack, "total": self.total,
                "tiles": self.tiles, "floor": self.floor, "budget": self.budget}


def mass_floor(problem: SelectionProblem) -> MassFloor:
    """The program's :class:`MassFloor` (the total computed once per prepared problem)."""
    cached = problem.shared.get("mass_floor")
    if cached is None:
        relief = 0
        for pd in problem.phases:
            for opts in pd.options:
                # a group may have no relay option left (``forced.without_packing``): then it stays direct
                relief += min([0, *(int(op.delta.raw.sum()) + (int(op.host.raw.sum()) if op.host is not None else 0)
                                    + (int(op.ext.raw.sum()) if op.ext is not None else 0) for op in opts[1:])])
        slack = sum(model_slack(problem).values()) + int(host_rounding(problem).sum())
        cached = problem.shared["mass_floor"] = (int(problem.direct.table_bytes[: problem.tiles].sum()), relief, slack)
    direct, relief, slack = cached
    return MassFloor(direct, relief, slack, problem.tiles, problem.table_budget)


@dataclass(frozen=True)
class HostedLevel:
    """One segment size of the hosted mass: what the tiles with room for segments of that size can take."""

    size: int  # segments of at least this many bytes (less the hosting margin)
    tiles: int  # tiles with room for one: each hosts at most one per phase
    segments: int  # Σ ⌊room / size⌋ over the tiles: at most this many such segments in all
    room: int  # their room: such segments' bytes add up to at most this


@dataclass(frozen=True)
class HostedMass(_Mass):
    """The hosted mass (f) at one worst tile ``target``: the least the tiles' tables can add up to when every relay
    segment sits on a tile whose floor leaves room for it under ``target`` (``bounds.hosted_mass_at``).

    The relief is a linear program's optimum -- each group's options as fractions, the segments of each size
    limited by the ``levels`` -- rounded down, so checking it takes an LP solver, not a search; when the mean of
    the total (``floor``) is over ``target``, no plan's worst tile is ``target`` or less (docs/selection.md,
    "Bounds", (f))."""

    target: int
    levels: tuple[HostedLevel, ...]

    def lines(self) -> list[str]:
        roomy = self.levels[-1] if self.levels else None
        where = (f" (only {roomy.tiles:,} tiles have room for a segment of {roomy.size:,} B or more)"
                 if roomy is not None else "")
        return [f"with every tile at most {self.target:,} B, each relay segment must sit on a tile whose floor leaves "
                f"room for it{where}; then the tables add up to at least {self.total:,} B = {self.direct:,} B direct − "
                f"{-self.relief:,} B at most relays take off (a linear program over the options, `--json`: "
                f"certificate.hosted.levels) − {self.slack:,} B model slack; over {self.tiles:,} tiles some tile "
                f"holds at least {self.floor:,} B, more than {self.target:,} B"]

    def to_json(self) -> HostedMassDoc:
        return {"target": self.target, "direct": self.direct, "relief": self.relief, "slack": self.slack,
                "total": self.total, "tiles": self.tiles, "floor": self.floor,
                "levels": [{"size": lv.size, "tiles": lv.tiles, "segments": lv.segments, "room": lv.room}
                           for lv in self.levels]}


@dataclass(frozen=True)
class Certificate:
    """Why no plan fits the budget: tiles whose own floor is over it, and/or a mean floor over it, or (checked
    when neither is) the hosted mass at the budget over it."""

    tiles: tuple[TileCertificate, ...]  # at most ``CERTIFIED_TILES``, the furthest over the budget first
    mass: MassFloor | None  # set when the mean floor alone is over the budget
    hosted: HostedMass | None = None  # set when only the hosted mass is

    def lines(self, shown: int) -> list[str]:
        """The certificate in words (the first ``shown`` tiles)."""
        out = [line for cert in self.tiles[:shown] for line in cert.lines()]
        if len(self.tiles) > shown:
            out.append(f"and {len(self.tiles) - shown} more tile(s) (`--json`: certificate.tiles, up to "
                       f"{CERTIFIED_TILES})")
        return (out + (self.mass.lines() if self.mass is not None else [])
                + (self.hosted.lines() if self.hosted is not None else []))

    def to_json(self) -> CertificateDoc:
        return {"tiles": [c.to_json() for c in self.tiles],
                "mass": self.mass.to_json() if self.mass is not None else None,
                "hosted": self.hosted.to_json() if self.hosted is not None else None}


def certificate(problem: SelectionProblem) -> Certificate | None:
    """Why no plan fits ``problem.table_budget``, or None when neither a tile's floor nor the mean floor is over
    it (a plan may still not exist: these are the checks that need no search)."""
    mass = mass_floor(problem)
    tiles = tile_certificates(problem)
    if not tiles and mass.floor <= problem.table_budget:
        return None
    return Certificate(tuple(tiles), mass if mass.floor > problem.table_budget else None)


def proved_floor(problem: SelectionProblem) -> int:
    """The least worst tile the checks without search allow: every budget under it is proved infeasible."""
    return max(int(tile_floors(problem).max(initial=0)), mass_floor(problem).floor)


def tile_certificates(problem: SelectionProblem) -> list[TileCertificate]:
    """The tiles whose floor is over the budget (at most ``CERTIFIED_TILES``, furthest over first)."""
    best = tile_floors(problem)
    over = np.flatnonzero(best > problem.table_budget)
    tiles = [int(t) for t in over[np.argsort(-best[over], kind="stable")][:CERTIFIED_TILES]]
    if not tiles:
        return []
    index = {p.phase: i for i, p in enumerate(problem.direct.phases)}
    charged = problem.direct.charged
    by_phase = {pd.phase.phase: (_phase_floors(problem, pd), pd) for pd in problem.phases}
    out = []
    for t in tiles:
        parts = []
        for p in problem.direct.phases:
            floors, pd = by_phase.get(p.phase, ({}, None))
            relief, seams, rounding = floors.get(t, (0, 0, 0))
            direct = int(charged[index[p.phase], t])
            groups = 0 if pd is None else sum(1 for opts in pd.options
                                              if any(t in op.tiles.tolist() for op in opts[1:]))
            if direct or relief or seams or rounding:
                parts.append(PhaseFloor(p.phase, problem.capture.label(p.phase), direct, relief, groups, seams,
                                        rounding))
        out.append(TileCertificate(t, problem.table_budget, tuple(parts)))
    return out


__all__ = ["CERTIFIED_TILES", "Certificate", "CertificateDoc", "HostedLevel", "HostedLevelDoc", "HostedMass",
           "HostedMassDoc", "MassFloor", "MassFloorDoc", "PhaseFloor",
           "PhaseFloorDoc", "TileCertificate", "TileCertificateDoc", "certificate", "host_rounding", "mass_floor",
           "model_slack", "phase_floor_terms",
           "proved_floor", "tile_certificates", "tile_floors"]
