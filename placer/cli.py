"""The ``placer`` command line. Each stage keeps its own command function; this module only wires them up and
turns every way a command can end into one line and one exit code (placer.errors.EXIT_TABLE, README).
"""

from __future__ import annotations

import os
import sys
import traceback

import typer

from placer import IMPORTED, __version__, interrupt, solver
from placer.errors import EXIT_INPUT, EXIT_INTERNAL, EXIT_TABLE, InputError
from placer.ordering.cli import schedule
from placer.placement.cli import place
from placer.report.cli import report
from placer.report.inspect import inspect
from placer.selection.cli import compare, solve
from placer.sweep.cli import sweep
from placer.validation.cli import validate_command
from placer.workloads.cli import generate

app = typer.Typer(
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


app.command("generate")(generate)
app.command("inspect")(inspect)
app.command("solve")(solve)
app.command("compare")(compare)
app.command("validate")(validate_command)
app.command("place")(place)
app.command("schedule")(schedule)
app.command("report")(report)
app.command("sweep")(sweep)


def main() -> None:
    """Run the command line; every way it can end maps to one exit code of :data:`EXIT_CODES` (no traceback)."""
    solver.COMMAND_START = IMPORTED  # the console command's clock starts with the interpreter, not the command
    interrupt.install()
    sys.exit(run(sys.argv[1:]))


def run(argv: list[str]) -> int:
    """Run ``placer ARGV`` and return its exit code; errors are one line on stderr."""
    try:
        code = app(args=argv, prog_name="placer", standalone_mode=False)
    except InputError as exc:
        return _fail(str(exc), EXIT_INPUT)
    except typer.Exit as exc:
        code = exc.exit_code
    except typer.Abort:
        return _fail("aborted", 130)
    except interrupt.Interrupted as exc:
        return _fail(f"interrupted by {exc.name}: stopped; nothing written", exc.exit_code)
    except typer.TyperException as exc:  # typer's usage errors (its vendored click): bad option, missing argument
        return _usage_error(exc)
    except MemoryError:
        return _fail("out of memory (the input is too large for this machine)", EXIT_INPUT)
    except BrokenPipeError:  # `placer ... | head`: the reader has gone; nothing to report to
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - keeps Python's exit-time flush quiet
        return 1
    except Exception as exc:  # a bug: one line (the traceback on request), never a silent or misleading code
        if os.environ.get("PLACER_TRACEBACK"):
            traceback.print_exc()
        return _fail(f"internal error: {type(exc).__name__}: {exc} (a bug in placer; PLACER_TRACEBACK=1 shows "
                     "where)", EXIT_INTERNAL)
    code = code if isinstance(code, int) else 0
    signal = interrupt.received()
    if signal is not None and code not in interrupt.EXIT_CODES.values():
        # a command that let CP-SAT stop early and did not report the interruption itself
        return _fail(f"interrupted by {signal.name}: results above are incomplete", signal.exit_code)
    return code


def _fail(message: str, code: int) -> int:
    typer.echo(f"error: {' '.join(message.split())}" if code != 130 and code != 143 else message, err=True)
    return code


def _usage_error(exc: typer.TyperException) -> int:
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:  # typer has printed the help already
        return _fail(f"missing command; `{ctx.command_path} --help` lists them", EXIT_INPUT)
    where = f"{ctx.command_path}: " if ctx is not None else ""
    code = exc.exit_code if exc.exit_code != 1 else EXIT_INPUT
    return _fail(f"{where}{exc.format_message()}", code)


if __name__ == "__main__":
    main()
