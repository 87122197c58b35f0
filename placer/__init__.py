"""placer: data-movement plan optimiser for tile-array accelerators with a compiled exchange."""

import time

__version__ = "0.1.0"

# when the package was first imported: a command's --time-limit counts from here (before the heavy imports)
IMPORTED = time.perf_counter()
CONSOLE = False  # set by the console entry point (placer.cli.main): then IMPORTED is when the command began
