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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from placer.errors import InputError

GIB = 1 << 30
MIB = 1 << 20


@dataclass(frozen=True)
class InputLimits:
    """What placer reads at most (docs/robustness.md, "Limits"). Each has an environment variable that raises it
    for a run that needs more: the message that refuses an input names it."""

    max_bytes: int  # an input's bytes after decompression (PLACER_MAX_INPUT_BYTES)
    max_ratio: int  # a gzip file's decompressed bytes per compressed byte, past RATIO_FLOOR (PLACER_MAX_GZIP_RATIO)
    max_text: int  # a TOML file: machine, run configuration, model, sweep (PLACER_MAX_TEXT_BYTES)
    max_transfers: int  # a capture's transfers (PLACER_MAX_TRANSFERS): 16 times SigLIP So400m's batch-4 layer

    @staticmethod
    def from_env() -> InputLimits:
        def get(name: str, default: int) -> int:
            raw = os.environ.get(name)
            if raw is None:
                return default
            try:
                value = int(raw)
            except ValueError:
                raise InputError(f"must be a positive whole number, got {raw!r}", where=name) from None
            if value <= 0:
                raise InputError(f"must be positive, got {value}", where=name)
            return value

        return InputLimits(get("PLACER_MAX_INPUT_BYTES", 16 * GIB), get("PLACER_MAX_GZIP_RATIO", 200),
                           get("PLACER_MAX_TEXT_BYTES", 4 * MIB), get("PLACER_MAX_TRANSFERS", 100_000_000))


RATIO_FLOOR = 64 * MIB  # below this many decompressed bytes no gzip file is refused for its ratio
_CHUNK = 4 * MIB


def regular_file(path: str | Path) -> int:
    """The size of ``path`` if it is a regular file placer may read; InputError otherwise (missing, a directory,
    a device such as /dev/zero, a FIFO: placer reads regular files only, so no input is endless)."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError("no such file", path=str(p)) from None
    except NotADirectoryError:
        raise InputError("no such file (a directory on its path is a file)", path=str(p)) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=str(p)) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a directory, not a file", path=str(p))
    if not stat.S_ISREG(st.st_mode):
        raise InputError("is not a regular file (a device, FIFO or socket): placer reads regular files only",
                         path=str(p))
    return int(st.st_size)


class InflationGuard:
    """Counts a gzip file's decompressed bytes and refuses it past the limits: its total, and (past RATIO_FLOOR)
    its ratio to the compressed size -- a gzip bomb of a megabyte that inflates to a gigabyte is refused long
    before it is read whole. Real captures compress about 5 to 15 times."""

    def __init__(self, path: str | Path, compressed: int, limits: InputLimits | None = None) -> None:
        self.path, self.compressed = str(path), max(1, compressed)
        self.limits = limits or InputLimits.from_env()
        self.total = 0

    def add(self, nbytes: int) -> None:
        self.total += nbytes
        lim = self.limits
        if self.total > lim.max_bytes:
            raise InputError(f"inflates to more than {lim.max_bytes:,} bytes (the input limit; "
                             "PLACER_MAX_INPUT_BYTES raises it)", path=self.path)
        if self.total > RATIO_FLOOR and self.total > lim.max_ratio * self.compressed:
            raise InputError(f"inflates more than {lim.max_ratio} times ({self.compressed:,} bytes to more than "
                             f"{self.total:,}): not a file placer writes, perhaps a gzip bomb "
                             "(PLACER_MAX_GZIP_RATIO raises the limit)", path=self.path)


def read_bytes(path: str | Path) -> bytes:
    """Read a regular file, un-gzipping it when its name ends in ``.gz`` (or it starts like gzip), within the
    input limits (:class:`InputLimits`)."""
    p = Path(path)
    size = regular_file(p)
    limits = InputLimits.from_env()
    if size > limits.max_bytes:
        raise InputError(f"is {size:,} bytes, more than the input limit of {limits.max_bytes:,} "
                         "(PLACER_MAX_INPUT_BYTES raises it)", path=str(p))
    try:
        with open(p, "rb") as f:
            head = f.read(2)
            if not (p.suffix == ".gz" or head == b"\x1f\x8b"):
                return head + f.read()  # its size is known (regular_file) and within the limit
            return _inflate_file(f, head, InflationGuard(p, size, limits))
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=str(p)) from None


def _inflate_file(f: BinaryIO, head: bytes, guard: InflationGuard) -> bytes:
    """A gzip file's decompressed bytes, member after member as :func:`gzip.decompress` reads them, counted."""
    path = guard.path
    out: list[bytes] = []
    d = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = head
    try:
        while True:
            if d.eof:  # a member ended: zero padding, then the next member or the end
                pending = d.unused_data + pending
                while not (pending := pending.lstrip(b"\0")):
                    pending = f.read(_CHUNK)
                    if not pending:
                        return b"".join(out)
                d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            src = d.unconsumed_tail or pending or f.read(_CHUNK)
            pending = b""
            if not src:
                if not d.eof:
                    raise InputError("truncated gzip file (ends before the end of the compressed stream)",
                                     path=path)
                return b"".join(out)
            piece = d.decompress(src, _CHUNK)
            guard.add(len(piece))
            out.append(piece)
    except zlib.error as exc:
        raise InputError(f"not a valid gzip file ({exc})", path=path) from None


def read_text(path: str | Path) -> str:
    """A small UTF-8 text file (machine, params, model, sweep files), within the text limit."""
    p = Path(path)
    size = regular_file(p)
    limit = InputLimits.from_env().max_text
    if size > limit:
        raise InputError(f"is {size:,} bytes, more than a TOML file may be ({limit:,}; PLACER_MAX_TEXT_BYTES raises "
                         "it)", path=str(p))
    try:
        return p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start})", path=str(p)) from None
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=str(p)) from None


def parse_toml(text: str, where: str) -> dict[str, Any]:
    """A TOML document, or one ``InputError`` line: invalid syntax, or nesting deeper than Python's parser
    recurses (a few hundred levels; no placer file nests more than three)."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"invalid TOML: {exc}", path=where) from None
    except RecursionError:
        raise InputError("invalid TOML: arrays or tables nested hundreds deep (placer's files nest at most three "
                         "levels)", path=where) from None


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
        # the path as given, links followed by the kernel: /dev/stdout into a pipe resolves to a name realpath
        # cannot follow ("pipe:[…]"), but stat sees the pipe
        st = os.stat(p)
    except (FileNotFoundError, NotADirectoryError):
        st = None
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        raise InputError("is not a regular file (a device, FIFO or socket); placer writes only regular files",
                         where=where)
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


def check_output_dir(path: str | Path, flag: str) -> Path:
    """Refuse a folder that files cannot be written into (a file, a device such as /dev/null, a path under a
    file, no write permission) before any work; the folder itself is created when the first file is written."""
    p = Path(path)
    where = f"{flag} {p}"
    if not str(path).strip():
        raise InputError("empty output folder", where=flag)
    try:
        st = p.stat()
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise InputError("a directory on its path is a file", where=where) from None
    except OSError as exc:
        raise InputError(f"cannot use as output folder ({exc.strerror})", where=where) from None
    if st is None:
        _check_parent(Path(os.path.realpath(p)) / "_", where)
    elif not stat.S_ISDIR(st.st_mode):
        raise InputError("exists and is not a folder", where=where)
    elif not os.access(p, os.W_OK | os.X_OK):
        raise InputError("folder is not writable", where=where)
    return p


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
