"""One exception type for every bad input, so the CLI can print one line and exit 2; and the exit codes."""

from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    """The exit codes of every placer command (README "Exit codes", ``placer --help``). Scripts rely on them."""

    OK = 0
    INVALID = 1  # a checked plan or schedule is invalid
    INPUT = 2  # usage error; unreadable, malformed or nonsensical input; an output path that is refused
    INFEASIBLE = 3  # proved infeasible
    OVER_BUDGET = 4  # no solution within the time limit, or the result breaks the budget / does not fit
    INTERNAL = 5  # a bug in placer (one line; PLACER_TRACEBACK=1 prints the traceback)
    SIGINT = 130
    BROKEN_PIPE = 141  # standard output's reader went away (`placer ... | head`): the conventional 128 + SIGPIPE
    SIGTERM = 143


EXIT_TABLE = """\b
Exit codes (every command):
  0    success
  1    a checked plan or schedule is invalid (validate, schedule, solve --schedule)
  2    usage error, unreadable/malformed/nonsensical input, or a refused output path
  3    proved infeasible (solve, place)
  4    no solution in time, or the result breaks the budget (solve, compare, validate, inspect: DOES NOT FIT)
  5    internal error (a bug; PLACER_TRACEBACK=1 shows the traceback)
  130  interrupted by SIGINT; 143 by SIGTERM (solve writes its best valid plan so far if -o is given)
  141  standard output's reader went away (`placer ... | head`); files given with -o are complete"""


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
        text = f"{prefix}: {message}" if prefix else message
        # one line whatever the input held: a key or value with a line break is shown escaped
        super().__init__(text.replace("\r", "\\r").replace("\n", "\\n"))
