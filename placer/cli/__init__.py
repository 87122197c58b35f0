"""The ``placer`` command line: the top layer, a thin one over the public API (:mod:`placer.api`).

Each command is a module of this package (``placer.cli.solve``, ``placer.cli.place``, ...): it parses its options,
calls the API and prints or writes the API's result. This module only wires the commands up and turns every way a
command can end into one line and one exit code (:class:`placer.errors.ExitCode`, README).
"""

from __future__ import annotations

import ast
import errno
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

from placer import __version__, clock, interrupt, startup
from placer.allocator import keep_freed_arrays
from placer.errors import EXIT_TABLE, ExitCode, InputError

# Command name -> (module, function). A command's module (and with it ortools, networkx, numpy, ...) is imported
# only when that command runs or shows its own help, so `placer --version` and `placer --help` start in a blink;
# the listing's one-line help is read from the function's docstring in the source, without importing it.
COMMANDS: dict[str, tuple[str, str]] = {
    "generate": ("placer.cli.generate", "generate"),
    "inspect": ("placer.cli.inspect", "inspect"),
    "solve": ("placer.cli.solve", "solve"),
    "compare": ("placer.cli.solve", "compare"),
    "validate": ("placer.cli.validate", "validate_command"),
    "place": ("placer.cli.place", "place"),
    "schedule": ("placer.cli.schedule", "schedule"),
    "report": ("placer.cli.report", "report"),
    "sweep": ("placer.cli.sweep", "sweep"),
}


def short_help(name: str) -> str:
    """The first paragraph of the command function's docstring, parsed from its source file (not imported)."""
    module, attr = COMMANDS[name]
    path = Path(__file__).parents[1].joinpath(*module.split(".")[1:]).with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and node.name == attr:
            doc = ast.get_docstring(node) or ""
            return " ".join(doc.split("\n\n")[0].split())
    return ""


def load_command(name: str) -> TyperCommand:
    """The click command of ``name``, importing its module now."""
    module, attr = COMMANDS[name]
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    single.command(name)(getattr(startup.import_command(module), attr))
    command = typer.main.get_command(single)
    assert isinstance(command, TyperCommand)  # one command, not a group
    return command


class _LazyCommand(TyperCommand):
    """Stands for a command in the group's listing; the real one is built when the command is invoked."""

    def __init__(self, name: str) -> None:
        short = short_help(name)
        super().__init__(name, help=short, short_help=short)

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        assert self.name is not None
        return load_command(self.name).make_context(info_name, args, parent=parent, **extra)


class _LazyGroup(TyperGroup):
    def list_commands(self, ctx: Any) -> list[str]:
        eager = super().list_commands(ctx)
        return [*COMMANDS, *(name for name in eager if name not in COMMANDS)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is None and cmd_name in COMMANDS:
            cmd = _LazyCommand(cmd_name)
        return cmd


app = typer.Typer(
    cls=_LazyGroup,
    rich_markup_mode=None,  # plain help: rich alone would take longer to import than the 0.2 s start-up budget
    name="placer",
    help="Optimise the data-movement plan (relays, SRAM placement, stream order) of a compiled IPU exchange.",
    epilog=EXIT_TABLE,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"placer {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """placer: relays, placement and ordering for tile-array exchange plans."""


def main() -> None:
    """Run the command line; every way it can end maps to one :class:`placer.errors.ExitCode` (no traceback)."""
    clock.CONSOLE = True  # a console command's clock starts when placer is imported, not when the command runs
    try:
        interrupt.install()
        keep_freed_arrays()
        if sys.stdout is None:  # started with standard output closed (`placer ... >&-`): the report would vanish
            code = _fail("standard output is closed: placer prints its report there (send it to /dev/null to "
                         "drop it)", ExitCode.INPUT)
        else:
            code = run(sys.argv[1:])
    except interrupt.Interrupted as exc:  # between the handlers' installation and the command's own handling
        code = _fail(f"interrupted by {exc.name}: stopped; nothing written", exc.exit_code)
    # a signal while the interpreter shuts down ends it with its code, quietly: the command is over
    for sig in interrupt.EXIT_CODES:
        signal.signal(sig, startup.quiet_exit)
    sys.exit(code)



def run(argv: list[str]) -> int:
    """Run ``placer ARGV`` and return its exit code; errors are one line on stderr."""
    try:
        code = app(args=argv, prog_name="placer", standalone_mode=False)
    except InputError as exc:
        return _fail(str(exc), ExitCode.INPUT)
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        return _fail("aborted", ExitCode.SIGINT)
    except interrupt.Interrupted as exc:
        return _fail(f"interrupted by {exc.name}: stopped; nothing written", exc.exit_code)
    except typer.TyperException as exc:  # typer's usage errors (its vendored click): bad option, missing argument
        return _usage_error(exc, argv)
    except MemoryError:
        return _fail("out of memory (the input is too large for this machine)", ExitCode.INPUT)
    except BrokenPipeError:  # `placer ... | head`: the reader has gone; nothing to report to
        _quiet_stdout()
        return ExitCode.BROKEN_PIPE
    except SystemExit as exc:
        # typer's vendored click turns a broken pipe into exit 1 ("invalid" here) after wrapping the streams
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":
            return ExitCode.BROKEN_PIPE
        raise exc
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EBADF):
            # a full disk or device under a write: a file placer writes names itself, standard output does not
            where = exc.filename if exc.filename else "standard output"
            if not exc.filename:
                _quiet_stdout()
            return _fail(f"cannot write to {where} ({exc.strerror})", ExitCode.INPUT)
        if os.environ.get("PLACER_TRACEBACK"):
            traceback.print_exc()
        return _fail(f"internal error: {type(exc).__name__}: {exc} (a bug in placer; PLACER_TRACEBACK=1 shows "
                     "where)", ExitCode.INTERNAL)
    except Exception as exc:  # a bug: one line (the traceback on request), never a silent or misleading code
        if os.environ.get("PLACER_TRACEBACK"):
            traceback.print_exc()
        return _fail(f"internal error: {type(exc).__name__}: {exc} (a bug in placer; PLACER_TRACEBACK=1 shows "
                     "where)", ExitCode.INTERNAL)
    code = code if isinstance(code, int) else 0
    signal = interrupt.received()
    if signal is not None and code not in interrupt.EXIT_CODES.values():
        # a command that let CP-SAT stop early and did not report the interruption itself
        return _fail(f"interrupted by {signal.name}: results above are incomplete", signal.exit_code)
    return code


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so Python's flush at exit does not fail a second time."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def _fail(message: str, code: int) -> int:
    signal = code in (ExitCode.SIGINT, ExitCode.SIGTERM)
    typer.echo(message if signal else f"error: {' '.join(message.split())}", err=True)
    return code


def _usage_error(exc: typer.TyperException, argv: list[str]) -> int:
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:  # its message is the help
        typer.echo(exc.format_message())
        return _fail(f"missing command; `{ctx.command_path} --help` lists them", ExitCode.INPUT)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    code = exc.exit_code if exc.exit_code != 1 else ExitCode.INPUT
    value = _given_value(getattr(exc, "param", None), argv)
    got = f" (got {value!r})" if value is not None else ""
    return _fail(f"{where}{exc.format_message()}{got}", code)


def _given_value(param: Any, argv: list[str]) -> str | None:
    """The text the user gave for an option typer refused (its message does not always repeat it)."""
    for opt in getattr(param, "opts", None) or []:
        for k, arg in enumerate(argv):
            if arg == opt and k + 1 < len(argv):
                return argv[k + 1]
            if arg.startswith(opt + "="):
                return arg[len(opt) + 1:]
    return None

