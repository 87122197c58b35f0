"""What a plan changed, in a few lines a person reads first: per phase the operands relayed, on how many relay
tiles, with how much scratch; then the program's totals."""

from __future__ import annotations

import numpy as np

from placer.arrays import unique
from placer.capture.model import Capture
from placer.selection.plan import Plan
from placer.units import format_size

VARIANT_NAMES = {"direct-receive": "direct-receive", "local-pack": "local-pack"}


def render_changes(capture: Capture, plan: Plan) -> str:
    if not plan.relays:
        return "what the plan changed: nothing (every operand stays direct)"
    lines = ["what the plan changed:"]
    phases = sorted({r.group.phase for r in plan.relays}, key=capture.phase_ids().index)
    for pid in phases:
        mine = [r for r in plan.relays if r.group.phase == pid]
        hosts = unique(np.concatenate([r.hosts for r in mine]))
        scratch = sum(int(r.scratch_bytes.sum()) for r in mine)
        counts = sorted({r.segmentation.count for r in mine})
        variants = sorted({VARIANT_NAMES.get(r.variant, r.variant) for r in mine})
        label = capture.label(pid)
        lines.append(f"  phase {pid}{f' ({label})' if label else ''}: {len(mine)} operand(s) relayed "
                     f"({', '.join(variants)}, {'/'.join(map(str, counts))} segments each) on {hosts.size:,} relay "
                     f"tile(s), scratch {format_size(scratch)}")
    every = unique(np.concatenate([r.hosts for r in plan.relays]))
    total = sum(int(r.scratch_bytes.sum()) for r in plan.relays)
    lines.append(f"  in all: {len(plan.relays)} operand(s) in {len(phases)} phase(s), {every.size:,} distinct relay "
                 f"tile(s), scratch {format_size(total)}")
    return "\n".join(lines)
