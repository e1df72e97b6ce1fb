"""Values that are not tensors (sequences, maps, optionals) as `ge.session` holds them.

onnxruntime gives them as plain Python values, and so does `ge.session`: a tensor is a
numpy array; a sequence a `list` of its elements; a map a `dict` (int or str keys; its
values Python numbers or str, as onnxruntime gives a ZipMap's probabilities); an optional
its element, or `None` when empty.

`value_label` names the type of a value run (`seq(map(int64, float))`); `paired_leaves`
walks two values in step, as the comparison does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto, helper

__all__ = [
    "Difference",
    "is_nested",
    "leaf_count",
    "onnx_elem_name",
    "outer_shape",
    "paired_leaves",
    "path_text",
    "value_label",
]

#: A step into a nested value: a sequence's position or a map's key.
Key = int | str


def onnx_elem_name(elem_type: int) -> str:
    """An element type in ONNX's type notation: `float`, `double`, `int64`, `string`."""
    if not elem_type:
        return "?"
    try:
        return str(TensorProto.DataType.Name(elem_type)).lower()
    except ValueError:
        return str(elem_type)


# -- naming and walking values run ----------------------------------------------------------


def is_nested(value: Any) -> bool:
    """Whether `value` is a sequence, map or empty optional rather than a tensor."""
    return value is None or isinstance(value, (list, tuple, dict))


def _leaf_label(value: Any) -> str:
    """A tensor or map value inside a nested value, in ONNX's notation."""
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "OSU":
            return "tensor(string)"
        try:
            return f"tensor({onnx_elem_name(helper.np_dtype_to_tensor_dtype(value.dtype))})"
        except (KeyError, TypeError, ValueError):
            return f"tensor({value.dtype.name})"
    if isinstance(value, np.generic):
        return _leaf_label(np.asarray(value)).removeprefix("tensor(").removesuffix(")")
    if isinstance(value, bool):
        return "bool"
    return {int: "int64", float: "float", str: "string"}.get(type(value), type(value).__name__)


def value_label(value: Any, *, nested: bool = False) -> str:
    """The type of a value run, as the verification table and `ge run` show it: a tensor
    by its dtype (`float32`, `string`), a sequence, map or optional in ONNX's notation from
    its first element (`seq(map(int64, float))`: a map's values are Python numbers, as
    onnxruntime gives them; `seq(?)` when empty), an empty optional `None`."""
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return f"seq({value_label(value[0], nested=True) if len(value) else '?'})"
    if isinstance(value, dict):
        if not value:
            return "map(?, ?)"
        key, item = next(iter(value.items()))
        return f"map({_leaf_label(key)}, {value_label(item, nested=True)})"
    if not nested:
        array = np.asarray(value)
        return "string" if array.dtype.kind in "OSU" else array.dtype.name
    return _leaf_label(value)


def outer_shape(value: Any) -> tuple[int, ...] | None:
    """A tensor's shape; a sequence's or map's length as a 1-d shape; None for None."""
    if value is None:
        return None
    if isinstance(value, (list, tuple, dict)):
        return (len(value),)
    return tuple(np.shape(value))


def leaf_count(value: Any) -> int:
    """The elements of the tensors and map values inside `value` (0 for None)."""
    if value is None:
        return 0
    if isinstance(value, (list, tuple)):
        return sum(map(leaf_count, value))
    if isinstance(value, dict):
        return sum(map(leaf_count, value.values()))
    return int(value.size) if isinstance(value, np.ndarray) else 1  # a number or str


def path_text(path: tuple[Key, ...]) -> str:
    """A place inside a nested value as Python indexes it: `[3][1]`, `[0]['cat']`."""
    return "".join(f"[{key!r}]" for key in path)


@dataclass(frozen=True)
class Difference:
    """Two values differ in structure at `path`: `text` says how; `elements` counts the
    expected value's elements there (all of them are taken as beyond tolerance)."""

    path: tuple[Key, ...]
    text: str
    elements: int

    def describe(self) -> str:
        return f"at {path_text(self.path)}: {self.text}" if self.path else self.text


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, (list, tuple)):
        return "a sequence"
    if isinstance(value, dict):
        return "a map"
    return "a tensor" if isinstance(value, np.ndarray) else f"a {type(value).__name__}"


def _keys_text(keys: list[Any]) -> str:
    shown = ", ".join(repr(k) for k in keys[:5])
    return f"[{shown}{', …' if len(keys) > 5 else ''}]"


def paired_leaves(expected: Any, actual: Any, path: tuple[Key, ...] = ()
                  ) -> Iterator[tuple[tuple[Key, ...], Any, Any] | Difference]:
    """Walk two values in step: `(path, expected leaf, actual leaf)` for each pair of
    tensors or map values at the same place, a `Difference` where their structure differs
    (a sequence's length, a map's keys, None against a value, a sequence against a map).
    Maps are matched by key (the common keys are still walked), sequences by position."""
    if expected is None or actual is None:
        if expected is not actual:
            what = "None instead of a value" if actual is None else "a value instead of None"
            yield Difference(path, what, max(leaf_count(expected), 1))
        return
    e_seq, a_seq = isinstance(expected, (list, tuple)), isinstance(actual, (list, tuple))
    e_map, a_map = isinstance(expected, dict), isinstance(actual, dict)
    if (e_seq, e_map) != (a_seq, a_map):
        yield Difference(path, f"{_kind(actual)} instead of {_kind(expected)}",
                         max(leaf_count(expected), 1))
        return
    if e_seq:
        if len(expected) != len(actual):
            yield Difference(path, f"length {len(actual)} instead of {len(expected)}",
                             max(leaf_count(expected), 1))
            return
        for i, (e, a) in enumerate(zip(expected, actual)):
            if is_nested(e) or is_nested(a):
                yield from paired_leaves(e, a, (*path, i))
            else:  # (a leaf here: no generator of its own for each of 100,000 rows)
                yield (*path, i), e, a
        return
    if e_map:
        missing = [k for k in expected if k not in actual]
        extra = [k for k in actual if k not in expected]
        if missing or extra:
            parts = ([f"keys {_keys_text(missing)} missing"] if missing else []) + (
                [f"keys {_keys_text(extra)} not expected"] if extra else [])
            yield Difference(path, ", ".join(parts),
                             max(sum(leaf_count(expected[k]) for k in missing), 1))
        for key, e in expected.items():
            if key not in actual:
                continue
            a = actual[key]
            if is_nested(e) or is_nested(a):
                yield from paired_leaves(e, a, (*path, key))
            else:
                yield (*path, key), e, a
        return
    yield path, expected, actual
