"""`pyatc`: GE's `atc` command line over `ge.compile`, for scripts written for atc.

    pyatc --model=net.onnx --framework=5 --output=out [--input_shape="x:1,3,224,224"]

`main(args=...)` runs it in this process (`ge.pyatc.command`: the flags, messages and
statuses); `run()` is the console script and `python -m ge.pyatc`, the command as the
process's own (`ge.cli.process_exit.run_command`). Light on purpose: what this package
imports comes before the first line of `run`, where the command starts holding SIGINT and
SIGTERM (a Ctrl-C while it imported argparse printed a traceback: trial D), so the rest is
imported when first asked for.
"""

from __future__ import annotations

TYPE_CHECKING = False  # (typing not imported either)
if TYPE_CHECKING:
    from typing import Any

    from ge.pyatc.command import FRAMEWORK_ONNX, main, parse_input_shape

__all__ = ["FRAMEWORK_ONNX", "main", "parse_input_shape", "run"]


def run() -> None:
    """The `pyatc` console script and `python -m ge.pyatc`: `main()` as the process's own
    command; raises SystemExit with its status."""
    from ge.cli.process_exit import run_command

    def load() -> Any:
        from ge.pyatc.command import main

        return main

    run_command("pyatc", load)


def __getattr__(name: str) -> Any:
    if name in __all__:
        from ge.pyatc import command

        return getattr(command, name)
    raise AttributeError(f"module 'ge.pyatc' has no attribute {name!r}")
