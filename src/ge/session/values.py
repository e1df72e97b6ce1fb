"""Values that are not tensors (sequences, maps, optionals) as `ge.session` holds them.

onnxruntime takes and gives them as plain Python values, and so does `ge.session`
everywhere: inputs given, generated or read from an `.npz`, outputs run, compared and
written. A tensor is a numpy array; a sequence a `list` of its elements; a map a `dict`
(int or str keys; its values Python numbers or str, as onnxruntime gives a ZipMap's
probabilities); an optional its element, or `None` when empty.

`ValueType` is the ONNX type of a graph input, with its text in ONNX's notation
(`seq(tensor(float) [2])`, `map(string, tensor(float))`); `fitted_value` checks a given
value against it (converting ge Tensors, numpy scalars, tuples); `value_label` names the
type of a value run (`seq(map(int64, float))`); `paired_leaves` walks two values in step,
as the comparison does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

__all__ = [
    "MAP",
    "OPTIONAL",
    "SEQUENCE",
    "SPARSE",
    "TENSOR",
    "UNKNOWN",
    "Difference",
    "ValueType",
    "fitted_value",
    "is_nested",
    "leaf_count",
    "onnx_elem_name",
    "outer_shape",
    "paired_leaves",
    "path_text",
    "value_label",
    "value_text",
]

Dim = int | str | None  # a static size, a symbolic name, or unknown
#: A step into a nested value: a sequence's position or a map's key.
Key = int | str

TENSOR, SEQUENCE, MAP, OPTIONAL, SPARSE, UNKNOWN = (
    "tensor", "sequence", "map", "optional", "sparse_tensor", "unknown")


def onnx_elem_name(elem_type: int) -> str:
    """An element type in ONNX's type notation: `float`, `double`, `int64`, `string`."""
    if not elem_type:
        return "?"
    try:
        return str(TensorProto.DataType.Name(elem_type)).lower()
    except ValueError:
        return str(elem_type)


@dataclass(frozen=True)
class ValueType:
    """The ONNX type of a value: a tensor (`elem_type`, `dims`), a sequence or an optional
    of `element`, a map from `elem_type` keys to `element` values, a sparse tensor, or
    unknown (a TypeProto with nothing set)."""

    kind: str
    elem_type: int = 0  # a tensor's element type; a map's key type
    dims: tuple[Dim, ...] | None = None  # a tensor's dims (None: unknown rank)
    element: ValueType | None = None  # a sequence's or optional's element; a map's value

    @classmethod
    def from_proto(cls, proto: onnx.TypeProto) -> ValueType:
        which = proto.WhichOneof("value")
        if which in ("tensor_type", "sparse_tensor_type"):
            tensor = getattr(proto, which)
            dims = None
            if tensor.HasField("shape"):
                dims = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                             for d in tensor.shape.dim)
            return cls(TENSOR if which == "tensor_type" else SPARSE, tensor.elem_type, dims)
        if which in ("sequence_type", "optional_type"):
            inner = getattr(proto, which)
            element = (cls.from_proto(inner.elem_type) if inner.HasField("elem_type")
                       else cls(UNKNOWN))
            return cls(SEQUENCE if which == "sequence_type" else OPTIONAL, element=element)
        if which == "map_type":
            value = (cls.from_proto(proto.map_type.value_type)
                     if proto.map_type.HasField("value_type") else cls(UNKNOWN))
            return cls(MAP, proto.map_type.key_type, element=value)
        return cls(UNKNOWN)

    def text(self) -> str:
        """ONNX's notation, with a tensor's dims when known: `seq(tensor(float) [2])`."""
        if self.kind in (TENSOR, SPARSE):
            dims = "" if self.dims is None else (
                f" [{', '.join('?' if d is None else str(d) for d in self.dims)}]")
            return f"{self.kind}({onnx_elem_name(self.elem_type)}){dims}"
        inner = self.element.text() if self.element is not None else "?"
        if self.kind == SEQUENCE:
            return f"seq({inner})"
        if self.kind == OPTIONAL:
            return f"optional({inner})"
        if self.kind == MAP:
            return f"map({onnx_elem_name(self.elem_type)}, {inner})"
        return "an unknown type"

    def what_to_give(self) -> str:
        """How a value of this type is given in Python: `a list of arrays`, `a dict`."""
        if self.kind == SEQUENCE:
            element = self.element
            if element is not None and element.kind == TENSOR:
                return "a list of numpy arrays"
            return f"a list (of {element.what_to_give() if element else 'values'})"
        if self.kind == MAP:
            return "a dict"
        if self.kind == OPTIONAL:
            inner = self.element.what_to_give() if self.element is not None else "a value"
            return f"None or {inner}"
        return "a numpy array"


# -- checking a value given for a type ------------------------------------------------------


def _np_dtype(elem_type: int) -> np.dtype[Any] | None:
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def _array_text(array: np.ndarray) -> str:
    dtype = "string" if array.dtype.kind in "OSU" else array.dtype.name
    return f"{dtype} [{', '.join(str(d) for d in array.shape)}]"


def value_text(value: Any) -> str:
    """A value given, for a message: `float32 [2, 3]`, `list of 2`, `None`, `str`."""
    if isinstance(value, np.ndarray):
        return _array_text(value)
    if isinstance(value, (list, tuple, dict)):
        return f"{type(value).__name__} of {len(value)}"
    return "None" if value is None else type(value).__name__


def _tensor_problem(array: np.ndarray, vtype: ValueType) -> bool:
    """Whether `array` does not fit the tensor type `vtype` (its element type, its rank and
    static dims; symbolic dims are not held to one size inside a sequence)."""
    if vtype.elem_type == TensorProto.STRING:
        wrong = array.dtype.kind not in "OSU"
    else:
        want = _np_dtype(vtype.elem_type) if vtype.elem_type else None
        wrong = want is not None and array.dtype != want
    if vtype.dims is not None:
        wrong = wrong or array.ndim != len(vtype.dims) or any(
            isinstance(d, int) and d != n for d, n in zip(vtype.dims, array.shape))
    return wrong


def _as_array(value: Any) -> Any:
    """A tensor inside a sequence or optional as an array: ge Tensors and numpy scalars
    converted; lists of numbers become arrays (a ragged one stays a list: refused)."""
    from ge.graph.tensor import Tensor

    if isinstance(value, Tensor):
        return value.numpy()
    if isinstance(value, (np.generic, list, tuple)):
        try:
            return np.asarray(value)
        except ValueError:  # ragged: "inhomogeneous shape"
            return value
    return value


def _scalar(value: Any) -> Any:
    """A map value as onnxruntime gives it: a Python number or str (numpy scalars and 0-d
    arrays converted)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return value.item() if isinstance(value, np.generic) else value


_KINDS_OF = {"f": (float, int), "c": (complex, float, int), "i": (int,), "u": (int,),
             "b": (bool,)}


def _scalar_fits(value: Any, elem_type: int) -> bool:
    if elem_type == TensorProto.STRING:
        return isinstance(value, str)
    dtype = _np_dtype(elem_type)
    if dtype is None:
        return True  # a type numpy cannot hold: onnxruntime will judge
    kinds = _KINDS_OF.get(dtype.kind, ())
    return isinstance(value, kinds) and (dtype.kind == "b" or not isinstance(value, bool))


def fitted_value(value: Any, vtype: ValueType, path: tuple[Key, ...] = ()
                 ) -> tuple[Any, str | None]:
    """`value` given for a value of type `vtype` as onnxruntime takes it (ge Tensors and
    numpy scalars converted, tuples as lists), and what is wrong with it (None when it
    fits): `element [1]: expected tensor(float) [2], got float64 [3]`."""
    where = f"element {path_text(path)}: " if path else ""

    def wrong(got: Any) -> str:
        return f"{where}expected {vtype.text()}, got {value_text(got)}"

    if vtype.kind == OPTIONAL:
        if value is None:
            return None, None
        element = vtype.element or ValueType(UNKNOWN)
        fitted, problem = fitted_value(value, element, path)
        if problem and element.kind == TENSOR:  # said of the optional, not of its element
            problem = wrong(fitted) + f" ({vtype.what_to_give()})"
        return fitted, problem
    if vtype.kind == SEQUENCE:
        if not isinstance(value, (list, tuple)):
            return value, wrong(value) + f" ({vtype.what_to_give()})"
        items, element = [], vtype.element or ValueType(UNKNOWN)
        for i, item in enumerate(value):
            fitted, problem = fitted_value(item, element, (*path, i))
            if problem:
                return value, problem
            items.append(fitted)
        return items, None
    if vtype.kind == MAP:
        if not isinstance(value, dict):
            return value, wrong(value) + " (a dict)"
        out, element = {}, vtype.element or ValueType(UNKNOWN)
        scalar = element.kind == TENSOR and not element.dims
        for key, item in value.items():
            key = _scalar(key)
            if not _scalar_fits(key, vtype.elem_type):
                return value, (f"{where}expected {vtype.text()}, got the key {key!r} "
                               f"({type(key).__name__})")
            if scalar:
                item = _scalar(item)
                if not _scalar_fits(item, element.elem_type):
                    return value, (f"{where}expected {vtype.text()}, got {item!r} "
                                   f"({type(item).__name__}) for the key {key!r}")
                out[key] = item
                continue
            fitted, problem = fitted_value(item, element, (*path, key))
            if problem:
                return value, problem
            out[key] = fitted
        return out, None
    if vtype.kind == TENSOR:
        array = _as_array(value)
        if not isinstance(array, np.ndarray):
            return value, wrong(array)
        return array, (wrong(array) if _tensor_problem(array, vtype) else None)
    return value, None  # sparse or unknown: onnxruntime will judge


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
