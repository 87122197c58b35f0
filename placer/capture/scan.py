"""The capture reader: stream the file through the compiled scanner (:mod:`placer.capture._scan`), decompressing
while it parses.

Reading a batch-two SigLIP capture (900 MB of JSON, 64 MB gzipped) with orjson alone takes about a minute and 10 GB
(docs/native.md): every transfer becomes a Python dict first. Here the compressed file is inflated in 4 MB pieces
by a second thread (zlib releases the GIL) while the C++ scanner parses the previous piece (it releases the GIL
too), so on two cores the load costs about the decompression alone; neither the file nor its decompressed text is
ever held whole (peak memory: the columns and a few pieces in flight).

The scanner returns the text outside the ``"transfers"`` arrays with each array replaced by a marker (orjson
parses that small remainder and confirms every cut was ``phases[k].transfers``) and each phase's final numpy
columns, already range-checked against every limit that does not depend on the tile count (it keeps the largest
tile instead). It accepts only a strict subset of JSON (``_scan.cpp`` lists it) and declines anything else; so
does this module on any doubt about the gzip stream. The caller then reads the file the ordinary way
(:func:`placer.fileio.read_bytes`, orjson), which names the error or accepts the unusual-but-valid file, so
messages are exactly those of the orjson path.
"""

from __future__ import annotations

import os
import queue
import threading
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt
import orjson

from placer import native
from placer.capture import _scan
from placer.fileio import InflationGuard, InputLimits, regular_file

native.require(_scan)

_PIECE_IN = 256 << 10  # compressed bytes per zlib call: small, so the unconsumed tail copied back stays small
_PIECE_OUT = 4 << 20  # decompressed bytes per piece: the scanner reads it while it is still in cache
_PLAIN_PIECE = 8 << 20  # bytes per read of an uncompressed file
_IN_FLIGHT = 4  # pieces queued between the two threads: bounds memory, and a few absorb jitter


@dataclass
class Limits:
    """The per-transfer limits the scanner checks (io.py owns the values)."""

    max_tiles: int
    max_words: int
    address_limit: int
    align: int
    word_bytes: int


# one phase's columns with a Phase's dtypes: source, words, width, src_ptr, src_addr, dst_ptr, dst_tile, dst_addr
PhaseColumns: TypeAlias = tuple[npt.NDArray[np.int32], npt.NDArray[np.int32], npt.NDArray[np.uint8],
                                npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64],
                                npt.NDArray[np.int32], npt.NDArray[np.int64]]


@dataclass
class NativeSplit:
    """The document without its transfers (each phase's ``transfers`` is ``[]``) and each phase's final columns:
    ``(source, words, width, src_ptr, src_addr, dst_ptr, dst_tile, dst_addr)`` with a Phase's dtypes (int32,
    int32, uint8, int64, int64, int64, int32, int64). They are valid only if every tile is below the tile count
    (``max_tile``, -1 with no transfer) and ``bad`` is false."""

    doc: Any
    columns: list[PhaseColumns]
    max_tile: int
    bad: bool


class _Decline(Exception):
    """The scanner is not sure; the caller reads the file the ordinary way."""


def scan_bytes(raw: bytes, limits: Limits) -> NativeSplit | None:
    """Scan a whole capture already in memory, or ``None`` if unsure."""
    return _scan_pieces(iter([raw]), limits)


def scan_file(path: str | Path, limits: Limits) -> NativeSplit | None:
    """Scan a capture file (gzipped when its name ends in ``.gz`` or it starts with gzip's magic bytes, as
    :func:`placer.fileio.read_bytes` decides), or ``None`` if unsure or unreadable."""
    p = Path(path)
    size = regular_file(p)  # a device or FIFO is refused before a byte is read: it may never end
    bounds = InputLimits.from_env()
    if size > bounds.max_bytes:
        return None  # read_bytes refuses it in its own words
    try:
        with open(p, "rb") as f:
            head = f.read(2)
            first = [head]

            def read(size: int) -> bytes:  # the file from its start (the two bytes already read first)
                return first.pop() if first else f.read(size)

            # read and parse piece by piece, never holding the whole text (nor the whole compressed file)
            if p.suffix == ".gz" or head == b"\x1f\x8b":
                return _scan_gzip(read, limits, InflationGuard(p, size, bounds))
            return _scan_pieces(iter(lambda: read(_PLAIN_PIECE), b""), limits)
    except OSError:
        return None


def _scan_pieces(pieces: Iterator[bytes], limits: Limits) -> NativeSplit | None:
    nonce = "x" + os.urandom(16).hex()  # unguessable, so no marker can come from the file itself
    scanner = _scan.Scanner(nonce=nonce.encode(), max_tiles=limits.max_tiles, max_words=limits.max_words,
                            address_limit=limits.address_limit, align=limits.align, word_bytes=limits.word_bytes)
    # the last piece is fed with final=True, so one piece is held back until the next one (or the end) is seen
    prev: bytes | None = None
    for piece in pieces:
        if prev is not None and not scanner.feed(prev):
            return None
        prev = piece
    if not scanner.feed(prev if prev is not None else b"", final=True):
        return None
    rest, regions, max_tile, bad = scanner.finish()
    try:
        doc = orjson.loads(rest)
    except orjson.JSONDecodeError:
        return None
    del rest
    if not _markers_ok(doc, nonce, len(regions)):
        return None
    columns: list[PhaseColumns] = list(regions)
    return NativeSplit(doc, columns, max_tile, bad)


def _markers_ok(doc: Any, marker: str, count: int) -> bool:
    """Every cut must be exactly ``phases[k].transfers``, in order, and every phase must have been cut; the
    markers are then replaced by empty lists."""
    phases = doc.get("phases") if isinstance(doc, dict) else None
    if not isinstance(phases, list) or len(phases) != count:
        return False
    for k, ph in enumerate(phases):
        if not isinstance(ph, dict) or ph.get("transfers") != [marker, k]:
            return False
        ph["transfers"] = []
    return True


def _scan_gzip(read: Callable[[int], bytes], limits: Limits, guard: InflationGuard) -> NativeSplit | None:
    """Read and inflate the gzip stream on a second thread while this one scans, a bounded queue between them;
    ``guard`` refuses a stream that inflates past the input limits (its InputError reaches the caller)."""
    q: queue.Queue[bytes | BaseException | None] = queue.Queue(_IN_FLIGHT)
    stop = threading.Event()

    def produce() -> None:
        try:
            for piece in _inflate(read):
                guard.add(len(piece))
                while not stop.is_set():
                    try:
                        q.put(piece, timeout=0.05)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            item: bytes | BaseException | None = None
        except BaseException as exc:  # a zlib error, _Decline or OSError declines; others are re-raised by the reader
            item = exc
        while not stop.is_set():
            try:
                q.put(item, timeout=0.05)
                return
            except queue.Full:
                continue

    failure: list[BaseException] = []

    def consume() -> Iterator[bytes]:
        while True:
            item = q.get()
            if item is None:
                return
            if isinstance(item, bytes):
                yield item
                continue
            failure.append(item)
            return

    worker = threading.Thread(target=produce, name="capture-inflate", daemon=True)
    worker.start()
    try:
        split = _scan_pieces(consume(), limits)
    finally:
        stop.set()
        worker.join()
    if failure:
        if isinstance(failure[0], zlib.error | _Decline | OSError):
            return None  # read_bytes reports the gzip error in its own words
        raise failure[0]
    return split


def _inflate(read: Callable[[int], bytes]) -> Iterator[bytes]:
    """The decompressed pieces of the gzip stream that ``read`` returns (at most the given number of bytes per
    call, ``b""`` at the end), of one or more members as :func:`gzip.decompress` reads it (zero bytes between and
    after members are skipped); raises :class:`_Decline` if the stream is truncated."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = b""  # compressed bytes read but not yet given to d
    while True:
        if d.eof:  # a member ended: padding, then the next member or the end
            pending = d.unused_data + pending
            while not (pending := pending.lstrip(b"\0")):
                pending = read(_PIECE_IN)
                if not pending:
                    return
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        if d.unconsumed_tail:
            src = d.unconsumed_tail
        else:
            src, pending = pending or read(_PIECE_IN), b""
            if not src:
                tail = d.flush()
                if tail:
                    yield tail
                if not d.eof:
                    raise _Decline  # truncated
                return
        out = d.decompress(src, _PIECE_OUT)
        if out:
            yield out
