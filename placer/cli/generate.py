"""``placer generate``: write the synthetic capture of a model description (:func:`placer.api.generate`, then
:func:`placer.api.write_capture`)."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from placer import api
from placer.cli import options
from placer.fileio import check_output
from placer.progress import install
from placer.units import MAX_COUNT, count_option, format_size
from placer.workloads.generate import DEFAULT_BATCH

MAX_BATCH = 4096


def generate(
    model: str = typer.Argument(..., help="Model name (siglip-so400m, pe-core-l14: models/NAME.toml or the "
                                          "bundled copy) or a path to a model .toml."),
    output: Path = typer.Option(..., "-o", "--output", help="Capture to write (.json or .json.gz)."),
    batch: int = typer.Option(DEFAULT_BATCH, "--batch", "-b", help="Images per step (1, 2, 4 are the studied "
                                                                   "sizes; larger ones work while they fit)."),
    layers: int | None = typer.Option(None, "--layers", help="Repeat iterations of the stored layer body "
                                                             "(default 1; the capture stores one body either way)."),
    seed: int = typer.Option(0, "--seed", help="Seed for weight holders and per-tile code/scratch sizes."),
    machine: str = options.machine(),
    quiet: bool = options.quiet(),
) -> None:
    """Lower a model to a whole-program synthetic capture (one layer body in a Repeat, plus bookends)."""
    install(quiet)
    count_option(batch, "--batch", maximum=MAX_BATCH)
    if layers is not None:
        count_option(layers, "--layers", maximum=MAX_COUNT)
    count_option(seed, "--seed", minimum=0, maximum=2**32 - 1)
    output = check_output(output, "-o", inputs=(model,))
    t0 = time.perf_counter()
    capture = api.generate(model, batch=batch, layers=layers, machine=machine, seed=seed)  # memory checked first
    t1 = time.perf_counter()
    size = api.write_capture(capture, output)
    t2 = time.perf_counter()
    work = capture.extra.get("workload", {})
    largest = max(capture.phases, key=lambda p: p.n)
    typer.echo(
        f"{output}: {work.get('model', model)} batch {batch}, {work.get('layers')} layer(s) (body of "
        f"{len(capture.repeat.phases) if capture.repeat else 0} phases), {len(capture.phases)} phases, "
        f"{capture.transfer_count():,} transfers (largest: phase {largest.phase}, {largest.n:,}), "
        f"{len(capture.allocations):,} allocations, {len(capture.panels)} panel hints; "
        f"{format_size(size)} written in {t2 - t0:.1f} s (generate {t1 - t0:.1f} s)"
    )
