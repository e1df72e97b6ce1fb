"""Small ONNX models for pass tests, built with `onnx.helper` in one call."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ge._compat import new_model_ir_version

__all__ = ["ValueSpec", "make_model", "tensor"]

#: A graph input or output: a ValueInfoProto, or (name, shape) for float32, or
#: (name, shape, element type), the type an `onnx.TensorProto` constant or a numpy dtype.
ValueSpec = onnx.ValueInfoProto | tuple[str, Sequence[Any]] | tuple[str, Sequence[Any], Any]


def _elem_type(value: Any) -> int:
    if isinstance(value, int):
        return value
    return helper.np_dtype_to_tensor_dtype(np.dtype(value))


def _value(spec: ValueSpec) -> onnx.ValueInfoProto:
    if isinstance(spec, onnx.ValueInfoProto):
        return spec
    name, shape = spec[0], spec[1]
    elem: int = onnx.TensorProto.FLOAT if len(spec) == 2 else _elem_type(spec[2])
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def tensor(name: str, value: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    """An initializer named `name` holding `value` (as `dtype`)."""
    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def make_model(nodes: Iterable[onnx.NodeProto], inputs: Iterable[ValueSpec],
               outputs: Iterable[ValueSpec], initializers: Iterable[onnx.TensorProto] = (), *,
               opset: int = 17, name: str = "g", check: bool = True) -> onnx.ModelProto:
    """A one-graph model at `opset`, checked with onnx's full checker unless `check=False`.

    `make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [2, 3])], [("y", [2, 3])])`
    """
    graph = helper.make_graph(list(nodes), name, [_value(v) for v in inputs],
                              [_value(v) for v in outputs], initializer=list(initializers))
    # onnx would stamp its newest IR version, which an older onnxruntime refuses
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              ir_version=new_model_ir_version())
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model
