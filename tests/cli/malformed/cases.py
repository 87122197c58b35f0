"""The malformed-input cases: each one command line, the files it needs, and what must come out.

A case names its files by placeholders: ``{cap}`` is the small demo capture, ``{plan}`` a valid plan for it,
``{csv}`` a small MiniMalloc CSV, ``{out}`` a pre-existing output file (whose bytes must not change), ``{dir}`` a
directory; ``{f}`` is the case's own file, written from ``text`` (str) or ``data`` (bytes, or a callable of the
demo capture's JSON returning the document to write).
"""

from __future__ import annotations

import copy
import gzip
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

INPUT = 2


@dataclass
class Case:
    id: str
    argv: str  # split on spaces after the placeholders are filled in
    code: int = INPUT
    says: tuple[str, ...] = ()  # substrings of the one stderr line (file, field, value)
    name: str = "f.json"  # the case file's name
    text: str | None = None
    data: bytes | Callable[[Any], Any] | None = None
    stdout_says: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


def _cap(edit: Callable[[dict[str, Any]], None]) -> Callable[[Any], Any]:
    def make(doc: Any) -> Any:
        doc = copy.deepcopy(doc)
        edit(doc)
        return doc
    make.capture = True  # type: ignore[attr-defined]
    return make


def _t0(doc: dict[str, Any]) -> dict[str, Any]:
    first: dict[str, Any] = doc["phases"][0]["transfers"][0]
    return first


def _set(path: str, value: Any) -> Callable[[Any], Any]:
    """Set a field of transfer 0 of phase 0 (``dest.address`` is its first destination's)."""
    def edit(doc: dict[str, Any]) -> None:
        t = _t0(doc)
        if path.startswith("dest."):
            t["destinations"][0][path[5:]] = value
        elif path == "src0":
            t["source_addresses"][0] = value
        else:
            t[path] = value
    return _cap(edit)


MACHINE = """name = "m"
tiles = 1472
clock_hz = 1.5e9
[memory]
base = 0x4c000
end = 0xe8000
loader_limit = 0xe7bb0
region0_end = 0x80000
region0_element = 16384
region1_element = 32768
[exchange]
bytes_per_cycle = 4
max_transfer_words = 4148
send_count_words = 64
sync_cycles = 600
pair_xor = 2
[budget]
table_bytes = 81920
fragments = 16384
[cost]
phase_entry_bytes = 8
table_rounding = 8
send_bytes = 8
long_send_extra_bytes = 4
receive_bytes = 8
pointer_reset_extra_bytes = 4
send_control_cycles = 2
receive_control_cycles = 2
pointer_reset_cycles = 1
[geometry]
rows = 23
row_stride = 64
block_stride = 4
lane_stride = 2
latency_base = 52
latency_per_row = 2
[local_pack]
segment_bytes = [1314, 1944]
cycles = [1170, 1422]
"""


def _machine(old: str, new: str) -> str:
    assert old in MACHINE, old
    return MACHINE.replace(old, new, 1)


def _plan(edit: Callable[[dict[str, Any]], None]) -> Callable[[Any], Any]:
    """Marker: the document is the valid plan (not the capture) with ``edit`` applied."""
    def make(plan: Any) -> Any:
        plan = copy.deepcopy(plan)
        edit(plan)
        return plan
    make.plan = True  # type: ignore[attr-defined]
    return make


def _gz_flipped(raw: bytes) -> bytes:
    z = bytearray(gzip.compress(raw))
    z[len(z) // 2] ^= 0x10
    return bytes(z)


CASES: list[Case] = [
    # --- command-line usage (typer's own errors included)
    Case("bare", "", says=("missing command",)),
    Case("solve-missing-arg", "solve", says=("Missing argument",)),
    Case("unknown-option", "solve {cap} --nope", says=("--nope",)),
    Case("generate-json", "generate --json", says=("--json",)),
    Case("phase-abc", "schedule {cap} --phase abc", says=("--phase", "abc")),
    Case("fragments-abc", "solve {cap} --fragments abc -o {out}", says=("--fragments", "abc")),
    Case("schedule-mode-bogus", "schedule {cap} --mode bogus", says=("--mode", "bogus")),
    Case("budget-80KB", "inspect {cap} --budget 80KB", says=("--budget", "80KB", "ambiguous")),
    Case("budget-huge", "inspect {cap} --budget 99999999999999999999999", says=("--budget", "99999999999999999999999")),
    Case("budget-zero", "solve {cap} --budget 0 -o {out}", says=("--budget", "'0'")),
    Case("budget-negative", "solve {cap} --budget -5 -o {out}", says=("--budget", "-5")),
    Case("budget-fraction", "solve {cap} --budget 1.5 -o {out}", says=("--budget", "1.5")),
    Case("budget-empty", "solve {cap} --budget= -o {out}", says=("--budget",)),
    Case("fragments-negative", "solve {cap} --fragments -1 -o {out}", says=("--fragments", "-1")),
    Case("fragments-zero", "solve {cap} --fragments 0 -o {out}", says=("--fragments", "0")),
    Case("seed-2^63", "solve {cap} --seed 9223372036854775808 -o {out}", says=("--seed", "9223372036854775808")),
    Case("seed-negative", "solve {cap} --seed -1 -o {out}", says=("--seed", "-1")),
    Case("time-limit-nan", "solve {cap} --time-limit nan -o {out}", says=("--time-limit", "nan")),
    Case("time-limit-inf", "solve {cap} --time-limit inf -o {out}", says=("--time-limit", "inf")),
    Case("time-limit-negative", "solve {cap} --time-limit -5 -o {out}", says=("--time-limit", "-5")),
    Case("workers-huge", "solve {cap} --workers 100000 -o {out}", says=("--workers", "100000")),
    Case("workers-zero", "solve {cap} --workers 0 -o {out}", says=("--workers", "0")),
    Case("greedy-objective", "solve {cap} --mode greedy --objective table -o {out}", says=("--mode greedy",
                                                                                             "--objective")),
    Case("greedy-time-limit", "solve {cap} --mode greedy --time-limit 5 -o {out}", says=("--mode greedy",
                                                                                          "--time-limit")),
    Case("solve-mode-bogus", "solve {cap} --mode bogus -o {out}", says=("--mode", "bogus")),
    Case("objective-bogus", "solve {cap} --objective speed -o {out}", says=("--objective", "speed")),
    Case("compare-empty-budget", "compare {cap} --budget 700,,800", says=("--budget", "700,,800", "empty")),
    Case("compare-only-comma", "compare {cap} --budget ,", says=("--budget",)),
    Case("compare-seed-negative", "compare {cap} --seed -1", says=("--seed", "-1")),
    Case("generate-batch-1000", "generate siglip-so400m --batch 1000 -o {out}", says=("--batch", "1000", "GiB")),
    Case("generate-batch-0", "generate siglip-so400m --batch 0 -o {out}", says=("--batch", "0")),
    Case("generate-layers-0", "generate siglip-so400m --layers 0 -o {out}", says=("--layers", "0")),
    Case("generate-unknown-model", "generate no-such-model -o {out}", says=("no-such-model",)),
    Case("place-capacity-80KB", "place {csv} --capacity 80KB -o {out}", says=("--capacity", "80KB")),
    Case("place-capacity-0", "place {csv} --capacity 0 -o {out}", says=("--capacity", "0")),
    Case("place-workers-0", "place {csv} --workers 0 -o {out}", says=("--workers", "0")),
    Case("place-mode-bogus", "place {csv} --mode bogus -o {out}", says=("--mode", "bogus")),
    Case("wave-words-0", "schedule {cap} --wave-words 0", says=("--wave-words", "0")),
    Case("schedule-phase-missing", "schedule {cap} --phase 99", says=("relay-demo.json", "phase 99")),
    Case("schedule-phase-negative", "schedule {cap} --phase -3", says=("phase -3",)),
    Case("validate-budget-0", "validate {cap} {plan} --budget 0", says=("--budget", "'0'")),
    Case("validate-fragments-neg", "validate {cap} {plan} --fragments -2", says=("--fragments", "-2")),
    # --- output paths, all refused before any work
    Case("out-directory", "solve {cap} -o {dir}", says=("-o", "is a directory")),
    Case("out-device", "solve {cap} -o /dev/null", says=("-o /dev/null", "not a regular file")),
    Case("out-is-input", "solve {cap} -o {cap}", says=("-o", "relay-demo.json", "input")),
    Case("write-capture-is-input", "solve {cap} --write-capture {cap}", says=("--write-capture", "input")),
    Case("write-capture-is-out", "solve {cap} -o {out} --write-capture {out}", says=("--write-capture", "-o")),
    Case("out-parent-is-file", "solve {cap} -o {out}/plan.json", says=("-o", "is a file")),
    Case("out-link-to-input", "solve {cap} -o {f}", name="link.json", says=("-o", "input"),
         extra={"symlink": "{cap}"}),
    Case("generate-out-dir", "generate siglip-so400m -o {dir}", says=("-o", "is a directory")),
    Case("place-out-is-input", "place {csv} -o {csv}", says=("-o", "input")),
    # --- captures
    Case("gz-bit-flip", "inspect {f}", name="c.json.gz", data=_gz_flipped, says=("c.json.gz", "gzip")),
    Case("gz-truncated", "inspect {f}", name="c.json.gz", data=lambda raw: gzip.compress(raw)[:-20],
         says=("c.json.gz", "truncated")),
    Case("json-truncated", "inspect {f}", data=lambda raw: raw[: len(raw) // 2], says=("f.json", "invalid JSON")),
    Case("capture-empty-file", "inspect {f}", data=b"", says=("f.json",)),
    Case("capture-binary", "inspect {f}", data=bytes(range(256)) * 4, says=("f.json",)),
    Case("capture-missing", "inspect {tmp}/missing.json", says=("missing.json", "no such file")),
    Case("capture-directory", "inspect {dir}", says=("is a directory",)),
    Case("capture-top-list", "inspect {f}", data=b"[1, 2]", says=("f.json", "top level")),
    Case("dest-address-2^40", "inspect {f}", data=_set("dest.address", 2**40),
         says=("f.json", "phase 0, transfer 0", "destinations", str(2**40))),
    Case("dest-address-unaligned", "inspect {f}", data=_set("dest.address", 393218),
         says=("f.json", "transfer 0", "393218", "multiple of 4")),
    Case("src-address-2^32", "inspect {f}", data=_set("src0", 2**32), says=("f.json", "source_addresses", str(2**32))),
    Case("src-address-unaligned", "inspect {f}", data=_set("src0", 327681),
         says=("f.json", "source_addresses", "327681")),
    Case("address-end-past-2^32", "inspect {f}", data=_set("dest.address", 2**32 - 4),
         says=("f.json", "transfer 0", str(2**32 - 4))),
    Case("duplicate-destination-tile", "inspect {f}",
         data=_cap(lambda d: _t0(d)["destinations"].append(dict(_t0(d)["destinations"][0]))),
         says=("f.json", "phase 0, transfer 0", "tile 0", "twice")),
    Case("sweep-output-is-a-file", "sweep {f} -o {out} --serial", name="s.toml",
         text='budgets = [600]\nmodes = ["greedy"]\n[[workloads]]\nname = "demo"\ncapture = "../relay-demo.json"\n',
         says=("out.json", "not a folder")),
    Case("source-among-destinations", "inspect {f}",
         data=_cap(lambda d: _t0(d)["destinations"].append({"tile": _t0(d)["source"], "address": 0x60000})),
         says=("f.json", "phase 0, transfer 0", "own source")),
    Case("phase-id-negative", "inspect {f}", data=_cap(lambda d: d["phases"][0].update(phase=-3)),
         says=("f.json", "phases[0]", "-3")),
    Case("phase-id-2^63", "inspect {f}", data=_cap(lambda d: d["phases"][0].update(phase=2**63)),
         says=("f.json", "phases[0]", str(2**63))),
    Case("repeat-iterations-2^63", "inspect {f}",
         data=_cap(lambda d: d.update(placer={"version": 1, "repeat": {"phases": [0], "iterations": 2**63}})),
         says=("f.json", "placer.repeat", str(2**63))),
    Case("repeat-iterations-0", "inspect {f}",
         data=_cap(lambda d: d.update(placer={"version": 1, "repeat": {"phases": [0], "iterations": 0}})),
         says=("f.json", "placer.repeat", "iterations")),
    Case("repeat-phase-twice", "inspect {f}",
         data=_cap(lambda d: d.update(placer={"version": 1, "repeat": {"phases": [0, 0], "iterations": 2}})),
         says=("f.json", "placer.repeat.phases", "twice")),
    Case("repeat-phase-not-id", "inspect {f}",  # found by the nightly hypothesis run: was a TypeError
         data=_cap(lambda d: d.update(placer={"version": 1, "repeat": {"phases": [[0]], "iterations": 2}})),
         says=("f.json", "placer.repeat.phases", "[0]")),
    Case("source-2^31", "inspect {f}", data=_set("source", 2**31), says=("f.json", "source", str(2**31))),
    Case("source-wraps-to-1", "inspect {f}", data=_set("source", 2**32 + 1), says=("f.json", "source", str(2**32 + 1))),
    Case("dest-tile-wraps", "inspect {f}", data=_set("dest.tile", 2**32 + 1),
         says=("f.json", "tile", str(2**32 + 1))),
    Case("words-2^31", "inspect {f}", data=_set("words", 2**31), says=("f.json", "words", str(2**31))),
    # orjson reads integers beyond 64 bits as floats: the line names the value as read
    Case("words-2^64", "inspect {f}", data=_set("words", 2**64), says=("f.json", "words", "must be an integer")),
    Case("words-float", "inspect {f}", data=_set("words", 8.5), says=("f.json", "words", "8.5")),
    Case("width-list", "inspect {f}", data=_set("width", []), says=("f.json", "width", "[]")),
    Case("tile-count-2^63", "inspect {f}", data=_cap(lambda d: d.update(tile_count=2**63)),
         says=("f.json", "tile_count", str(2**63))),
    Case("tile-count-0", "inspect {f}", data=_cap(lambda d: d.update(tile_count=0)), says=("f.json", "tile_count")),
    Case("solve-bad-capture-keeps-out", "solve {f} -o {out}", data=_set("dest.address", 2**40),
         says=("f.json", str(2**40))),
    # --- machine files
    Case("machine-tiles-fraction", "inspect {cap} --machine {f}", name="m.toml", text=_machine("tiles = 1472",
         "tiles = 1472.5"), says=("m.toml", "tiles", "1472.5")),
    Case("machine-tiles-huge", "inspect {cap} --machine {f}", name="m.toml",
         text=_machine("tiles = 1472", f"tiles = {2**63 - 1}"), says=("m.toml", "tiles", str(2**63 - 1))),
    Case("machine-rows-0", "inspect {cap} --machine {f}", name="m.toml", text=_machine("rows = 23", "rows = 0"),
         says=("m.toml", "geometry.rows", "0")),
    Case("machine-table-bytes-0", "inspect {cap} --machine {f}", name="m.toml",
         text=_machine("table_bytes = 81920", "table_bytes = 0"), says=("m.toml", "budget.table_bytes", "0")),
    Case("machine-bandwidth-0", "inspect {cap} --machine {f}", name="m.toml",
         text=_machine("bytes_per_cycle = 4", "bytes_per_cycle = 0"), says=("m.toml", "exchange.bytes_per_cycle")),
    Case("machine-max-words-0", "solve {cap} --machine {f} -o {out}", name="m.toml",
         text=_machine("max_transfer_words = 4148", "max_transfer_words = 0"),
         says=("m.toml", "exchange.max_transfer_words", "0")),
    Case("machine-unknown-key", "inspect {cap} --machine {f}", name="m.toml",
         text=_machine('name = "m"', 'name = "m"\ncores = 2'), says=("m.toml", "cores", "unknown")),
    Case("machine-unknown-section-key", "inspect {cap} --machine {f}", name="m.toml",
         text=_machine("rows = 23", "rows = 23\ncolumns = 64"), says=("m.toml", "geometry.columns", "unknown")),
    Case("machine-clock-nan", "inspect {cap} --machine {f}", name="m.toml",
         text=_machine("clock_hz = 1.5e9", "clock_hz = nan"), says=("m.toml", "clock_hz", "nan")),
    Case("machine-missing-section", "inspect {cap} --machine {f}", name="m.toml",
         text=MACHINE.replace("[budget]\ntable_bytes = 81920\nfragments = 16384\n", ""), says=("m.toml", "budget")),
    Case("machine-bad-toml", "inspect {cap} --machine {f}", name="m.toml", text="tiles = = 3",
         says=("m.toml", "TOML")),
    Case("machine-pack-duplicates", "inspect {cap} --machine {f}", name="m.toml",
         text=_machine("segment_bytes = [1314, 1944]", "segment_bytes = [1314, 1314]"),
         says=("m.toml", "local_pack.segment_bytes")),
    Case("machine-loader-past-end", "inspect {cap} --machine {f}", name="m.toml",
         text=_machine("loader_limit = 0xe7bb0", "loader_limit = 0xf0000"), says=("m.toml", "loader_limit")),
    Case("machine-budget-over-memory", "inspect {cap} --machine {f}", name="m.toml",
         text=_machine("table_bytes = 81920", "table_bytes = 10000000"), says=("m.toml", "budget.table_bytes")),
    Case("machine-file-missing", "inspect {cap} --machine {tmp}/nope.toml", says=("nope.toml", "no such machine")),
    # --- params files
    Case("params-time-limit-nan", "solve {cap} --params {f} -o {out}", name="p.toml", text="time_limit = nan",
         says=("p.toml", "time_limit", "nan")),
    Case("params-workers-huge", "solve {cap} --params {f} -o {out}", name="p.toml", text="workers = 100000",
         says=("p.toml", "workers", "100000")),
    Case("params-gap-negative", "solve {cap} --params {f} -o {out}", name="p.toml", text="relative_gap = -1",
         says=("p.toml", "relative_gap", "-1")),
    Case("params-seed-negative", "solve {cap} --params {f} -o {out}", name="p.toml", text="seed = -1",
         says=("p.toml", "seed", "-1")),
    Case("params-unknown-key", "solve {cap} --params {f} -o {out}", name="p.toml", text="time_limt = 3",
         says=("p.toml", "time_limt", "unknown")),
    Case("params-log-int", "solve {cap} --params {f} -o {out}", name="p.toml", text="log = 1",
         says=("p.toml", "log", "1")),
    Case("params-workers-float", "solve {cap} --params {f} -o {out}", name="p.toml", text="workers = 2.5",
         says=("p.toml", "workers", "2.5")),
    Case("params-backstop", "solve {cap} --params {f} -o {out}", name="p.toml", text="backstop = 3",
         says=("p.toml", "backstop")),
    Case("params-not-utf8", "solve {cap} --params {f} -o {out}", name="p.toml", data=b"\xff\xfe\x00",
         says=("p.toml", "UTF-8")),
    # --- MiniMalloc CSV
    Case("csv-duplicate-id", "place {f} -o {out}", name="a.1024.csv", text="id,lower,upper,size\nb1,0,3,4\nb1,3,9,4\n",
         says=("a.1024.csv", "line 3", "b1")),
    Case("csv-header-only", "place {f} -o {out}", name="a.1024.csv", text="id,lower,upper,size\n",
         says=("a.1024.csv", "header")),
    Case("csv-empty", "place {f} -o {out}", name="a.1024.csv", text="", says=("a.1024.csv", "empty")),
    Case("csv-missing-column", "place {f} -o {out}", name="a.1024.csv", text="id,lower,size\nb1,0,4\n",
         says=("a.1024.csv", "upper")),
    Case("csv-size-text", "place {f} -o {out}", name="a.1024.csv", text="id,lower,upper,size\nb1,0,3,four\n",
         says=("a.1024.csv", "line 2", "four")),
    Case("csv-size-0", "place {f} -o {out}", name="a.1024.csv", text="id,lower,upper,size\nb1,0,3,0\n",
         says=("a.1024.csv", "line 2", "size")),
    Case("csv-empty-lifetime", "place {f} -o {out}", name="a.1024.csv", text="id,lower,upper,size\nb1,3,3,4\n",
         says=("a.1024.csv", "line 2", "[3, 3)")),
    Case("csv-alignment-3", "place {f} -o {out}", name="a.1024.csv",
         text="id,lower,upper,size,alignment\nb1,0,3,4,3\n", says=("a.1024.csv", "alignment", "3")),
    Case("csv-duplicate-column", "place {f} -o {out}", name="a.1024.csv",
         text="id,lower,upper,size,size\nb1,0,3,4,4\n", says=("a.1024.csv", "twice")),
    Case("csv-huge-value", "place {f} -o {out}", name="a.1024.csv",
         text=f"id,lower,upper,size\nb1,0,3,{2**70}\n", says=("a.1024.csv", "line 2")),
    Case("csv-no-capacity", "place {f} -o {out}", name="nocap.csv", text="id,lower,upper,size\nb1,0,3,4\n",
         says=("nocap.csv", "capacity")),
    # --- placement dumps
    Case("dump-top-list", "place {f} -o {out}", name="d.json", data=b"[]", says=("d.json", "top level")),
    Case("dump-version-2", "place {f} -o {out}", name="d.json", data=b'{"version": 2, "ranges": [], "requests": []}',
         says=("d.json", "version", "2")),
    Case("dump-missing-requests", "place {f} -o {out}", name="d.json", data=b'{"ranges": [[0, 64]]}',
         says=("d.json", "requests")),
    Case("dump-reversed-range", "place {f} -o {out}", name="d.json",
         data=b'{"ranges": [[64, 0]], "requests": []}', says=("d.json", "ranges[0]", "[64, 0)")),
    Case("dump-huge-bytes", "place {f} -o {out}", name="d.json",
         data=orjson.dumps({"ranges": [[0, 64]], "requests": [{"bytes": 2**40, "alignment": 4,
                            "class": "Ipu21Standard", "lifetime": {"first": 0, "last": 1}}]}),
         says=("d.json", "requests[0].bytes", str(2**40))),
    Case("dump-alignment-3", "place {f} -o {out}", name="d.json",
         data=orjson.dumps({"ranges": [[0, 64]], "requests": [{"bytes": 4, "alignment": 3,
                            "class": "Ipu21Standard", "lifetime": {"first": 0, "last": 1}}]}),
         says=("d.json", "alignment", "3")),
    Case("dump-unknown-class", "place {f} -o {out}", name="d.json",
         data=orjson.dumps({"ranges": [[0, 64]], "requests": [{"bytes": 4, "alignment": 4,
                            "class": "Fast", "lifetime": {"first": 0, "last": 1}}]}),
         says=("d.json", "class", "Fast")),
    Case("dump-lifetime-reversed", "place {f} -o {out}", name="d.json",
         data=orjson.dumps({"ranges": [[0, 64]], "requests": [{"bytes": 4, "alignment": 4,
                            "class": "Ipu21Standard", "lifetime": {"first": 5, "last": 1}}]}),
         says=("d.json", "lifetime", "5")),
    # --- plans
    Case("plan-budget-2^63", "validate {cap} {f}", name="plan.json",
         data=_plan(lambda p: p["budget"].update(table_bytes=2**63)),
         says=("plan.json", "budget.table_bytes", str(2**63))),
    Case("plan-other-capture", "validate {cap} {f}", name="plan.json",
         data=_plan(lambda p: p["capture"].update(sha256="0" * 64)), says=("plan.json", "capture.sha256",
                                                                          "another capture")),
    Case("plan-other-machine", "validate {cap} {plan} --machine mk1", says=("plan.json", "machine", "mk1")),
    Case("plan-not-json", "validate {cap} {f}", name="plan.json", data=b"{plan", says=("plan.json", "invalid JSON")),
    Case("plan-kind", "validate {cap} {f}", name="plan.json", data=_plan(lambda p: p.update(kind="recipe")),
         says=("plan.json", "kind", "recipe")),
    Case("plan-version-2", "validate {cap} {f}", name="plan.json", data=_plan(lambda p: p.update(plan_version=2)),
         says=("plan.json", "plan_version", "2")),
    Case("plan-remove-out-of-range", "validate {cap} {f}", name="plan.json",
         data=_plan(lambda p: p.update(delta=[{"phase": 0, "remove": [9999], "append": []}])),
         says=("plan.json", "delta[0].remove", "9999")),
    # --- hardening round two: every promise checked before any work, every number against the CLI's limits
    Case("report-png-is-a-file", "report {cap} -o {tmp}/r.html --png {out}", says=("--png", "not a folder"),
         extra={"absent": "r.html"}),
    Case("report-png-devnull", "report {cap} -o {tmp}/r.html --png /dev/null", says=("--png", "/dev/null"),
         extra={"absent": "r.html"}),
    Case("report-png-under-a-file", "report {cap} -o {tmp}/r.html --png {out}/png",
         says=("--png", "a directory on its path is a file"), extra={"absent": "r.html"}),
    Case("report-budget-0", "report {cap} -o {tmp}/r.html --budget 0", says=("--budget", "'0'"),
         extra={"absent": "r.html"}),
    Case("report-budget-1000GiB", "report {cap} -o {tmp}/r.html --budget 1000GiB", says=("--budget", "1000GiB"),
         extra={"absent": "r.html"}),
    Case("report-budget-huge", "report {cap} -o {tmp}/r.html --budget 99999999999999999999999",
         says=("--budget", "99999999999999999999999"), extra={"absent": "r.html"}),
    Case("out-stdout-into-a-pipe", "solve {cap} --budget 640 -o /dev/stdout", says=("/dev/stdout", "regular file")),
    *[Case(f"sweep-{cid}", "sweep {f} -o {tmp}/r --serial", name="s.toml",
           text=f'budgets = [{budget}]\nmodes = ["greedy", "cpsat"]\n{extra}\n[[workloads]]\nname = "demo"\n'
                'capture = "../relay-demo.json"\n', says=("s.toml", *needle), extra={"absent": "r/jobs"})
      for cid, budget, extra, needle in [
          ("time-limit-nan", 600, "[solver]\ntime_limit = nan", ("solver.time_limit", "nan")),
          ("time-limit-inf", 600, "[solver]\ntime_limit = inf", ("solver.time_limit", "inf")),
          ("relative-gap-nan", 600, "[solver]\nrelative_gap = nan", ("solver.relative_gap", "nan")),
          ("workers-100000", 600, "[solver]\nworkers = 100000", ("solver.workers", "100000")),
          ("budget-2^63-1", 2**63 - 1, "", ("budgets[0]", str(2**63 - 1))),
          ("seed-2^63-1", 600, f"seeds = [{2**63 - 1}]", ("seeds[0]", str(2**63 - 1))),
          ("2000-jobs", 600, "seeds = [" + ", ".join(map(str, range(2000))) + "]", ("2,001 jobs", "--yes")),
      ]],
    Case("csv-capacity-2^64-in-name", "place {f} -o {out}", name="x.18446744073709551616.csv",
         text="id,lower,upper,size\nb1,0,3,4\n",
         says=("x.18446744073709551616.csv", "capacity", "18446744073709551616")),
    Case("csv-size-2^61", "place {f} -o {out}", name="x.4096.csv", text=f"id,lower,upper,size\nb1,0,3,{2**61}\n",
         says=("x.4096.csv", "line 2", "size")),
    Case("dump-fixed-not-a-list", "place {f} -o {out}", name="d.json",
         data=b'{"ranges": [[0, 64]], "requests": [], "fixed": 1}', says=("d.json", "fixed", "1")),
    Case("capture-allocation-at-2^63", "inspect {f}",
         data=_cap(lambda d: d["placer"]["allocations"][0].update(start=2**63, end=2**63 + 16)),
         says=("f.json", "placer.allocations[0]")),
    # found by the fuzz targets (test_fuzz_formats.py)
    Case("csv-lone-carriage-return", "place {f} -o {out}", name="a.1024.csv", text="id,lower,upper,size\nb1,0,3,\r4\n",
         says=("a.1024.csv", "line")),
    Case("plan-remove-2^63", "validate {cap} {f}", name="plan.json",
         data=_plan(lambda p: p.update(delta=[{"phase": 0, "remove": [2**63], "append": []}])),
         says=("plan.json", "delta[0].remove[0]", str(2**63))),
    # nesting, size and file-kind limits (docs/robustness.md, "Limits")
    Case("params-nested-deep", "solve {cap} --params {f}", name="p.toml", text="a = " + "[" * 5000 + "]" * 5000,
         says=("p.toml", "nested")),
    Case("machine-nested-deep", "inspect {cap} --machine {f}", name="m.toml", text="a = " + "{b=" * 3000 + "1" +
         "}" * 3000, says=("m.toml", "nested")),
    Case("sweep-nested-deep", "sweep {f} -o {tmp}/r --serial", name="s.toml", text="a = " + "[" * 5000 + "]" * 5000,
         says=("s.toml", "nested")),
    Case("model-nested-deep", "generate {f} -o {out}", name="m.toml", text="a = " + "[" * 5000 + "]" * 5000,
         says=("m.toml", "nested")),
    Case("capture-nested-deep", "inspect {f}", data=b'{"phases": ' + b"[" * 5000 + b"]" * 5000 + b"}",
         says=("f.json", "depth")),
    Case("plan-nested-deep", "validate {cap} {f}", name="plan.json", data=b"[" * 5000 + b"]" * 5000,
         says=("plan.json", "depth")),
    Case("dump-nested-deep", "place {f} -o {out}", name="d.json", data=b"[" * 5000 + b"]" * 5000,
         says=("d.json", "depth")),
    Case("order-nested-deep", "validate {cap} {plan} --order {f}", name="o.json", data=b"[" * 5000 + b"]" * 5000,
         says=("o.json", "depth")),
    Case("params-5MiB", "solve {cap} --params {f}", name="p.toml", text="# " + "x" * (5 << 20) + "\n",
         says=("p.toml", "PLACER_MAX_TEXT_BYTES")),
    Case("capture-dev-zero", "inspect /dev/zero", says=("/dev/zero", "regular file")),
    Case("machine-dev-zero", "inspect {cap} --machine /dev/zero", says=("/dev/zero", "regular file")),
    Case("csv-dev-zero", "place /dev/zero -o {out}", says=("/dev/zero", "regular file")),
    # --- exit codes other than 2 (README's table)
    Case("validate-over-budget", "validate {cap} {greedy640} --budget 640", code=4, says=(),
         stdout_says=("budget",)),
    Case("inspect-does-not-fit", "inspect {cap} --budget 100", code=4, says=(), stdout_says=("DOES NOT FIT",)),
    Case("place-infeasible-keeps-out", "place {f} -o {out}", name="tight.1000.csv", code=3,
         text="id,lower,upper,size\nb1,0,3,600\nb2,0,3,600\n", says=(), stdout_says=("infeasible",)),
]
