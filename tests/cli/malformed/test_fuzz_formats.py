"""The other readers, fuzzed the way test_fuzz_reader fuzzes captures: plan files, order files, placement dumps,
MiniMalloc CSV files and sweep files. Each mutated or corrupted document ends in a result or in one
``InputError`` line naming the file, never in another exception. CI runs a few hundred examples per property; the
``nightly`` profile runs 10,000 (docs/robustness.md)."""

from __future__ import annotations

import copy
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from placer.capture.io import read_capture
from placer.capture.model import Capture
from placer.errors import InputError
from placer.fileio import read_json
from placer.machine import Machine, load_machine
from placer.ordering.orders import parse_orders, replay_all
from placer.placement.formats import read_problem
from placer.sweep.spec import load_spec
from placer.validation.plan import bind_plan, parse_plan
from placer.validation.validator import validate

from .test_fuzz_reader import _dump, _examples, _mutate, _paths, _toml, nasty

ROOT = Path(__file__).parents[3]
DEMO = ROOT / "examples" / "relay-demo.json"


@cache
def _demo() -> tuple[Capture, Machine, dict[str, Any], dict[str, Any]]:
    """The demo capture, the production rule's plan at 700 B (it relays) and the reference order of its phases."""
    from placer import api

    cap, machine = read_capture(DEMO), load_machine("ipu21")
    plan = dict(api.solve(cap, machine, budget=700, mode="greedy").plan_json())
    return cap, machine, plan, dict(api.schedule(cap, machine).order_json())


def _one_line(exc: InputError, name: str) -> None:
    assert "\n" not in str(exc), str(exc)
    assert name in str(exc), str(exc)


def _mutated(doc: Any, data: st.DataObject) -> Any:
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(1, 3))):
        paths = _paths(doc)
        # most of a plan's or order's paths are deep inside long lists: weight the shallow ones up
        path = data.draw(st.one_of(st.sampled_from(paths), st.sampled_from([p for p in paths if len(p) <= 2])))
        doc = _mutate(doc, path, data.draw(nasty), bool(path) and data.draw(st.booleans()))
    return doc


def _corrupted(raw: bytes, data: st.DataObject) -> bytes:
    out = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4))):
        action = data.draw(st.sampled_from(["flip", "truncate", "insert"]))
        at = data.draw(st.integers(0, max(0, len(out) - 1)))
        if action == "flip" and out:
            out[at] ^= 1 << data.draw(st.integers(0, 7))
        elif action == "truncate":
            del out[at:]
        else:
            out[at:at] = data.draw(st.sampled_from([b"-", b"9" * 25, b".5", b"e9", b"\"", b"{", b"]", b",", b"\x00",
                                                    b"\n", b"\xff", b"NaN", b"1e400"]))
    return bytes(out)


def _file(tmp: str, name: str, raw: bytes) -> Path:
    f = Path(tmp) / name
    f.write_bytes(raw)
    return f


# --- plan files -------------------------------------------------------------------------------------------------
def _check_plan(raw: bytes) -> None:
    cap, machine, _, _ = _demo()
    with tempfile.TemporaryDirectory() as tmp:
        f = _file(tmp, "plan.json", raw)
        try:
            plan = parse_plan(read_json(f), str(f))
            bind_plan(plan, cap, str(f))
        except InputError as exc:
            _one_line(exc, "plan.json")
            return
        report = validate(cap, plan, machine)
        assert all("\n" not in e for e in report.errors)


@settings(max_examples=_examples(150), deadline=None)
@given(data=st.data())
def test_mutated_plans_never_escape(data: st.DataObject) -> None:
    _check_plan(_dump(_mutated(_demo()[2], data)))


@settings(max_examples=_examples(100), deadline=None)
@given(data=st.data())
def test_corrupted_plan_bytes_never_escape(data: st.DataObject) -> None:
    _check_plan(_corrupted(_dump(_demo()[2]), data))


# --- order files ------------------------------------------------------------------------------------------------
def _check_order(raw: bytes) -> None:
    cap, machine, _, _ = _demo()
    with tempfile.TemporaryDirectory() as tmp:
        f = _file(tmp, "order.json", raw)
        try:
            _, _, orders = parse_orders(read_json(f), str(f))
            rows = replay_all(cap, orders, machine, str(f))
        except InputError as exc:
            _one_line(exc, "order.json")
            return
        assert all(r.horizon >= 0 for r in rows)


@settings(max_examples=_examples(150), deadline=None)
@given(data=st.data())
def test_mutated_orders_never_escape(data: st.DataObject) -> None:
    _check_order(_dump(_mutated(_demo()[3], data)))


@settings(max_examples=_examples(100), deadline=None)
@given(data=st.data())
def test_corrupted_order_bytes_never_escape(data: st.DataObject) -> None:
    _check_order(_corrupted(_dump(_demo()[3]), data))


# --- placement dumps and MiniMalloc CSV -------------------------------------------------------------------------
DUMP = {"version": 1, "ranges": [[0, 4096]], "region_boundary": None,
        "requests": [{"bytes": 64, "alignment": 8, "class": "Ipu21Standard", "lifetime": {"first": 0, "last": 3}},
                     {"bytes": 128, "alignment": 4, "class": "Ipu21Standard", "lifetime": {"first": 2, "last": 5}}],
        "fixed": [{"start": 1024, "end": 1100, "first": 0, "last": 9}]}
CSV = "id,lower,upper,size,alignment\nb1,0,3,64,8\nb2,2,9,128,4\nb3,5,7,4000,1\n"


def _check_problem(raw: bytes, name: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        f = _file(tmp, name, raw)
        try:
            problem = read_problem(f)
        except InputError as exc:
            _one_line(exc, name)
            return
    for r in problem.requests:
        assert 0 < r.bytes <= 2**32
        assert r.alignment >= 1
        assert 0 <= r.first <= r.last <= 2**32
    assert all(0 <= lo < hi <= 2**32 for lo, hi in problem.ranges)


@settings(max_examples=_examples(150), deadline=None)
@given(data=st.data())
def test_mutated_dumps_never_escape(data: st.DataObject) -> None:
    _check_problem(_dump(_mutated(DUMP, data)), "d.json")


@settings(max_examples=_examples(150), deadline=None)
@given(data=st.data(), name=st.sampled_from(["a.4096.csv", "a.18446744073709551616.csv", "a.0.csv", "a.csv"]))
def test_corrupted_csv_never_escapes(data: st.DataObject, name: str) -> None:
    _check_problem(_corrupted(CSV.encode(), data), name)


@settings(max_examples=_examples(100), deadline=None)
@given(cells=st.lists(st.one_of(st.integers(-(2**70), 2**70).map(str), st.text(max_size=6)), min_size=5,
                      max_size=5))
def test_csv_rows_of_any_values_never_escape(cells: list[str]) -> None:
    _check_problem(f"id,lower,upper,size,alignment\n{','.join(cells)}\n".encode(), "a.4096.csv")


# --- sweep files ------------------------------------------------------------------------------------------------
SWEEP = {"budgets": ["64KiB", 81920], "modes": ["greedy", "cpsat"], "objectives": ["cycles,table"], "seeds": [0, 1],
         "solver": {"time_limit": 30.0, "workers": 1, "relative_gap": 0.0, "deterministic": True},
         "workloads": [{"name": "gen", "model": "siglip-so400m", "batch": 2, "layers": 1, "seed": 0},
                       {"name": "demo", "capture": str(DEMO), "budgets": [512, 700]}]}


def _sweep_toml(doc: dict[str, Any]) -> str:
    lines = [f"{k} = {_value(v)}" for k, v in doc.items() if k not in ("solver", "workloads")]
    if isinstance(doc.get("solver"), dict):
        lines += ["[solver]"] + [f"{k} = {_value(v)}" for k, v in doc["solver"].items()]
    elif "solver" in doc:
        lines.insert(0, f"solver = {_value(doc['solver'])}")
    for w in doc.get("workloads", []) if isinstance(doc.get("workloads"), list) else []:
        lines += ["[[workloads]]"] + ([f"{k} = {_value(v)}" for k, v in w.items()] if isinstance(w, dict) else [])
    return "\n".join(lines) + "\n"


def _value(v: Any) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2**63:
        return str(2**63 - 1)  # TOML has 64-bit integers; the largest is the hostile one
    return _toml(v)


@settings(max_examples=_examples(150), deadline=None)
@given(data=st.data())
def test_mutated_sweep_files_never_escape(data: st.DataObject) -> None:
    doc = _mutated(SWEEP, data)
    with tempfile.TemporaryDirectory() as tmp:
        f = _file(tmp, "sweep.toml", _sweep_toml(doc).encode() if isinstance(doc, dict) else b"x = 1\n")
        try:
            spec = load_spec(f)
        except InputError as exc:
            _one_line(exc, "sweep.toml")
            return
    assert spec.job_count() == len(spec.jobs())
    assert all(0 < b < 2**31 for b in spec.budgets)
    assert all(0 <= s < 2**31 for s in spec.seeds)
    assert 1 <= spec.config.workers <= 256
    assert 0 < spec.config.time_limit < float("inf")


@settings(max_examples=_examples(100), deadline=None)
@given(data=st.data())
def test_corrupted_sweep_bytes_never_escape(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        f = _file(tmp, "sweep.toml", _corrupted(_sweep_toml(SWEEP).encode(), data))
        try:
            load_spec(f)
        except InputError as exc:
            _one_line(exc, "sweep.toml")
