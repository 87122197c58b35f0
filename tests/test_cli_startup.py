"""Start-up guard: `placer --version` must not import the solver stack (ortools, networkx, numpy, pandas)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time

from placer.cli import COMMANDS, short_help


def test_placer_version_starts_fast():
    cmd = [sys.executable, "-c", "import sys; sys.argv = ['placer', '--version']; from placer.cli import main; main()"]
    best = min(_wall(cmd) for _ in range(3))
    assert best <= 1.0  # about 0.1 s on an idle machine; generous so that a loaded machine does not flake


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("placer ")
    return time.perf_counter() - t0


def test_cli_module_imports_no_heavy_library():
    code = ("import sys, placer.cli; heavy = [m for m in ('ortools', 'networkx', 'numpy', 'pandas', 'rich', 'ray') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_lazy_command_help_matches_the_docstrings():
    for name, (module, attr) in COMMANDS.items():
        doc = getattr(importlib.import_module(module), attr).__doc__ or ""
        assert short_help(name) == " ".join(doc.split("\n\n")[0].split()) != "", name
