"""A vectorised writer for large captures: the same JSON as ``placer.capture.io.write_capture``, without a Python
object per transfer.

``write_capture`` builds one dict per transfer and per destination; for a generated batch-two SigLIP capture
(1.6 M transfers, 10 M destinations) that costs about 30 s and several GB. Here each phase is rendered straight to
bytes with numpy: the text is a sequence of (constant, integer) items, the integers' decimal digits are computed
arithmetically and scattered into one byte buffer. Phases are streamed one at a time (gzip at level 1 when the
name ends in ``.gz``) and the file appears atomically.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import orjson

from placer.arrays import isin
from placer.capture.io import capture_to_json
from placer.capture.model import Capture, Phase
from placer.fileio import atomic_output
from placer.progress import track

# item kinds: the constant text written before the item's integer (NONE: constant only)
_CONST = [
    b'{"source":',  # 0  transfer start
    b',"source_addresses":[',  # 1  first source address
    b",",  # 2  further source address / transfer separator
    b'],"destinations":[{"tile":',  # 3  first destination tile
    b',"address":',  # 4  destination address
    b'},{"tile":',  # 5  further destination tile
    b'}],"words":',  # 6  words
    b',"width":"Word32"}',  # 7  transfer end (no integer)
    b',"width":"Paired64"}',  # 8  transfer end (no integer)
    b",",  # 9  separator between transfers (no integer)
]
_NO_INT = {7, 8, 9}
_TABLE = np.zeros((len(_CONST), max(len(c) for c in _CONST)), np.uint8)
for _i, _c in enumerate(_CONST):
    _TABLE[_i, : len(_c)] = np.frombuffer(_c, np.uint8)


def _digits(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n, D) ASCII digits right-aligned in D columns, and the digit count of each non-negative integer."""
    x = x.astype(np.int64)
    top = int(x.max(initial=0))
    width = max(1, len(str(top)))
    pw = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    dig = ((x[:, None] // pw[None, :]) % 10).astype(np.uint8) + ord("0")
    length = np.ones(x.shape[0], np.int64)
    for k in range(1, width):
        length += x >= 10**k
    return dig, length


def render_transfers(p: Phase) -> bytes:
    """The JSON text of a phase's ``transfers`` list alone (``[...]``), as ``phase_to_json`` would give it."""
    text = render_phase(Phase(p.phase, p.source, p.words, p.width, p.src_ptr, p.src_addr, p.dst_ptr, p.dst_tile,
                              p.dst_addr, {}))
    return text[text.index(b'"transfers":') + len(b'"transfers":'): -1]


def render_phase(p: Phase) -> bytes:
    """The JSON text of one phase (``{"phase": id, "transfers": [...]}`` plus any extra keys)."""
    n = p.n
    head = b'{"phase":' + str(p.phase).encode() + b',"transfers":['
    tail = b"]"
    if p.extra:
        tail += b"," + orjson.dumps(p.extra)[1:-1]
    tail += b"}"
    if n == 0:
        return head + tail
    sc = np.diff(p.src_ptr)
    dc = p.fanout
    per = 1 + sc + 2 * dc + 1 + 1 + 1  # source, addresses, (tile, address) pairs, words, end, separator
    per[-1] -= 1  # no separator after the last transfer
    total = int(per.sum())
    start = np.zeros(n + 1, np.int64)
    np.cumsum(per, out=start[1:])
    kind = np.empty(total, np.int8)
    val = np.zeros(total, np.int64)
    s0 = start[:-1]
    kind[s0] = 0
    val[s0] = p.source
    # source addresses
    src_t = np.repeat(np.arange(n), sc)
    src_k = np.arange(src_t.shape[0]) - np.repeat(p.src_ptr[:-1], sc)
    pos = s0[src_t] + 1 + src_k
    kind[pos] = np.where(src_k == 0, 1, 2)
    val[pos] = p.src_addr
    # destinations
    dst_t = p.dst_transfer()
    dst_k = np.arange(dst_t.shape[0]) - np.repeat(p.dst_ptr[:-1], dc)
    pos = s0[dst_t] + 1 + sc[dst_t] + 2 * dst_k
    kind[pos] = np.where(dst_k == 0, 3, 5)
    val[pos] = p.dst_tile
    kind[pos + 1] = 4
    val[pos + 1] = p.dst_addr
    end = s0 + 1 + sc + 2 * dc
    kind[end] = 6
    val[end] = p.words
    kind[end + 1] = np.where(p.width == 1, 8, 7)
    if n > 1:
        kind[end[:-1] + 2] = 9
    # one fixed-width slot per item: the constant (zero padded) then the digits (leading zero bytes); dropping
    # every zero byte leaves the text in order, with no per-item scatter
    has_int = ~isin(kind, list(_NO_INT))
    dig, dlen = _digits(val)
    width = dig.shape[1]
    dig[np.arange(width)[None, :] < (width - dlen)[:, None]] = 0
    dig[~has_int] = 0
    slots = np.concatenate([_TABLE[kind], dig], axis=1)
    out = slots[slots != 0]
    line: bytes = head + out.tobytes() + tail
    return line


def write_capture_fast(capture: Capture, path: str | Path) -> int:
    """Write ``capture`` as JSON (gzip level 1 for ``.gz``) atomically; return the file size in bytes."""
    doc = capture_to_json(capture.with_phases([]))
    text = orjson.dumps(doc)
    marker = b'"phases":[]'
    at = text.index(marker)
    prefix, suffix = text[: at + len(marker) - 1], text[at + len(marker) - 1 :]
    with atomic_output(path) as sink:
        sink.write(prefix)
        for k, phase in enumerate(track(capture.phases, f"write {Path(path).name}", unit="phases")):
            if k:
                sink.write(b",")
            sink.write(render_phase(phase))
        sink.write(suffix)
    return Path(path).stat().st_size


# Seconds per transfer of writing a capture (this writer, gzip level 1), measured on SigLIP b2 (about 6 s per
# million transfers): ``placer solve --write-capture`` holds this much of its time limit back for the write.
WRITE_SECONDS_PER_TRANSFER = 6e-6


def write_seconds(capture: Capture) -> float:
    """About how long writing ``capture`` takes here (:data:`WRITE_SECONDS_PER_TRANSFER` per transfer)."""
    return WRITE_SECONDS_PER_TRANSFER * capture.transfer_count()


__all__ = ["WRITE_SECONDS_PER_TRANSFER", "render_phase", "write_capture", "write_capture_fast", "write_seconds"]


def write_capture(capture: Capture, path: str | Path) -> int:
    """Write a capture (gzipped when the name ends in .gz), atomically, rendered column-wise by numpy; return the
    file size in bytes."""
    return write_capture_fast(capture, path)
