"""The whole pipeline through placer's Python API, on the bundled relay demo (or any capture).

    python examples/pipeline.py examples/relay-demo.json --budget 640 -o out/

1. cost the capture against the budget (``placer.inspect``);
2. choose relays with CP-SAT (``placer.solve``) and write the plan and the rewritten program;
3. check the plan with the independent validator (``placer.validate``);
4. order every phase of the rewritten program's exchange streams (``placer.schedule``);
5. place the SRAM of the busiest relay host: its allocations and the relay buffers the plan put there
   (``placer.place``).

It prints one JSON document whose sections are the results' ``to_json()``: each equals the ``--json`` of the
matching command on the same inputs (``placer inspect``, ``solve``, ``validate``, ``schedule``, ``place``), which
``tests/api/test_pipeline_example.py`` checks. Run it from the output directory's parent or give ``-o``: the
files it writes are named relative to it, as the commands would name them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import placer
from placer.fileio import print_json


def host_buffers_csv(result: placer.SelectionResult, machine: placer.Machine) -> tuple[str, int] | None:
    """The busiest relay host's buffers as a MiniMalloc CSV (lifetimes in phases), and its capacity in bytes."""
    hosted: dict[int, list[tuple[int, int]]] = {}  # tile -> (phase, bytes) of each relay buffer on it
    for relay in result.plan.relays:
        for tile, nbytes in zip(relay.hosts.tolist(), relay.scratch_bytes.tolist(), strict=True):
            hosted.setdefault(int(tile), []).append((relay.group.phase, int(nbytes)))
    if not hosted:
        return None
    tile = max(sorted(hosted), key=lambda t: sum(b for _, b in hosted[t]))
    capture = result.capture
    rows = ["id,lower,upper,size,alignment"]
    alloc = capture.allocations
    for k in range(len(alloc)):
        if int(alloc.tile[k]) == tile:
            rows.append(f"alloc{k},{int(alloc.first[k])},{int(alloc.last[k]) + 1},"
                        f"{int(alloc.end[k]) - int(alloc.start[k])},8")
    for k, (phase, nbytes) in enumerate(hosted[tile]):
        rows.append(f"relay{k},{phase},{phase + 1},{nbytes},8")
    mem = machine.memory
    return "\n".join(rows) + "\n", min(mem.end, mem.loader_limit) - mem.base


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("capture", nargs="?", default=str(Path(__file__).with_name("relay-demo.json")))
    ap.add_argument("--budget", default="640", help="table budget per tile (bytes or e.g. 80KiB)")
    ap.add_argument("--machine", default="ipu21")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds for the relay selection")
    ap.add_argument("-o", "--output", default=".", help="directory for plan.json, rewritten.json, host.*.csv")
    args = ap.parse_args(argv)
    capture_path = Path(args.capture).resolve()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    os.chdir(out)  # the files are named relative to the output directory, as in the commands' JSON

    machine = placer.load_machine(args.machine)
    capture = placer.read_capture(capture_path)
    doc: dict[str, object] = {"inspect": placer.inspect(capture, machine, budget=args.budget).to_json()}

    params = placer.RunConfig.load().selection.with_overrides(time_limit=args.time_limit)
    # writes_capture: the time limit covers writing the rewritten program too (as `placer solve --write-capture`)
    solved = placer.solve(capture, machine, budget=args.budget, params=params, writes_capture=True)
    solved.write_plan("plan.json")
    placer.write_capture(solved.rewritten(), "rewritten.json")
    doc["solve"] = solved.to_json()

    checked = placer.validate(capture, solved.plan_json(), machine, budget=args.budget)
    doc["validate"] = checked.to_json()

    doc["schedule"] = placer.schedule("rewritten.json", machine).to_json()

    host = host_buffers_csv(solved, machine)
    if host is not None:
        text, capacity = host
        name = f"host.{capacity}.csv"  # MiniMalloc's naming: the capacity is in the file name
        Path(name).write_text(text)
        doc["place"] = placer.place(name).to_json()

    print_json(doc)
    return 0 if solved.fits and checked.valid else 1


if __name__ == "__main__":
    sys.exit(main())
