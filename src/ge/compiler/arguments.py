"""Checks of the arguments of a compilation (`ge.compile`, `compile_graph`) by type.

A wrong type is `CompilerOptionTypeError` (GE1202, a `TypeError`) naming the type and the
value it got (`opset must be an int, got the str '20'`), before anything runs: Python would
otherwise take it somewhere further on, as a str iterated into its characters (`disable=
"ConstantFolding"` disabled "unknown passes C, F, a, ...") or a value compared with a range
it is not of the type of.

One rule for the arguments that hold several things: a list (any iterable) of them, never
one of them alone. One str, bytes or path is refused, with how to write it as a list, rather
than taken as one item: `pass_paths` showed that some callers mean the characters of their
str no more than others mean one item (a `os.pathsep`-joined list of paths), and Python
cannot tell. A mapping where a list belongs is refused too (`disable={"X": False}` would
disable X). The mapping arguments (`options`, `dims`, `steps`, `inputs`) must be mappings.
"""

from __future__ import annotations

import os
import re
import reprlib
from collections.abc import Iterable, Mapping
from typing import TypeVar

from ge.errors import CompilerOptionTypeError

__all__ = ["described", "flag", "item_list", "mapping", "name_list", "text"]

T = TypeVar("T")

_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother = 200, 80  # a path in full; an object shortened
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 6
_LINE_BREAK = re.compile(r"\s*\n\s*")  # an array's repr spans lines; an error is one


def described(value: object) -> str:
    """`value` as an error names what it got: its type, then its (shortened) repr on one
    line, as in "the str '20'" or "the list [1, 2, 3]"; an array by its shape and dtype, an
    object without a repr of its own by its type ("a CompileProgress object")."""
    kind = type(value).__name__
    if type(value).__repr__ is object.__repr__:  # `<... object at 0x...>` says no more
        return f"a {kind} object"
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if isinstance(shape, tuple) and dtype is not None:
        return f"the {kind} of shape {shape} and dtype {dtype}"
    return f"the {kind} {_LINE_BREAK.sub(' ', _REPR.repr(value))}"


def item_list(value: object, what: str, kind: type[T], items: str) -> list[T]:
    """`value` (an iterable of `kind`, `items` in words) as a list; one str, bytes, path or
    `kind` alone, a mapping, a non-iterable or an item of another type is refused
    (`CompilerOptionTypeError` naming `what` and what it got)."""
    wanted = f"{what} must be a list of {items}"
    if isinstance(value, (str, bytes, os.PathLike)):
        hint = f": write [{os.fsdecode(value)!r}]" if kind is str else ""
        raise CompilerOptionTypeError(f"{wanted}, got {described(value)}{hint}")
    if isinstance(value, kind):
        raise CompilerOptionTypeError(f"{wanted}, got {described(value)}: put it in a list")
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise CompilerOptionTypeError(f"{wanted}, got {described(value)}")
    chosen = list(value)
    for item in chosen:
        if not isinstance(item, kind):
            raise CompilerOptionTypeError(f"{wanted}, got {described(item)} among them")
    return chosen


def name_list(value: object, what: str) -> tuple[str, ...]:
    """`value` as the pass names it lists (`disable`, `enable`): see `item_list`."""
    return tuple(item_list(value, what, str, "pass names"))


def mapping(value: object, what: str, of: str) -> Mapping[object, object]:
    """`value` itself when it is a mapping (of `of`, in words, for the error), else
    `CompilerOptionTypeError` naming what it got."""
    if not isinstance(value, Mapping):
        raise CompilerOptionTypeError(f"{what} must be a mapping of {of}, got {described(value)}")
    return value


def flag(value: object, what: str) -> bool:
    """`value` when it is a bool; anything else (the str "false", which is true) is
    `CompilerOptionTypeError` naming what it got."""
    if not isinstance(value, bool):
        raise CompilerOptionTypeError(f"{what} must be True or False, got {described(value)}")
    return value


def text(value: object, what: str, wanted: str) -> str:
    """`value` when it is a str; else `CompilerOptionTypeError` saying it must be a str
    (`wanted`: what it may be, in words) and what it got. The value itself is the caller's
    to check (`CompilerOptionError`)."""
    if not isinstance(value, str):
        raise CompilerOptionTypeError(f"{what} must be a str ({wanted}), got {described(value)}")
    return value
