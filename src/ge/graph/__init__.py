"""The IR of `ge`: graphs, nodes, tensor descriptions and constants, and ONNX load/save.

GE-shaped (`Data`, `Const`, `NetOutput` structural nodes; GE's enums and method names) so
pass code written for GE reads the same; the operators are ONNX's. See docs/graph.md.
"""

from ge.graph.graph import CONST, DATA, NET_OUTPUT, Graph, ModelInfo
from ge.graph.model_io import load
from ge.graph.node import Node
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import UNKNOWN_DIM, UNKNOWN_DIM_NUM, UNKNOWN_DIM_SIZE, Shape, TensorDesc
from ge.graph.types import (
    DataType,
    DumpFormat,
    Format,
    OnnxElementType,
    Placement,
    data_type_from_onnx,
    data_type_to_onnx,
)

__all__ = [
    "CONST",
    "DATA",
    "NET_OUTPUT",
    "UNKNOWN_DIM",
    "UNKNOWN_DIM_NUM",
    "UNKNOWN_DIM_SIZE",
    "DataType",
    "DumpFormat",
    "Format",
    "Graph",
    "ModelInfo",
    "Node",
    "OnnxElementType",
    "Placement",
    "Shape",
    "Tensor",
    "TensorDesc",
    "data_type_from_onnx",
    "data_type_to_onnx",
    "load",
]
