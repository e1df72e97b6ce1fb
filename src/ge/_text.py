"""Text for messages that every layer writes the same way (imports nothing of `ge`).

A message that lists what may be many things names the first few and counts the rest:
`'a', 'b', 'c' and 2 more`; one function writes that, so every message reads alike.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["error_text", "first_and_more", "printable"]


def first_and_more(items: Sequence[str], shown: int = 3, separator: str = ", ") -> str:
    """The first `shown` of `items` (already formatted) joined by `separator`, followed by
    " and N more" when N more are left out: `'a', 'b', 'c' and 2 more`."""
    text = separator.join(items[:shown])
    return text + f" and {len(items) - shown} more" if len(items) > shown else text


def short_repr(value: object, width: int = 40) -> str:
    """`repr(value)`, cut to `width` characters with "..." (a value quoted in a message)."""
    text = repr(value)
    return text if len(text) <= width else text[:width - 3] + "..."


def printable(text: str) -> str:
    """`text` with every character that is not printable written as its escape (`\\x1b`):
    text from a model or a plugin shown in a terminal, which would obey an escape sequence
    in it (trials LL, NN)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def error_text(err: BaseException) -> str:
    """What `err` says on one line, whole (onnx and onnxruntime spread one message over
    lines, and its first line alone cuts it short), or its type's name when it says
    nothing."""
    return " ".join(str(err).split()) or type(err).__name__
