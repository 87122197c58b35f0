"""The fixtures every test directory shares, in one place (the tests are laid out like the package: one
directory per stage, ``tests/cli`` for the command line, ``tests/api`` for the public API).

Hypothesis profiles: ``default`` (CI) and ``nightly`` (>= 10,000 examples per property); run the long one with
``python -m pytest tests/cli/malformed --hypothesis-profile=nightly`` (docs/robustness.md).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from placer.capture.model import Capture
from placer.cost.model import ProgramCost, program_cost
from placer.machine import Machine, load_machine
from placer.workloads.generate import generate
from tests.report.report_cli import DEMO, Built, placer

settings.register_profile("nightly", max_examples=10_000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

PLACEMENT_FIXTURES = Path(__file__).parent / "fixtures" / "placement"
SHARED_DATA = Path(__file__).parents[1] / ".." / "shared" / "data"


# --- placement: the fixture files, and the shared data sets when the checkout has them -------------------------


@pytest.fixture
def fixtures() -> Path:
    return PLACEMENT_FIXTURES


@pytest.fixture
def data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip("../shared/data is absent")
    return SHARED_DATA


# --- workloads: generated captures (session-scoped: generating one is the slow part, about a second each) --------


@pytest.fixture(scope="session")
def machine() -> Machine:
    return load_machine()


@pytest.fixture(scope="session")
def siglip2(machine: Machine) -> Capture:
    return generate("siglip-so400m", batch=2, machine=machine)


@pytest.fixture(scope="session")
def siglip2_cost(siglip2: Capture, machine: Machine) -> ProgramCost:
    return program_cost(siglip2, machine)


@pytest.fixture(scope="session")
def pe2(machine: Machine) -> Capture:
    return generate("pe-core-l14", batch=2, machine=machine)


# --- report: one small report, built once through the command line (the demo, both plans and a compare) ---------


@pytest.fixture(scope="session")
def demo_report(tmp_path_factory: pytest.TempPathFactory) -> Built:
    pytest.importorskip("plotly")
    pytest.importorskip("matplotlib")
    d = tmp_path_factory.mktemp("report")
    greedy, cpsat, cmp, html, png = d / "greedy.json", d / "plan.json", d / "cmp.json", d / "report.html", d / "png"
    for args in (("--mode", "greedy", "-o", greedy), ("--time-limit", "1", "-o", cpsat)):
        res = placer("solve", DEMO, "--budget", "700", "-q", *args)
        assert res.returncode in (0, 4), res.stderr  # 4: the production rule's plan does not fit 700 B
    res = placer("compare", DEMO, "--budget", "600,700", "--time-limit", "0.5", "--json", "-q")
    assert res.returncode in (0, 4), res.stderr
    cmp.write_text(res.stdout)
    res = placer("report", DEMO, greedy, cpsat, "-o", html, "--compare", cmp, "--png", png, "-q")
    assert res.returncode == 0, res.stderr
    return Built(DEMO, greedy, cpsat, cmp, html, png, res.stdout)
