"""Byte sizes as users type them: ``80KiB``, ``64 KiB``, ``81920``.

Decimal-looking suffixes (``KB``, ``MB``) are refused: in this field "KB" is used for both 1,000 and 1,024 bytes,
and a budget that is off by 2.4 % silently changes which plans fit.
"""

from __future__ import annotations

import re
from typing import Any

from placer.errors import InputError

# Any per-tile byte quantity a user gives (budgets, capacities): a tile has well under 1 MiB, and every model and
# column that holds such a number is exact up to here (CP-SAT coefficients, int32 arrays).
MAX_SIZE = 2**31 - 1
MAX_COUNT = 2**31 - 1
# Any address, end of a range or buffer size in a placement problem (dump, MiniMalloc CSV, --capacity): a tile's
# address is 32 bits, so an end of 2^32 is the largest that makes sense, and the engines' int64 sums stay exact.
MAX_ADDRESS = 2**32

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
    if len(number) > 30:
        raise ValueError(f"size {text!r} is far too large")
    key = unit.upper()
    if key in _AMBIGUOUS:
        raise ValueError(
            f"size {text!r} is ambiguous: {unit!r} may mean 1000 or 1024 bytes; write KiB/MiB/GiB or plain bytes"
        )
    if key not in _BINARY:
        raise ValueError(f"size {text!r} has unknown unit {unit!r} (use B, KiB, MiB or GiB)")
    if "." in number:
        whole, frac = number.split(".")
        scaled = int(whole + frac) * _BINARY[key]  # exact: no float rounding on large sizes
        value, rest = divmod(scaled, 10 ** len(frac))
        if rest:
            raise ValueError(f"size {text!r} is not a whole number of bytes")
        return int(value)
    return int(number) * _BINARY[key]


def parse_size_list(text: str) -> list[int]:
    """Parse a comma-separated list of sizes (``64KiB,72KiB,80KiB``); an empty element is an error."""
    parts = text.split(",")
    for k, part in enumerate(parts):
        if not part.strip():
            raise ValueError(f"{text!r} has an empty element (item {k + 1})")
    return [parse_size(part) for part in parts]


def size_option(text: str | int, flag: str, *, minimum: int = 1, maximum: int = MAX_SIZE,
                path: str | None = None) -> int:
    """A size given anywhere a user types one (a flag, a TOML or JSON field, the API), checked against the one set
    of limits: ``InputError`` naming the file (``path``), the flag or field and the value otherwise."""
    if isinstance(text, bool) or not isinstance(text, str | int):
        raise InputError(f"must be a size such as \"80KiB\" or 81920, got {text!r}", path=path, where=flag)
    try:
        value = parse_size(text)
    except ValueError as exc:
        raise InputError(str(exc), path=path, where=flag) from None
    _in_range(value, text, flag, minimum, maximum, path)
    return value


def size_list_option(text: str, flag: str, *, minimum: int = 1, maximum: int = MAX_SIZE) -> list[int]:
    try:
        values = parse_size_list(text)
    except ValueError as exc:
        raise InputError(str(exc), where=flag) from None
    for v in values:
        _in_range(v, text, flag, minimum, maximum)
    return values


def count_option(value: int, flag: str, *, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """An integer option (fragments, batch, layers, phase id) in ``minimum..maximum``."""
    if not minimum <= value <= maximum:
        raise InputError(f"must be in {minimum}..{maximum:,}, got {value}", where=flag)
    return value


def _in_range(value: int, text: str | int, flag: str, minimum: int, maximum: int, path: str | None = None) -> None:
    if value < minimum:
        raise InputError(f"must be at least {format_size(minimum)}, got {text!r}", path=path, where=flag)
    if value > maximum:
        raise InputError(f"must be at most {maximum:,} bytes, got {text!r}", path=path, where=flag)


def ceil_div(x: Any, d: Any) -> Any:
    """⌈x / d⌉ for integers or integer arrays (exact: no float rounding), the one spelling of it in placer."""
    return -(-x // d)


def round_up(x: Any, multiple: Any) -> Any:
    """``x`` rounded up to a multiple of ``multiple`` (integers or integer arrays; table rounding, alignment)."""
    return ceil_div(x, multiple) * multiple


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
