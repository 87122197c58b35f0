"""``generate``: a model description lowered to a whole-program synthetic capture."""

from __future__ import annotations

from pathlib import Path

from placer.capture.model import Capture, Repeat
from placer.errors import InputError
from placer.machine import Machine, load_machine
from placer.workloads.builder import Program
from placer.workloads.lowering import Lowering
from placer.workloads.spec import ModelSpec, load_model

DEFAULT_BATCH = 2
DEFAULT_LAYERS = 1


def generate(model: str | Path | ModelSpec, batch: int = DEFAULT_BATCH, layers: int | None = None,
             machine: str | Path | Machine | None = None, seed: int = 0) -> Capture:
    """Lower ``model`` at ``batch`` images to a capture whose Repeat body (one layer, stored once) runs
    ``layers`` times (default 1). Deterministic for a given seed: the seed only moves weight holders, per-tile
    code and scratch sizes, never the traffic pattern's structure."""
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    mach = machine if isinstance(machine, Machine) else load_machine(machine)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise InputError(f"batch must be a positive integer, got {batch!r}", where="batch")
    layers = DEFAULT_LAYERS if layers is None else layers
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise InputError(f"layers must be a positive integer, got {layers!r}", where="layers")
    prog = Program(mach, layers, seed)
    low = Lowering(spec, batch, prog)
    low.build()
    body = tuple(range(low.body, low.end))
    capture = prog.capture(list(range(len(low.steps))), Repeat(body, layers))
    capture.extra["workload"] = {"model": spec.name, "batch": batch, "layers": layers, "seed": seed,
                                 "machine": mach.name, "generator": "placer.workloads"}
    return capture
