"""No group is offered whose bytes another transfer of the phase also writes (docs/reference.md §4): checked byte
by byte against random phases with stray writes, some landing inside a group's operand."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.alternatives.groups import SHARED_BYTES, scan_phase
from placer.capture.model import Phase
from tests.builders import group_phase


def _writers(phase: Phase) -> dict[tuple[int, int], set[int]]:
    """(tile, byte) -> the transfers that write it: the plain reading the scan is checked against."""
    out: dict[tuple[int, int], set[int]] = {}
    nbytes = phase.nbytes
    for i in range(phase.n):
        for j in range(int(phase.dst_ptr[i]), int(phase.dst_ptr[i + 1])):
            tile, addr = int(phase.dst_tile[j]), int(phase.dst_addr[j])
            for b in range(addr, addr + int(nbytes[i])):
                out.setdefault((tile, b), set()).add(i)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), strays=st.lists(st.tuples(st.integers(0, 11), st.integers(-8, 200),
                                                             st.sampled_from([4, 8, 16])), max_size=3))
def test_no_offered_group_shares_a_byte_with_another_transfer(seed: int, strays: list[tuple[int, int, int]]) -> None:
    parts = [group_phase(0, [0, 1, 2], [6, 7], 12, seed=seed), group_phase(0, [3, 4, 5], [8, 9], 10, seed=seed + 1)]
    base = int(parts[0].dst_addr.min())
    for tile, offset, nbytes in strays:
        addr = base + offset // 4 * 4
        parts.append(Phase.build(0, [20], [nbytes // 4], [1], [tile], [addr], [0x50000]))
    phase = Phase.concat(0, parts)
    writers = _writers(phase)
    scan = scan_phase(phase, gainful_only=False)
    for g in scan.groups:
        mine = set(g.transfers.tolist())
        for i in mine:
            for j in range(int(phase.dst_ptr[i]), int(phase.dst_ptr[i + 1])):
                tile, addr = int(phase.dst_tile[j]), int(phase.dst_addr[j])
                for b in range(addr, addr + int(phase.nbytes[i])):
                    assert writers[(tile, b)] <= mine, (g.index, tile, b)
    for r in scan.rejected:
        if r.reason == SHARED_BYTES:  # refused only when another transfer really writes one of its bytes
            assert any(len(w) > 1 for w in writers.values())
