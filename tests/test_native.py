"""The compiled modules (placer/native.py): every one is built and is the build this source expects, and its
committed stub is what nanobind's stub generator makes of it (so mypy checks the calls against the real
signatures). To regenerate the stubs after changing a binding: ``pip install -e .``, then the command below."""

from __future__ import annotations

import importlib
import subprocess
import sys
import types
from pathlib import Path

import pytest

from placer import native

ROOT = Path(__file__).resolve().parents[1]


def stubgen_command(output_dir: Path) -> list[str]:
    """``python -m nanobind.stubgen -q -m placer.capture._scan ... -O DIR``: every module's stub into DIR."""
    modules = [arg for name in sorted(native.MODULES) for arg in ("-m", name)]
    return [sys.executable, "-m", "nanobind.stubgen", "-q", *modules, "-O", str(output_dir)]


@pytest.mark.parametrize("name", sorted(native.MODULES))
def test_every_compiled_module_is_built_and_current(name: str) -> None:
    assert native.available(name)
    module = importlib.import_module(name)
    native.require(module)
    assert native.MODULES[name] == module.VERSION


def test_a_stale_or_unknown_module_is_refused() -> None:
    stale = types.ModuleType("placer.streams._balance")
    stale.VERSION = native.MODULES["placer.streams._balance"] - 1  # type: ignore[attr-defined]
    with pytest.raises(native.NativeError, match=r"stale build \(interface 3, this placer needs 4\): pip install"):
        native.require(stale)
    with pytest.raises(native.NativeError, match="not one of placer's compiled modules"):
        native.require(types.ModuleType("placer.ordering._other"))
    assert not native.available("placer.ordering._absent")


def test_the_committed_stubs_are_what_stubgen_generates(tmp_path: Path) -> None:
    subprocess.run(stubgen_command(tmp_path), check=True, cwd=tmp_path)
    for name in native.MODULES:
        committed = ROOT / (name.replace(".", "/") + ".pyi")
        generated = tmp_path / (name.rpartition(".")[2] + ".pyi")
        assert committed.read_text() == generated.read_text(), (
            f"{committed.relative_to(ROOT)} is stale: regenerate it with "
            f"python -m nanobind.stubgen -q -m {name} -o {committed.relative_to(ROOT)}")
