"""A relay plan: the choices, the rewritten program they produce, and the plan file (docs/plan.md)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NotRequired, TypeAlias, TypedDict

import numpy as np
import numpy.typing as npt

from placer.alternatives.groups import ReplicaGroup
from placer.alternatives.relay import RelayRewrite, Variant
from placer.alternatives.segments import Segmentation
from placer.capture.headroom import Buffers
from placer.capture.io import capture_digest, phase_to_json
from placer.capture.model import Capture, Phase, Repeat
from placer.machine import Machine
from placer.modes import PlanMode

if TYPE_CHECKING:
    import orjson

PLAN_VERSION = 1

# A phase's transfer records (docs/capture.md), or the same records pre-rendered for a writer (``rendered``)
TransfersDoc: TypeAlias = "list[dict[str, object]] | orjson.Fragment"


class PlanSegmentDoc(TypedDict):
    """One segment of a relay: the byte range it carries, its host tile and staging buffer."""

    start: int
    end: int
    tile: int
    buffer: int
    phase: int
    # local-pack: the unpacked runs' scratch and the extra phase holding the forwards
    scratch: NotRequired[int]
    scratch_bytes: NotRequired[int]
    extra_phase: NotRequired[int | None]


class PlanRelayDoc(TypedDict):
    """One relayed group."""

    phase: int
    group: int
    variant: Variant
    replicas: list[int]
    bases: list[int]
    extent: int
    segments: list[PlanSegmentDoc]


class PlanDeltaDoc(TypedDict):
    """A phase's rewrite: transfer indices removed, transfers appended."""

    phase: int
    remove: list[int]
    append: TransfersDoc


class PlanInsertedDoc(TypedDict):
    """A local-pack extra phase, run after ``after``."""

    after: int
    phase: int | None
    label: str
    transfers: TransfersDoc


class PlanKernelDoc(TypedDict):
    """A local-pack tile's copies ([from, to, bytes]) after phase ``after``."""

    after: int
    tile: int
    copies: list[list[int]]


class PlanCaptureDoc(TypedDict):
    sha256: str
    tile_count: int
    transfers: int


class PlanBudgetDoc(TypedDict):
    table_bytes: int
    fragments: int


class PlanDoc(TypedDict):
    """The plan file (docs/plan.md): what ``Plan.to_json`` and ``SelectionResult.plan_json`` return."""

    plan_version: int
    kind: str
    mode: PlanMode
    machine: str
    machine_sha256: str  # provenance: placer validate refuses a plan checked against another capture or machine
    capture: PlanCaptureDoc
    budget: PlanBudgetDoc
    relays: list[PlanRelayDoc]
    delta: list[PlanDeltaDoc]
    inserted_phases: list[PlanInsertedDoc]
    kernels: list[PlanKernelDoc]
    summary: Mapping[str, object]  # the per-phase summary (placer.report.summary.PlanSummaryDoc), {} without one


@dataclass(eq=False)
class RelayChoice:
    group: ReplicaGroup
    variant: Variant
    segmentation: Segmentation
    hosts: npt.NDArray[np.int64]  # relay tile of each segment
    buffers: npt.NDArray[np.int64]  # staging buffer address of each segment
    rewrite: RelayRewrite
    extra_phase: int | None = None  # local-pack: id of the extra phase holding the forwards

    @property
    def scratch_bytes(self) -> npt.NDArray[np.int64]:
        """Bytes of relay memory per segment (local-pack also keeps the unpacked runs)."""
        seg = self.segmentation.segment_bytes()
        if self.variant == "local-pack":
            covered = np.bincount(np.repeat(np.arange(seg.shape[0]), np.diff(self.segmentation.frag_start)),
                                  weights=self.group.nbytes, minlength=seg.shape[0]).astype(np.int64)
            return seg + covered
        return seg


@dataclass(eq=False)
class Plan:
    mode: PlanMode
    machine: Machine
    table_budget: int
    fragment_limit: int
    relays: list[RelayChoice] = field(default_factory=list)

    def buffers(self) -> Buffers:
        """Every relay's staging buffers: host, phase, address range (for the memory headroom)."""
        if not self.relays:
            return Buffers.empty()
        tile = np.concatenate([r.hosts for r in self.relays]).astype(np.int64)
        phase = np.concatenate([np.full(r.hosts.shape[0], r.group.phase, np.int64) for r in self.relays])
        start = np.concatenate([r.buffers for r in self.relays]).astype(np.int64)
        end = start + np.concatenate([r.scratch_bytes for r in self.relays]).astype(np.int64)
        return Buffers(tile, phase, start, end)

    def phase_rewrite(self, phase: Phase) -> tuple[Phase, Phase | None]:
        """One phase with its relays applied, and its local-pack extra phase (None without local-pack)."""
        chosen = [r for r in self.relays if r.group.phase == phase.phase]
        if not chosen:
            return phase, None
        removed = np.zeros(phase.n, bool)
        for r in chosen:
            removed[r.rewrite.remove] = True
        parts = [phase.take(np.flatnonzero(~removed))]
        parts += [r.rewrite.gathers for r in chosen]
        parts += [r.rewrite.forwards for r in chosen if r.variant == "direct-receive"]
        packs = [r for r in chosen if r.variant == "local-pack"]
        extra = None
        if packs:
            assert packs[0].extra_phase is not None
            extra = Phase.concat(packs[0].extra_phase, [r.rewrite.forwards for r in packs], extra={})
        return Phase.concat(phase.phase, parts, extra=phase.extra), extra

    def rewritten(self, capture: Capture) -> Capture:
        """The program with every chosen relay applied (extra local-pack phases right after their phase)."""
        phases: list[Phase] = []
        labels = dict(capture.phase_labels or {})
        body = set(capture.repeat.phases) if capture.repeat else set()
        relayed = {r.group.phase for r in self.relays}
        for p in capture.phases:
            if p.phase not in relayed:
                phases.append(p)
                continue
            main, extra = self.phase_rewrite(p)
            phases.append(main)
            if extra is not None:
                phases.append(extra)
                labels[extra.phase] = f"local-pack multicast of phase {p.phase}"
                if p.phase in body:
                    body.add(extra.phase)
        out = capture.with_phases(phases)
        out.phase_labels = labels if (labels or capture.phase_labels is not None) else None
        if capture.repeat is not None:
            out.repeat = Repeat(tuple(ph.phase for ph in phases if ph.phase in body), capture.repeat.iterations)
        return out

    def to_json(self, capture: Capture, summary: Mapping[str, object] | None = None, *,
                rendered: bool = False) -> PlanDoc:
        """The plan file's document. ``rendered`` gives the transfer lists as pre-rendered JSON (``orjson.Fragment``,
        the numpy writer's text): the same bytes once serialised, a few times faster for a writer; in-memory
        readers (the validator) want the lists."""
        if rendered:
            import orjson

            from placer.capture.writer import render_transfers

            def transfers(ph: Phase) -> TransfersDoc:
                return orjson.Fragment(render_transfers(ph))
        else:
            def transfers(ph: Phase) -> TransfersDoc:
                transfer_list: list[dict[str, object]] = phase_to_json(ph)["transfers"]
                return transfer_list

        by_phase: dict[int, list[RelayChoice]] = {}
        for r in self.relays:
            by_phase.setdefault(r.group.phase, []).append(r)
        relays: list[PlanRelayDoc] = []
        delta: list[PlanDeltaDoc] = []
        inserted: list[PlanInsertedDoc] = []
        kernels: list[PlanKernelDoc] = []
        for p in capture.phases:
            chosen = by_phase.get(p.phase, [])
            if not chosen:
                continue
            remove = np.sort(np.concatenate([r.rewrite.remove for r in chosen]))
            appended = [r.rewrite.gathers for r in chosen]
            appended += [r.rewrite.forwards for r in chosen if r.variant == "direct-receive"]
            delta.append({
                "phase": p.phase,
                "remove": remove.tolist(),
                "append": transfers(Phase.concat(p.phase, appended, extra={})),
            })
            packs = [r for r in chosen if r.variant == "local-pack"]
            if packs:
                extra_id = packs[0].extra_phase
                inserted.append({
                    "after": p.phase,
                    "phase": extra_id,
                    "label": f"local-pack multicast of phase {p.phase}",
                    "transfers": transfers(Phase.concat(extra_id or 0, [r.rewrite.forwards for r in packs],
                                                        extra={})),
                })
                for r in packs:
                    by_tile: dict[int, list[list[int]]] = {}
                    for tile, frm, to, nb in r.rewrite.copies:
                        by_tile.setdefault(tile, []).append([frm, to, nb])
                    for tile, copies in by_tile.items():
                        kernels.append({"after": p.phase, "tile": tile, "copies": copies})
            for r in chosen:
                relays.append(_relay_json(r))
        return {
            "plan_version": PLAN_VERSION,
            "kind": "placer-plan",
            "mode": self.mode,
            "machine": self.machine.name,
            # provenance: placer validate refuses a plan checked against another capture or machine
            "machine_sha256": self.machine.digest(),
            "capture": {"sha256": capture_digest(capture), "tile_count": capture.tile_count,
                        "transfers": capture.transfer_count()},
            "budget": {"table_bytes": self.table_budget, "fragments": self.fragment_limit},
            "relays": relays,
            "delta": delta,
            "inserted_phases": inserted,
            "kernels": kernels,
            "summary": summary or {},
        }


def _relay_json(r: RelayChoice) -> PlanRelayDoc:
    g = r.group
    seg = r.segmentation
    scratch = r.scratch_bytes
    segments = []
    for s in range(seg.count):
        rec: PlanSegmentDoc = {
            "start": int(seg.bounds[s]),
            "end": int(seg.bounds[s + 1]),
            "tile": int(r.hosts[s]),
            "buffer": int(r.buffers[s]),
            "phase": g.phase,
        }
        if r.variant == "local-pack":
            rec["scratch"] = int(r.buffers[s] + seg.bounds[s + 1] - seg.bounds[s])
            rec["scratch_bytes"] = int(scratch[s] - (seg.bounds[s + 1] - seg.bounds[s]))
            rec["extra_phase"] = r.extra_phase
        segments.append(rec)
    return {
        "phase": g.phase,
        "group": g.index,
        "variant": r.variant,
        "replicas": g.replicas.tolist(),
        "bases": g.bases.tolist(),
        "extent": g.extent,
        "segments": segments,
    }
