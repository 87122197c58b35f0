"""The ``placer`` command line. Each stage keeps its own command function; this module only wires them up.

Exit codes (stable, for scripts): 0 success; 1 a checked plan is invalid; 2 unreadable or malformed input;
3 proved infeasible; 4 no solution in time, or the fallback plan breaks the budget.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup

import placer
from placer import __version__
from placer.errors import InputError

# Command name -> (module, function). A command's module (and with it ortools, networkx, numpy, ...) is imported
# only when that command runs or shows its own help, so `placer --version` and `placer --help` start in a blink;
# the listing's one-line help is read from the function's docstring in the source, without importing it.
COMMANDS: dict[str, tuple[str, str]] = {
    "generate": ("placer.workloads.cli", "generate"),
    "inspect": ("placer.report.inspect", "inspect"),
    "solve": ("placer.selection.cli", "solve"),
    "compare": ("placer.selection.cli", "compare"),
    "validate": ("placer.validation.cli", "validate_command"),
    "place": ("placer.placement.cli", "place"),
    "schedule": ("placer.ordering.cli", "schedule"),
    "report": ("placer.report.cli", "report"),
    "sweep": ("placer.sweep.cli", "sweep"),
}


def short_help(name: str) -> str:
    """The first paragraph of the command function's docstring, parsed from its source file (not imported)."""
    module, attr = COMMANDS[name]
    path = Path(__file__).parent.joinpath(*module.split(".")[1:]).with_suffix(".py")
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef) and node.name == attr:
            doc = ast.get_docstring(node) or ""
            return " ".join(doc.split("\n\n")[0].split())
    return ""


def load_command(name: str) -> TyperCommand:
    """The click command of ``name``, importing its module now."""
    module, attr = COMMANDS[name]
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    single.command(name)(getattr(importlib.import_module(module), attr))
    return typer.main.get_command(single)


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
    placer.CONSOLE = True  # a console command's clock starts when placer is imported, not when the command runs
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
