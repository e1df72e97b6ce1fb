"""Output types of the `ai.onnx.ml` operators onnx has no inference function for.

onnx defines no shape inference for Scaler, Normalizer, Imputer, LinearRegressor,
SVMRegressor, TreeEnsembleRegressor and FeatureVectorizer: their outputs stayed untyped,
and so did everything after them, so no pass could check a rank there (skl2onnx's MLP
pipelines: `Scaler` then the MatMul + Add that MatMulAddFusion never fused). The rules
here are what onnxruntime's kernels produce, which the tests check by running each one:
the per-feature operators keep X's shape, the regressors give `[N, targets]` (N = 1 for a
1-D X, which they read as one row, except TreeEnsembleRegressor, which refuses it),
FeatureVectorizer `[N, sum(inputdimensions)]`.
"""

from __future__ import annotations

from collections.abc import Callable

from ge.errors import OpNotFoundError
from ge.graph.node import Node
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import DataType
from ge.ops.onnx_node import node_spec
from ge.ops.schemas import get_op_spec

__all__ = ["infer_ml_node", "ml_rule_types", "typed_by_ml_rule"]

ML_DOMAIN = "ai.onnx.ml"
_FLOAT = DataType.DT_FLOAT

Dims = list[int | str]


def _dims(node: Node, index: int = 0) -> Dims | None:
    desc = node.get_input_desc(index)
    shape = desc.get_shape()
    if shape.is_unknown_rank():
        return None
    return list(shape)


def _rows(dims: Dims | None) -> int | str | None:
    """The row count of a regressor's X: its first dim, 1 for a 1-D X (one row)."""
    if dims is None or len(dims) not in (1, 2):
        return None
    return dims[0] if len(dims) == 2 else 1


def _same_shape(node: Node, data_type: DataType | None) -> list[TensorDesc | None]:
    dims = _dims(node)
    dtype = node.get_input_desc(0).data_type if data_type is None else data_type
    return [None if dims is None else TensorDesc(dims, data_type=dtype)]


def _rows_by(node: Node, columns: int | None, *, matrix_only: bool = False
             ) -> list[TensorDesc | None]:
    """`[N, columns]` floats; `matrix_only`: nothing for a 1-D X (onnxruntime refuses it)."""
    dims = _dims(node)
    if matrix_only and (dims is None or len(dims) != 2):
        return [None]
    rows = _rows(dims)
    if rows is None or columns is None:
        return [None]
    return [TensorDesc([rows, columns], data_type=_FLOAT)]


def _int_attr(node: Node, name: str, default: int) -> int:
    return int(node.get_attr(name)) if node.has_attr(name) else default


def _feature_vectorizer(node: Node) -> list[TensorDesc | None]:
    if not node.has_attr("inputdimensions"):
        return [None]
    width = sum(int(d) for d in node.get_attr("inputdimensions"))
    return _rows_by(node, width)


_RULES: dict[str, Callable[[Node], list[TensorDesc | None]]] = {
    "Scaler": lambda node: _same_shape(node, _FLOAT),
    "Normalizer": lambda node: _same_shape(node, _FLOAT),
    "Imputer": lambda node: _same_shape(node, None),
    "LinearRegressor": lambda node: _rows_by(node, _int_attr(node, "targets", 1)),
    "SVMRegressor": lambda node: _rows_by(node, 1),
    "TreeEnsembleRegressor": lambda node: _rows_by(node, _int_attr(node, "n_targets", 1),
                                                   matrix_only=True),
    "FeatureVectorizer": _feature_vectorizer,
}


def typed_by_ml_rule(node: Node) -> bool:
    """Whether `node` is one of the `ai.onnx.ml` operators typed here (onnx cannot: a
    later onnx that can takes them back)."""
    if node._domain != ML_DOMAIN or node._type not in _RULES:
        return False
    schema = node_spec(node).schema
    return schema is None or not schema.has_type_and_shape_inference_function


def ml_rule_types(op_type: str, opset: int) -> bool:
    """`typed_by_ml_rule` of an `ai.onnx.ml` operator named by type and opset (a node of a
    function body, which is no IR node)."""
    if op_type not in _RULES:
        return False
    try:
        schema = get_op_spec(op_type, opset, ML_DOMAIN).schema
    except OpNotFoundError:
        return False
    return schema is None or not schema.has_type_and_shape_inference_function


def infer_ml_node(node: Node) -> list[TensorDesc | None]:
    """The output descs of such a node from its input descs (None where unknown)."""
    return _RULES[node._type](node)
