"""Ending the `ge` process once its command is done, without tearing the interpreter down.

A compilation leaves its graph in memory: about ten tracked objects per node, in reference
cycles, which the interpreter's shutdown collects and frees one by one before the process
can end (1.3 s after a 100,000-node compile whose own work took 7 s, measured). Nothing of
that is the user's: the outputs are written, the lines printed. `exit_process` flushes what
the command printed, runs the `atexit` callbacks (logging's, temporary folders' finalizers)
as a normal exit would, and ends the process with the command's status. It also closes the
window in which a SIGTERM arriving after the outputs were written killed the process
without a word (the handlers of the command are gone by then; trial QQ).
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import NoReturn

__all__ = ["exit_process", "exit_status"]


def exit_status(code: object) -> int:
    """The process status `SystemExit(code)` ends Python with: None is 0, an int itself,
    anything else (a message, which Python prints to stderr) 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    return 1


def _others_running() -> bool:
    """Whether a thread other than the main one would keep a normal exit waiting (a
    non-daemon thread a plugin started): then the process ends as Python ends it."""
    return any(t is not threading.main_thread() and not t.daemon and t.is_alive()
               for t in threading.enumerate())


def exit_process(code: object) -> NoReturn:
    """End the process with the status of `SystemExit(code)`, skipping the interpreter's
    teardown when it can (see the module docstring); raises that SystemExit when it cannot
    (another thread still running, or outside the main thread)."""
    if threading.current_thread() is not threading.main_thread() or _others_running():
        raise SystemExit(code)
    for signum in (signal.SIGINT, signal.SIGTERM):  # the command's outcome is decided
        signal.signal(signum, signal.SIG_IGN)
    if code is not None and not isinstance(code, int):
        print(code, file=sys.stderr)
    status = exit_status(code)
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_functions is None:  # (another Python than CPython)
        raise SystemExit(code)
    try:
        run_exit_functions()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass  # (a closed pipe: `ge ... | head`; nothing more can reach it)
        os._exit(status)
