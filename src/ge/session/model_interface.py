"""A model's interface as runs see it: its inputs (name, type, dims, a default), the dims
its outputs declare, and the check of the inputs a run is given against them. A `Graph` is
read as it is (nothing exported), a `ModelProto` from its declarations."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from ge.errors import GraphTypeError, VerificationInputError
from ge.graph.graph import Graph
from ge.graph.tensor import Tensor
from ge.graph.types import DataType, data_type_to_onnx, elem_type_name
from ge.graph.value_info import holds_non_tensor
from ge.session.low_bit import restored
from ge.session.values import ValueType, fitted_value, value_text

__all__ = ["Dim", "InputSpec", "Model", "checked_inputs", "model_inputs", "model_name",
           "model_outputs", "proto_inputs"]

Model = Graph | onnx.ModelProto
Dim = int | str | None  # a static size, a symbolic name, or unknown


@dataclass(frozen=True)
class InputSpec:
    """One graph input: name, ONNX element type (0 = unknown), dims (None = unknown rank);
    `optional` inputs have a default value (an initializer of the same name). `nested` is
    the type of an input that is not a tensor (a sequence, map, optional or sparse tensor:
    `ge.session.values`), None for a tensor; its `elem_type` is then 0 and its `dims`
    None."""

    name: str
    elem_type: int
    dims: tuple[Dim, ...] | None
    optional: bool = False
    nested: ValueType | None = None

    def describe(self) -> str:
        """E.g. `float32 [batch, 16]` (`?` for an unknown dim), `seq(tensor(float) [2])`."""
        if self.nested is not None:
            return self.nested.text()
        dtype = elem_type_name(self.elem_type) if self.elem_type else "any type"
        if self.dims is None:
            return f"{dtype} (any shape)"
        return f"{dtype} [{', '.join('?' if d is None else str(d) for d in self.dims)}]"


def _graph_inputs(graph: Graph) -> list[InputSpec]:
    # Initializers giving inputs a default (IR >= 4) are kept aside by the importer.
    defaults = getattr(graph, "_input_defaults", {})
    specs = []
    for node in graph.get_data_nodes():
        name = node.get_output_names()[0]
        desc = node.get_output_desc(0)
        shape = desc.shape
        dims = None if shape.is_unknown_rank() else _dims_of(shape)
        if holds_non_tensor(desc):  # its ONNX type is kept on the desc
            specs.append(InputSpec(name, 0, None, name in defaults,
                                   ValueType.from_proto(desc._source.type)))
            continue
        dtype = desc.data_type
        elem = 0 if dtype == DataType.DT_UNDEFINED else data_type_to_onnx(dtype)
        specs.append(InputSpec(name, elem, dims, name in defaults))
    return specs


def proto_inputs(model: onnx.ModelProto) -> list[InputSpec]:
    defaults = {t.name for t in model.graph.initializer}
    specs = []
    for vi in model.graph.input:
        if vi.type.WhichOneof("value") not in (None, "tensor_type"):
            specs.append(InputSpec(vi.name, 0, None, vi.name in defaults,
                                   ValueType.from_proto(vi.type)))
            continue
        tensor = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        elem, dims = 0, None
        if tensor is not None:
            elem = tensor.elem_type
            if tensor.HasField("shape"):
                dims = _proto_dims(tensor)
        specs.append(InputSpec(vi.name, elem, dims, vi.name in defaults))
    return specs


def model_inputs(model: Model) -> list[InputSpec]:
    """The inputs of a model in order (a Graph is read directly, not exported)."""
    if isinstance(model, Graph):
        return _graph_inputs(model)
    if isinstance(model, onnx.ModelProto):
        return proto_inputs(model)
    hint = ("; ge.graph.load(path) reads a model file" if isinstance(model, (str, os.PathLike))
            else "")  # (a plain TypeError, outside ge's errors: trial Z)
    raise GraphTypeError(f"model must be a ge.graph.Graph or an onnx.ModelProto, "
                         f"got {type(model).__name__}{hint}")


def _dims_of(shape: Iterable[Dim]) -> tuple[Dim, ...]:
    """A desc's dims as `InputSpec` holds them: an unknown one (-1) as None."""
    return tuple(d if isinstance(d, str) else (None if d is None or d < 0 else d)
                 for d in shape)


def _proto_dims(tensor: onnx.TypeProto.Tensor) -> tuple[Dim, ...]:
    """A tensor type's declared dims: a size, a symbol, or None (neither; or -1, which
    exporters write for an unknown dim and onnxruntime reads so)."""
    return tuple((d.dim_value if d.dim_value >= 0 else None) if d.HasField("dim_value")
                 else (d.dim_param or None) for d in tensor.shape.dim)


def model_outputs(model: Model) -> dict[str, tuple[Dim, ...]]:
    """The dims each tensor output of `model` declares, by name (a dim: a size, a symbol,
    or None), leaving out the outputs declared without a shape."""
    if isinstance(model, onnx.ModelProto):
        declared = {}
        for vi in model.graph.output:
            tensor = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
            if tensor is not None and tensor.HasField("shape"):
                declared[vi.name] = _proto_dims(tensor)
        return declared
    net_output = model.get_net_output()
    declared = {}
    for i in range(net_output.get_inputs_size() if net_output is not None else 0):
        producer = net_output.get_input_producer(i)  # type: ignore[union-attr]
        if producer is None or not net_output.has_input_desc(i):  # type: ignore[union-attr]
            continue
        desc = net_output.get_input_desc(i)  # type: ignore[union-attr]
        if not desc.shape.is_unknown_rank() and not holds_non_tensor(desc):
            declared[producer[0].get_output_name(producer[1])] = _dims_of(desc.shape)
    return declared


def model_name(model: Model) -> str:
    return model.name if isinstance(model, Graph) else model.graph.name


# -- checking inputs --------------------------------------------------------------------------


def _problem(spec: InputSpec, value: Any, symbols: dict[str, tuple[str, int]]) -> str | None:
    """What is wrong with `value` as input `spec` (a tensor), or None."""
    if not isinstance(value, np.ndarray):
        return f"input {spec.name!r}: expected {spec.describe()}, got {value_text(value)}"
    wrong = False
    if spec.elem_type:
        if spec.elem_type == TensorProto.STRING:
            wrong = value.dtype.kind not in "OSU"
        else:
            try:
                wrong = value.dtype != helper.tensor_dtype_to_np_dtype(spec.elem_type)
            except (KeyError, TypeError, ValueError):
                wrong = False  # an element type numpy cannot hold: onnxruntime will judge
    if spec.dims is not None:
        if value.ndim != len(spec.dims):
            wrong = True
        else:
            for want, got in zip(spec.dims, value.shape):
                if isinstance(want, int) and want != got:
                    wrong = True
    if wrong:
        return f"input {spec.name!r}: expected {spec.describe()}, got {value_text(value)}"
    if spec.dims is not None:
        for want, got in zip(spec.dims, value.shape):
            if isinstance(want, str):
                first = symbols.setdefault(want, (spec.name, got))
                if first[1] != got:
                    return (f"input {spec.name!r}: dim {want!r} is {got}, but input "
                            f"{first[0]!r} gave it size {first[1]}")
    return None


def _as_arrays(inputs: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(inputs, Mapping):
        raise VerificationInputError(
            f"inputs must be a mapping of input name to array, got {type(inputs).__name__}")
    return {name: v.numpy() if isinstance(v, Tensor) else
            (np.asarray(v) if isinstance(v, np.generic) else v) for name, v in inputs.items()}


def checked_inputs(inputs: Mapping[str, Any], specs: list[InputSpec],
                   graph_name: str) -> dict[str, Any]:
    """`inputs` as arrays (ge Tensors converted), or for a sequence, map or optional input
    as the Python value onnxruntime takes (`ge.session.values.fitted_value`), after
    `check_inputs`' checks."""
    arrays = _as_arrays(inputs)
    problems: list[str] = []
    symbols: dict[str, tuple[str, int]] = {}
    known = {s.name for s in specs}
    for spec in specs:
        if spec.name not in arrays:
            if not spec.optional:
                problems.append(f"input {spec.name!r}: missing (expected {spec.describe()})")
            continue
        if spec.nested is not None:
            arrays[spec.name], problem = fitted_value(arrays[spec.name], spec.nested)
            if problem:
                problems.append(f"input {spec.name!r}: {problem}")
            continue
        if spec.elem_type:  # a float8 or int4 array read back from an .npz file is void
            arrays[spec.name] = restored(arrays[spec.name], spec.elem_type)
        problem = _problem(spec, arrays[spec.name], symbols)
        if problem:
            problems.append(problem)
    names = ", ".join(s.name for s in specs) or "none"
    problems.extend(f"input {name!r}: not an input of the graph (its inputs: {names})"
                    for name in arrays if name not in known)
    if problems:
        if len(problems) == 1:
            raise VerificationInputError(f"inputs do not fit graph {graph_name!r}: {problems[0]}")
        lines = "\n".join(f"  - {p}" for p in problems)
        raise VerificationInputError(
            f"inputs do not fit graph {graph_name!r} ({len(problems)} problems):\n{lines}")
    return arrays
