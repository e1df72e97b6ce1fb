"""The `ge` command (`ge.cli.cli`, `ge.cli.main`): a click group whose sub-commands live in
their own modules.

`import ge.cli` stays light so that `ge --help` and `ge --version` answer at once: the
sub-command modules (which import onnx, numpy, rich and the compiler) are imported only when
their command runs; `ge --help` lists them from the short help kept here.

Errors of `ge` (GeError) print as one line with their code; `--debug` shows the traceback.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any

import click

from ge import __version__
from ge.errors import GeError

__all__ = ["cli", "main"]

#: name -> (module, attribute, short help shown by `ge --help` without importing the module)
_COMMANDS: dict[str, tuple[str, str, str]] = {
    "compile": ("ge.cli.compile", "compile_command",
                "Compile MODEL with the pass plugins and write the result to OUTPUT."),
    "diff": ("ge.cli.diff", "diff_command",
             "Show the nodes and operators that differ between models A and B."),
    "dump": ("ge.cli.compile", "dump_command", "Print MODEL as text."),
    "inspect": ("ge.cli.inspect", "inspect_command",
                "Show a model's inputs, outputs, opsets, operators and weights."),
    "passes": ("ge.cli.passes", "passes", "Inspect the passes the compiler would run."),
    "run": ("ge.cli.run", "run_command",
            "Run MODEL on inputs (given or generated) and show or save its outputs."),
    "verify": ("ge.cli.verify", "verify_command",
               "Run ORIGINAL and OTHER on the same inputs and compare their outputs."),
}


class _GeGroup(click.Group):
    """Loads sub-commands on first use and turns a GeError into one clean line (unless
    --debug). Commands with `--json` report their errors themselves (`ge.cli.output`)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None or cmd_name not in _COMMANDS:
            return command
        module_name, attribute, _ = _COMMANDS[cmd_name]
        command = getattr(importlib.import_module(module_name), attribute)
        assert isinstance(command, click.Command)
        self.add_command(command, cmd_name)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The short help of lazy commands comes from _COMMANDS: listing them imports nothing.
        rows = []
        for name in self.list_commands(ctx):
            if name in _COMMANDS and name not in self.commands:
                rows.append((name, _COMMANDS[name][2]))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                rows.append((name, command.get_short_help_str(formatter.width)))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        from ge._signals import interrupt_behind

        try:
            return super().invoke(ctx)
        except (KeyboardInterrupt, Exception) as exc:
            debug = ctx.find_root().params.get("debug")
            # a signal, or an error raised from one (native code wrapping it)
            interrupt = exc if isinstance(exc, KeyboardInterrupt) else interrupt_behind(exc)
            if interrupt is None and isinstance(exc, GeError) and not debug:
                from ge.cli.output import one_line

                click.echo(f"ge: {one_line(str(exc))}", err=True)
                ctx.exit(1)
            if interrupt is None:
                raise
            # Before a command's output handling began (while it imports what it needs), or
            # re-raised by it under --debug: ended as the command would, not as click's
            # "Aborted!" with status 1, which a script cannot tell from a failure.
            from ge.cli.output import end_interrupted

            if debug:
                import traceback

                traceback.print_exc()
            end_interrupted("ge", interrupt)


@click.group(cls=_GeGroup)
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.version_option(__version__, prog_name="ge")
def cli(debug: bool) -> None:
    """ge: a graph compiler for ONNX models with GE-style Python pass plugins."""


#: The native modules every command imports (through ge.graph), imported with SIGINT and
#: SIGTERM held before it runs: a signal inside their inits crashed the process or was
#: lost (trial A; `ge._signals.imported_held`).
_NATIVE_MODULES = ("numpy", "onnx")


def _imports_of(args: Sequence[str]) -> tuple[str, ...]:
    """What the command `args` name imports first: the native modules and its own module
    (nothing for `ge --help`, `ge --version` or a name that is no command; its module alone
    for `ge compile --help`, which imported onnx and numpy first: 0.2-0.45 s). The group's
    options take no value, so the first word not starting with `-` is the command."""
    name = next((arg for arg in args if not arg.startswith("-")), None)
    if name not in _COMMANDS:
        return ()
    if "--help" in args:  # (click prints it before the command runs: nothing native)
        return (_COMMANDS[name][0],)
    return (*_NATIVE_MODULES, _COMMANDS[name][0])


def main(argv: Sequence[str] | None = None) -> None:
    """Run the `ge` command line (`argv`, default `sys.argv[1:]`); raises SystemExit with
    its status, as click does. The console script and `python -m ge` run it through
    `ge.cli.process_exit.run`, which also prepares the end of their process."""
    from ge._signals import (
        TERMINATED_STATUS,
        ended_unwritten,
        held_signals,
        imported_held,
        terminated_as_interrupt,
    )

    args = list(argv) if argv is not None else sys.argv[1:]
    imports = _imports_of(args)
    with terminated_as_interrupt() as terminated:
        try:
            imported_held(imports)  # a signal meanwhile: delivered after, here
            if imports:
                cli.main(args=args, prog_name="ge")
            else:  # help, version, usage: a moment, held whole (click read a Ctrl-C in it
                with held_signals():  # as "Aborted!", status 1, or lost it: trial D)
                    cli.main(args=args, prog_name="ge")
        except SystemExit:
            if terminated:
                raise SystemExit(TERMINATED_STATUS) from None
            raise
        except KeyboardInterrupt as interrupt:
            # before a command's own handling (its first moments: the imports of the
            # command line's output, the command's module), or held over a command that
            # writes nothing: nothing was written (trial ZZ saw a traceback)
            raise SystemExit(ended_unwritten("ge", interrupt)) from None
