"""The `ge` command as a process of its own: the console script, `python -m ge`.

`run` runs `ge.cli.main`; once the command has ended, SIGINT and SIGTERM end the process
at once with status 130 or 143 and one line saying the command had already ended. The
command's own handlers are gone by then, and the interpreter's shutdown takes a moment
(0.16-0.18 s after a 100,000-node compile; 0.9-1.0 s before the commands closed their
graphs with `Graph.close`, when the cyclic collector freed the compiled graph there), in which the
default handler ended the process without a word (trial QQ), and an atexit callback that
hangs could not be cut short. Everything of a normal exit happens: atexit callbacks,
finalizers, module teardown (that of the plugin modules unloaded when their compilation
ended too: they are put back in `sys.modules` first), a profiler's report. (Freezing the
collector, `gc.freeze()`, would skip that collection, but also the finalizers of what
plugin modules hold.)

A program calling `ge.cli.main` itself keeps its own signal handlers.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from ge._signals import ENDING_SIGNALS, ending_word

__all__ = ["exit_status", "run"]


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
    from ge._signals import ending_of, held_signals, terminated_as_interrupt

    try:  # (nothing heavy; a signal meanwhile is delivered after it: one line, trial A)
        with terminated_as_interrupt(), held_signals():
            from ge._retired_modules import RETIRED
            from ge.cli import main
    except KeyboardInterrupt as interrupt:
        word, status = ending_of(interrupt)
        sys.stderr.write(f"ge: {word}; nothing was written\n")
        raise SystemExit(status) from None

    with RETIRED.collecting() as unloaded:
        try:
            main()
        except SystemExit as exit_:
            _ending(exit_status(exit_.code))
            raise
        finally:
            # the plugins unloaded when their compilation ended: back in `sys.modules`, so
            # that the shutdown clears them as modules (a file they left open is flushed)
            for module in unloaded:
                sys.modules.setdefault(module.__name__, module)


def _ending(status: int) -> None:
    """What the process does once its command ended with `status` (module docstring)."""
    if threading.current_thread() is not threading.main_thread():
        return

    def ended(signum: int, frame: object) -> None:
        word = ending_word(signum)
        try:
            sys.stderr.write(f"ge: {word} after the command had ended (status {status})\n")
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass
        os._exit(128 + signum)

    for signum in ENDING_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:  # (ignored by the parent: stays)
            signal.signal(signum, ended)
