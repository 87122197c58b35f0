"""Order files (``placer.ordering.orders``): every malformed field is one InputError naming the file, the field
and the value; an order is refused when it is not a permutation or breaks a dependency."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from placer.errors import InputError
from placer.ordering.orders import PhaseOrder, order_document, parse_orders, replay
from placer.refschedule.reference import reference_schedule
from tests.builders import group_phase, small_machine

M = small_machine(48)
DIGEST = "0" * 64


def _doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = dict(order_document(DIGEST, M, [PhaseOrder(0, np.arange(3), 10, 9, "greedy")]))
    doc.update(changes)
    return doc


@pytest.mark.parametrize(("changes", "where"), [
    ({"kind": "placer-plan"}, "kind"),
    ({"order_version": 2}, "order_version"),
    ({"rules": "model"}, "rules"),
    ({"program_sha256": "abc"}, "program_sha256"),
    ({"phases": {}}, "phases"),
    ({"phases": [{"phase": -1, "horizon": 1, "lower_bound": 1, "method": "x", "order": []}]}, "phases[0].phase"),
    ({"phases": [{"phase": 0, "horizon": True, "lower_bound": 1, "method": "x", "order": []}]}, "phases[0].horizon"),
    ({"phases": [{"phase": 0, "horizon": 1, "lower_bound": 1, "method": "x", "order": [1.5]}]}, "phases[0].order"),
    ({"phases": [{"phase": 0, "horizon": 1, "lower_bound": 1, "method": "x", "order": []}] * 2}, "phases[1].phase"),
])
def test_malformed_order_files_name_the_field(changes: dict[str, Any], where: str) -> None:
    with pytest.raises(InputError) as info:
        parse_orders(_doc(**changes), "o.json")
    assert "o.json" in str(info.value)
    assert where in str(info.value)


def test_a_valid_order_replays_and_a_broken_one_is_refused() -> None:
    phase = group_phase(0, [0, 1], [2, 3], 6)
    timed = reference_schedule(phase, M, tiles=48)
    ok = replay(phase, PhaseOrder(0, timed.order, timed.horizon, 0, "greedy"), M, 48)
    assert ok.valid
    assert ok.horizon == timed.horizon
    short = replay(phase, PhaseOrder(0, timed.order[:-1], timed.horizon, 0, "greedy"), M, 48)
    assert not short.valid
    assert "not a permutation" in short.problems[0]
    wrong = replay(phase, PhaseOrder(0, timed.order, timed.horizon + 1, 0, "greedy"), M, 48)
    assert not wrong.valid
    assert "records" in wrong.problems[-1]
