"""The ES (eager-style) graph builder: `GraphBuilder`, `TensorHolder`, scopes and one
function per operator (`ge.es.onnx`, with GE-style aliases `ge.es.math`, `ge.es.nn`,
`ge.es.all`; custom operators in `ge.es.custom`). See docs/es.md.
"""

from ge.es.decomposition import build_decomposition
from ge.es.graph_builder import GraphBuilder, InputType
from ge.es.opset import current_opset_imports, opset_scope
from ge.es.scopes import attr_scope, control_dependency_scope
from ge.es.tensor_holder import TensorHolder
from ge.ops.ascend import es_getattr
from ge.ops.evaluation import set_decomposition_builder

set_decomposition_builder(build_decomposition)

__all__ = [
    "GraphBuilder",
    "InputType",
    "TensorHolder",
    "attr_scope",
    "build_decomposition",
    "control_dependency_scope",
    "current_opset_imports",
    "opset_scope",
]

# An Ascend operator's name (`es.BatchMatMulV2`) says which ONNX function to call instead
# (the functions are in `ge.es.onnx`, `ge.es.math`, `ge.es.nn`, `ge.es.all`).
__getattr__ = es_getattr(__name__)
