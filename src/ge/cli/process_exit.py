"""The `ge` and `pyatc` commands as processes of their own: the console scripts, `python -m
ge`, `python -m ge.pyatc` (`run_command`).

`run` runs `ge.cli.main` (`ge.pyatc.run`: `ge.pyatc.main`); once the command has ended,
SIGINT and SIGTERM end the process at once with status 130 or 143 and one line saying the
command had already ended. The
command's own handlers are gone by then, and the interpreter's shutdown takes a moment
(0.16-0.18 s after a 100,000-node compile; 0.9-1.0 s before the commands closed their
graphs with `Graph.close`, when the cyclic collector freed the compiled graph there), in which the
default handler ended the process without a word (trial QQ), and an atexit callback that
hangs could not be cut short. Everything of a normal exit happens: atexit callbacks,
finalizers, module teardown (that of the plugin modules unloaded when their compilation
ended too: they are put back in `sys.modules` first), a profiler's report. (Freezing the
collector, `gc.freeze()`, would skip that collection, but also the finalizers of what
plugin modules hold.)

A program calling `ge.cli.main` or `ge.pyatc.main` itself keeps its own signal handlers.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from ge._signals import (
    ENDING_SIGNALS,
    ended_unwritten,
    ending_of,
    ending_word,
    say_after_end,
)

TYPE_CHECKING = False  # (typing not imported: what is imported before the hold, the least)
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import NoReturn

__all__ = ["exit_status", "run", "run_command"]


def exit_status(code: object) -> int:
    """The process status `SystemExit(code)` ends Python with: None is 0, an int itself,
    anything else (a message, which Python prints to stderr) 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1


def run() -> None:
    """Run the `ge` command line (`sys.argv`) as this process's own (see the module
    docstring); raises the command's SystemExit."""

    def load() -> Callable[[], object]:
        from ge.cli.command_line import main

        return main

    run_command("ge", load)


def run_command(prog: str, load: Callable[[], Callable[[], object]]) -> NoReturn:
    """Run command `prog` as this process's own: `load()` imports it (with SIGINT and
    SIGTERM held, from the first line of the process's entry: a signal meanwhile is the
    one line and 130/143 once they are imported), then the command it returns runs (its
    status: what it returns or the SystemExit it raises), then the process's end is
    prepared (`_ending`). From start to end SIGTERM raises `Terminated`: a signal between
    those steps (before the command's own handling began, or as it returned) is one line
    too, never Python's traceback or a silent death by the signal (trial D)."""
    from ge._signals import held_signals, terminated_as_interrupt

    status: int | None = None
    try:
        with terminated_as_interrupt():
            with held_signals():  # (nothing heavy; a signal meanwhile: delivered after it)
                from ge._retired_modules import RETIRED

                command = load()
            with RETIRED.collecting() as unloaded:
                try:
                    try:
                        status = exit_status(command())
                    except SystemExit as exit_:
                        status = exit_status(exit_.code)
                    _ending(prog, status)  # (kept by terminated_as_interrupt's end)
                finally:
                    # the plugins unloaded when their compilation ended: back in
                    # `sys.modules`, so that the shutdown clears them as modules (a file
                    # they left open is flushed)
                    for module in unloaded:
                        sys.modules.setdefault(module.__name__, module)
    except KeyboardInterrupt as interrupt:
        if status is None:
            raise SystemExit(ended_unwritten(prog, interrupt)) from None
        word, ended = ending_of(interrupt)  # (as the command returned: before `_ending`)
        say_after_end(prog, word, status)
        raise SystemExit(ended) from None
    raise SystemExit(status)


def _ending(prog: str, status: int) -> None:
    """What the process does once its command ended with `status` (module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def ended(signum: int, frame: object) -> None:
        say_after_end(prog, ending_word(signum), status)
        os._exit(128 + signum)

    for signum in ENDING_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:  # (ignored by the parent: stays)
            signal.signal(signum, ended)
