"""The `ShapeInferenceError` (GE1305) of whole-model inference (`ge.ops.model_inference`) in
words its reader can act on: onnx's message cut to the first node it rejects, element types
and domains named, the nodes as ge names them, the input types of the node refused; and the
error for a value the file declares of another element type than inference gives it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import onnx

from ge.errors import ShapeInferenceError
from ge.graph.export_names import written_name
from ge.graph.graph import Graph
from ge.graph.node import Node
from ge.graph.onnx_export import UNNAMED_PREFIX
from ge.graph.places import graph_label, node_label
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import DataType, data_type_to_onnx, elem_type_name

__all__ = ["declared_elsewise", "inference_error"]

#: onnx's inference of a serialized model: (serialized, strict, data_prop) -> inferred model.
_Infer = Callable[[bytes, bool, bool], onnx.ModelProto]


def declared_elsewise(graph: Graph, node: Node, inferred: TensorDesc, declared: TensorDesc
                      ) -> None:
    """`ShapeInferenceError` when the file declares (a value_info) another element type for
    a value of `node` than inference gives it, in onnx's words for a graph output."""
    said, got = declared.data_type, inferred.data_type
    if DataType.DT_UNDEFINED in (said, got) or said == got:
        return
    message = _ELEM_TYPES.sub(_name_elem_types, (
        f"(op_type:{node.type}, node name: {written_name(node) or node.name}): "
        "[TypeInferenceError] Inferred elem type differs from existing elem type: "
        f"({data_type_to_onnx(got)}) vs ({data_type_to_onnx(said)})"))
    root = graph.root_graph()
    where = "" if graph is root else f" ({graph_label(graph, as_read=True)})"
    raise ShapeInferenceError(f"shape inference of graph {root.name!r} failed{where}: "
                              f"{message}", nodes=[node.name])


# onnx names each node it rejects as "(op_type:MatMul, node name: mm): ..."
_ONNX_NODE_NAME = re.compile(r"\(op_type:[^,]*, node name: ([^)]*)\)")


def _nodes_named_in(message: str) -> list[str]:
    """The node names onnx's inference error message mentions, in order, once each (as
    the model handed to onnx has them: `_ir_names` gives ge's)."""
    return list(dict.fromkeys(m for m in _ONNX_NODE_NAME.findall(message) if m))


def _ir_names(root: Graph, names: list[str]) -> list[str]:
    """The IR names of nodes named as in the model handed to onnx: a node the model has no
    name for is `UNNAMED_PREFIX` + its IR name, another its model name, which is its IR name
    unless two nodes had it (trial FF: the model's 'Sqrt' was IR 'Sqrt_1')."""
    written = {written_name(n): n.name for n in reversed(root.get_all_nodes())}
    return [name.removeprefix(UNNAMED_PREFIX) if name.startswith(UNNAMED_PREFIX)
            else written.get(name, name) for name in names]


def inference_error(root: Graph, err: Exception, serialized: bytes, infer: _Infer
                    ) -> ShapeInferenceError:
    """The GE1305 for onnx's inference error `err` on the model `serialized`, which `infer`
    runs onnx's inference on again for the input types of the node it refused."""
    message = _first_error(str(err))
    unnamed = _unnamed_in_model(root, [m for m in _ONNX_NODE_NAME.findall(message)
                                       if m.startswith(UNNAMED_PREFIX)])
    if unnamed:  # onnx was given ge's names for them (`name_every_node`): say which they are
        message += "; " + "; ".join(unnamed)
    named = _nodes_named_in(message)
    if serialized and len(named) == 1:  # (one node: not a node of a body, named after its owner)
        message += _input_types(serialized, named[0], infer)
    return ShapeInferenceError(f"shape inference of graph {root.name!r} failed: {message}",
                               nodes=_ir_names(root, _nodes_named_in(str(err))))


def _input_types(serialized: bytes, node_name: str, infer: _Infer) -> str:
    """"; its inputs: float32[batch, seq, 64], float32[33, 64]" for the node of the main
    graph onnx's inference refused, as inference types them up to it (again, not strict:
    the nodes before it typed): onnx says "Incompatible dimensions for matrix
    multiplication" without the dims (trial S: a weight of the wrong shape). "" when it
    cannot tell, and for a call of one of the model's functions (the node that failed is
    inside it, trial X)."""
    inferred = None
    for data_prop in (True, False):  # (its data propagation may fault: `infer_shapes`)
        try:
            inferred = infer(serialized, False, data_prop)
            break
        except Exception:  # (the error reported is the one that counts)
            continue
    if inferred is None:
        return ""
    node = next((n for n in inferred.graph.node if n.name == node_name), None)
    functions = {(f.domain, f.name) for f in inferred.functions}
    if node is None or (node.domain, node.op_type) in functions:
        return ""
    types = {vi.name: vi.type for vi in (*inferred.graph.input, *inferred.graph.value_info,
                                         *inferred.graph.output)}
    types.update((t.name, onnx.helper.make_tensor_type_proto(t.data_type, list(t.dims)))
                 for t in inferred.graph.initializer)
    shown = [_type_text(types.get(name)) if name else "(none)" for name in node.input]
    if not shown or all(text == "?" for text in shown):
        return ""
    return f"; its inputs: {', '.join(shown)}"


def _type_text(type_proto: onnx.TypeProto | None) -> str:
    """A type as messages show it, `float32[batch, 64]`, `seq(float32[3])` ("?" for what is
    not known)."""
    if type_proto is None:
        return "?"
    if type_proto.HasField("sequence_type"):
        return f"seq({_type_text(type_proto.sequence_type.elem_type)})"
    if type_proto.HasField("optional_type"):
        return f"optional({_type_text(type_proto.optional_type.elem_type)})"
    if type_proto.HasField("map_type"):
        key = _elem_name(type_proto.map_type.key_type)
        return f"map({key}, {_type_text(type_proto.map_type.value_type)})"
    if not type_proto.HasField("tensor_type"):
        return "?"
    tensor = type_proto.tensor_type
    elem = _elem_name(tensor.elem_type)
    if not tensor.HasField("shape"):
        return elem
    dims = [str(d.dim_value) if d.HasField("dim_value") else "?" if (
        not d.dim_param or d.dim_param.startswith("unk__")) else d.dim_param  # (made up)
        for d in tensor.shape.dim]
    return f"{elem}[{', '.join(dims)}]"


def _elem_name(elem_type: int) -> str:
    """`elem_type_name` (numpy's name, `string`), "?" when unset."""
    return elem_type_name(elem_type) if elem_type else "?"


def _unnamed_in_model(root: Graph, names: list[str]) -> list[str]:
    """For each node of `names` the model has without a name, which node it is: the values
    it computes (trial BB: a GE1305 for one of several unnamed DequantizeLinear nodes)."""
    wanted = {name.removeprefix(UNNAMED_PREFIX) for name in names}
    found = []
    for node in root.get_all_nodes():
        if node.name in wanted and not written_name(node):
            label = node_label(node.type, "", domain=node.domain,
                               outputs=node.get_output_names())
            where = f" of {graph_label(node.owner_graph, as_read=True)}" if node.owner_graph else ""
            found.append(f"{UNNAMED_PREFIX + node.name!r} is the {label}{where}")
    return found


def _first_error(message: str) -> str:
    """onnx's message cut to the first node it rejects: the nodes after it fail only
    because that one has no type, and listing each of them hides the cause."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    first = lines[0] if lines else message
    prefix = "[ShapeInferenceError] Inference error(s): "
    if first.startswith(prefix):
        first = first[len(prefix):]
    first = _ELEM_TYPES.sub(_name_elem_types, first)
    first = _NO_OPSET.sub(_name_domain, first)
    later = len(_nodes_named_in(message)) - 1
    if later > 0:
        first += f" (and {later} node(s) after it could not be typed)"
    return first


#: onnx's "Inferred elem type differs from existing elem type: (1) vs (7)": element types
#: by their numbers, which say nothing to whoever reads them.
_ELEM_TYPES = re.compile(r"elem type differs from existing elem type: \((\d+)\) vs \((\d+)\)")


#: onnx's "No opset import for domain  optype Add": the default domain, "", said as a blank.
_NO_OPSET = re.compile(r"No opset import for domain (\S*) optype (\S+)")


def _name_domain(found: re.Match[str]) -> str:
    domain = found.group(1)
    said = f"{domain!r} (the default ONNX domain)" if not domain else repr(domain)
    return f"No opset import for domain {said}, op type {found.group(2)}"


def _name_elem_types(found: re.Match[str]) -> str:
    inferred, declared = (elem_type_name(int(found.group(i))) for i in (1, 2))
    return (f"elem type differs from existing elem type: ({found.group(1)}) vs "
            f"({found.group(2)}): the node computes {inferred}, the model declares {declared} "
            "for that value (a graph output's or a value_info's type)")
