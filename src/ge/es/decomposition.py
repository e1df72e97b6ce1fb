"""Custom operators' decompositions as graphs: what evaluation runs and passes can inline."""

from __future__ import annotations

from typing import Any

from ge.es.graph_builder import GraphBuilder
from ge.graph.graph import Graph
from ge.graph.tensor import Tensor
from ge.ops.registry import CustomOp

__all__ = ["build_decomposition"]


def build_decomposition(op: CustomOp, inputs: list[Tensor], attrs: dict[str, Any]) -> Graph:
    """A graph computing `op` from its decomposition with constant `inputs` (Tensors)."""
    if op.decomposition is None:
        raise ValueError(f"custom operator {op.spec.domain}::{op.spec.op_type} has no "
                         "decomposition")
    builder = GraphBuilder(f"{op.spec.op_type}_decomposition")
    holders = [builder.create_const(v) for v in inputs]
    result = op.decomposition(*holders, **attrs)
    outputs = list(result) if isinstance(result, (tuple, list)) else [result]
    return builder.build_and_reset(outputs)
