"""Stage 1 of the pipeline: the exchange-traffic capture, held as columnar numpy arrays."""

from placer.capture.io import read_capture
from placer.capture.model import (
    PAIRED64,
    SCHEMA_VERSION,
    WIDTH_NAMES,
    WORD32,
    Allocations,
    Capture,
    PanelHint,
    Phase,
    Repeat,
)
from placer.capture.writer import write_capture

__all__ = [
    "PAIRED64",
    "SCHEMA_VERSION",
    "WIDTH_NAMES",
    "WORD32",
    "Allocations",
    "Capture",
    "PanelHint",
    "Phase",
    "Repeat",
    "read_capture",
    "write_capture",
]
