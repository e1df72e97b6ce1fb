"""Checks of the arguments of a compilation (`ge.compile`, `compile_graph`) by type.

A wrong type is `CompilerOptionTypeError` (GE1202, a `TypeError`) naming the type and the
value it got (`opset must be an int, got the str '20'`), before anything runs: Python would
otherwise take it somewhere further on, as a str iterated into its characters (`disable=
"ConstantFolding"` disabled "unknown passes C, F, a, ...") or a value compared with a range
it is not of the type of.
"""

from __future__ import annotations

import re
import reprlib

__all__ = ["described"]

_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_LINE_BREAK = re.compile(r"\s*\n\s*")  # an array's repr spans lines; an error is one


def described(value: object) -> str:
    """`value` as an error names what it got: its type, then its (shortened) repr on one
    line, as in "the str '20'" or "the list [1, 2, 3]"; an array by its shape and dtype."""
    kind = type(value).__name__
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if isinstance(shape, tuple) and dtype is not None:
        return f"the {kind} of shape {shape} and dtype {dtype}"
    return f"the {kind} {_LINE_BREAK.sub(' ', _REPR.repr(value))}"
