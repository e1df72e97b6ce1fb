"""The tracebacks of the errors `ge.testing` raises: the test's line and the user's code, not
ge's.

A pass that fails under `run_pass` (`apply_pass`, `find_matches`, the assertions) raises
the engine's `PassRunError` (E13028), a plugin that fails to import under `load_passes` its
`PluginLoadError` (E13029). As the engine raises them, the error's own traceback is ge's
(where it turned the failure into E13028), and the exception it was raised from (the
pass's) starts with the engine's frames calling the hook: pytest printed some hundred
lines of ge around the one line of the pass that raised (trial KK).

`without_engine_frames` cuts both: the error is raised again from the helper, whose frames
pytest hides (`__tracebackhide__`, pytest's own convention), so its traceback is the
test's line; each exception it was raised from starts at the first frame of the user's
code (ge's frames calling it are dropped). When that exception is a ge error (`GeError`:
raised on purpose, its message says what is wrong, `node 'n' has no attribute 'axis'`),
it ends at the user's last frame too, the line that called ge; any other exception keeps
the frames after it (a bug of ge's own shows where). An exception with no frame of the
user's is kept whole, but for one ge raised about what a hook returned
(`ge.passes.source.blame`), whose error names the hook's line: its frames, all ge's, are
dropped. The frames left are the real ones, in their order; `ge.compile` raises its errors
untouched.
"""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

from ge.errors import GeError
from ge.passes.source import blamed_location, is_internal_file

__all__ = ["without_engine_frames"]

_E = TypeVar("_E", bound=BaseException)

#: How many exceptions of a chain (`raise ... from`, or raised while handling) are looked at.
_MAX_CHAIN = 8


def without_engine_frames(err: _E) -> _E:
    """`err`, an error of ge's raised under a `ge.testing` helper, to be raised again there:
    its traceback cleared and each exception of its chain starting at the user's code."""
    err.__traceback__ = None
    seen = {id(err)}
    cause = _raised_from(err)
    while cause is not None and id(cause) not in seen and len(seen) <= _MAX_CHAIN:
        seen.add(id(cause))
        tb = _user_frames(cause.__traceback__, to_last=isinstance(cause, GeError))
        if tb is not None:
            cause.__traceback__ = tb
        elif blamed_location(cause) is not None:
            cause.__traceback__ = None
        cause = _raised_from(cause)
    return err


def _raised_from(exc: BaseException) -> BaseException | None:
    """The exception `exc` was raised from, as Python shows the chain: its cause, else the
    one being handled (unless suppressed)."""
    if exc.__cause__ is not None:
        return exc.__cause__
    return None if exc.__suppress_context__ else exc.__context__


def _user_frames(tb: TracebackType | None, *, to_last: bool) -> TracebackType | None:
    """The part of `tb` from its first frame that is not ge's own (nor the import
    machinery's) on, and (`to_last`) up to its last such frame; None when every frame
    is ge's."""
    while tb is not None and _is_ge(tb):
        tb = tb.tb_next
    if tb is not None and to_last:
        last, entry = tb, tb.tb_next
        while entry is not None:
            if not _is_ge(entry):
                last = entry
            entry = entry.tb_next
        last.tb_next = None
    return tb


def _is_ge(tb: TracebackType) -> bool:
    return is_internal_file(tb.tb_frame.f_code.co_filename)
