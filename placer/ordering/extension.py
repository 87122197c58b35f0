"""An optional compiled loop and the switch that turns it off.

``setup.py`` builds the C++ loops (``_balance``, ``_materialize``) where a compiler is available. An install
without one, or with a build older than the interface the Python side expects (its ``VERSION``: an editable
install not rebuilt), uses the Python loops, which stay the reference the compiled ones are tested against; an
environment variable set to ``python`` (or ``set``, from tests) turns a built one off.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType


@dataclass
class Extension:
    """A compiled module (None: not built, or stale) and whether it is used."""

    module: ModuleType | None
    enabled: bool

    @classmethod
    def of(cls, module: ModuleType | None, *, version: int, switch: str) -> Extension:
        """``module`` if it was built for ``version``; enabled unless the environment's ``switch`` is ``python``."""
        if getattr(module, "VERSION", None) != version:  # pragma: no cover - depends on the install
            module = None
        return cls(module, os.environ.get(switch, "native") != "python")

    @property
    def available(self) -> bool:
        """Built and enabled."""
        return self.module is not None and self.enabled

    def set(self, enabled: bool) -> bool:
        """Turn it on or off; returns the previous setting."""
        before, self.enabled = self.enabled, enabled
        return before


__all__ = ["Extension"]
