"""One small report, built once through the command line: the bundled relay demo, both plans and a compare."""

from __future__ import annotations

import pytest
from report_cli import DEMO, Built, placer


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
