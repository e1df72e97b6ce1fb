"""Steps that a Ctrl-C or a SIGTERM must not cut in two.

A save with external data renames two files into place, the data file and then the model:
an interrupt between the two left the previous model reading the new weights (a model that
loads and computes what neither version did; trial QQ). `held_signals` holds SIGINT and
SIGTERM for such a step and delivers them, to the handlers the process had, when it ends.

And how a command ends on one: `terminated_as_interrupt` raises SIGTERM as `Terminated`, a
KeyboardInterrupt, so that it ends as Ctrl-C does, with its status (`TERMINATED_STATUS`,
`INTERRUPTED_STATUS`). Nothing here imports more than the standard library: `ge.cli.main`
installs it before the command line imports its output and the command's modules, so a
signal in those first moments ends it with its one line too (trial ZZ).

`imported_held` imports the modules a command needs (onnx, numpy) with both signals held:
a Ctrl-C in their native module inits crashed the process (onnx's nanobind init: SIGSEGV,
SIGABRT) or was lost in it (the command ran on, exit 0), and a traceback printed instead of
the one line (trial A). The entry points hold them from their start to the end of those
imports, then deliver a noted signal, which ends the command as usual (`ending_of`).
"""

from __future__ import annotations

import contextlib
import importlib
import signal
import sys
import threading

TYPE_CHECKING = False  # (typing not imported: this module is imported before the hold)
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator
    from typing import Any

__all__ = ["BROKEN_PIPE_STATUS", "ENDING_SIGNALS", "INTERRUPTED_STATUS", "TERMINATED_STATUS",
           "Terminated", "ended_unwritten", "ending_of", "ending_word", "held_signals",
           "imported_held", "interrupt_behind", "say_after_end", "terminated_as_interrupt"]

#: The signals a user or a supervisor ends a command with (held here, and after a command
#: has ended by `ge.cli.process_exit`).
ENDING_SIGNALS = (signal.SIGINT, signal.SIGTERM)

#: The exit status of a command ended by SIGTERM or SIGINT (128 + the signal's number, as a
#: shell reports it).
TERMINATED_STATUS = 128 + signal.SIGTERM
INTERRUPTED_STATUS = 128 + signal.SIGINT
#: The exit status of a command whose reader stopped reading its output (`ge inspect m.onnx
#: | head`), as SIGPIPE would end it (Python ignores SIGPIPE; click exited 1, without a word,
#: which a script with `set -o pipefail` read as the command's failure: trial ZZ).
BROKEN_PIPE_STATUS = 128 + 13  # (SIGPIPE's number; `signal.SIGPIPE` is not on Windows)


def ending_word(signum: int) -> str:
    """How a message names the end by `signum`, as a shell would: Ctrl-C interrupts,
    SIGTERM terminates."""
    return "terminated" if signum == signal.SIGTERM else "interrupted"


#: How far `interrupt_behind` follows a chain of causes.
_MAX_CHAIN = 32


def interrupt_behind(exc: BaseException) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM (`KeyboardInterrupt`, `Terminated`) `exc` is or
    was raised from (its cause), or while handling (its context), if any: native code that
    catches every exception wraps it in one of its own (pybind11's module init made a SIGTERM
    during `import onnxruntime` an `ImportError: initialization failed`, and `ge compile
    --verify` ended with a traceback and status 1 instead of 143; trial VV), and so may a
    plugin. Such an error is that signal, not a failure."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
        if isinstance(current, KeyboardInterrupt):
            return current
        seen.add(id(current))
        current = current.__cause__ if current.__cause__ is not None else (
            None if current.__suppress_context__ else current.__context__)
    return None


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """While the block runs, SIGINT and SIGTERM are noted instead of handled; when it ends
    (also by an exception) the process's own handlers get each one noted, once. Only the
    main thread handles signals in Python: elsewhere, and for a signal whose handler was
    not set from Python (which cannot be put back), nothing is held. Nests: an inner
    block's signals reach the outer one's holder, delivered when that ends."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    noted: list[int] = []

    def note(signum: int, frame: object) -> None:
        if signum not in noted:
            noted.append(signum)

    previous: dict[int, Any] = {}
    try:
        for each in ENDING_SIGNALS:
            handler = signal.getsignal(each)
            if handler is None:
                continue
            signal.signal(each, note)
            previous[each] = handler
        yield
    finally:
        for held, handler in previous.items():
            signal.signal(held, handler)
        for signum in noted:
            signal.raise_signal(signum)


def imported_held(modules: Iterable[str]) -> None:
    """Import `modules` with SIGINT and SIGTERM held (`held_signals`): one that came meanwhile
    is delivered once they are all imported, never inside a native module's init (where it
    crashed the process or was lost: module docstring)."""
    with held_signals():
        for name in modules:
            importlib.import_module(name)


class Terminated(KeyboardInterrupt):
    """SIGTERM (`timeout`, `docker stop`, a cancelled CI job) raised as an interrupt, so that
    a command ends as on Ctrl-C: files being written are removed, outputs stay as they
    were, and no pass reports it as its own failure."""


def ending_of(interrupt: KeyboardInterrupt) -> tuple[str, int]:
    """How a command ended by `interrupt` says so, and its exit status: `("terminated",
    143)` for SIGTERM (`Terminated`), `("interrupted", 130)` for Ctrl-C."""
    signum = signal.SIGTERM if isinstance(interrupt, Terminated) else signal.SIGINT
    return ending_word(signum), 128 + signum


def ended_unwritten(prog: str, interrupt: KeyboardInterrupt) -> int:
    """Say on stderr, in one line, how command `prog` was ended by `interrupt` outside its
    output handling, and return its exit status: before it began (its first moments: nothing
    was written), or as the command's SystemExit was on its way out (the command had ended:
    its status is said, as `ge.cli.process_exit` says a signal after the end)."""
    word, status = ending_of(interrupt)
    context = interrupt.__context__
    if isinstance(context, SystemExit):
        said = context.code if isinstance(context.code, int) else int(context.code is not None)
        say_after_end(prog, word, said)
    else:
        sys.stderr.write(f"{prog}: {word}; nothing was written\n")
    return status


def say_after_end(prog: str, word: str, status: int) -> None:
    """The line of a signal that came after command `prog` had ended with `status`."""
    try:
        sys.stderr.write(f"{prog}: {word} after the command had ended (status {status})\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


@contextlib.contextmanager
def terminated_as_interrupt() -> Iterator[list[bool]]:
    """While the block runs, SIGTERM raises `Terminated` in the main thread; the list it
    yields holds True once that happened. Outside the main thread: nothing changes. A
    handler the block installed itself (`ge.cli.process_exit`'s, as its command ends) stays
    when it ends."""
    seen: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield seen
        return

    def interrupt(signum: int, frame: object) -> None:
        seen.append(True)
        raise Terminated()

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield seen
    finally:  # (unless the block set a handler of its own: a process's end, kept)
        if signal.getsignal(signal.SIGTERM) is interrupt:
            signal.signal(signal.SIGTERM, previous)
