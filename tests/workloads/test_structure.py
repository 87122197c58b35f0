"""The generated SigLIP So400m batch-two capture against the reference figures of docs/reference.md §8."""

from __future__ import annotations

import numpy as np
import pytest

from placer.capture.model import Capture, Phase
from placer.cost.model import ProgramCost, program_cost
from placer.machine import Machine
from placer.selection.greedy import production_plan

MIB = 2**20


def groups(p: Phase, mask: np.ndarray) -> dict[int, int]:
    """Destination-set id -> fan-out, over the transfers selected by ``mask``."""
    ids = p.dst_set_ids()[mask]
    fan = p.fanout[mask]
    return {int(i): int(f) for i, f in zip(ids, fan, strict=True)}


def near(value: float, target: float, rel: float) -> bool:
    return abs(value - target) <= rel * target


def test_phase_list(siglip2: Capture) -> None:
    assert siglip2.phase_ids() == list(range(69))
    assert siglip2.repeat is not None
    assert siglip2.repeat.iterations == 1
    body = siglip2.repeat.phases
    assert body == tuple(range(14, 58))
    labels = siglip2.phase_labels or {}
    assert "qkv: input + weights" in labels[16]
    assert "mlp-up: input + weights" in labels[50]
    assert "mlp-up: partial-sum" in labels[51]
    assert "mlp-up: output" in labels[52]
    assert "mlp-down: input" in labels[54]
    assert "mlp-down: weights" in labels[55]
    assert "mlp-down: partial-sum" in labels[56]
    assert "mlp-down: output" in labels[57]
    assert all(p.n > 0 for p in siglip2.phases)


def test_qkv_phase(siglip2: Capture) -> None:
    p = siglip2.phase_by_id(16)
    act = p.fanout == 36
    assert int(act.sum()) == 1458 * 1152 // 32 == 52_488
    assert (p.words[act] == 8).all()
    g = groups(p, act)
    assert len(g) == 40
    assert set(g.values()) == {36}
    # weights: each block W[k, n] in 9 slices of 3,072 B on 9 of its 10 replicas ("small unreplicated homes"),
    # each slice in two pieces (2,048 + 1,024 B) to the other 9 replicas; a home never sends to itself
    w = p.fanout == 9
    assert (act | w).all()
    gw = groups(p, w)
    assert len(gw) == 1296
    assert set(gw.values()) == {9}
    assert int(w.sum()) == 2592
    held = np.bincount(p.source[w], weights=p.nbytes[w], minlength=siglip2.tile_count)
    assert set(np.unique(held).tolist()) == {0, 3072}
    assert int((held > 0).sum()) == 1296
    dt = p.dst_transfer()
    assert not (p.dst_tile == p.source[dt])[w[dt]].any()
    assert near(p.n, 55_080, 0.001)
    assert near(float((p.nbytes[act] * 36).sum()) / MIB, 57.67, 0.01)
    assert near(float((p.nbytes[w] * 9).sum()) / MIB, 37.97 * 9 / 10, 0.01)  # the homes' own slices stay home
    # activations come from the rows' owners with one source address, weights with one per layer
    assert (np.diff(p.src_ptr)[act] == 1).all()
    assert siglip2.repeat is not None
    assert (np.diff(p.src_ptr)[w] == siglip2.repeat.iterations).all()


def test_mlp_up_phase(siglip2: Capture) -> None:
    p = siglip2.phase_by_id(50)
    act = p.fanout == 54
    assert int(act.sum()) == 52_488
    g = groups(p, act)
    assert len(g) == 27
    assert set(g.values()) == {54}
    assert near(p.n, 62_500, 0.05)
    assert near(float((p.nbytes[act] * 54).sum()) / MIB, 86.50, 0.01)
    assert (p.fanout[~act] == 8).all()  # 8 of the 9 replicas hold a slice: it travels to the other 8
    assert near(float((p.nbytes[~act] * p.fanout[~act]).sum()) / MIB, 42.56 * 8 / 9, 0.01)


def test_mlp_down_phases(siglip2: Capture) -> None:
    p = siglip2.phase_by_id(54)
    g = groups(p, np.ones(p.n, bool))
    assert len(g) == 240
    assert set(g.values()) == {6}
    assert p.n == 1458 * 135  # 134 grain columns of 32 bytes and one of 16 per row
    assert near(p.n, 197_000, 0.01)
    assert near(p.payload_bytes() / MIB, 35.91, 0.01)
    red = siglip2.phase_by_id(56)
    assert red.n == 17_040
    assert (red.nbytes >= 2300).all()
    assert (red.nbytes <= 2400).all()


# phase 55: the reference's 94.92 MiB less the homes' own slices (19 of 20 replicas receive each piece)
@pytest.mark.parametrize(("phase", "mib"), [(18, 9.60), (51, 24.63), (52, 11.96), (55, 94.92 * 19 / 20), (56, 37.96),
                                            (57, 3.20)])
def test_phase_payloads(siglip2: Capture, phase: int, mib: float) -> None:
    assert near(siglip2.phase_by_id(phase).payload_bytes() / MIB, mib, 0.05)


def test_transfer_words_in_range(siglip2: Capture) -> None:
    for p in siglip2.phases:
        assert p.words.min() >= 1, p.phase
        assert p.words.max() <= 4148, p.phase
        assert (p.dst_tile >= 0).all()
        assert (p.dst_tile < siglip2.tile_count).all()


@pytest.mark.parametrize(("phase", "target"), [(16, 12_056), (50, 17_908), (54, 9_684)])
def test_worst_tile_tables(siglip2_cost: ProgramCost, phase: int, target: int) -> None:
    worst = siglip2_cost.phases[phase].worst_table()
    assert near(worst, target, 0.10), worst


def test_budget_behaviour(siglip2: Capture, siglip2_cost: ProgramCost, pe2: Capture, machine: Machine) -> None:
    """docs/reference.md §8: batch-two SigLIP all direct does not fit 80 KiB, with the rule's relays it does; PE-core
    fits either way, with less room to spare without relays. The rule relays QKV and MLP-up (input and weights in
    one phase: the homes' own slices leave their receive ports room for a relay), and only those."""
    budget, limit = machine.budget.table_bytes, machine.budget.fragments
    assert siglip2_cost.worst_table() > budget
    pe_cost = program_cost(pe2, machine)
    assert 0.6 * budget < pe_cost.worst_table() <= budget
    for cap, direct in ((siglip2, siglip2_cost), (pe2, pe_cost)):
        plan, decisions = production_plan(cap, machine, budget, limit)
        assert {d.phase for d in decisions if d.accepted} == {16, 50}
        after = program_cost(plan.rewritten(cap), machine)
        assert after.worst_table() <= budget < direct.worst_table() or cap is pe2
        assert after.worst_table() < direct.worst_table()
        assert after.cycles == direct.cycles
