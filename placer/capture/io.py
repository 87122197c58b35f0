"""Reading and writing the reference compiler's capture JSON (docs/reference.md §2), plus placer's optional extensions.

Extensions live under the top-level key ``"placer"`` (``{"version": 1, "repeat": ..., "allocations": ...,
"panels": ...}``) so that a capture written by placer is still a valid reference capture; see docs/capture.md.

``read_capture`` reads with the compiled scanner (:mod:`placer.capture.scan`, which streams the file and
decompresses while it parses); whenever it declines or anything is wrong, the orjson path below runs and reports
exactly as before. That path is two-pass: a fast pass builds the numpy columns with list comprehensions; only if
it trips does a slow pass walk the transfers one by one to name the exact phase, transfer index and field that is
wrong.
"""

from __future__ import annotations

import hashlib
import itertools
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import orjson

from placer.capture import scan
from placer.capture.model import (
    EXTENSION_VERSION,
    SCHEMA_VERSION,
    WIDTH_NAMES,
    WORD_BYTES,
    Allocations,
    Capture,
    PanelHint,
    Phase,
    Repeat,
)
from placer.errors import InputError
from placer.fileio import InputLimits, read_bytes, read_json
from placer.progress import task

MAX_WORDS = 4148  # the reference format's per-transfer limit; a machine file may be stricter, never looser
ADDRESS_LIMIT = 2**32  # tile addresses are 32-bit byte addresses
WORD_ALIGN = 4  # every transfer moves whole 32-bit words, from and to word-aligned addresses
MAX_TILES = 1 << 20
MAX_PHASE_ID = 2**31 - 1
MAX_ITERATIONS = 1 << 20  # Repeat iterations: costs are multiplied by it and must stay exact in int64
# what the compiled scanner checks per transfer (all of _check_ranges but the tile count, which it reports)
_SCAN_LIMITS = scan.Limits(max_tiles=MAX_TILES, max_words=MAX_WORDS, address_limit=ADDRESS_LIMIT,
                           align=WORD_ALIGN, word_bytes=WORD_BYTES)
_TOP_KEYS = {"schema_version", "tile_count", "phases", "phase_labels", "phase_traffic", "placer"}
_WIDTH_CODE = {name: code for code, name in enumerate(WIDTH_NAMES)}


def read_capture(path: str | Path) -> Capture:
    """Read a capture (``.json`` or ``.json.gz``); raise :class:`InputError` naming the bad field. The input
    limits apply (``placer.fileio.InputLimits``), the number of transfers included."""
    with task(f"load {Path(path).name}"):
        cap = _read_capture(path)
    limit = InputLimits.from_env().max_transfers
    if cap.transfer_count() > limit:
        raise InputError(f"has {cap.transfer_count():,} transfers, more than the limit of {limit:,} "
                         "(PLACER_MAX_TRANSFERS raises it)", path=str(path))
    return cap


def _read_capture(path: str | Path) -> Capture:
    cap = _from_native(scan.scan_file(path, _SCAN_LIMITS), str(path))
    if cap is not None:
        return cap
    raw = read_bytes(path)  # the scanner declined: orjson reads the file, and names the error if there is one
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        del raw
        doc = read_json(path)  # raises read_json's one-line InputError for the syntax error
    return capture_from_json(doc, str(path))


def _read_fast(raw: bytes, path: str) -> Capture | None:
    """A capture's text read by the compiled scanner; ``None`` if it declines or the capture has any error (the
    orjson path then names it, so messages and which error is reported first stay exactly those of
    :func:`capture_from_json`)."""
    return _from_native(scan.scan_bytes(raw, _SCAN_LIMITS), path)


def _from_native(split: scan.NativeSplit | None, path: str) -> Capture | None:
    """A capture from the compiled scanner's result, or ``None`` if it declined or any check fails."""
    if split is None or split.bad:
        return None
    try:
        cap = capture_from_json(split.doc, path)  # every check but the per-transfer ones (transfers are [] here)
    except InputError:
        return None
    if split.max_tile >= cap.tile_count:
        return None  # the scanner checked every other range; this one needs the tile count
    phases = []
    for skeleton, (source, words, width, src_ptr, src_addr, dst_ptr, dst_tile, dst_addr) in zip(
            cap.phases, split.columns, strict=True):
        phases.append(Phase(skeleton.phase, source, words, width, src_ptr, src_addr, dst_ptr, dst_tile, dst_addr,
                            extra=skeleton.extra))
    cap.phases = phases
    return cap


def capture_digest(capture: Capture) -> str:
    """SHA-256 of what a plan depends on: tile count, every phase's columns (fixed dtypes, so the in-memory
    representation does not matter), the Repeat and the allocations. Labels, panel hints and unknown keys are left
    out; so is the file's formatting (``.json`` and ``.json.gz`` of one program have one digest)."""
    h = hashlib.sha256(f"placer-capture-v1 tiles={capture.tile_count}".encode())
    for p in capture.phases:
        h.update(f"|phase {p.phase} n={p.n}|".encode())
        for name, dtype in _DIGEST_COLUMNS:
            h.update(np.ascontiguousarray(getattr(p, name), dtype=dtype).tobytes())
    if capture.repeat is not None:
        h.update(f"|repeat {list(capture.repeat.phases)} x{capture.repeat.iterations}|".encode())
    a = capture.allocations
    for name in ("tile", "start", "end", "first", "last"):
        h.update(np.ascontiguousarray(getattr(a, name), dtype="<i8").tobytes())
    return h.hexdigest()


_DIGEST_COLUMNS = (("source", "<i4"), ("words", "<i4"), ("width", "u1"), ("src_ptr", "<i8"), ("src_addr", "<i8"),
                   ("dst_ptr", "<i8"), ("dst_tile", "<i4"), ("dst_addr", "<i8"))


def capture_from_json(doc: Any, path: str = "<capture>", *, self_sends: bool = False) -> Capture:
    """A capture from its parsed JSON, every field checked (``InputError`` names the file, field and value).
    ``self_sends`` lets a transfer name its own source among its destinations (the validator reads a plan's
    transfers this way, to report such a relay as an invalid plan rather than a malformed file)."""
    if not isinstance(doc, dict):
        raise InputError(f"top level must be an object, got {type(doc).__name__}", path=path)
    for key in ("schema_version", "tile_count", "phases"):
        if key not in doc:
            raise InputError("missing field", path=path, where=key)
    version = doc["schema_version"]
    if version != SCHEMA_VERSION:
        raise InputError(f"unsupported schema version {version!r} (this placer reads {SCHEMA_VERSION})",
                         path=path, where="schema_version")
    tiles = doc["tile_count"]
    if not _is_int(tiles) or not 1 <= tiles <= MAX_TILES:
        raise InputError(f"must be an integer in 1..{MAX_TILES:,}, got {tiles!r}", path=path, where="tile_count")
    if not isinstance(doc["phases"], list):
        raise InputError("must be a list", path=path, where="phases")
    phases = []
    seen: set[int] = set()
    for k, raw in enumerate(doc["phases"]):
        phase = _phase_from_json(raw, k, tiles, path, self_sends)
        if phase.phase in seen:
            raise InputError(f"duplicate phase id {phase.phase}", path=path, where=f"phases[{k}].phase")
        seen.add(phase.phase)
        phases.append(phase)
    labels = _labels(doc.get("phase_labels"), path)
    ext = doc.get("placer") or {}
    if not isinstance(ext, dict):
        raise InputError("must be an object", path=path, where="placer")
    if ext and ext.get("version") != EXTENSION_VERSION:
        raise InputError(f"unsupported extension version {ext.get('version')!r} (this placer reads "
                         f"{EXTENSION_VERSION})", path=path, where="placer.version")
    return Capture(
        tile_count=int(tiles),
        phases=phases,
        schema_version=int(version),
        phase_labels=labels,
        phase_traffic=doc.get("phase_traffic"),
        repeat=_repeat(ext.get("repeat"), seen, path),
        allocations=_allocations(ext.get("allocations"), tiles, path),
        panels=_panels(ext.get("panels"), path),
        extra={k: v for k, v in doc.items() if k not in _TOP_KEYS},
    )


def _is_int(x: Any) -> TypeGuard[int]:
    return isinstance(x, int) and not isinstance(x, bool)


def _phase_from_json(raw: Any, k: int, tiles: int, path: str, self_sends: bool = False) -> Phase:
    where = f"phases[{k}]"
    if not isinstance(raw, dict):
        raise InputError("must be an object", path=path, where=where)
    if "phase" not in raw or not _is_int(raw["phase"]) or not 0 <= raw["phase"] <= MAX_PHASE_ID:
        raise InputError(f"'phase' must be an integer id in 0..{MAX_PHASE_ID:,}, got {raw.get('phase')!r}",
                         path=path, where=where)
    pid = raw["phase"]
    where = f"phase {pid}"
    transfers = raw.get("transfers")
    if not isinstance(transfers, list):
        raise InputError("'transfers' must be a list", path=path, where=where)
    extra = {key: v for key, v in raw.items() if key not in ("phase", "transfers")}
    try:
        phase = _fast_columns(pid, transfers)
    except (KeyError, TypeError, ValueError, OverflowError):
        _locate_error(transfers, tiles, path, where)
        raise InputError("malformed transfers", path=path, where=where) from None
    phase.extra = extra
    _check_ranges(phase, tiles, path, where, self_sends)
    return phase


def _fast_columns(pid: int, ts: list[dict[str, Any]]) -> Phase:
    source = _ints([t["source"] for t in ts])
    words = _ints([t["words"] for t in ts])
    width = np.array([_WIDTH_CODE[t["width"]] for t in ts], dtype=np.uint8)
    srcs = [t["source_addresses"] for t in ts]
    src_counts = np.array([len(s) for s in srcs], dtype=np.int64)
    src_addr = _ints([a for s in srcs for a in s])
    dsts = [t["destinations"] for t in ts]
    dst_counts = np.array([len(d) for d in dsts], dtype=np.int64)
    dst_tile = _ints([d["tile"] for ds in dsts for d in ds])
    dst_addr = _ints([d["address"] for ds in dsts for d in ds])
    if (src_counts == 0).any() or (dst_counts == 0).any():
        raise ValueError
    return _build64(pid, source, words, dst_counts, dst_tile, dst_addr, src_addr, src_counts, width)


def _build64(pid: int, source: Any, words: Any, dst_counts: Any, dst_tile: Any, dst_addr: Any, src_addr: Any,
             src_counts: Any, width: Any) -> Phase:
    """A phase whose columns are all still int64: :func:`_check_ranges` narrows them once they are known to fit
    (Phase.build casts at once, and 2**32 + 5 would become tile 5)."""
    phase = Phase.build(pid, [], [], dst_counts, [], dst_addr, src_addr, src_counts, width)
    phase.source = np.asarray(source, np.int64)
    phase.words = np.asarray(words, np.int64)
    phase.dst_tile = np.asarray(dst_tile, np.int64)
    return phase


def _ints(values: list[Any]) -> np.ndarray:
    # numpy would silently truncate 1.5 and accept true; only exact ints pass the fast path
    if values and set(map(type, values)) != {int}:
        raise TypeError
    return np.array(values, dtype=np.int64)


def _locate_error(ts: list[Any], tiles: int, path: str, where: str) -> None:
    """Walk the transfers one by one and raise on the first bad one (the slow, precise pass)."""
    for i, t in enumerate(ts):
        at = f"{where}, transfer {i}"
        if not isinstance(t, dict):
            raise InputError("transfer must be an object", path=path, where=at)
        for key in ("source", "source_addresses", "destinations", "words", "width"):
            if key not in t:
                raise InputError(f"missing field '{key}'", path=path, where=at)
        _check_int(t["source"], "source", at, path, tiles - 1)
        _check_int(t["words"], "words", at, path, MAX_WORDS, 1)
        if not isinstance(t["width"], str) or t["width"] not in _WIDTH_CODE:
            raise InputError(f"field 'width' has unknown value {t['width']!r} (expected Word32 or Paired64)",
                             path=path, where=at)
        sa = t["source_addresses"]
        if not isinstance(sa, list) or not sa:
            raise InputError(f"field 'source_addresses' must be a non-empty list, got {sa!r}", path=path, where=at)
        for a in sa:
            _check_int(a, "source_addresses", at, path, ADDRESS_LIMIT - 1)
        ds = t["destinations"]
        if not isinstance(ds, list) or not ds:
            raise InputError(f"field 'destinations' must be a non-empty list, got {ds!r}", path=path, where=at)
        for j, d in enumerate(ds):
            if not isinstance(d, dict) or "tile" not in d or "address" not in d:
                raise InputError(f"destinations[{j}] must be {{tile, address}}, got {d!r}", path=path, where=at)
            _check_int(d["tile"], f"destinations[{j}].tile", at, path, tiles - 1)
            _check_int(d["address"], f"destinations[{j}].address", at, path, ADDRESS_LIMIT - 1)


def _check_int(value: Any, name: str, at: str, path: str, hi: int, lo: int = 0) -> None:
    if not _is_int(value):
        raise InputError(f"field '{name}' must be an integer, got {value!r}", path=path, where=at)
    if not lo <= value <= hi:
        raise InputError(f"field '{name}' = {value} is outside {lo}..{hi}", path=path, where=at)


def _check_ranges(phase: Phase, tiles: int, path: str, where: str, self_sends: bool = False) -> None:
    """Vectorised range checks; on failure name the first offending transfer and its value."""

    def fail(mask: np.ndarray, rows: np.ndarray, msg: str, values: np.ndarray) -> None:
        first = int(np.flatnonzero(mask)[0])
        raise InputError(msg.format(values[first]), path=path, where=f"{where}, transfer {int(rows[first])}")

    n = phase.n
    rows = np.arange(n)
    if n and ((phase.source < 0) | (phase.source >= tiles)).any():
        fail((phase.source < 0) | (phase.source >= tiles), rows,
             f"field 'source' = {{}} is outside 0..{tiles - 1}", phase.source)
    if n and ((phase.words < 1) | (phase.words > MAX_WORDS)).any():
        fail((phase.words < 1) | (phase.words > MAX_WORDS), rows, f"field 'words' = {{}} is outside 1..{MAX_WORDS}",
             phase.words)
    src_rows = np.repeat(rows, np.diff(phase.src_ptr))
    bad = (phase.src_addr < 0) | (phase.src_addr >= ADDRESS_LIMIT)
    if bad.any():
        fail(bad, src_rows, "field 'source_addresses' has address {} outside 0..2^32-1", phase.src_addr)
    bad = phase.src_addr % WORD_ALIGN != 0
    if bad.any():
        fail(bad, src_rows, "field 'source_addresses' has address {} that is not a multiple of 4", phase.src_addr)
    dst_rows = phase.dst_transfer()
    bad_tile = (phase.dst_tile < 0) | (phase.dst_tile >= tiles)
    if bad_tile.any():
        fail(bad_tile, dst_rows, f"field 'destinations.tile' = {{}} is outside 0..{tiles - 1}", phase.dst_tile)
    bad = (phase.dst_addr < 0) | (phase.dst_addr >= ADDRESS_LIMIT)
    if bad.any():
        fail(bad, dst_rows, "field 'destinations.address' has address {} outside 0..2^32-1", phase.dst_addr)
    bad = phase.dst_addr % WORD_ALIGN != 0
    if bad.any():
        fail(bad, dst_rows, "field 'destinations.address' has address {} that is not a multiple of 4",
             phase.dst_addr)
    if n:
        nbytes = phase.words * WORD_BYTES
        bad = phase.dst_addr + nbytes[dst_rows] > ADDRESS_LIMIT
        if bad.any():
            fail(bad, dst_rows, "destination address {} + the transfer's bytes passes 2^32", phase.dst_addr)
        bad = phase.src_addr + nbytes[src_rows] > ADDRESS_LIMIT
        if bad.any():
            fail(bad, src_rows, "source address {} + the transfer's bytes passes 2^32", phase.src_addr)
        _check_destination_sets(phase, dst_rows, path, where, self_sends)
    # numpy int64 -> the narrower in-memory dtypes, now that ranges are known to fit
    phase.source = phase.source.astype(np.int32)
    phase.words = phase.words.astype(np.int32)
    phase.dst_tile = phase.dst_tile.astype(np.int32)


def _check_destination_sets(phase: Phase, dst_rows: np.ndarray, path: str, where: str,
                            self_sends: bool = False) -> None:
    """A transfer names each destination tile once, and never its own source (a tile does not exchange with
    itself: a copy to its own memory is not an exchange transfer)."""
    own = phase.dst_tile == phase.source[dst_rows]
    if own.any() and not self_sends:
        k = int(np.flatnonzero(own)[0])
        raise InputError(f"destination tile {int(phase.dst_tile[k])} is the transfer's own source", path=path,
                         where=f"{where}, transfer {int(dst_rows[k])}")
    multi = np.flatnonzero(phase.fanout > 1)
    if multi.shape[0] == 0:
        return
    order = np.lexsort((phase.dst_tile, dst_rows))  # sorted by transfer, then tile
    t, r = phase.dst_tile[order], dst_rows[order]
    dup = (t[1:] == t[:-1]) & (r[1:] == r[:-1])
    if dup.any():
        k = int(np.flatnonzero(dup)[0])
        raise InputError(f"destination tile {int(t[k])} appears twice in one transfer", path=path,
                         where=f"{where}, transfer {int(r[k])}")


def _labels(raw: Any, path: str) -> dict[int, str] | None:
    if raw is None:
        return None
    if isinstance(raw, dict):
        try:
            return {int(k): str(v) for k, v in raw.items()}
        except ValueError:
            raise InputError("keys must be phase ids", path=path, where="phase_labels") from None
    if isinstance(raw, list):
        return {i: str(v) for i, v in enumerate(raw)}
    raise InputError(f"must be an object or a list, got {type(raw).__name__}", path=path, where="phase_labels")


def _repeat(raw: Any, phase_ids: set[int], path: str) -> Repeat | None:
    if raw is None:
        return None
    where = "placer.repeat"
    if not isinstance(raw, dict) or not isinstance(raw.get("phases"), list):
        raise InputError("must be {phases: [...], iterations: N}", path=path, where=where)
    iters = raw.get("iterations")
    if not _is_int(iters) or not 1 <= iters <= MAX_ITERATIONS:
        raise InputError(f"iterations must be an integer in 1..{MAX_ITERATIONS:,}, got {iters!r}", path=path,
                         where=where)
    if len(set(map(repr, raw["phases"]))) != len(raw["phases"]):
        raise InputError(f"lists a phase twice: {raw['phases'][:20]!r}", path=path, where=f"{where}.phases")
    for p in raw["phases"]:
        if not _is_int(p) or p not in phase_ids:
            raise InputError(f"phase {p!r} is not a phase of this capture", path=path, where=f"{where}.phases")
    return Repeat(tuple(int(p) for p in raw["phases"]), int(iters))


def _allocations(raw: Any, tiles: int, path: str) -> Allocations:
    if raw is None:
        return Allocations.empty()
    where = "placer.allocations"
    if not isinstance(raw, list):
        raise InputError("must be a list", path=path, where=where)
    fast = _allocations_fast(raw, tiles)
    if fast is not None:
        return fast
    cols: dict[str, list[int]] = {k: [] for k in _ALLOCATION_KEYS}
    names = []
    for i, a in enumerate(raw):
        if not isinstance(a, dict):
            raise InputError("must be an object", path=path, where=f"{where}[{i}]")
        for key, col in cols.items():
            v = a.get(key)
            if not _is_int(v) or not 0 <= v <= _ALLOCATION_MAX[key]:
                raise InputError(f"field '{key}' must be an integer in 0..{_ALLOCATION_MAX[key]:,}, got {v!r}",
                                 path=path, where=f"{where}[{i}]")
            col.append(v)
        if a["tile"] >= tiles:
            raise InputError(f"field 'tile' = {a['tile']} is outside 0..{tiles - 1}", path=path, where=f"{where}[{i}]")
        if a["end"] <= a["start"] or a["last"] < a["first"]:
            raise InputError(f"empty range or lifetime: {a!r}", path=path, where=f"{where}[{i}]")
        names.append(str(a.get("name", "")))
    return Allocations(
        tile=np.array(cols["tile"], np.int32),
        start=np.array(cols["start"], np.int64),
        end=np.array(cols["end"], np.int64),
        first=np.array(cols["first"], np.int64),
        last=np.array(cols["last"], np.int64),
        name=names,
    )


_ALLOCATION_KEYS = ("tile", "start", "end", "first", "last")
# a tile's addresses are 32 bits (an end may be 2^32); phases are numbered like the capture's (below 2^31)
_ALLOCATION_MAX = {"tile": 2**31 - 1, "start": 2**32, "end": 2**32, "first": 2**31 - 1, "last": 2**31 - 1}


def _allocations_fast(raw: list[Any], tiles: int) -> Allocations | None:
    """The allocations column-wise (90k of them in a batch-two SigLIP capture: a third of the loop's time), or
    ``None`` if any is not exactly what the loop above accepts; the loop then names the first bad one."""
    try:
        cols = {k: [a[k] for a in raw] for k in _ALLOCATION_KEYS}
    except (KeyError, TypeError, IndexError):  # not an object, or a field missing
        return None
    if any(c and set(map(type, c)) != {int} for c in cols.values()):  # exact ints only (no bool, no float)
        return None
    try:
        tile, start, end, first, last = (np.array(cols[k], np.int64) for k in _ALLOCATION_KEYS)
    except OverflowError:
        return None
    if raw and not ((tile >= 0).all() and (tile < tiles).all() and (start >= 0).all() and (end > start).all()
                    and (end <= _ALLOCATION_MAX["end"]).all() and (first >= 0).all() and (last >= first).all()
                    and (last <= _ALLOCATION_MAX["last"]).all()):
        return None
    return Allocations(tile=tile.astype(np.int32), start=start, end=end, first=first, last=last,
                       name=[str(a.get("name", "")) for a in raw])


def _panels(raw: Any, path: str) -> list[PanelHint]:
    if raw is None:
        return []
    where = "placer.panels"
    if not isinstance(raw, list):
        raise InputError("must be a list", path=path, where=where)
    out = []
    for i, p in enumerate(raw):
        try:
            splits = p.get("splits", True)
            if not isinstance(splits, bool):
                raise TypeError
            bounds = tuple(int(b) for b in p.get("boundaries", [] if splits is False else None))
            hint = PanelHint(int(p["phase"]), tuple(sorted(int(t) for t in p["tiles"])), bounds,
                             str(p.get("operand", "")), splits)
        except (KeyError, TypeError, ValueError, AttributeError):
            raise InputError("must be {phase, tiles, boundaries[, operand][, splits]}", path=path,
                             where=f"{where}[{i}]") from None
        if not splits and not bounds:
            out.append(hint)
            continue
        if len(bounds) < 2 or bounds[0] != 0 or any(b <= a for a, b in itertools.pairwise(bounds)):
            raise InputError(f"boundaries must rise strictly from 0, got {list(bounds)[:6]}", path=path,
                             where=f"{where}[{i}]")
        out.append(hint)
    return out


def capture_to_json(capture: Capture) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "schema_version": capture.schema_version,
        "tile_count": capture.tile_count,
        "phases": [phase_to_json(p) for p in capture.phases],
    }
    if capture.phase_labels is not None:
        doc["phase_labels"] = {str(k): v for k, v in capture.phase_labels.items()}
    if capture.phase_traffic is not None:
        doc["phase_traffic"] = capture.phase_traffic
    ext: dict[str, Any] = {}
    if capture.repeat is not None:
        ext["repeat"] = {"phases": list(capture.repeat.phases), "iterations": capture.repeat.iterations}
    a = capture.allocations
    if len(a):
        ext["allocations"] = [
            {"tile": t, "start": s, "end": e, "first": f, "last": la, **({"name": nm} if nm else {})}
            for t, s, e, f, la, nm in zip(a.tile.tolist(), a.start.tolist(), a.end.tolist(), a.first.tolist(),
                                          a.last.tolist(), a.name or [""] * len(a), strict=True)
        ]
    if capture.panels:
        ext["panels"] = [
            {"phase": h.phase, "tiles": list(h.tiles), "boundaries": list(h.boundaries),
             **({"operand": h.operand} if h.operand else {}), **({} if h.splits else {"splits": False})}
            for h in capture.panels
        ]
    if ext:
        doc["placer"] = {"version": EXTENSION_VERSION, **ext}
    doc.update(capture.extra)
    return doc


def phase_to_json(p: Phase) -> dict[str, Any]:
    src = p.src_addr.tolist()
    sp = p.src_ptr.tolist()
    dt = p.dst_tile.tolist()
    da = p.dst_addr.tolist()
    dp = p.dst_ptr.tolist()
    transfers = [
        {
            "source": s,
            "source_addresses": src[sp[i] : sp[i + 1]],
            "destinations": [{"tile": dt[j], "address": da[j]} for j in range(dp[i], dp[i + 1])],
            "words": w,
            "width": WIDTH_NAMES[wd],
        }
        for i, (s, w, wd) in enumerate(zip(p.source.tolist(), p.words.tolist(), p.width.tolist(), strict=True))
    ]
    return {"phase": p.phase, "transfers": transfers, **p.extra}
