"""The command line's first moments: a signal before placer's own handlers are installed ends the process quietly.

``placer/__init__.py`` imports this module before anything else. When the process is the command line (the
``placer`` console script, or ``python -m placer.cli``), SIGINT and SIGTERM end it at once with their exit code
(130, 143) and one line, instead of a KeyboardInterrupt traceback from whatever import was running;
``placer.interrupt.install`` replaces the handlers when the command starts. A program that imports placer as a
library keeps its own handlers.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # C module: `signal` builds enums first (a millisecond)
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType

_NAMES = {_signal.SIGINT: "SIGINT", _signal.SIGTERM: "SIGTERM"}


def _command_line() -> bool:
    argv0 = sys.argv[0] if sys.argv else ""
    # `python -m placer.cli` imports the package while argv[0] is still "-m"; the console script is named placer
    return os.path.basename(argv0) == "placer" or argv0 == "-m" or argv0.endswith(os.path.join("placer", "cli",
                                                                                                 "__main__.py"))


def _early_exit(signum: int, _frame: object) -> None:
    name = _NAMES.get(signum, f"signal {signum}")
    os.write(2, f"interrupted by {name} while starting: nothing done\n".encode())
    os._exit(128 + signum)


def quiet_exit(signum: int, _frame: object) -> None:
    """The handler once a command has finished: a late signal ends the process with its code, nothing printed."""
    os._exit(128 + signum)


def import_command(module: str) -> ModuleType:
    """Import a command's module with a signal ending the process at once, as before placer's handlers were
    installed: their exception, raised inside a native module's initialisation (orjson's, under SIGINT 0.1 s
    after start), crashed the interpreter with SIGSEGV instead of ending the command."""
    import importlib

    previous = {sig: _signal.getsignal(sig) for sig in _NAMES}
    for sig in _NAMES:
        _signal.signal(sig, _early_exit)
    try:
        return importlib.import_module(module)
    finally:
        for sig, handler in previous.items():
            _signal.signal(sig, handler)


if _command_line():
    for _sig in _NAMES:
        _signal.signal(_sig, _early_exit)
