"""The fields of a model that ge reads as text (names, op types, domains, doc strings) are
UTF-8 text.

Protobuf hands a `string` field back as bytes when the file holds bytes that are not UTF-8,
which only a corrupt (or hand-made broken) file does; used as text they fail far from the
cause (a table of `ge inspect`, a doc string copied, a value name looked up). Loading checks
each field where it reads it, with a type test that leaves its cost unchanged
(`ge.graph.onnx_import`), and `ge inspect`, which builds no Graph, checks the same fields with
these functions (`ge.graph.payload_checks.check_model_payloads`): both refuse the file with
the same GE1101.
"""

from __future__ import annotations

import onnx

from ge.errors import ModelLoadError
from ge.graph.places import node_label

__all__ = ["check_graph_text", "check_model_fields", "check_node_text", "text"]


def text(value: str | bytes, what: str) -> str:
    """`value`, a string field of the model that `what` names, if it is text; else
    `ModelLoadError` (GE1101)."""
    if type(value) is not str:
        raise ModelLoadError(
            f"{what} is not valid UTF-8 text ({value!r}); the model file is corrupt"
        )
    return value


def check_model_fields(model: onnx.ModelProto) -> None:
    """The text fields of the model itself (its graph's name, opset domains, producer,
    domain, doc string, metadata)."""
    text(model.graph.name, "the graph name")
    for op in model.opset_import:
        text(op.domain, "an opset domain")
    text(model.producer_name, "the producer name")
    text(model.producer_version, "the producer version")
    text(model.domain, "the model domain")
    text(model.doc_string, "the model doc string")
    for p in model.metadata_props:
        text(p.key, "a metadata key")
        text(p.value, "a metadata value")


def check_graph_text(graph: onnx.GraphProto, where: str) -> None:
    """The text fields of `graph` (named `where`: "graph 'g'") but its nodes': its doc
    string, the names (and doc strings) of its inputs, outputs, value_info and
    initializers, the values its quantization annotations name."""
    text(graph.doc_string, f"{where}: the graph's doc string")
    for kind, values in (("input", graph.input), ("output", graph.output),
                         ("value_info", graph.value_info)):
        for i, vi in enumerate(values):
            text(vi.name, f"{where}: the name of {kind} {i}")
            text(vi.doc_string, f"{where}: the doc string of {kind} {vi.name!r}")
    for i, tensor in enumerate(graph.initializer):
        text(tensor.name, f"{where}: the name of initializer {i}")
    for annotation in graph.quantization_annotation:
        text(annotation.tensor_name, f"{where}: a value named by a quantization annotation")


def check_node_text(node: onnx.NodeProto, index: int, where: str) -> None:
    """The text fields of `node` (at `index` in the node list of the graph `where` names):
    its name, op type, domain, input and output names, attribute names."""
    text(node.name, f"{where}: a node's name")
    text(node.op_type, f"{where}: a node's op type")
    text(node.domain, f"{where}: a node's domain")
    outputs = node.output[:]
    label = node_label(node.op_type, node.name, domain=node.domain, index=index,
                       outputs=[o for o in outputs if type(o) is str])
    for value in outputs:
        text(value, f"{where}: an output name of {label}")
    for i, value in enumerate(node.input):
        text(value, f"{where}: input {i} of {label}")
    for attr in node.attribute:
        text(attr.name, f"{where}: an attribute name of {label}")
