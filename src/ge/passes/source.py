"""Where in the user's code something happened: class definitions, call sites, tracebacks.

Errors name the user's file and line, never a line of `ge` itself; these helpers find them.
"""

from __future__ import annotations

import dis
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from ge._user_code import (
    caller_location,
    innermost_user_location,
    is_internal_file,
    traceback_location,
)
from ge.errors import GeError, SourceLocation

__all__ = [
    "at_user_line",
    "blame",
    "blame_at",
    "blamed_location",
    "caller_location",
    "collected_warnings",
    "definition_location",
    "hook_location",
    "innermost_user_location",
    "is_internal_file",
    "mark_match",
    "marked_match",
    "returned_at",
    "same_file",
    "traceback_location",
    "user_stacklevel",
    "warn_user",
]

def user_stacklevel() -> int:
    """The `stacklevel` with which the function calling this one makes a warning point at
    the first caller outside `ge` (the user's line)."""
    level, frame = 2, sys._getframe(2)
    while frame.f_back is not None and is_internal_file(frame.f_code.co_filename):
        level, frame = level + 1, frame.f_back
    return level


def warn_user(warning: Warning, location: SourceLocation | None = None, *,
              about: SourceLocation | None = None) -> None:
    """Issue `warning` at `location`, else at the user's line that called into `ge`, each
    time (not once per line, Python's default): a compilation's warnings are about that
    compilation, and a notebook cell run again must show them again. A `collected_warnings()`
    block of this thread (or task) gets it too, whatever the warning filters. The place in
    the user's code it is about (a report's `location`: `ge_location`) is `location`, or
    `about` for a warning issued at the user's call but about a pass's line (a pass rolled
    back)."""
    collected = _COLLECTED.get()
    if collected is not None:
        collected.append(warning)
    if location is not None or about is not None:
        warning.ge_location = str(location or about)  # type: ignore[attr-defined]
    where = location or caller_location()
    filename, line = (where.file, where.line or 0) if where is not None else ("ge", 0)
    warnings.warn_explicit(warning, type(warning), filename, line)


#: The warnings `warn_user` issued inside the innermost `collected_warnings()` block of this
#: context: per thread, unlike `warnings.catch_warnings`, which is process-wide.
_COLLECTED: ContextVar[list[Warning] | None] = ContextVar("ge_collected_warnings", default=None)


@contextmanager
def collected_warnings() -> Iterator[list[Warning]]:
    """The warnings ge issues inside the block in this thread (a compilation's own, for
    `CompileResult.warnings`), in order; the block's warnings still go to Python's
    warning machinery as well."""
    collected: list[Warning] = []
    token = _COLLECTED.set(collected)
    try:
        yield collected
    finally:
        _COLLECTED.reset(token)


def definition_location(cls: type) -> SourceLocation:
    """Where `cls` was defined: recorded at class creation, else its module's file."""
    recorded = cls.__dict__.get("__ge_pass_source__")
    if isinstance(recorded, SourceLocation):
        return recorded
    module = sys.modules.get(cls.__module__)
    filename = getattr(module, "__file__", None) or f"<module {cls.__module__}>"
    return SourceLocation(filename, None)


def hook_location(hook: object) -> SourceLocation | None:
    """The user's `def` line of a hook (its first decorator's; the original function of an
    adapted hook), or None for a hook of ge's own (a synthesized `patterns()`)."""
    func = getattr(hook, "__ge_original_hook__", None) or getattr(hook, "__func__", hook)
    code = getattr(func, "__code__", None)
    if code is None or is_internal_file(code.co_filename):
        return None
    return SourceLocation(code.co_filename, code.co_firstlineno)


def returned_at(hook: object, value: object) -> SourceLocation | None:
    """The line of the `return` by which `hook` (a pass's `run`) returned `value`, read from
    its code as it was loaded (not from its file, which may have changed since): the only
    `return` of a literal or of a module-level name (`return False`, `return FAILED`,
    `return ge.passes.FAILED`) equal to `value`, when every `return` of the function is
    such a one; else None (a `return status` could have given it too). The `def` line
    alone sends the author looking through the whole method."""
    func = getattr(hook, "__ge_original_hook__", None) or getattr(hook, "__func__", hook)
    code = getattr(func, "__code__", None)
    if code is None or is_internal_file(code.co_filename):
        return None
    scope: dict[str, Any] = getattr(func, "__globals__", {})
    found: list[int] = []
    line: int | None = None
    loaded: list[dis.Instruction] = []  # the instructions before the current one
    for instruction in dis.get_instructions(code):
        line = _line_of(instruction, line)
        if instruction.opname == "RETURN_CONST":  # (Python 3.12: `return <literal>`)
            returned: object = instruction.argval
        elif instruction.opname == "RETURN_VALUE":
            returned = _static_value(loaded[-2:], scope)
        else:
            loaded.append(instruction)
            continue
        loaded.clear()
        if returned is _UNKNOWN:
            return None  # a computed result: this return may have given it
        if _same(returned, value) and line is not None:
            found.append(line)
    if len(set(found)) != 1:
        return None
    return SourceLocation(code.co_filename, found[0])


_UNKNOWN = object()


def _line_of(instruction: dis.Instruction, current: int | None) -> int | None:
    """The source line of `instruction` (its position from Python 3.11, else the line the
    last instruction starting one gave)."""
    positions = getattr(instruction, "positions", None)
    if positions is not None and positions.lineno is not None:
        return int(positions.lineno)
    starts = instruction.starts_line
    return starts if isinstance(starts, int) and not isinstance(starts, bool) else current


def _static_value(before: list[dis.Instruction], scope: dict[str, Any]) -> object:
    """What the instructions just before a `RETURN_VALUE` load, when that is a literal, a
    global name or an attribute of one (`ge.passes.FAILED`); `_UNKNOWN` for anything else
    (nothing is evaluated)."""
    if not before:
        return _UNKNOWN
    last = before[-1]
    if last.opname == "LOAD_CONST":
        return last.argval
    if last.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
        return scope.get(str(last.argval), _UNKNOWN)
    if last.opname == "LOAD_ATTR" and len(before) == 2 and (
            before[0].opname in ("LOAD_GLOBAL", "LOAD_NAME")):
        owner = scope.get(str(before[0].argval), _UNKNOWN)
        return _UNKNOWN if owner is _UNKNOWN else getattr(owner, str(last.argval), _UNKNOWN)
    return _UNKNOWN


def _same(found: object, value: object) -> bool:
    """Equal and of the same kind: `False` is not the status `0`."""
    return type(found) is type(value) and found == value


def blame(exc: BaseException, hook: object) -> BaseException:
    """Mark `exc`, raised by ge about what `hook` returned, as that hook's fault: the E13028
    it becomes points at the hook's `def` (its first decorator's) line rather than at the
    pass's class statement. Hooks of ge's own (a synthesized `patterns()`) are not marked,
    nor is an error marked already (the line of a custom operator's inference function that
    typed the replacement's output wrongly: `ge.passes.rewrite`)."""
    location = hook_location(hook)
    if location is not None:
        blame_at(exc, location)
    return exc


def blame_at(exc: BaseException, location: SourceLocation) -> BaseException:
    """Mark `exc` as the fault of the user's code at `location` (what `blame` does with a
    hook's `def` line), unless it is marked already: a nearer cause stays."""
    if blamed_location(exc) is None:
        exc.__ge_location__ = location  # type: ignore[attr-defined]
    return exc


def mark_match(exc: BaseException, nodes: Iterable[Any]) -> None:
    """Record on `exc`, raised while the engine asked a pass about one match (or one node
    of a decompose pass), the nodes of that match, for the E13028 it becomes to name (the
    first marking stays: the innermost match)."""
    if getattr(exc, "__ge_match__", None) is None:
        exc.__ge_match__ = tuple(n.name for n in nodes)  # type: ignore[attr-defined]


def marked_match(exc: BaseException) -> tuple[str, ...]:
    """The nodes `mark_match` recorded on `exc` (none if it did not)."""
    found = getattr(exc, "__ge_match__", None)
    return found if isinstance(found, tuple) else ()


def blamed_location(exc: BaseException) -> SourceLocation | None:
    """The hook location `blame` put on `exc`, if any."""
    location = getattr(exc, "__ge_location__", None)
    return location if isinstance(location, SourceLocation) else None


def at_user_line(err: GeError) -> None:
    """Locate `err`, raised while a pass's patterns were built or compiled outside a
    compilation (`find_matches`, `ge passes explain`: no E13028 carries the user's line),
    where it is the user's code's fault: the hook `blame` marked, else the innermost frame of the
    user's code (an `es` call refusing its arguments in a `@pattern` method)."""
    err.location = (err.location or blamed_location(err)
                    or innermost_user_location(err.__traceback__))


def same_file(a: str, b: str) -> bool:
    """Whether the paths `a` and `b` name one file (through links and relative parts)."""
    return a == b or os.path.realpath(a) == os.path.realpath(b)
