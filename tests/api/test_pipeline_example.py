"""examples/pipeline.py runs the pipeline through the API; each of its sections equals the matching command's
--json on the same inputs (wall-clock figures aside), so the command line is the API serialised."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).parents[2]
DEMO = ROOT / "examples" / "relay-demo.json"
# what a clock measures (seconds), not what was computed: differs from run to run
WALL = {"runtime_s", "wall_s", "spent_s", "seconds", "greedy_seconds", "runtime", "search_cpu"}


def _steady(doc: Any) -> Any:
    if isinstance(doc, dict):
        return {k: _steady(v) for k, v in doc.items() if k not in WALL}
    if isinstance(doc, list):
        return [_steady(v) for v in doc]
    return doc


def _placer(cwd: Path, *args: object) -> Any:
    res = subprocess.run([sys.executable, "-m", "placer.cli", *map(str, args), "--json"], capture_output=True,
                         text=True, cwd=cwd, timeout=300, check=False)
    assert res.returncode in (0, 4), res.stderr  # 4: inspect says the program as captured does not fit
    return json.loads(res.stdout)


def test_example_equals_the_commands_json(tmp_path: Path) -> None:
    api, cli = tmp_path / "api", tmp_path / "cli"
    cli.mkdir()
    res = subprocess.run([sys.executable, str(ROOT / "examples" / "pipeline.py"), str(DEMO), "--budget", "640",
                          "--time-limit", "20", "-o", str(api)], capture_output=True, text=True, timeout=300,
                         check=False)
    assert res.returncode == 0, res.stderr
    doc = json.loads(res.stdout)
    assert set(doc) == {"inspect", "solve", "validate", "schedule", "place"}

    # the same steps through the command line, the files named the same way in their own directory
    expected = {
        "inspect": _placer(cli, "inspect", DEMO, "--budget", "640"),
        "solve": _placer(cli, "solve", DEMO, "--budget", "640", "--time-limit", "20", "-o", "plan.json",
                         "--write-capture", "rewritten.json", "-q"),
        "validate": _placer(cli, "validate", DEMO, "plan.json", "--budget", "640"),
        "schedule": _placer(cli, "schedule", "rewritten.json", "-q"),
    }
    host = next(api.glob("host.*.csv"))  # the placement problem the example derived from its plan
    shutil.copy(host, cli / host.name)
    expected["place"] = _placer(cli, "place", host.name, "-q")
    for section, want in expected.items():
        assert _steady(doc[section]) == _steady(want), section
    assert (api / "plan.json").read_bytes() == (cli / "plan.json").read_bytes()
    assert doc["solve"]["objectives"]["fits"]
    assert doc["validate"]["valid"]
    assert doc["place"]["verified"]
