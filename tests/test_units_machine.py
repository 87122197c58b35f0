from __future__ import annotations

from pathlib import Path

import pytest

from placer.errors import InputError
from placer.machine import load_machine
from placer.solver import SolverParams
from placer.units import format_size, parse_size, parse_size_list


@pytest.mark.parametrize(("text", "value"), [("80KiB", 81920), ("64 KiB", 65536), ("81920", 81920),
                                              ("1MiB", 1 << 20), ("12B", 12), (" 2 GiB ", 2 << 30)])
def test_sizes(text: str, value: int) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["80KB", "80kb", "1MB", "80K"])
def test_ambiguous_units_refused_with_reason(text: str) -> None:
    with pytest.raises(ValueError, match=r"ambiguous.*1000 or 1024"):
        parse_size(text)


@pytest.mark.parametrize("text", ["", "KiB", "1.5B", "80 parsecs", "-3"])
def test_bad_sizes(text: str) -> None:
    with pytest.raises(ValueError, match=r"^size "):
        parse_size(text)


def test_size_list_and_format() -> None:
    assert parse_size_list("64KiB,72KiB, 80KiB") == [65536, 73728, 81920]
    assert format_size(81920) == "80 KiB"


def test_bundled_machines() -> None:
    ipu = load_machine()
    assert ipu.tiles == 1472
    assert ipu.budget.table_bytes == 81920
    assert ipu.budget.fragments == 16384
    assert ipu.memory.base == 0x4C000
    assert ipu.memory.end == 0xE8000
    assert load_machine("mk1").tiles == 1216
    assert ipu.latency(0) == 52
    assert ipu.physical(1).item() == 2  # lane bit of the logical id -> physical bit 1 (pair partner = XOR 2)


def test_user_machine_file(tmp_path: Path) -> None:
    src = Path(__file__).parents[1] / "placer" / "machines" / "ipu21.toml"
    text = src.read_text().replace("tiles = 1472", "tiles = 64").replace("table_bytes = 81920", "table_bytes = 4096")
    f = tmp_path / "m.toml"
    f.write_text(text)
    m = load_machine(f)
    assert m.tiles == 64
    assert m.budget.table_bytes == 4096
    f.write_text(text.replace("sync_cycles = 600", "sync_cycles = -1"))
    with pytest.raises(InputError, match=r"exchange\.sync_cycles"):
        load_machine(f)
    with pytest.raises(InputError, match="no such machine file"):
        load_machine(tmp_path / "missing.toml")


def test_solver_params(tmp_path: Path) -> None:
    p = SolverParams.from_toml()
    assert p.workers == 2
    assert p.time_limit > 0
    f = tmp_path / "p.toml"
    f.write_text("time_limit = 3\nworkers = 1\n")
    assert SolverParams.from_toml(f).workers == 1
    f.write_text("time_limt = 3\n")
    with pytest.raises(InputError, match="time_limt: unknown solver parameter"):
        SolverParams.from_toml(f)
    with pytest.raises(InputError, match=r"--workers: must be an integer in 1\.\.256, got 0"):
        p.with_overrides(workers=0)
