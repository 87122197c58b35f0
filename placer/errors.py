"""One exception type for every bad input, so the CLI can print one line and exit 2."""

from __future__ import annotations


class InputError(ValueError):
    """A user-supplied file or value is malformed.

    The message always names where (file, and inside it the phase/transfer/field) and the offending value, so a
    user can find it without a traceback.
    """

    def __init__(self, message: str, *, path: str | None = None, where: str | None = None) -> None:
        self.path = path
        self.where = where
        parts = [p for p in (path, where) if p]
        prefix = ": ".join(parts)
        super().__init__(f"{prefix}: {message}" if prefix else message)
