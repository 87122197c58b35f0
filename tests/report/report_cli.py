"""Helpers of the report tests: the command line as a subprocess, and the small report they share."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "examples" / "relay-demo.json"


def placer(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "placer.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})}, check=False)


@dataclass
class Built:
    capture: Path
    greedy: Path
    cpsat: Path
    compare: Path
    html: Path
    png: Path
    stdout: str
