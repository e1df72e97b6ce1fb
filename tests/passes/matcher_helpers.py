"""Shared pieces of the matcher tests: small ONNX models, running one pass, onnxruntime."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

import ge.es.all as es
import ge.graph
from ge.es.opset import opset_scope
from ge.graph import Graph
from ge.passes import PatternFusionPass, pattern
from ge.passes.context import PassContext
from ge.passes.execution import PassRun, run_pass

F32 = TensorProto.FLOAT


class NegNeg(PatternFusionPass):
    """Neg(Neg(x)) -> x: the smallest pattern pass (expression style)."""

    @pattern
    def twice(self, inputs):
        return es.Neg(es.Neg(inputs[0]))

    def replacement(self, inputs):
        return inputs[0]


def model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[tuple[str, list[int]]],
          outputs: Sequence[tuple[str, list[int]]],
          initializers: Sequence[onnx.TensorProto] = (), opset: int = 17) -> onnx.ModelProto:
    """A float32 model (inputs and outputs typed), checked by onnx."""
    graph = helper.make_graph(
        list(nodes), "g",
        [helper.make_tensor_value_info(n, F32, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F32, s) for n, s in outputs],
        list(initializers))
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    return onnx.shape_inference.infer_shapes(proto)


def const(name: str, values: Any, dtype: Any = np.float32) -> onnx.TensorProto:
    array = np.asarray(values, dtype=dtype)
    return onnx.numpy_helper.from_array(array, name)


def load(proto: onnx.ModelProto) -> Graph:
    return ge.graph.load(proto)


def rewrite(instance: Any, graph: Graph, *, kind: str = "pattern_fusion",
            op_types: Sequence[str] = ()) -> PassRun:
    """Run one pass instance on `graph` as the scheduler does (a transaction, the opset)."""
    run = PassRun(PassContext(type(instance).__name__), tuple(op_types))
    with graph.transaction(), opset_scope(graph.opset_imports):
        run_pass(kind, instance, graph, run)
    return run


def op_counts(graph: Graph) -> Counter[str]:
    return Counter(n.type for n in graph.get_direct_nodes()
                   if n.type not in ("Data", "NetOutput", "Const"))


def outputs_of(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(proto.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_same_outputs(before: onnx.ModelProto, after: Graph, seed: int = 0) -> None:
    """The rewritten graph computes what the original model does (onnxruntime, 1e-5)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in before.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    exported = after.to_onnx()
    onnx.checker.check_model(exported, full_check=True)
    assert [o.name for o in exported.graph.output] == [o.name for o in before.graph.output]
    for want, got in zip(outputs_of(before, feeds), outputs_of(exported, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
