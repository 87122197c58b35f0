"""The table bounds that hold for every plan (``select.lower_bounds``: per-tile floors, the average table mass, the
whole-program linear relaxation) are never above the best plan, checked against every plan of random instances
small enough to enumerate."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from placer.capture.model import Capture, PanelHint, Phase
from placer.selection import bounds
from placer.selection.floors import model_slack, proved_floor
from placer.selection.select import lower_bounds, prepare
from tests.builders import every_plan, group_phase, small_machine

M = small_machine(8)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), a_frags=st.integers(3, 9), b_frags=st.integers(2, 8),
       a_senders=st.sampled_from([[2, 3], [2, 3, 6], [6]]), b_senders=st.sampled_from([[6, 2], [6], [7, 3]]),
       panels=st.booleans(), local_pack=st.booleans())
def test_table_bounds_never_above_the_best_plan(seed: int, a_frags: int, b_frags: int, a_senders: list[int],
                                                b_senders: list[int], panels: bool, local_pack: bool) -> None:
    # without local-pack options (``--no-local-pack``) every plan is of the kind enumerated, and the bounds are
    # tighter (fewer options to take rows off a tile, less slack): never below those with them
    a = group_phase(0, [0, 1], a_senders, a_frags, seed=seed)
    b = group_phase(0, [4, 5], b_senders, b_frags, seed=seed + 1)
    hints = [PanelHint(0, (0, 1), (0, 32 * a_frags)), PanelHint(0, (4, 5), (0, 32 * b_frags))] if panels else []
    cap = Capture(tile_count=8, phases=[Phase.concat(0, [a, b])], panels=hints)
    problem = prepare(cap, M, 10**6, 16384, local_pack=local_pack).problem
    plans = every_plan(cap, problem, M, max_segments=3)
    best = min(t for _c, t in plans)  # over a subset of the plans: at least the true optimum
    lp = bounds.table_lp_bound(problem, model_slack(problem), time_limit=5.0)
    assert lp is not None
    assert lp <= best
    problem.shared["table_lp"] = lp
    assert lower_bounds(problem)["table"] <= best
    if not local_pack:
        offered = prepare(cap, M, 10**6, 16384).problem
        assert proved_floor(problem) >= proved_floor(offered)
