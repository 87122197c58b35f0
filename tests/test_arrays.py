"""placer.arrays gives numpy's set routines' values by sorting; the package keeps off numpy's slow names."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from placer.arrays import intersect1d, isin, setdiff1d, union1d, unique
from placer.machine import _TABLES, load_machine

INTS = st.sampled_from([np.int8, np.int32, np.int64, np.uint16, np.uint64, np.bool_])


def _arrays(dtype: type) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=12))


@settings(max_examples=200, deadline=None)
@given(st.data(), INTS, INTS)
def test_the_set_routines_give_numpys_values(data: st.DataObject, left: type, right: type) -> None:
    a, b = data.draw(_arrays(left)), data.draw(_arrays(right))
    for ours, theirs in ((unique(a), np.unique(a)), (isin(a, b), np.isin(a, b)),
                         (isin(a, b, invert=True), np.isin(a, b, invert=True)),
                         (intersect1d(a, b), np.intersect1d(a, b)), (setdiff1d(a, b), np.setdiff1d(a, b)),
                         (union1d(a, b), np.union1d(a, b))):
        assert ours.shape == theirs.shape
        assert ours.dtype == theirs.dtype
        assert np.array_equal(ours, theirs)


def test_other_dtypes_go_to_numpy() -> None:
    f = np.array([2.0, np.nan, 1.0, np.nan])
    assert np.array_equal(unique(f), np.unique(f), equal_nan=True)
    s = np.array(["b", "a", "b"])
    assert unique(s).tolist() == ["a", "b"]
    assert isin(s, ["a"]).tolist() == [False, True, False]


def test_the_package_keeps_off_numpys_hash_path() -> None:
    """A plain ``np.unique`` (no index, inverse or counts) and the set routines built on it take numpy's hash path,
    about a hundred times slower than sorting here; the validator and the schedule checker keep numpy's (they share
    no code with the stages they check)."""
    root = Path(__file__).resolve().parents[1] / "placer"
    exempt = {root / "arrays.py", root / "ordering" / "check.py"}
    slow = re.compile(r"np\.(isin|intersect1d|setdiff1d|union1d|in1d)\(")
    found = [f"{path.relative_to(root.parent)}:{k}" for path in sorted(root.rglob("*.py"))
             if path not in exempt and path.parent.name != "validation"
             for k, line in enumerate(path.read_text().splitlines(), 1)
             if slow.search(line) or ("np.unique(" in line and "return_" not in line)]
    assert found == []


def test_rows_and_routes_looked_up_equal_the_formula() -> None:
    for name in ("ipu21", "mk1"):
        machine = load_machine(name)
        rng = np.random.default_rng(1)
        pairs = machine.tiles**2 // 8  # the least call that looks routes up (smaller ones compute them)
        s, d = rng.integers(0, machine.tiles, pairs), rng.integers(0, machine.tiles, pairs)
        assert np.array_equal(machine.mux_time(s, d), machine._route(s, d))
        assert np.array_equal(machine.row(d), machine._row(d))
        assert np.array_equal(machine.mux_time(s[:10], d[:10]), machine._route(s[:10], d[:10]))
        assert (machine.geometry, machine.tiles, "routes") in _TABLES
