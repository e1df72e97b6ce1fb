"""An operator call's arguments read against its schema: attribute values converted to the
kind each attribute takes, arguments matched to the formal inputs, the call's output count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, helper

from ge.errors import GeError, GraphTypeError, OpAttributeError, OpInputError
from ge.es.tensor_holder import TensorHolder
from ge.graph.attributes import int64_problem
from ge.graph.graph import Graph
from ge.graph.node import is_const
from ge.graph.tensor import Tensor
from ge.graph.types import DataType, data_type_from_numpy, data_type_to_onnx
from ge.ops.schemas import AttrSpec, OpSpec

__all__ = ["convert_attr", "default_output_count", "output_count", "split_arguments"]

A = AttributeProto


# -- attributes ----------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _tensor_of(where: str, spec: AttrSpec, v: Any) -> Tensor | None:
    """The Tensor an attribute's value gives, None for a value of no tensor;
    `OpAttributeError` for an array a Tensor cannot hold (strings that are not UTF-8)."""
    if isinstance(v, Tensor):
        return v
    if isinstance(v, (np.ndarray, np.generic)):
        try:
            return Tensor(np.asarray(v))
        except GraphTypeError as exc:
            raise OpAttributeError(f"{where}: attribute {spec.name!r}: {exc.message}") from None
    return None


def convert_attr(where: str, spec: AttrSpec, value: Any) -> AttributeProto | Graph | list[Graph]:
    """The attribute value in the kind the schema asks for (`OpAttributeError` otherwise)."""
    kind = spec.kind
    ok: Any = None
    if kind == A.INT:
        if isinstance(value, DataType):
            ok = data_type_to_onnx(value)
        elif isinstance(value, (bool, np.bool_)) or _is_int(value):
            ok = int(value)
    elif kind == A.FLOAT:
        ok = float(value) if _is_number(value) else None
    elif kind == A.STRING:
        ok = value if isinstance(value, (str, bytes)) else None
    elif kind in (A.INTS, A.FLOATS, A.STRINGS, A.TENSORS, A.GRAPHS) and (
        isinstance(value, (list, tuple)) or _is_vector(kind, value)
    ):
        items = list(value)
        if kind == A.INTS and all(_is_int(v) or isinstance(v, (bool, np.bool_, DataType))
                                  for v in items):  # (bools as an INT takes them, 0 and 1)
            ok = [data_type_to_onnx(v) if isinstance(v, DataType) else int(v) for v in items]
        elif kind == A.FLOATS and all(_is_number(v) for v in items):
            ok = [float(v) for v in items]
        elif kind == A.STRINGS and all(isinstance(v, (str, bytes)) for v in items):
            ok = items
        elif kind == A.TENSORS:
            tensors = [_tensor_of(where, spec, v) for v in items]
            if all(t is not None for t in tensors):
                ok = [t.to_proto() for t in tensors]  # type: ignore[union-attr]
        elif kind == A.GRAPHS and all(isinstance(v, Graph) for v in items):
            return items
    elif kind == A.TENSOR:
        tensor = _tensor_of(where, spec, value)
        ok = tensor.to_proto() if tensor is not None else None
    elif kind == A.GRAPH:
        if isinstance(value, Graph):
            return value
    elif kind == A.SPARSE_TENSOR:
        ok = value if isinstance(value, onnx.SparseTensorProto) else None
    elif kind == A.TYPE_PROTO:
        ok = value if isinstance(value, onnx.TypeProto) else None
    elif kind == A.TYPE_PROTOS and isinstance(value, (list, tuple)):
        ok = list(value) if all(isinstance(v, onnx.TypeProto) for v in value) else None
    if ok is None:
        raise OpAttributeError(
            f"{where}: attribute {spec.name!r} must be of type {spec.kind_name}, got "
            f"{type(value).__name__} {value!r:.60}{_element_type_hint(kind, value)}"
        )
    problem = int64_problem(ok) if kind in (A.INT, A.INTS) else None
    if problem is not None:
        raise OpAttributeError(f"{where}: attribute {spec.name!r} {problem}")
    return helper.make_attribute(spec.name, ok, attr_type=kind)


def _is_vector(kind: int, value: Any) -> bool:
    """Whether `value` is a 1-D numpy array given for a list attribute of numbers or
    strings (`perm=np.array([0, 2, 1])`, `axes=np.arange(2)`): its elements are the list's."""
    return (kind in (A.INTS, A.FLOATS, A.STRINGS) and isinstance(value, np.ndarray)
            and value.ndim == 1)


def _element_type_hint(kind: int, value: Any) -> str:
    """For a numpy dtype given where ONNX takes an element type as an INT (`Cast(x,
    to=np.float16)`, trial YY): the DataType that says it."""
    if kind in (A.INTS, A.FLOATS, A.STRINGS) and isinstance(value, np.ndarray):
        return (f"; a list attribute takes a 1-D array, not one of {value.ndim} dims"
                if value.ndim != 1 else "")
    if kind != A.INT or not (isinstance(value, np.dtype) or (
            isinstance(value, type) and issubclass(value, np.generic))):
        return ""
    try:
        data_type = data_type_from_numpy(value)
    except GeError:
        return ""
    return f"; an element type is given as a DataType: DataType.{data_type.name}"



# -- inputs -------------------------------------------------------------------------------


def split_arguments(
    where: str, spec: OpSpec, args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """Positional and keyword arguments matched to formal inputs (flat) and attributes."""
    formals = spec.inputs
    by_name: dict[str, Any] = {}
    attrs: dict[str, Any] = {}
    input_names = [p.name for p in formals]
    for key, value in kwargs.items():
        if key in spec.attributes:
            attrs[key] = value
        elif key in input_names:
            by_name[key] = value
        else:
            known = ", ".join(sorted(spec.attributes)) or "none"
            raise OpAttributeError(
                f"{where} got an unknown attribute {key!r}; its attributes are: {known}"
            )
    values: list[Any] = []
    rest = list(args)
    for i, formal in enumerate(formals):
        if formal.variadic:
            given = rest[i:] if len(rest) > i else []
            if formal.name in by_name:
                if given:
                    raise OpInputError(f"{where}: input {formal.name!r} given twice")
                given = [by_name.pop(formal.name)]
            if len(given) == 1 and isinstance(given[0], (list, tuple)):
                given = list(given[0])
            values.extend(given)
            rest = []
            break
        if i < len(rest):
            if formal.name in by_name:
                raise OpInputError(f"{where}: input {formal.name!r} given twice")
            values.append(rest[i])
        else:
            values.append(by_name.pop(formal.name, None))
    else:
        if len(rest) > len(formals):
            raise OpInputError(
                f"{where} takes at most {len(formals)} inputs ({spec.summary()}), "
                f"got {len(rest)}"
            )
    while values and values[-1] is None and not (spec.variadic_input and
                                                 len(values) >= len(formals)):
        values.pop()
    for i, formal in enumerate(formals):
        if formal.option.value == "single" and (i >= len(values) or values[i] is None):
            raise OpInputError(
                f"{where} requires input {i} {formal.name!r} ({spec.summary()}); "
                f"got {len([v for v in values if v is not None])} input(s)"
            )
    if spec.variadic_input:
        count = len(values) - (len(formals) - 1)
        need = formals[-1].min_arity
        if count < need:
            raise OpInputError(
                f"{where} needs at least {need} value(s) for variadic input "
                f"{formals[-1].name!r} ({spec.summary()}), got {max(count, 0)}"
            )
    if not spec.min_input <= len(values) <= spec.max_input:
        raise OpInputError(
            f"{where} takes {spec.min_input}..{spec.max_input} inputs ({spec.summary()}), "
            f"got {len(values)}"
        )
    return values, attrs


# -- outputs ------------------------------------------------------------------------------


def _graph_outputs(graph: Any) -> int | None:
    if isinstance(graph, Graph):
        net_output = graph.get_net_output()
        return net_output.get_inputs_size() if net_output is not None else 0
    return None


def _const_size(holder: Any) -> int | None:
    if isinstance(holder, TensorHolder) and is_const(holder._node):
        return int(holder._node.get_attr("value").size)
    if isinstance(holder, (list, tuple)):
        return len(holder)
    return None


def default_output_count(spec: OpSpec, attrs: dict[str, Any], inputs: list[Any]) -> int | None:
    """How many outputs a call makes when `num_outputs` is not given (None: cannot tell)."""
    if not spec.variadic_output:
        required = [i for i, p in enumerate(spec.outputs) if p.option.value == "single"]
        return (required[-1] + 1) if required else 1
    if isinstance(attrs.get("num_outputs"), int):
        return int(attrs["num_outputs"])
    if spec.op_type == "Split" and not spec.domain:
        if "split" in attrs:
            return len(attrs["split"])
        names = [p.name for p in spec.inputs]
        if "split" in names and len(inputs) > names.index("split"):
            return _const_size(inputs[names.index("split")])
    if not spec.domain:
        if spec.op_type == "If":
            return _graph_outputs(attrs.get("then_branch"))
        if spec.op_type == "Loop":
            n = _graph_outputs(attrs.get("body"))
            return None if n is None else n - 1
        if spec.op_type == "Scan":
            return _graph_outputs(attrs.get("body"))
    return None


def output_count(where: str, spec: OpSpec, attrs: dict[str, Any], inputs: list[Any],
                 num_outputs: int | None) -> int:
    if num_outputs is None:
        count = default_output_count(spec, attrs, inputs)
        if count is None:
            raise OpInputError(
                f"{where} has a variable number of outputs that its attributes and inputs do "
                "not tell; pass num_outputs="
            )
    else:
        if isinstance(num_outputs, bool) or not isinstance(num_outputs, int):
            raise OpAttributeError(f"{where}: num_outputs must be an int, got {num_outputs!r}")
        count = num_outputs
    if not max(spec.min_output, 1) <= count <= spec.max_output:
        raise OpInputError(
            f"{where} has {spec.min_output}..{spec.max_output} outputs, {count} requested"
        )
    return count
