"""placer: data-movement plan optimiser for tile-array accelerators with a compiled exchange."""

__version__ = "0.1.0"
