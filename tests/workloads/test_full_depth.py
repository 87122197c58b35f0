"""Full-depth programs (SigLIP So400m b2 with its 27 layers, PE-core L/14 b2 with its 24): they fit tile memory,
their memory is consistent, the reference's full-depth figure holds, and the one-layer program is unchanged by the
machinery that makes them fit (serial passes in the MAP head, the exact layout)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from placer.capture.headroom import Buffers, headroom
from placer.capture.model import Capture
from placer.errors import InputError
from placer.machine import Machine
from placer.workloads.calibration import TARGETS, TOLERANCE, measure, phase_ids
from placer.workloads.generate import generate
from placer.workloads.lowering import phase_steps
from placer.workloads.spec import load_model, resolve_model_path

from .test_memory_panels import _inside_live


@pytest.fixture(scope="module")
def siglip27(machine: Machine) -> Capture:
    return generate("siglip-so400m", batch=2, layers=27, machine=machine)


@pytest.fixture(scope="module")
def pe24(machine: Machine) -> Capture:
    return generate("pe-core-l14", batch=2, layers=24, machine=machine)


def _no_overlap_while_live(cap: Capture) -> None:
    a = cap.allocations
    for tile in range(0, cap.tile_count, 23):  # a spread sample: the layout is per kind, the same on every tile
        sel = np.flatnonzero(a.tile == tile)
        s, e, f, la = a.start[sel], a.end[sel], a.first[sel], a.last[sel]
        clash = ((s[:, None] < e[None, :]) & (s[None, :] < e[:, None])
                 & (f[:, None] <= la[None, :]) & (f[None, :] <= la[:, None]))
        np.fill_diagonal(clash, False)
        assert not clash.any(), tile


@pytest.mark.parametrize("name", ["siglip27", "pe24"])
def test_full_depth_fits_tile_memory(name: str, request: pytest.FixtureRequest, machine: Machine) -> None:
    cap: Capture = request.getfixturevalue(name)
    a = cap.allocations
    assert a.start.min() >= machine.memory.base
    assert a.end.max() <= machine.memory.loader_limit
    r0 = machine.memory.region0_end
    assert not ((a.start < r0) & (a.end > r0)).any()
    _no_overlap_while_live(cap)
    for p in cap.phases:  # every byte the traffic touches lies in a live allocation of its tile
        dst_bytes = p.nbytes[p.dst_transfer()]
        assert _inside_live(p.dst_tile, p.dst_addr, p.dst_addr + dst_bytes, cap, p.phase), p.phase
    room = headroom(cap, machine)
    assert room is not None
    assert 0 <= room.free < room.capacity


def test_siglip_head_runs_in_serial_passes(siglip27: Capture, machine: Machine) -> None:
    work = siglip27.extra["workload"]
    assert (work["layers"], work["head_passes"]) == (27, 3)
    one = generate("siglip-so400m", batch=2, layers=1, machine=machine)
    assert one.extra["workload"]["head_passes"] == 1
    assert len(siglip27.phases) == len(one.phases) + 2
    labels = [siglip27.label(p) for p in siglip27.phase_ids()]
    assert sum("pass" in label for label in labels) == 3
    # the passes split the reduction's bytes, not add to them; the body and the output to the owners are unchanged
    spec = load_model("siglip-so400m")
    lean = replace(spec, lowering={**spec.lowering, "map_kv": replace(spec.lowering["map_kv"], serial=3)})
    ids1 = phase_ids("siglip-so400m")
    ids3 = {key: i for i, (key, _) in enumerate(phase_steps(lean)[0])}
    red1 = one.phase_by_id(ids1["map_kv.red"])
    reds = [siglip27.phase_by_id(ids3[k]) for k in ("map_kv.red", "map_kv.red1", "map_kv.red2")]
    assert sum(r.payload_bytes() for r in reds) == red1.payload_bytes()
    out1, out3 = one.phase_by_id(ids1["map_kv.out"]), siglip27.phase_by_id(ids3["map_kv.out"])
    assert out1.n == out3.n
    assert out1.payload_bytes() == out3.payload_bytes()
    body = siglip27.repeat
    assert body is not None
    assert body.iterations == 27
    for pid in body.phases:  # one body, whatever the depth: same transfers (weights read at 27 addresses)
        assert siglip27.phase_by_id(pid).n == one.phase_by_id(pid).n


def test_pe_full_depth_figure(pe24: Capture, machine: Machine) -> None:
    deep = [t for t in TARGETS if t.layers > 1]
    assert deep
    for row in measure(pe24, machine, [t for t in deep if t.model == "pe-core-l14"], "pe-core-l14"):
        assert abs(row.ratio - 1) <= TOLERANCE, (row.target.what, row.ratio)
    one = generate("pe-core-l14", batch=2, layers=1, machine=machine)
    with pytest.raises(ValueError, match="full-depth"):
        measure(one, machine, deep, "pe-core-l14")


def test_too_deep_is_refused_with_the_buffer(machine: Machine) -> None:
    with pytest.raises(InputError, match="does not fit in tile memory"):
        generate("siglip-so400m", batch=2, layers=40, machine=machine)


def test_serial_only_outside_the_layer_body(tmp_path: Path) -> None:
    text, _ = resolve_model_path("siglip-so400m")
    bad = tmp_path / "m.toml"
    bad.write_text(text.replace("[lowering.qkv]\n", "[lowering.qkv]\nserial = 2\n"))
    with pytest.raises(InputError, match=r"lowering\.qkv\.serial"):
        load_model(bad)


def test_headroom_counts_buffers(pe24: Capture, machine: Machine) -> None:
    base = headroom(pe24, machine)
    assert base is not None
    t, p = base.tile, base.phase
    # a 1 KiB buffer on the fullest tile, in its fullest phase, in region 1, takes exactly its bytes
    start = machine.memory.region0_end
    extra = Buffers(np.array([t]), np.array([p]), np.array([start]), np.array([start + 1024]))
    room = headroom(pe24, machine, extra)
    assert room is not None
    assert (room.free, room.tile, room.phase, room.buffer_bytes) == (base.free - 1024, t, p, 1024)
    assert room.hosts_free == room.free
    assert room.region1_free == base.region1_free - 1024
