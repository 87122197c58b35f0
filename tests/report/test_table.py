"""Terminal tables: full labels wrapped (never cut), numbers aligned."""

from __future__ import annotations

from placer.report.selection import TimeDoc, render_time
from placer.report.table import render


def test_long_labels_wrap_and_keep_every_word() -> None:
    label = "mlp-up: input + weights (replicated to every column tile of the grid)"
    text = render(["phase", "label", "table B"], [[50, label, 17_908], [9, "short", 12]], wrap=30)
    lines = text.splitlines()
    assert " ".join(line[7:37].strip() for line in lines[2:-1] if line[7:37].strip()) == label
    assert max(len(line) for line in lines) <= 7 + 30 + 2 + len("table B")
    assert lines[2].rstrip().endswith("17,908")
    assert lines[-1].rstrip().endswith("12")
    assert all(len(x) <= 30 for x in (line[7:37].rstrip() for line in lines[2:]))


def test_short_tables_unchanged() -> None:
    assert render(["a", "b"], [[1, "x"]]).splitlines() == ["a  b", "-  -", "1  x"]


def test_the_time_line_says_when_the_backstop_cut_the_search_and_what_to_do() -> None:
    doc: TimeDoc = {"limit_s": 30.0, "wall_s": 29.1, "spent_s": {"load": 3.6, "search": 6.2}, "work": 0.0,
                    "work_budget": 12.0, "backstop": False}
    line = render_time(doc)
    assert line == ("time: 29.1 s of a 30 s limit (load 3.6 s, search 6.2 s); CP-SAT work 0.0 of 12.0 "
                    "deterministic s")
    warned = render_time({**doc, "backstop": True}).splitlines()
    assert warned[0] == line
    assert warned[1].startswith("warning: the wall-clock backstop")
    assert "--time-limit" in warned[1]
    assert "may differ from run to run" in warned[1]


def test_the_time_line_says_what_writing_the_capture_holds_back() -> None:
    # placer solve --write-capture on a 3.6 M-transfer program: about 22 s of a 30 s limit are held back
    doc: TimeDoc = {"limit_s": 30.0, "wall_s": 27.2, "spent_s": {"load": 2.7, "search": 0.5, "output": 17.9},
                    "work": 0.0, "work_budget": 12.0, "backstop": False, "write_capture_reserve_s": 21.8}
    assert render_time(doc).endswith("; 21.8 s of the limit held back for --write-capture")
    warned = render_time({**doc, "backstop": True}).splitlines()[1]
    assert warned.endswith("writing the capture takes about 22 s of the limit: --time-limit 52 gives the search "
                           "its usual share")
    # a small program's write is not worth a hint
    assert "usual share" not in render_time({**doc, "backstop": True, "write_capture_reserve_s": 0.4})
