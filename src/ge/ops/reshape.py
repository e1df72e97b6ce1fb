"""What a Reshape makes of its input's dims: the one arithmetic of ONNX's Reshape rules.

A 0 in the target shape copies the input's dim at that axis (unless `allowzero`=1, which
makes it a size) and one -1 takes what the other axes leave of the element count. Dims
are sizes, named symbols (one name is one size throughout a model) or None (not known), so
the same function serves inference (`ge.ops.shape_values`, where targets are computed
from shapes) and the built-in passes (constant targets, fully known input dims).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ge.graph.node import Node

__all__ = ["Dim", "allow_zero", "reshaped_dims"]

Dim = int | str | None  # a size, a symbol, or not known


def allow_zero(node: Node) -> bool:
    """Whether a Reshape's 0 is a size (`allowzero`=1, as onnxruntime reads it) rather than
    "keep this dim"."""
    return node.has_attr("allowzero") and node.get_attr("allowzero") == 1


def reshaped_dims(dims: Sequence[Dim] | None, target: Sequence[Dim],
                  zero_is_size: bool) -> list[Dim] | None:
    """The dims a Reshape to `target` makes of input dims `dims` (None: unknown rank): each
    target element, a 0 copying the input's dim there (unless `zero_is_size`), a -1 the
    size or symbol the others leave when the symbols cancel and the sizes divide; None at
    an axis where that cannot be told. None altogether for a target no Reshape takes
    (more than one -1, another negative size)."""
    out: list[Dim] = []
    for i, t in enumerate(target):
        if t == 0 and not zero_is_size:
            out.append(dims[i] if dims is not None and i < len(dims) else None)
        else:
            out.append(t)
    if out.count(-1) == 1:
        k = out.index(-1)
        out[k] = _remaining(dims, out[:k] + out[k + 1:])
    if any(isinstance(d, int) and d < 0 for d in out):
        return None
    return out


def _remaining(dims: Sequence[Dim] | None, others: Sequence[Dim]) -> Dim:
    """The dim `-1` stands for: the input's element count over the others', when the
    symbols cancel and the sizes divide; None when that cannot be told."""
    if dims is None or None in dims or None in others:
        return None
    symbols = [d for d in dims if isinstance(d, str)]
    for d in others:
        if isinstance(d, str):
            if d not in symbols:
                return None
            symbols.remove(d)
    sizes = math.prod(d for d in dims if isinstance(d, int))
    divisor = math.prod(d for d in others if isinstance(d, int))
    if divisor == 0 or sizes % divisor:
        return None
    if not symbols:
        return sizes // divisor
    if len(symbols) == 1 and sizes == divisor:
        return symbols[0]
    return None
