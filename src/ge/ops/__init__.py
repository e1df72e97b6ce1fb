"""Operators: schemas (all of ONNX via `onnx.defs`, plus registered custom operators),
shape/type inference and constant evaluation. See docs/ops.md.
"""

from ge.ops.evaluation import evaluate_node, is_constant_foldable
from ge.ops.inference import infer_node, is_custom_node
from ge.ops.model_inference import infer_shapes
from ge.ops.onnx_node import get_attr_or_default
from ge.ops.registry import (
    CustomOp,
    InferContext,
    get_custom_op,
    list_custom_ops,
    register_op,
    unregister_op,
)
from ge.ops.schemas import (
    AttrSpec,
    OpSpec,
    ParamOption,
    ParamSpec,
    get_op_spec,
    latest_opset,
    standard_op_types,
)

__all__ = [
    "AttrSpec",
    "CustomOp",
    "InferContext",
    "OpSpec",
    "ParamOption",
    "ParamSpec",
    "evaluate_node",
    "get_attr_or_default",
    "get_custom_op",
    "get_op_spec",
    "infer_node",
    "infer_shapes",
    "is_constant_foldable",
    "is_custom_node",
    "latest_opset",
    "list_custom_ops",
    "register_op",
    "standard_op_types",
    "unregister_op",
]
