"""Constant evaluation: the outputs of a node whose inputs are all constants.

Standard operators run in onnx's reference evaluator on a one-node model (every operator
of every opset, no session to build); custom operators run their numpy kernel, or their
decomposition (built by `ge.es`, which installs the builder hook at import) in the same
evaluator.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.reference import ReferenceEvaluator

from ge.errors import ConstantEvaluationError
from ge.graph.graph import Graph
from ge.graph.node import Node
from ge.graph.tensor import Tensor
from ge.ops.inference import is_custom_node
from ge.ops.onnx_node import (
    STRUCTURAL,
    const_value,
    input_value_name,
    node_proto,
    opset_imports_of,
    outer_inputs,
)
from ge.ops.registry import CustomOp, get_custom_op

__all__ = ["evaluate_node", "is_constant_foldable", "set_decomposition_builder"]

# (custom op, input values, attrs) -> Graph computing the op from its decomposition.
DecompositionBuilder = Callable[[CustomOp, list[Tensor], dict[str, Any]], Graph]
_decomposition_builder: DecompositionBuilder | None = None


def set_decomposition_builder(builder: DecompositionBuilder | None) -> None:
    """Install the function that turns a decomposition into a Graph (`ge.es` does this)."""
    global _decomposition_builder
    _decomposition_builder = builder


def _inputs(node: Node) -> list[Tensor | None]:
    values: list[Tensor | None] = []
    for i in range(node.get_inputs_size()):
        if node.get_input_producer(i) is None:
            values.append(None)
            continue
        value = const_value(node, i)
        if value is None:
            raise ConstantEvaluationError(
                f"node {node.name!r} ({node.type}): input {i} is not a constant",
                nodes=[node.name])
        values.append(value)
    return values


def is_constant_foldable(node: Node) -> bool:
    """True when every connected input (and outer value of its subgraphs) is a `Const`."""
    if node.type in STRUCTURAL and not node.domain:
        return False
    for i in range(node.get_inputs_size()):
        if node.get_input_producer(i) is not None and const_value(node, i) is None:
            return False
    return all(src.type == "Const" for src, _ in outer_inputs(node).values())


def _run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray], what: str) -> list[Any]:
    try:
        return list(ReferenceEvaluator(model).run(None, feeds))
    except Exception as err:
        raise ConstantEvaluationError(f"{what}: evaluation failed: {err}") from err


def _evaluate_custom(node: Node, values: list[Tensor | None]) -> list[Tensor]:
    custom = get_custom_op(node.type, node.domain)
    what = f"node {node.name!r} ({node.domain}::{node.type})"
    if custom is None:
        raise ConstantEvaluationError(f"{what}: the custom operator is not registered")
    attrs = {k: s.default for k, s in custom.spec.attributes.items() if s.default is not None}
    attrs.update({k: node.get_attr(k) for k in node.get_attr_names()})
    if custom.kernel is not None:
        arrays = [v.numpy() if v is not None else None for v in values]
        try:
            result = custom.kernel(*arrays, **attrs)
        except Exception as err:
            raise ConstantEvaluationError(f"{what}: the kernel failed: {err}") from err
        results = list(result) if isinstance(result, (tuple, list)) else [result]
    else:
        if _decomposition_builder is None:
            raise ConstantEvaluationError(
                f"{what}: evaluating a decomposition needs ge.es (import ge.es first)")
        graph = _decomposition_builder(custom, [v for v in values if v is not None], attrs)
        results = _run_model(graph.to_onnx(), {}, what)
    return [Tensor(np.asarray(r)) for r in results[: node.get_outputs_size()]]


def evaluate_node(node: Node) -> list[Tensor]:
    """The output values of `node`, whose connected inputs must all be `Const` nodes.

    Returns one `Tensor` per output; raises `ConstantEvaluationError` when an input is not a
    constant or the operator fails.
    """
    values = _inputs(node)
    if is_custom_node(node):
        return _evaluate_custom(node, values)
    proto = node_proto(node)
    initializers = []
    for i, value in enumerate(values):
        if value is not None:
            initializers.append(value.to_proto(input_value_name(node, i)))
    for name, (src, _) in outer_inputs(node).items():
        if src.type != "Const":
            raise ConstantEvaluationError(
                f"node {node.name!r} ({node.type}): its subgraphs read {name!r}, "
                "which is not a constant", nodes=[node.name])
        initializers.append(src.get_attr("value").to_proto(name))
    outputs = [helper.make_empty_tensor_value_info(n) for n in node.get_output_names() if n]
    graph = helper.make_graph([proto], "evaluate", [], outputs, initializer=initializers)
    model = helper.make_model(graph, opset_imports=opset_imports_of(node))
    results = _run_model(model, {}, f"node {node.name!r} ({node.type})")
    return [Tensor(np.asarray(r)) for r in results]
