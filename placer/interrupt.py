"""SIGINT and SIGTERM: stop a CP-SAT search and keep its best answer, or abort cleanly everywhere else.

Outside a solve a signal raises :class:`Interrupted` (a ``BaseException``, so no ``except Exception`` swallows it
and every ``finally`` - e.g. the atomic writer's temp-file cleanup - still runs). Inside :func:`graceful` (a command
that can still report its best-so-far answer, e.g. ``placer solve``) the first signal only records itself and stops
the running CP-SAT searches; every later :func:`solve` returns at once with no solution, so the command finishes
quickly with its incumbent and then asks :func:`received` how to end. A second signal always aborts.

CP-SAT's own SIGINT handler (``catch_sigint_signal``) is switched off by :mod:`placer.solver`: it stops the search
but hides the signal, so the program used to carry on and exit 0. Instead the search runs in a worker thread and the
main thread waits in short joins, where Python delivers signals to the handlers below.
"""

from __future__ import annotations

import _thread
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI installs the handlers at start-up; importing ortools there would slow every command
    from ortools.sat.python import cp_model

from placer.errors import ExitCode

EXIT_CODES = {signal.SIGINT: ExitCode.SIGINT, signal.SIGTERM: ExitCode.SIGTERM}
REDELIVER_POLL = 0.005  # seconds between looks at whether a deferred signal's import is over


class Interrupted(BaseException):
    """A signal arrived; the command stops with exit code ``128 + signal``."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(signal.Signals(self.signum), 128 + self.signum)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


_lock = threading.Lock()
_solvers: set[cp_model.CpSolver] = set()
_state: dict[str, Any] = {"signum": None, "graceful": 0}


def _importing(frame: Any) -> bool:
    """Whether ``frame`` runs inside an import (importlib's frames are on its stack)."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib._bootstrap"):
            return True
        frame = frame.f_back
    return False


def _redeliver(signum: int, main: int | None) -> None:
    """Signal the main thread again once it has left the import it was in (polled: imports take milliseconds)."""
    while main is not None:
        time.sleep(REDELIVER_POLL)
        frame = sys._current_frames().get(main)
        if frame is None:
            return  # the main thread has ended
        if not _importing(frame):
            # a real signal, to the main thread: it also ends a blocking call there (interrupt_main would not)
            signal.pthread_kill(main, signum)
            return


def _handler(signum: int, frame: Any) -> None:
    with _lock:
        first = _state["signum"] is None
        if first:
            _state["signum"] = signum
        soft = first and _state["graceful"] > 0
        for solver in list(_solvers):
            solver.stop_search()
    if soft:
        return
    if _importing(frame):
        # raised inside an import, the exception can run through a native module's initialisation, which does not
        # expect it (orjson's crashed the interpreter with SIGSEGV that way): the signal is kept (``received``
        # has it) and delivered again as soon as the import is over, when it raises
        _thread.start_new_thread(_redeliver, (signum, threading.main_thread().ident))
        return
    raise Interrupted(signum)


def _unraisable(args: Any, previous: Callable[[Any], None] = sys.unraisablehook) -> None:
    # the handler runs between any two bytecodes, also inside a finaliser or a callback whose exceptions Python
    # can only print ("Exception ignored in: ..."): there the signal is raised again, to be handled at the next
    # point where it can end the command. Raised from another thread: raised here, the handler would run again
    # inside this hook (at the next call's check for pending signals); a bare thread does not wait to start
    if isinstance(args.exc_value, Interrupted):
        _thread.start_new_thread(_thread.interrupt_main, (signal.Signals(args.exc_value.signum),))
        return
    previous(args)


def install() -> None:
    """Route SIGINT and SIGTERM to :func:`_handler` (the CLI calls this once, before parsing arguments)."""
    for sig in EXIT_CODES:
        signal.signal(sig, _handler)
    sys.unraisablehook = _unraisable


def received() -> Interrupted | None:
    """The signal that arrived, if any (as the exception the command would end with)."""
    signum = _state["signum"]
    return None if signum is None else Interrupted(signum)


def reset() -> None:
    """Forget a received signal (tests run several commands in one process)."""
    with _lock:
        _state["signum"] = None


@contextmanager
def graceful() -> Iterator[None]:
    """Within this block the first signal stops the searches instead of raising; see the module docstring."""
    with _lock:
        _state["graceful"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["graceful"] -= 1


def solve(solver: cp_model.CpSolver, call: Callable[[], Any]) -> Any:
    """Run ``call`` (a ``solver.solve(...)``) so that a signal can stop it; returns what it returns.

    Without a signal handler installed (library use, tests) the call runs directly in this thread."""
    if signal.getsignal(signal.SIGINT) is not _handler or threading.current_thread() is not threading.main_thread():
        return call()
    with _lock:
        if _state["signum"] is not None:
            # already told to stop: a zero time limit makes this solve end at once (no solution, no proof) while
            # the solver is still a solved one whose statistics the caller may read
            solver.parameters.max_time_in_seconds = 0.0
            solver.parameters.max_deterministic_time = 0.0
        _solvers.add(solver)
    box: dict[str, Any] = {}
    # the search's end, as the worker itself reports it: Thread.join() interrupted by a signal can leave the
    # thread marked as finished while it still runs (CPython's lock handling in join), and a CP-SAT thread left
    # running when the interpreter exits aborts it ("terminate called without an active exception")
    done = threading.Event()

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # re-raised in the main thread
            box["error"] = exc
        finally:
            done.set()

    thread = threading.Thread(target=work, name="cp-sat", daemon=True)
    try:
        thread.start()  # inside the try: a signal right after start() must still stop the search and wait for it
        while not done.wait(0.05):  # signals are delivered between waits
            if _state["signum"] is not None:
                solver.stop_search()  # repeated: a stop sent before the search had started is lost
    except BaseException:
        solver.stop_search()
        while thread.ident is not None and not done.is_set():  # it started: wait until it has really stopped
            with suppress(BaseException):  # a second signal: the search is already told to stop; wait still
                done.wait(0.05)
            solver.stop_search()
        raise
    finally:
        with _lock:
            _solvers.discard(solver)
    if "error" in box:
        raise box["error"]
    return box["value"]
