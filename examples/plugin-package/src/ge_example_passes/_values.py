"""Reading constants off matched nodes (shared by the passes of this package)."""

from __future__ import annotations

from typing import Any

import numpy as np

CONSTANT_TYPES = ("Const", "Constant")


def constant_input(node: Any, index: int) -> np.ndarray | None:
    """The value of input `index` of `node` when a constant produces it, else None.

    Initializers are `Const` nodes; an ONNX `Constant` counts when it holds a tensor
    (`value`), not when it was written with `value_float(s)` / `value_int(s)`."""
    if index >= node.get_inputs_size():
        return None
    producer = node.get_input_producer(index)
    return None if producer is None else constant_output(producer[0])


def constant_output(node: Any) -> np.ndarray | None:
    """The value `node` holds when it is a constant (see `constant_input`), else None."""
    if node.type not in CONSTANT_TYPES or not node.has_attr("value"):
        return None
    return np.asarray(node.get_attr("value").numpy())


def first_of_type(nodes: list[Any], op_type: str) -> Any:
    """The first node of `op_type` among `nodes` (a match always has one)."""
    return next(n for n in nodes if n.type == op_type)


def text_attr(node: Any, name: str, default: str) -> str:
    """A string attribute (stored as bytes or str) or its ONNX default."""
    if not node.has_attr(name):
        return default
    value = node.get_attr(name)
    return value.decode() if isinstance(value, bytes) else str(value)
