"""Per-phase stages on several threads give exactly what they give on one."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placer.alternatives.groups import scan_capture
from placer.cost.model import program_cost
from placer.selection.greedy import production_plan
from placer.selection.problem import build_problem
from placer.threads import ordered_map
from tests.builders import relay_capture, small_machine

M = small_machine(48)


def test_results_come_in_input_order_whatever_finishes_first() -> None:
    def slow_first(i: int) -> int:
        time.sleep(0.02 if i == 0 else 0.0)
        return i * i

    assert list(ordered_map(slow_first, list(range(6)), workers=2)) == [i * i for i in range(6)]


def test_an_error_in_one_item_is_raised_and_the_rest_is_not_waited_for() -> None:
    def boom(i: int) -> int:
        if i == 1:
            raise ValueError("item 1")
        return i

    with pytest.raises(ValueError, match=r"^item 1$"):
        list(ordered_map(boom, list(range(4)), workers=2))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**16), st.integers(2, 4), st.integers(8, 40))
def test_two_threads_cost_scan_rule_and_options_like_one(seed: int, phases: int, fragments: int) -> None:
    cap = relay_capture(groups=4, replicas=4, fragments=fragments, phases=phases, seed=seed)
    one, two = program_cost(cap, M, 1), program_cost(cap, M, 2)
    assert np.array_equal(one.table_bytes, two.table_bytes)
    assert one.sharing is not None
    assert two.sharing is not None
    assert np.array_equal(one.sharing.charged, two.sharing.charged)
    assert [p.cycles for p in one.phases] == [p.cycles for p in two.phases]
    s1, s2 = scan_capture(cap, False, 1), scan_capture(cap, False, 2)
    assert [[g.key() for g in s.groups] for s in s1] == [[g.key() for g in s.groups] for s in s2]
    (p1, d1), (p2, d2) = (production_plan(cap, M, 4096, 16384, scans=s, direct=c, workers=w)
                          for s, c, w in ((s1, one, 1), (s2, two, 2)))
    assert [d.to_json() for d in d1] == [d.to_json() for d in d2]
    assert [(r.group.key(), r.hosts.tolist(), r.buffers.tolist()) for r in p1.relays] == \
        [(r.group.key(), r.hosts.tolist(), r.buffers.tolist()) for r in p2.relays]
    b1, b2 = (build_problem(cap, M, 4096, 16384, direct=one, workers=w) for w in (1, 2))
    assert [[[(o.count, o.variant, o.delta.raw.tolist()) for o in opts] for opts in pd.options] for pd in b1.phases] \
        == [[[(o.count, o.variant, o.delta.raw.tolist()) for o in opts] for opts in pd.options] for pd in b2.phases]
