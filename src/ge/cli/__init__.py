"""The `ge` command: the click group `cli` and `main` (`ge.cli.command_line`), and its
sub-commands in modules of their own.

Light on purpose: `ge.cli.process_exit`, the console script's target, is in this package,
and what a package imports comes before the first line of its module, where the command
starts holding SIGINT and SIGTERM (`ge._signals`): a Ctrl-C while this imported click
printed a traceback (trial D). `cli` and `main` are imported when first asked for.
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing not imported either)
if TYPE_CHECKING:
    from typing import Any

    from ge.cli.command_line import cli, main

__all__ = ["cli", "main"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ge.cli import command_line

        return getattr(command_line, name)
    raise AttributeError(f"module 'ge.cli' has no attribute {name!r}")
