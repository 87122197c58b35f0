"""Terminal tables: full labels wrapped (never cut), numbers aligned."""

from __future__ import annotations

from placer.report.table import render


def test_long_labels_wrap_and_keep_every_word() -> None:
    label = "mlp-up: input + weights (replicated to every column tile of the grid)"
    text = render(["phase", "label", "table B"], [[50, label, 17_908], [9, "short", 12]], wrap=30)
    lines = text.splitlines()
    assert " ".join(line[7:37].strip() for line in lines[2:-1] if line[7:37].strip()) == label
    assert max(len(line) for line in lines) <= 7 + 30 + 2 + len("table B")
    assert lines[2].rstrip().endswith("17,908") and lines[-1].rstrip().endswith("12")
    assert all(len(x) <= 30 for x in (line[7:37].rstrip() for line in lines[2:]))


def test_short_tables_unchanged() -> None:
    assert render(["a", "b"], [[1, "x"]]).splitlines() == ["a  b", "-  -", "1  x"]
