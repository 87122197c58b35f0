"""Plain-text tables that line up, for terminal output a person can read at a glance.

Text is never cut: a text cell longer than ``wrap`` characters is wrapped onto continuation lines within its
column (at spaces where it can), so full phase labels stay readable and the table keeps its width.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

WRAP = 40  # widest text column before its cells wrap


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], *, title: str | None = None,
           wrap: int = WRAP) -> str:
    cells = [[_fmt(c) for c in row] for row in rows]
    # text columns left-aligned (and wrapped), numbers right-aligned (never wrapped)
    numeric = [bool(rows) and all(_is_num(row[i]) for row in rows if i < len(row)) for i in range(len(headers))]
    lines_of = [[_wrap(c, wrap) if not numeric[i] else [c] for i, c in enumerate(row)] for row in cells]
    widths = [len(h) for h in headers]
    for row in lines_of:
        for i, parts in enumerate(row):
            widths[i] = max(widths[i], *(len(p) for p in parts))

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if numeric[i] else v.ljust(w)
                         for i, (v, w) in enumerate(zip(values, widths, strict=False))).rstrip()

    out = [title] if title else []
    out.append(line(list(headers)))
    out.append("  ".join("-" * w for w in widths))
    for row in lines_of:
        height = max((len(parts) for parts in row), default=1)
        for k in range(height):
            out.append(line([parts[k] if k < len(parts) else "" for parts in row]))
    return "\n".join(out)


def _wrap(text: str, width: int) -> list[str]:
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [text]


def _is_num(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _fmt(x: object) -> str:
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        return f"{x:,.2f}"
    return "" if x is None else str(x)
