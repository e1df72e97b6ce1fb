"""Models with sparse constants (sparse initializers, `Constant`s of a `sparse_value`) for
the tests of compiling, converting, inspecting and saving them, and onnxruntime runs to
compare their outputs with."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

F = onnx.TensorProto.FLOAT
node = helper.make_node


def sparse(name: str, dense: np.ndarray, *, coordinates: bool = False
           ) -> onnx.SparseTensorProto:
    """`dense` in sparse form: its nonzero values, with their positions in the flattened
    tensor ([NNZ]) or, with `coordinates`, one row of coordinates each ([NNZ, rank])."""
    flat = dense.reshape(-1)
    where = np.flatnonzero(flat)
    indices = (np.stack(np.unravel_index(where, dense.shape), axis=1) if coordinates
               else where).astype(np.int64)
    return helper.make_sparse_tensor(numpy_helper.from_array(flat[where], name),
                                     numpy_helper.from_array(indices, name + "_indices"),
                                     list(dense.shape))


def vi(name: str, dims: list[int] | None, elem_type: int = F) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem_type, dims)


def sparse_model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto],
                 outputs: list[onnx.ValueInfoProto],
                 sparse_initializers: list[onnx.SparseTensorProto] = (),
                 initializers: list[onnx.TensorProto] = (),
                 functions: list[onnx.FunctionProto] = (), opset: int = 17,
                 check: bool = True) -> onnx.ModelProto:
    """A model of graph "g" at `opset` (and "mydomain" 1 with `functions`), checked by onnx's
    checker unless not to `check` (not its full check: its inference refuses sparse
    initializers)."""
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers),
                              sparse_initializer=list(sparse_initializers))
    opsets = [helper.make_opsetid("", opset)]
    if functions:
        opsets.append(helper.make_opsetid("mydomain", 1))
    model = helper.make_model(graph, opset_imports=opsets, functions=list(functions))
    if check:
        onnx.checker.check_model(model)
    return model


def dense_with_zeros(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """A float tensor of `shape` with about 60% zeros (the first and last elements not)."""
    rng = np.random.default_rng(seed)
    value = rng.standard_normal(shape).astype(np.float32)
    value[rng.random(shape) < 0.6] = 0
    flat = value.reshape(-1)
    flat[0], flat[-1] = 1.5, -2.0
    return value


def run_ort(model: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """`model`'s outputs on `feeds` in onnxruntime (CPU)."""
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, feeds)
