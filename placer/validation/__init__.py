"""The independent plan validator: ``placer validate CAPTURE PLAN``.

It shares no code with the relay rewrite or the cost model: it reads files with the capture/plan readers,
applies the plan's delta itself, replays both programs symbolically and recounts the exchange tables from
docs/reference.md §3.
"""

from placer.validation.plan import load_plan
from placer.validation.validator import ValidationReport, validate

__all__ = ["ValidationReport", "load_plan", "validate"]
