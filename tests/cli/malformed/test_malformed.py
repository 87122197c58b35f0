"""Every malformed-input case of cases.py as a ``placer`` process of its own: the README's exit code, one stderr
line naming the file, the field and the value, no traceback, the pre-existing ``-o`` file unchanged and no
temporary file left. The cases run concurrently once per session; each test checks one.

Twice over: ``test_case`` runs each command line in a child forked from a warm interpreter (warm.py: the console
script's own ``main()``, without the 0.4 s start-up of each), and the slow ``test_case_through_the_console_script``
runs each through the installed ``placer`` script in a fresh interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest

from .cases import CASES, Case

ROOT = Path(__file__).parents[3]
DEMO = ROOT / "examples" / "relay-demo.json"
SENTINEL = b"pre-existing output: must survive every failed command\n"


def entry_point() -> list[str]:
    script = Path(sys.executable).parent / "placer"
    return [str(script)] if script.exists() else [sys.executable, "-m", "placer.cli"]


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # progress lines only for steps slower than an hour: stderr holds the error line alone
    env = {**os.environ, "PLACER_PROGRESS_SECONDS": "3600"}
    return subprocess.run([*entry_point(), *argv], capture_output=True, text=True, timeout=300, cwd=cwd, env=env,
                          check=False)


def _dumps(doc: Any) -> bytes:
    return json.dumps(doc).encode()  # json, not orjson: the cases hold integers beyond 64 bits


def _write_case_file(case: Case, f: Path, capture_doc: Any, capture_raw: bytes, plan_doc: Any) -> None:
    if case.text is not None:
        f.write_text(case.text)
    elif isinstance(case.data, bytes):
        f.write_bytes(case.data)
    elif case.data is not None:
        if getattr(case.data, "plan", False):
            f.write_bytes(_dumps(case.data(plan_doc)))
        elif getattr(case.data, "capture", False):
            f.write_bytes(_dumps(case.data(capture_doc)))
        else:
            f.write_bytes(case.data(capture_raw))


Outcomes = dict[str, tuple[subprocess.CompletedProcess[str], Path]]
Job = tuple[str, list[str], Path]


@pytest.fixture(scope="session")
def case_jobs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[], list[Job]]:
    """Each case's command line and directory; calling it (re)writes the directories as they are before the
    command runs: the case's file and a pre-existing ``out.json``, nothing else."""
    tmp = tmp_path_factory.mktemp("malformed")
    cap = tmp / "relay-demo.json"
    shutil.copy(DEMO, cap)
    plan = tmp / "plan.json"
    made = run(["solve", str(cap), "--mode", "greedy", "-o", str(plan)], tmp)
    assert made.returncode == 0, made.stderr
    greedy640 = tmp / "greedy640.json"
    made = run(["solve", str(cap), "--mode", "greedy", "--budget", "640", "-o", str(greedy640)], tmp)
    assert made.returncode == 4, made.stderr  # the production rule breaks 640 B; its plan is still written
    csv = tmp / "small.1024.csv"
    csv.write_text("id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\n")
    shared_dir = tmp / "adir"
    shared_dir.mkdir()
    capture_raw = cap.read_bytes()
    capture_doc, plan_doc = orjson.loads(capture_raw), orjson.loads(plan.read_bytes())

    jobs = []
    for case in CASES:
        sub = tmp / case.id
        sub.mkdir()
        jobs.append((case.id, case.argv.format(cap=cap, plan=plan, csv=csv, out=sub / "out.json", dir=shared_dir,
                                               f=sub / case.name, tmp=sub, greedy640=greedy640).split(), sub))

    def fresh() -> list[Job]:
        for case, (_, _, sub) in zip(CASES, jobs, strict=True):
            for p in sub.iterdir():  # what the other variant's run left
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            (sub / "out.json").write_bytes(SENTINEL)
            f = sub / case.name
            if "symlink" in case.extra:
                f.symlink_to(case.extra["symlink"].format(cap=cap))
            else:
                _write_case_file(case, f, capture_doc, capture_raw, plan_doc)
        return jobs

    return fresh


@pytest.fixture(scope="session")
def outcomes(case_jobs: Callable[[], list[Job]], tmp_path_factory: pytest.TempPathFactory) -> Outcomes:
    """Every case run in a child of the warm interpreter (warm.py), two at a time."""
    jobs = case_jobs()
    streams = tmp_path_factory.mktemp("malformed-streams")
    lines = [json.dumps({"argv": argv, "cwd": str(sub), "stdout": str(streams / f"{i}.out"),
                         "stderr": str(streams / f"{i}.err")}) for i, (_, argv, sub) in enumerate(jobs)]
    env = {**os.environ, "PLACER_PROGRESS_SECONDS": "3600"}  # as run() gives each command
    server = subprocess.run([sys.executable, str(Path(__file__).with_name("warm.py")), "2"], input="\n".join(lines),
                            capture_output=True, text=True, timeout=900, env=env, check=False)
    assert server.returncode == 0, server.stderr
    codes = {d["id"]: d["code"] for d in map(json.loads, server.stdout.splitlines())}
    assert sorted(codes) == list(range(len(jobs))), server.stdout
    return {cid: (subprocess.CompletedProcess(argv, codes[i], (streams / f"{i}.out").read_text(),
                                              (streams / f"{i}.err").read_text()), sub)
            for i, (cid, argv, sub) in enumerate(jobs)}


@pytest.fixture(scope="session")
def console_outcomes(case_jobs: Callable[[], list[Job]]) -> Outcomes:
    """Every case through the installed ``placer`` script, each in a fresh interpreter."""
    jobs = case_jobs()
    with ThreadPoolExecutor(4) as pool:
        done = pool.map(lambda job: (job[0], run(job[1], job[2]), job[2]), jobs)
        return {cid: (res, sub) for cid, res, sub in done}


def test_at_least_80_cases() -> None:
    assert len(CASES) >= 80
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case, outcomes: Outcomes) -> None:
    _check(case, *outcomes[case.id])


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_through_the_console_script(case: Case, console_outcomes: Outcomes) -> None:
    _check(case, *console_outcomes[case.id])


def _check(case: Case, res: subprocess.CompletedProcess[str], sub: Path) -> None:
    shown = f"exit {res.returncode}\nstdout: {res.stdout[-600:]}\nstderr: {res.stderr}"
    assert res.returncode == case.code, shown
    assert "Traceback" not in res.stderr, shown
    assert "Traceback" not in res.stdout, shown
    if case.code == 2:
        lines = res.stderr.splitlines()
        assert len(lines) == 1, shown
        assert lines[0].startswith("error: "), shown
        for text in case.says:
            assert text in lines[0], (text, shown)
    for text in case.stdout_says:
        assert text in res.stdout, (text, shown)
    assert (sub / "out.json").read_bytes() == SENTINEL, "the pre-existing -o file changed"
    if "absent" in case.extra:  # the promise was checked before the work: nothing written
        assert not (sub / case.extra["absent"]).exists(), f"{case.extra['absent']} was written"
    left = [p.name for p in sub.iterdir() if p.name.endswith(".tmp")]
    assert not left, f"temporary files left: {left}"


def test_symlink_output_is_written_through(tmp_path: Path) -> None:
    """A link as -o: the file it points to gets the plan, the link stays a link (docs/robustness.md)."""
    target = tmp_path / "real.json"
    target.write_bytes(SENTINEL)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    res = run(["solve", str(DEMO), "--mode", "greedy", "-o", str(link)], tmp_path)
    assert res.returncode == 0, res.stderr
    assert link.is_symlink()
    assert orjson.loads(target.read_bytes())["kind"] == "placer-plan"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.json", "real.json"]
