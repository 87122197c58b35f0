"""Plain-text tables that line up, for terminal output a person can read at a glance."""

from __future__ import annotations

from collections.abc import Sequence


def render(headers: Sequence[str], rows: Sequence[Sequence[object]], *, title: str | None = None) -> str:
    cells = [[_fmt(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
    # text columns left-aligned, numbers right-aligned
    numeric = [all(_is_num(row[i]) for row in rows if i < len(row)) and rows for i in range(len(headers))]
    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if numeric[i] else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths,
                                                                                                   strict=False)))
    out = [title] if title else []
    out.append(line(list(headers)).rstrip())
    out.append("  ".join("-" * w for w in widths))
    out.extend(line(r).rstrip() for r in cells)
    return "\n".join(out)


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
