"""The E13028 error of a pass run that failed: the reason in one line (an exception with
what it was raised from), at the user's line, with the nodes it names; and which exceptions
escaping a pass fail it. Shared by the engine, `ge.testing` and `ge passes explain`."""

from __future__ import annotations

from collections.abc import Iterable

from ge._signals import interrupt_behind
from ge.compiler.last_changes import Blame
from ge.compiler.pass_registry import RegisteredPass
from ge.errors import (
    GeError,
    InferenceFunctionError,
    KernelError,
    PassRunError,
    SourceLocation,
)
from ge.passes.hooks import hook_note
from ge.passes.plugin_cache import loaded_plugins
from ge.passes.source import (
    blamed_location,
    innermost_user_location,
    marked_match,
    same_file,
    traceback_location,
)

__all__ = ["describe_exception", "is_pass_failure", "run_error"]


def is_pass_failure(exc: BaseException) -> bool:
    """Whether `exc`, escaping a pass, fails that pass (E13028): any exception, `SystemExit`
    (a pass calling `sys.exit()` must not end the compiler, let alone with status 0) and
    other BaseExceptions; only Ctrl-C and generator shutdown pass through, and an error
    raised from a Ctrl-C or SIGTERM (`interrupt_behind`: an import of native code the
    signal came in, which wraps it), which is that signal, not the pass's failure."""
    return (not isinstance(exc, (KeyboardInterrupt, GeneratorExit))
            and interrupt_behind(exc) is None)


def describe_exception(exc: BaseException) -> str:
    """The exception a pass raised, with what it was raised from (`raise ... from err`, or
    while handling err): a pass re-raising "Get attributes failed" from the error that says
    which attribute of which node keeps that in the one line (else only --debug showed it)."""
    text = f"{type(exc).__name__}: {exc}"
    seen = {id(exc)}
    cause = _cause(exc)
    while cause is not None and id(cause) not in seen and len(seen) <= _MAX_CAUSES:
        seen.add(id(cause))
        said = str(cause)
        if said != str(exc) or type(cause) is not type(exc):  # (not one re-raised as is)
            text += f" (from {type(cause).__name__}{': ' + said if said else ''})"
        cause = _cause(cause)
    return text


_MAX_CAUSES = 3


def _cause(exc: BaseException) -> BaseException | None:
    """What `exc` was raised from: its explicit cause, else the exception being handled."""
    if exc.__cause__ is not None:
        return exc.__cause__
    return None if exc.__suppress_context__ else exc.__context__


def run_error(entry: RegisteredPass, stage: str, return_code: str, reason: str,
              exc: BaseException | None = None, nodes: Iterable[str] = (), *,
              unchecked: bool = False, location: SourceLocation | None = None,
              earlier: Blame | None = None) -> PassRunError:
    """E13028 at the user's line: the innermost frame in the pass's own file, else the line
    `location` (the check's problems: the line that changed their first node), else its
    class, and (`raised_in`) the innermost line of the user's code that raised when it is
    in another file (`innermost_user_location`: a helper module the pass imports, whose
    line the pass file's call alone did not show); with the nodes the failure names (a ge
    error raised in the pass, the problems, else the match or node its hooks failed on:
    `ge.passes.source.mark_match`).
    A hook called otherwise than its parameter names suggest adds how it was called
    (`ge.passes.hooks.signature_notes`)."""
    if isinstance(exc, GeError) and not nodes:
        nodes = exc.nodes
    defined_at = entry.descriptor.location
    raised_in = None
    if exc is not None:
        location = (traceback_location(exc.__traceback__, [defined_at.file], only_within=True)
                    or blamed_location(exc) or location)
        # the line that raised, when not in the pass's file: a helper module of the user's
        raised_in = innermost_user_location(exc.__traceback__, defined_at.file)
        if raised_in is not None and same_file(raised_in.file, (location or defined_at).file):
            raised_in = None
        note = hook_note(exc)
        if note is not None:
            reason = f"{reason.rstrip('.')}. {note}"
        # the hooks failed on one match: which (of two Divs, which one was it?)
        nodes = nodes or marked_match(exc)
    if entry.builtin and isinstance(exc, (InferenceFunctionError, KernelError)):
        what = "built-in pass"  # it ran a custom operator's own function, which failed
        advice = (" The custom operator's registered function is at fault (its plugin's "
                  f"code, not ge): fix it, or disable={entry.name!r} (--disable "
                  f"{entry.name}) compiles without this pass.")
        location = exc.location or location
    elif entry.builtin and unchecked:  # the graph it got may be what was broken
        what = "built-in pass"
        advice = (" The checks after each pass were off (check='none', --check none), so a "
                  "pass that ran before it may have left the graph invalid: compile with the "
                  "checks on to find that pass.")
    elif entry.builtin and earlier is not None:  # a plugin before it left the node so
        what = "built-in pass"
        advice = (f" A plugin pass before it may have left the graph so{earlier.sentence}: "
                  f"--verify each-pass (verify='each-pass') checks after every pass; "
                  f"disable={entry.name!r} (--disable {entry.name}) compiles without this one.")
    elif entry.builtin:  # GE's wording is for plugins; a failing built-in pass is ge's fault
        what = "built-in pass"
        advice = (f" This is a bug in ge: please report it with the model; "
                  f"disable={entry.name!r} (--disable {entry.name}) or on_pass_failure="
                  "'skip' (--on-pass-failure skip) compiles without it.")
    else:
        what, advice = "custom fusion pass", ""
    # (an error of ge's raised at the same line says it once: "... (at p.py:17)." and then
    # "(pass P, ..., at p.py:17)" repeated it: trial U)
    said_at = f" (at {location or defined_at})"
    if reason.rstrip(".").endswith(said_at):
        reason = reason.rstrip(".")[: -len(said_at)]
    if not entry.builtin and _edited_since_loaded(entry):
        advice += (f" ({defined_at.file} changed since it was loaded: the code that ran, "
                   "and the line named, are as it was then.)")
    return PassRunError(
        f"Failed to run {what} {entry.name}. Return code: {return_code}. "
        f"Reason: {_sentence(reason)}{advice}",
        pass_name=entry.name,
        stage=stage,
        location=location or defined_at,
        path=defined_at.file,
        nodes=list(dict.fromkeys(nodes)),
        raised_in=raised_in,
    )


def _edited_since_loaded(entry: RegisteredPass) -> bool:
    """Whether the file of the pass's class changed since its plugin imported it (an
    installed plugin edited in place, a plugin the compiler holds from its start): the
    error's lines are the old code's. Asked of a failure only (a stat, rarely a read)."""
    for plugin in loaded_plugins():
        if any(d is entry.descriptor for d in plugin.descriptors):
            return entry.descriptor.location.file in plugin.changed_files()
    return False


def _sentence(reason: str) -> str:
    """`reason` ended as a sentence: one full stop, not after a question mark."""
    reason = reason.rstrip(".")
    return reason if reason.endswith(("?", "!")) else reason + "."
