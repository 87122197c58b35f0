"""Byte sizes as users type them: ``80KiB``, ``64 KiB``, ``81920``.

Decimal-looking suffixes (``KB``, ``MB``) are refused: in this field "KB" is used for both 1,000 and 1,024 bytes,
and a budget that is off by 2.4 % silently changes which plans fit.
"""

from __future__ import annotations

import re

_BINARY = {"": 1, "B": 1, "KIB": 1024, "MIB": 1024**2, "GIB": 1024**3}
_AMBIGUOUS = {"K", "KB", "M", "MB", "G", "GB"}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int) -> int:
    """Return the number of bytes ``text`` denotes, or raise ``ValueError`` saying why not."""
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"size {text!r} is negative")
        return text
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"size {text!r} is not a number with an optional unit (B, KiB, MiB, GiB)")
    number, unit = match.groups()
    key = unit.upper()
    if key in _AMBIGUOUS:
        raise ValueError(
            f"size {text!r} is ambiguous: {unit!r} may mean 1000 or 1024 bytes; write KiB/MiB/GiB or plain bytes"
        )
    if key not in _BINARY:
        raise ValueError(f"size {text!r} has unknown unit {unit!r} (use B, KiB, MiB or GiB)")
    value = float(number) * _BINARY[key]
    if value != int(value):
        raise ValueError(f"size {text!r} is not a whole number of bytes")
    return int(value)


def parse_size_list(text: str) -> list[int]:
    """Parse a comma-separated list of sizes (``64KiB,72KiB,80KiB``)."""
    return [parse_size(part) for part in text.split(",") if part.strip()]


def format_size(n: int) -> str:
    """Human-readable binary size, exact when it divides evenly."""
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    if n >= 1024 * 1024:
        return f"{n / 1024**2:.2f} MiB"
    if n >= 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n} B"
