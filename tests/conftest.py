"""Hypothesis profiles shared by every test: ``default`` (CI) and ``nightly`` (>= 10,000 examples per property).

Run the long one with ``python -m pytest tests/malformed --hypothesis-profile=nightly`` (docs/robustness.md).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

settings.register_profile("nightly", max_examples=10_000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
