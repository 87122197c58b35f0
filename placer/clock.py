"""When the running command began: its ``--time-limit`` counts from here, before the heavy imports.

``placer/__init__.py`` imports this module first, so :data:`IMPORTED` is when the package was first imported; the
console entry point (``placer.cli.main``) sets :data:`CONSOLE`, and then that moment is when the command began.
"""

from __future__ import annotations

import time

IMPORTED = time.perf_counter()
CONSOLE = False  # set by the console entry point: then IMPORTED is when the command began


def command_start() -> float:
    """When the running command began: when the console process imported placer, or now (in-process callers)."""
    return IMPORTED if CONSOLE else time.perf_counter()
