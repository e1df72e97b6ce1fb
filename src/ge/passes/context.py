"""`PassContext`: what the engine tells a running pass, and how the pass reports an error."""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["PassContext"]


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
        """Explain a failure; the text becomes the reason of the E13028 error."""
        self._error_message = str(message)

    def get_option_value(self, key: str) -> str:
        """The compilation option `key`, as a string (GE options are strings)."""
        value = self._options.get(key) if isinstance(key, str) else None
        if value is None:
            raise RuntimeError(f"Failed to get option value for key: {key}")
        return value

    def __repr__(self) -> str:
        return f"PassContext(pass_name={self._pass_name!r})"
