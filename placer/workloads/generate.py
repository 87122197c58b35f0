"""``generate``: a model description lowered to a whole-program synthetic capture."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from placer.capture.model import Capture, Repeat
from placer.errors import InputError
from placer.machine import Machine, load_machine
from placer.workloads.builder import Program, TileMemoryError
from placer.workloads.lowering import Lowering, phase_steps
from placer.workloads.spec import MAX_SERIAL, ModelSpec, load_model, plan_grid

DEFAULT_BATCH = 2
DEFAULT_LAYERS = 1

# Peak memory of generating and writing a capture grows with the traffic: about 650 MiB per image of SigLIP
# So400m (729 tokens, hidden 1,152, MLP 4,304), 2.4 GB at batch four (docs/workloads.md), above a base.
PEAK_BYTES_PER_IMAGE = 650 << 20
PEAK_BYTES_BASE = 300 << 20
_REFERENCE_WIDTH = 729 * (1152 * 4 + 4304 * 2)  # SigLIP So400m's tokens times its matmuls' widths


def memory_needed(spec: ModelSpec, batch: int) -> int:
    """Bytes generating ``spec`` at ``batch`` images needs at its peak (an estimate, from the whole model: tokens
    and matmul widths, not only the batch): what ``check_memory`` holds against the machine's free memory."""
    width = spec.tokens * (spec.hidden * 4 + spec.mlp * 2)
    return PEAK_BYTES_BASE + batch * PEAK_BYTES_PER_IMAGE * max(width, 1) // _REFERENCE_WIDTH


def check_memory(model: str | Path | ModelSpec, batch: int, where: str = "--batch") -> None:
    """Refuse a workload whose generation would not fit in this machine's free memory, before building it (it
    used to get the machine's OOM killer involved; a model with ten times the patch grid per side took 3.9 GB
    before failing)."""
    spec = model if isinstance(model, ModelSpec) else load_model(model)
    need = memory_needed(spec, batch)
    have = available_memory()
    if have is not None and need > have:
        raise InputError(f"{spec.name} at batch {batch} needs about {need / 2**30:,.1f} GiB of memory to generate "
                         f"({spec.tokens:,} tokens per image); {have / 2**30:,.1f} GiB is available", where=where)


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo (bytes), or None where there is no such file."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


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
    # The MAP head's projection keeps FP16 partial sums of every token row of its M-block (about 88 KB per tile for
    # SigLIP b2) and as much again to reduce them. Next to a full-depth program's resident layer weights that
    # does not fit, so, as a matmul planner under memory pressure would, the head computes and reduces its rows in
    # serial passes: the fewest that fit (one pass, the calibrated program, whenever it fits).
    error: TileMemoryError | None = None
    head = spec.lowering.get(HEAD) or plan_grid(spec.tokens, *spec.matmul_shape(HEAD), mach.tiles)
    for passes in range(head.serial, MAX_SERIAL + 1):
        lean = spec if passes == head.serial else replace(
            spec, lowering={**spec.lowering, HEAD: replace(head, serial=passes)})
        try:
            capture = _build(lean, batch, layers, mach, seed)
        except TileMemoryError as exc:
            error = exc
            if exc.phase is not None and exc.phase < _first_head_phase(lean):
                break  # the fullest phase is before the head: passes in the head cannot help
            continue
        capture.extra["workload"]["head_passes"] = passes
        return capture
    assert error is not None
    raise error  # the leanest program's reason


HEAD = "map_kv"  # the head's matmul that may run in serial passes


def _first_head_phase(spec: ModelSpec) -> int:
    steps, _, _ = phase_steps(spec)
    return next(i for i, (key, _) in enumerate(steps) if key.startswith(f"{HEAD}."))


def _build(spec: ModelSpec, batch: int, layers: int, mach: Machine, seed: int) -> Capture:
    prog = Program(mach, layers, seed)
    low = Lowering(spec, batch, prog)
    low.build()
    body = tuple(range(low.body, low.end))
    capture = prog.capture(list(range(len(low.steps))), Repeat(body, layers))
    capture.extra["workload"] = {"model": spec.name, "batch": batch, "layers": layers, "seed": seed,
                                 "machine": mach.name, "generator": "placer.workloads"}
    return capture
