"""`PassContext`: what the engine tells a running pass, and how the pass reports an error."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Final, TypeVar, overload

from ge.passes.hooks import add_note

__all__ = ["PassContext"]

_T = TypeVar("_T")

#: `get_option_value` called without `default` (GE's behaviour: an absent option raises);
#: a private object, so that any value, None included, can be a default.
_NO_DEFAULT: Final = object()


class PassContext:
    """The per-invocation context handed to a pass: its name, the options, an error slot.

    The engine creates one for every invocation; it is only meaningful during that call.
    A pass explains a failure with `set_error_message`; the engine puts that text into the
    E13028 error it raises.
    """

    __slots__ = ("_error_message", "_fusions", "_options", "_pass_name")

    def __init__(self, pass_name: str = "", options: Mapping[str, str] | None = None) -> None:
        self._pass_name = pass_name
        self._options: dict[str, str] = dict(options or {})
        self._error_message = ""
        self._fusions = 0  # report_fuse calls during this invocation

    def get_pass_name(self) -> str:
        """The name the pass was registered under."""
        return self._pass_name

    def set_pass_name(self, name: str) -> None:
        """Set by the engine before each invocation."""
        self._pass_name = name

    def get_error_message(self) -> str:
        """The message the pass set, or "" if it set none."""
        return self._error_message

    def set_error_message(self, message: str) -> None:
        """Explain a failure; the text becomes the reason of the E13028 error (None clears
        it: no reason, not the text "None")."""
        self._error_message = "" if message is None else str(message)

    @overload
    def get_option_value(self, key: str) -> str: ...

    @overload
    def get_option_value(self, key: str, default: _T) -> str | _T: ...

    def get_option_value(self, key: str, default: object = _NO_DEFAULT) -> object:
        """The compilation option `key`, as a string (GE options are strings).

        An option the compilation was not given (or a `key` that is not a string) raises
        `RuntimeError("Failed to get option value for key: <key>")`, as GE does (spec
        §4.2): a pass that reads an option it may not get either catches it or passes
        `default`. `default` (keyword or second positional argument) is a `ge` extension:
        it is returned, as given, instead of raising when the option is absent; code using
        it does not run on GE.
        """
        value = self._options.get(key) if isinstance(key, str) else None
        if value is not None:
            return value
        if default is not _NO_DEFAULT:
            return default
        raise add_note(RuntimeError(f"Failed to get option value for key: {key}"),
                       self._given_note(key))

    def _given_note(self, key: object) -> str:
        """What the compilation was given instead (E13028 adds it to GE's message): the
        options of a name close to `key` (a misspelling on either side), else how options
        are given."""
        if not self._options:
            return ("The compilation was given no options (ge compile --option KEY=VALUE, "
                    "ge.compile(options={...}))")
        close = difflib.get_close_matches(str(key), list(self._options), n=3, cutoff=0.75)
        if close:
            return f"The compilation was given {', '.join(map(repr, close))}: misspelt?"
        return f"The compilation was given {len(self._options)} other option(s)"

    def __repr__(self) -> str:
        return f"PassContext(pass_name={self._pass_name!r})"
