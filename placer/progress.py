"""Progress of long steps: one protocol every stage reports to, one display chosen by the command line.

A stage names its step and says how far it is; it never decides how that is shown. It reports to the *current*
progress (like a logger): ``with progress.task("scan groups", total=64) as t: ... t.advance()``, or
``for phase in progress.track(phases, "scan groups"): ...``, or hands ``t.solver`` to CP-SAT as its callback. The
command line installs the display once (:func:`install`):

- on a terminal: a live display (rich), one line per running step with a bar when the total is known, the solver's
  objective and bound, and one finished line per step;
- otherwise (a pipe, a log file, CI): plain newline-terminated lines, each starting with a ``HH:MM:SS`` timestamp,
  never a carriage return: a line when a step finishes, and at most one line every few seconds while it runs;
- ``-q``: nothing.

A solver's news (a new objective or bound) has one signature everywhere, :data:`SolverCallback` -- what
:meth:`Task.solver` takes and what every stage's ``progress=`` argument accepts.

Library use (no :func:`install`) is silent. The current progress is a context variable, so a thread started by a
stage keeps reporting only if the stage hands it a :class:`Task` explicitly (CP-SAT's callback threads do, through
``Task.solver``).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from typing import Any, Protocol, TextIO, TypeVar

T = TypeVar("T")

PLAIN_INTERVAL = 2.0  # seconds between two plain lines of one running step
TIMESTAMP = "%H:%M:%S"
# Steps shorter than this leave no line: a log should show the long steps, not every quick one. The environment
# variable PLACER_PROGRESS_SECONDS changes it (0 shows every step, e.g. to test the format).
LONG_STEP = 2.0


def long_step() -> float:
    try:
        return max(0.0, float(os.environ.get("PLACER_PROGRESS_SECONDS", LONG_STEP)))
    except ValueError:
        return LONG_STEP


SolverCallback = Callable[[float, float | None, float | None], None]
"""Called with (elapsed seconds, objective, bound) whenever a solver improves either (``None``: not known)."""


def both(first: SolverCallback, extra: SolverCallback | None) -> SolverCallback:
    """One callback that tells ``first`` (e.g. the display's :meth:`Task.solver`) and then ``extra`` (the caller's
    own, when it gave one)."""
    if extra is None:
        return first

    def call(elapsed: float, objective: float | None, bound: float | None) -> None:
        first(elapsed, objective, bound)
        extra(elapsed, objective, bound)

    return call


class Task(Protocol):
    """One running step."""

    def advance(self, steps: int = 1, detail: str = "") -> None:
        """``steps`` more units done (0: news without a unit); ``detail`` (optional) says what is going on."""

    def update(self, detail: str) -> None:
        """Set the text the step's next line shows (e.g. its result, for the line that closes it); in a log it
        makes no line of its own."""

    def solver(self, elapsed: float, objective: float | None, bound: float | None) -> None:
        """CP-SAT's callback (:data:`SolverCallback`): a new objective and/or bound."""


class Progress(Protocol):
    """Where every stage reports its long steps."""

    def task(self, name: str, total: int | None = None, unit: str = "") -> AbstractContextManager[Task]:
        """A step called ``name``, of ``total`` units of ``unit`` (e.g. "phases") when known."""


# --- the shared bookkeeping of a step; the displays differ only in how they show it


class _Step:
    def __init__(self, sink: _Sink, name: str, total: int | None, unit: str) -> None:
        self.sink = sink
        self.name = name
        self.total = total
        self.unit = unit
        self.done = 0
        self.detail = ""
        self.start = time.perf_counter()
        self.lock = threading.Lock()

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def advance(self, steps: int = 1, detail: str = "") -> None:
        with self.lock:
            self.done += steps
            if detail:
                self.detail = detail
        self.sink.changed(self)

    def update(self, detail: str) -> None:
        with self.lock:
            self.detail = detail
        self.sink.changed(self, news=False)

    def solver(self, elapsed: float, objective: float | None, bound: float | None) -> None:  # noqa: ARG002 - protocol
        with self.lock:
            old_obj, old_bound = _parse_solver(self.detail)
            obj = objective if objective is not None else old_obj
            bnd = bound if bound is not None else old_bound
            self.detail = solver_detail(obj, bnd)
        self.sink.changed(self)

    def counted(self) -> str:
        if self.total is None:
            return f"{self.done:,} {self.unit}".strip() if self.done else ""
        return f"{self.done:,}/{self.total:,} {self.unit}".strip()


def solver_detail(objective: float | None, bound: float | None) -> str:
    """How a solver's state reads everywhere: ``objective 1,234 bound 1,200 (gap 2.76%)``."""
    parts = [f"objective {_num(objective)}", f"bound {_num(bound)}"]
    if objective is not None and bound is not None and objective != 0:
        parts.append(f"(gap {max(0.0, (objective - bound) / abs(objective)):.2%})")
    return " ".join(parts)


def _parse_solver(detail: str) -> tuple[float | None, float | None]:
    words = detail.split()
    values: dict[str, float | None] = {"objective": None, "bound": None}
    for key in values:
        if key in words:
            text = words[words.index(key) + 1].replace(",", "")
            values[key] = None if text == "-" else float(text)
    return values["objective"], values["bound"]


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:,.0f}" if float(x).is_integer() else f"{x:,.3f}"


class _Sink:
    def begin(self, step: _Step) -> None:
        pass

    def changed(self, step: _Step, news: bool = True) -> None:
        pass

    def end(self, step: _Step, failed: bool) -> None:
        pass


class _Reporter:
    """A :class:`Progress` that keeps the steps' state and tells its sink."""

    def __init__(self, sink: _Sink) -> None:
        self.sink = sink

    @contextmanager
    def task(self, name: str, total: int | None = None, unit: str = "") -> Iterator[Task]:
        step = _Step(self.sink, name, total, unit)
        self.sink.begin(step)
        failed = True
        try:
            yield step
            failed = False
        finally:
            self.sink.end(step, failed)


class _Plain(_Sink):
    """Timestamped lines for logs: never a carriage return, at most one line per step every PLAIN_INTERVAL s."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream
        self.last: dict[int, float] = {}
        self.shown: set[int] = set()
        self.lock = threading.Lock()
        self.threshold = long_step()

    def _write(self, text: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr
        with self.lock:
            stream.write(f"{time.strftime(TIMESTAMP)} {text}\n")
            stream.flush()

    def begin(self, step: _Step) -> None:
        self.last[id(step)] = step.start

    def changed(self, step: _Step, news: bool = True) -> None:
        now = time.perf_counter()
        if not news or now - step.start < self.threshold or now - self.last.get(id(step), step.start) < PLAIN_INTERVAL:
            return
        self.last[id(step)] = now
        self.shown.add(id(step))
        self._write(f"{step.name}: " + ", ".join(x for x in (step.counted(), step.detail, f"{step.elapsed:.1f} s")
                                                 if x))

    def end(self, step: _Step, failed: bool) -> None:
        self.last.pop(id(step), None)
        # a short step that failed leaves no line either: the command reports the error itself, on one line
        if step.elapsed < self.threshold and id(step) not in self.shown:
            return
        self.shown.discard(id(step))
        what = "stopped" if failed else "done"
        self._write(f"{step.name}: {what} in {step.elapsed:.1f} s" + (f", {step.detail}" if step.detail else ""))


class _Live(_Sink):
    """rich's live display on a terminal; a finished step leaves one line above it."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as RichProgress

        self.console = Console(stderr=True)
        self.rich = RichProgress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
                                 TextColumn("{task.fields[count]}"), TimeElapsedColumn(),
                                 TextColumn("{task.fields[detail]}"),
                                 console=self.console, transient=True, refresh_per_second=8)
        self.ids: dict[int, Any] = {}
        self.lock = threading.Lock()
        self.threshold = long_step()

    def begin(self, step: _Step) -> None:
        from rich.markup import escape

        with self.lock:
            if not self.ids:
                self.rich.start()
            self.ids[id(step)] = self.rich.add_task(escape(step.name), total=step.total, detail="",
                                                     count=step.counted())

    def changed(self, step: _Step, news: bool = True) -> None:  # noqa: ARG002 - the sink protocol's signature
        from rich.markup import escape

        task_id = self.ids.get(id(step))
        if task_id is not None:
            self.rich.update(task_id, completed=step.done, detail=escape(step.detail), count=step.counted())

    def end(self, step: _Step, failed: bool) -> None:
        from rich.markup import escape

        with self.lock:
            task_id = self.ids.pop(id(step), None)
            if task_id is not None:
                self.rich.remove_task(task_id)
            if step.elapsed >= self.threshold:
                mark = "[red]✗[/red]" if failed else "[green]✓[/green]"
                detail = ", ".join(x for x in (step.counted(), step.detail) if x)
                self.console.print(f"{mark} {escape(step.name)}  {step.elapsed:.1f} s"
                                   + (f"  {escape(detail)}" if detail else ""), highlight=False, soft_wrap=True)
            if not self.ids:
                self.rich.stop()


SILENT: Progress = _Reporter(_Sink())
_current: ContextVar[Progress] = ContextVar("placer_progress", default=SILENT)


def plain(stream: TextIO | None = None) -> Progress:
    """Timestamped lines on ``stream`` (default: the current ``sys.stderr``)."""
    return _Reporter(_Plain(stream))


def live() -> Progress:
    return _Reporter(_Live())


def install(quiet: bool = False) -> Progress:
    """Choose the display for this command: nothing when ``quiet``, rich on a terminal, plain lines otherwise."""
    chosen = SILENT if quiet else (live() if sys.stderr.isatty() else plain())
    _current.set(chosen)
    return chosen


@contextmanager
def using(progress: Progress) -> Iterator[Progress]:
    """Report to ``progress`` inside the block (tests, embedding)."""
    token = _current.set(progress)
    try:
        yield progress
    finally:
        _current.reset(token)


def current() -> Progress:
    return _current.get()


def task(name: str, total: int | None = None, unit: str = "") -> AbstractContextManager[Task]:
    """A step of the current progress (see :class:`Progress.task`)."""
    return current().task(name, total, unit)


def track(items: Iterable[T], name: str, total: int | None = None, unit: str = "") -> Iterator[T]:
    """Iterate ``items``, one unit of the step ``name`` per item."""
    if total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    with task(name, total, unit) as t:
        try:
            for item in items:
                yield item
                t.advance()
        except GeneratorExit:  # the caller stopped early on purpose: the step is done, not failed
            return
