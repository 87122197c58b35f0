"""The ``placer`` command line. Each stage keeps its own command function; this module only wires them up.

Exit codes (stable, for scripts): 0 success; 1 a checked plan is invalid; 2 unreadable or malformed input;
3 proved infeasible; 4 no solution in time, or the fallback plan breaks the budget.
"""

from __future__ import annotations

import sys

import typer

from placer import IMPORTED, __version__, solver
from placer.errors import InputError
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
    solver.COMMAND_START = IMPORTED  # the console command's clock starts with the interpreter, not the command
    try:
        code = app(standalone_mode=False)
    except InputError as exc:
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # click usage errors carry their own exit code and message
        import click

        if isinstance(exc, click.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
