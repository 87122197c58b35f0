"""The synthetic capture of benchmarks/bench_cost.py (a script, not a package: loaded from its file)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from placer.capture import read_capture, write_capture

BENCH = Path(__file__).parents[2] / "benchmarks" / "bench_cost.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_cost", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_synthetic_destinations_are_distinct_and_never_the_source(bench: ModuleType, seed: int) -> None:
    # ~13,500 destination entries over 1,472 tiles: independent draws would hit the source about 9 times
    phase = bench.synthetic(5_000, seed).phases[0]
    rows = phase.dst_transfer()
    assert not (phase.dst_tile == phase.source[rows]).any()
    pairs = rows * (int(phase.dst_tile.max()) + 1) + phase.dst_tile
    assert np.unique(pairs).shape[0] == pairs.shape[0]
    assert set(np.unique(phase.fanout)) == {1, 2, 6}


def test_synthetic_is_deterministic_and_the_reader_accepts_it(bench: ModuleType, tmp_path: Path) -> None:
    cap = bench.synthetic(5_000)
    assert cap.phases[0].equals(bench.synthetic(5_000).phases[0])
    write_capture(cap, tmp_path / "synthetic.json")
    assert read_capture(tmp_path / "synthetic.json").phases[0].equals(cap.phases[0])
