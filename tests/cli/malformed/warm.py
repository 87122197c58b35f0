"""A warm ``placer``: one interpreter imports every placer module once, then forks a child per command line.

Run as a script, ``python warm.py WORKERS``, with one JSON job per stdin line: ``argv``, ``cwd``, and the files
``stdout`` and ``stderr`` that keep what the child writes to its standard streams (pipes, as ``subprocess.run``
gives them). Once every child has ended it prints one JSON line per job, ``{"id", "code"}``.

Each child is a process of its own that runs what the ``placer`` console script runs, ``sys.exit(main())`` with
``sys.argv[0] == "placer"``, standard input from /dev/null and the command's clock started at the fork, and ends
as the interpreter ends a process (``_exit_code``). What the fork saves is the interpreter's start-up, the imports
and the teardown: about 0.4 CPU seconds of each of the ~170 malformed-input cases. The same cases also run
through the installed console script in fresh interpreters, in the slow suite (``test_malformed.py``).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import pkgutil
import selectors
import signal
import sys
import threading
import time
import traceback
from typing import Any, NoReturn

WORKERS = int(sys.argv[1]) if len(sys.argv) > 1 else 2
CHILD_SECONDS = 300  # as the console-script variant's subprocess timeout
sys.argv = ["placer"]  # before placer's first import: startup.py installs the command line's early handlers

import placer  # noqa: E402
from placer import clock  # noqa: E402
from placer.cli import main  # noqa: E402

# what the commands import on first use (typer's option parsing, CP-SAT), besides placer's own modules
LIBRARIES = ("typer._adapters", "typer._click.decorators", "pydantic", "pydantic.fields", "pydantic.types",
             "pydantic._internal._validators", "annotated_types", "ortools.sat.python.cp_model")


def _preload() -> None:
    for mod in pkgutil.walk_packages(placer.__path__, "placer."):
        if not mod.name.endswith("__main__"):  # placer.cli.__main__ would run the command line
            importlib.import_module(mod.name)
    for name in LIBRARIES:
        importlib.import_module(name)


def _child(job: dict[str, Any], out: int, err: int) -> NoReturn:
    os.chdir(job["cwd"])
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, to in ((0, null), (1, out), (2, err)):
        os.dup2(to, fd)
    for fd in (null, out, err):
        os.close(fd)
    # the server read its jobs through sys.stdin: a fresh reader on the new descriptor 0, as a new process has
    sys.stdin = open(0, encoding=sys.stdin.encoding, closefd=False)  # noqa: SIM115 (the interpreter closes it)
    sys.argv = ["placer", *job["argv"]]
    clock.IMPORTED = time.perf_counter()  # the command began now, not when the server imported placer
    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    except BaseException:  # the interpreter's report of an uncaught exception; never back into the server's loop
        traceback.print_exc()
        code = 1
    os._exit(_exit_code(code))


def _exit_code(code: object) -> int:
    """Python's own ending of a process after ``SystemExit(code)`` (non-daemon threads joined, atexit callbacks
    run, the standard streams flushed: 120 when stdout cannot be), short of tearing down every module: that
    teardown touches the whole heap the child shares with the server and would cost most of a start-up again."""
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except Exception as exc:  # what the interpreter reports, and its exit code
        print(f"Exception ignored in: {sys.stdout!r}\n{type(exc).__name__}: {exc}", file=sys.stderr)
        code = 120
    with contextlib.suppress(Exception):  # nowhere left to report it
        sys.stderr.flush()
    return code


def serve(workers: int) -> None:
    _preload()
    jobs = [json.loads(line) for line in sys.stdin if line.strip()]
    running: dict[int, int] = {}
    began: dict[int, float] = {}
    codes: dict[int, int] = {}
    streams = selectors.DefaultSelector()  # the read ends of the running children's stdout and stderr pipes

    def drain(timeout: float | None) -> None:
        for key, _ in streams.select(timeout):
            chunk = os.read(key.fd, 1 << 16)
            if chunk:
                key.data.write(chunk)
            else:
                streams.unregister(key.fd)
                os.close(key.fd)
                key.data.close()

    def reap() -> None:
        for pid, start in began.items():
            if time.monotonic() - start > CHILD_SECONDS:  # a hang: killed, so its case fails with -9
                os.kill(pid, signal.SIGKILL)
        while running:
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
            codes[running.pop(pid)] = os.waitstatus_to_exitcode(status)
            del began[pid]

    for i, job in enumerate(jobs):
        while len(running) >= workers:
            drain(0.02)
            reap()
        pipes = [os.pipe(), os.pipe()]  # standard output and error are pipes, as subprocess.run gives them
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            for key in list(streams.get_map().values()):  # the other children's pipes are not this one's
                os.close(key.fd)
            streams.close()
            for r, _ in pipes:
                os.close(r)
            _child(job, pipes[0][1], pipes[1][1])  # never returns
        running[pid] = i
        began[pid] = time.monotonic()
        for (r, w), stream in zip(pipes, ("stdout", "stderr"), strict=True):
            os.close(w)
            streams.register(r, selectors.EVENT_READ, open(job[stream], "wb", buffering=0))  # noqa: SIM115

    while running or streams.get_map():
        drain(0.02)
        reap()
    for i in range(len(jobs)):
        print(json.dumps({"id": i, "code": codes[i]}))


if __name__ == "__main__":
    serve(WORKERS)
