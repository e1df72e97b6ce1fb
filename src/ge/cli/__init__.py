"""The `ge` command: a click group; sub-commands live in their own modules.

Errors of `ge` (GeError) print as one line with their code; `--debug` shows the traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from ge import __version__
from ge.errors import GeError

__all__ = ["cli", "main"]


class _GeGroup(click.Group):
    """A click group that turns a GeError into one clean line unless --debug is given."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GeError as err:
            if ctx.find_root().params.get("debug"):
                raise
            click.echo(f"ge: {err}", err=True)
            ctx.exit(1)


@click.group(cls=_GeGroup)
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.version_option(__version__, prog_name="ge")
def cli(debug: bool) -> None:
    """ge: a graph compiler for ONNX models with GE-style Python pass plugins."""


def _register_commands() -> None:
    from ge.cli.compile import compile_command, dump_command
    from ge.cli.passes import passes

    cli.add_command(passes)
    cli.add_command(compile_command)
    cli.add_command(dump_command)


_register_commands()


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (`ge`)."""
    cli.main(args=list(argv) if argv is not None else None, prog_name="ge")
