"""The hint for a pass that computed with a symbolic dim as if it were a size.

Dynamic exports have symbolic dims everywhere (`['batch', 4]`): a dim is then a `str`, and
code written for GE's static shapes (`dims[0] > 0`, `dims[0] % 8`, a constant built from
the dims) raises a TypeError that says nothing of dims. Where ge reports such an exception
(the E13028 of the pass that raised it, `ge passes explain` on a `meet_requirements` that
raised) it adds one sentence pointing at what a dim can be; this module holds the sentence
and the test of when it applies, so every place says the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ge.graph.tensor_desc import Shape

__all__ = ["SYMBOLIC_DIM_HINT", "shape_symbols", "symbolic_dim_hint"]

#: What a dim can be and where it is written down.
SYMBOLIC_DIM_HINT = ("a dim may be a symbol, a str such as 'batch', where the hook expects "
                     "an int: see docs/graph.md on dims")

# What Python says when a str meets int arithmetic or comparison: `'>' not supported
# between instances of 'str' and 'int'`, `unsupported operand type(s) for %: 'str' and
# 'int'`, `can only concatenate str (not "int") to str`, `must be real number, not str`,
# and `'hidden' % 8`, which formats: `not all arguments converted during string formatting`.
_STR_OPERAND = re.compile(r"'str'|\bstr \(not\b|\bnot str\b|"
                          r"^not all arguments converted during string formatting$")


def shape_symbols(shapes: Iterable[Shape]) -> set[str]:
    """The symbolic dims (names) of `shapes`; shapes of unknown rank have none."""
    return {dim for shape in shapes if not shape.is_unknown_rank()
            for dim in shape if isinstance(dim, str)}


def symbolic_dim_hint(exc: BaseException, symbols: Iterable[str]) -> str | None:
    """`SYMBOLIC_DIM_HINT` when `exc`, raised by pass code reading values whose dims include
    `symbols`, is clearly a symbol used as a size: a TypeError about a str operand, or a
    TypeError or ValueError quoting one of the symbols (`create_const_int64: 'N' is not a
    int`, `invalid literal for int() with base 10: 'batch'`). None otherwise, and when
    there is no symbol: a TypeError of a static model is the pass's own."""
    if not isinstance(exc, (TypeError, ValueError)):
        return None
    names = set(symbols)
    if not names:
        return None
    text = str(exc)
    if isinstance(exc, TypeError) and _STR_OPERAND.search(text):
        return SYMBOLIC_DIM_HINT
    if any(repr(name) in text for name in names):
        return SYMBOLIC_DIM_HINT
    return None
