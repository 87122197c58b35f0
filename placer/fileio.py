"""File helpers shared by every reader and writer: transparent gzip, atomic writes, output-path checks.

Output paths (docs/cli.md): every command checks its output paths with :func:`check_output` before any work, so
a bad ``-o`` is one line and exit 2 before a long solve, never after it. A directory, a device node, a FIFO or a
socket is refused, as is an output that is one of the inputs or another output of the same command. A symbolic
link is written *through*: the file it points to receives the new content (atomically) and the link stays.
Files appear only complete (temporary file in the same directory, then rename); the temporary file is removed on
every error, including SIGINT/SIGTERM (see :mod:`placer.interrupt`).
"""

from __future__ import annotations

import gzip
import os
import stat
import sys
import tempfile
import zlib
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
        except EOFError:
            raise InputError("truncated gzip file (ends before the end of the compressed stream)",
                             path=str(p)) from None
        except (OSError, zlib.error) as exc:
            raise InputError(f"not a valid gzip file ({exc})", path=str(p)) from None
    return raw


def read_text(path: str | Path) -> str:
    """A small UTF-8 text file (machine, params, model files)."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError("no such file", path=str(p)) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", path=str(p)) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=str(p)) from None


def check_output(path: str | Path, flag: str, *, inputs: tuple[str | Path | None, ...] = (),
                 outputs: tuple[tuple[str, str | Path | None], ...] = ()) -> Path:
    """Refuse an output path that cannot or must not be written; return the file to write (a link's target).

    ``inputs`` are the command's input files, ``outputs`` the (flag, path) of its other outputs: writing one of
    them would destroy it or write two results to one file."""
    p = Path(path)
    if not str(path).strip():
        raise InputError("empty output path", where=flag)
    target = Path(os.path.realpath(p))
    where = f"{flag} {p}"
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise InputError("a directory on its path is a file", where=where) from None
    except OSError as exc:
        raise InputError(f"cannot use as output ({exc.strerror})", where=where) from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory; give a file name", where=where)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise InputError("is not a regular file (a device, FIFO or socket); placer writes only regular files",
                         where=where)
    _check_parent(target, where)
    for name in inputs:
        if name is not None and _same_file(target, Path(name)):
            raise InputError(f"is the input {name}; writing it would destroy the input", where=where)
    for other_flag, other in outputs:
        if other is not None and os.path.realpath(other) == str(target):
            raise InputError(f"is also the {other_flag} output; give two different files", where=where)
    return target


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def _check_parent(target: Path, where: str) -> None:
    parent = target.parent
    while not parent.exists():  # atomic_output creates missing directories; the first existing one must allow it
        if parent.is_symlink():
            raise InputError(f"directory {parent} is a dangling link", where=where)
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"{parent} is not a directory", where=where)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"directory {parent} is not writable", where=where)


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
    p = Path(os.path.realpath(path))  # through a symbolic link: the link stays, its target gets the content
    if p.exists() and not p.is_file():  # never replace a directory or a device node by a regular file
        raise InputError("is not a regular file; placer writes only regular files", path=str(path))
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    except OSError as exc:
        raise InputError(f"cannot write ({exc.strerror})", path=str(path)) from None
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
    except OSError as exc:  # disk full, quota, I/O error: nothing half-written is left
        Path(tmp).unlink(missing_ok=True)
        raise InputError(f"cannot write ({exc.strerror or exc})", path=str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so no reader ever sees half a file."""
    with atomic_output(path) as fh:
        fh.write(data)


def atomic_write_text(path: str | Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def json_bytes(obj: Any, *, indent: bool = False) -> bytes:
    """``obj`` as JSON: the one serialiser of every file and every ``--json`` output (orjson; numpy arrays and
    scalars as lists and numbers, non-string keys as strings, ``indent`` two spaces)."""
    opts = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS | (orjson.OPT_INDENT_2 if indent else 0)
    return orjson.dumps(obj, option=opts)


def write_json(path: str | Path, obj: Any, *, indent: int | None = None) -> None:
    """Serialise ``obj`` as JSON and write it atomically (gzip when the name ends in ``.gz``)."""
    atomic_write_bytes(path, json_bytes(obj, indent=bool(indent)))


def print_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON and a newline on standard output (every command's ``--json``)."""
    out = sys.stdout
    out.write(json_bytes(obj, indent=True).decode() + "\n")
    out.flush()
