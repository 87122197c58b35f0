"""Start-up guard: `placer --version` must not import the solver stack (ortools, networkx, numpy, pandas)."""

from __future__ import annotations

import importlib
import resource
import subprocess
import sys
from pathlib import Path

from placer.cli import COMMANDS, short_help


def test_placer_version_starts_fast() -> None:
    # CPU seconds of the child, not wall time: the development machine is shared, and a load of 16 on 2 cores
    # stretched a 0.07 s start-up to 1 s of wall time
    cmd = [sys.executable, "-c", "import sys; sys.argv = ['placer', '--version']; from placer.cli import main; main()"]
    best = min(_cpu(cmd) for _ in range(3))
    assert best <= 1.0  # about 0.07 s; generous so that it never flakes


def test_placer_help_starts_fast() -> None:
    cmd = [sys.executable, "-c", "import sys; sys.argv = ['placer', '--help']; from placer.cli import main; main()"]
    best = min(_cpu(cmd, expect="Usage") for _ in range(3))
    assert best <= 1.0  # about 0.07 s


def test_placing_a_hundred_buffers_imports_no_solver_library_and_starts_fast(tmp_path: Path) -> None:
    # a MiniMalloc-class instance goes bound -> canonical search: neither ortools nor numpy is needed
    from placer.placement.generate import write_set

    path = write_set(tmp_path, [100], [1], ipu=False, plain=False, holes=0.4)[0]
    code = ("import sys; sys.argv = ['placer', 'place', sys.argv[1], '--quiet']\n"
            "from placer.cli import main\n"
            "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
            "heavy = [m for m in ('ortools', 'numpy', 'networkx', 'pandas', 'ray') if m in sys.modules]\n"
            "print('HEAVY', ','.join(heavy), 'EXIT', code)")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert "status: placed" in out.stdout, out.stdout
    assert out.stdout.strip().endswith("HEAVY  EXIT 0"), out.stdout
    assert after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime <= 2.0  # about 0.2 s


def _cpu(cmd: list[str], expect: str = "placer ") -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert expect in out.stdout
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def test_cli_module_imports_no_heavy_library() -> None:
    code = ("import sys, placer.cli; heavy = [m for m in ('ortools', 'networkx', 'numpy', 'pandas', 'rich', 'ray') "
            "if m in sys.modules]; print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_lazy_command_help_matches_the_docstrings() -> None:
    for name, (module, attr) in COMMANDS.items():
        doc = getattr(importlib.import_module(module), attr).__doc__ or ""
        assert short_help(name) == " ".join(doc.split("\n\n")[0].split()) != "", name
