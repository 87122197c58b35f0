"""File helpers shared by every reader and writer: transparent gzip and atomic writes."""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from placer.errors import InputError


def read_bytes(path: str | Path) -> bytes:
    """Read a file, un-gzipping it when its name ends in ``.gz``."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise InputError("no such file", path=str(p)) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=str(p)) from None
    if p.suffix == ".gz" or raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError as exc:
            raise InputError(f"not a valid gzip file ({exc})", path=str(p)) from None
    return raw


def read_json(path: str | Path) -> Any:
    """Parse JSON (optionally gzipped) with orjson, several times faster than json on large captures."""
    raw = read_bytes(path)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InputError(f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}", path=str(path)) from None


@contextmanager
def atomic_output(path: str | Path) -> Iterator[BinaryIO]:
    """A binary file that appears at ``path`` only once fully written (temporary file, then rename); gzipped
    when the name ends in ``.gz``. On any error nothing is left behind."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as raw:
            if p.suffix == ".gz":
                with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as gz:
                    yield gz  # type: ignore[misc]
            else:
                yield raw
        # mkstemp creates 0600; give the file the permissions an ordinary open() would have
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so no reader ever sees half a file."""
    with atomic_output(path) as fh:
        fh.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def write_json(path: str | Path, obj: Any, *, indent: int | None = None) -> None:
    """Serialise ``obj`` as JSON and write it atomically (gzip when the name ends in ``.gz``)."""
    opts = orjson.OPT_SERIALIZE_NUMPY | (orjson.OPT_INDENT_2 if indent else 0)
    atomic_write_bytes(path, orjson.dumps(obj, option=opts))
