"""Text dumps of a graph: one readable line per node, ONNX text, or protobuf text.

The readable form is what test failures and `ge dump` show:

    graph main (opset ai.onnx=17)
      %x = Data[index=0]() : float32[1,3]
      %y = Relu(%x) : float32[1,3]
      NetOutput(%y)
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx

from ge.errors import GraphError
from ge.graph.attributes import GRAPH_KINDS, decode_attr, kind_name
from ge.graph.graph import Graph
from ge.graph.node import Node, is_const
from ge.graph.subgraphs import labelled_bodies
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import format_desc
from ge.graph.types import DumpFormat

__all__ = ["dump_file", "dump_text", "node_line", "readable"]

_MAX_ATTR_TEXT = 80


def _attr_text(value: object) -> str:
    if isinstance(value, Tensor):
        text = repr(value)
    elif isinstance(value, float):
        text = f"{value:g}"
    elif isinstance(value, list):
        text = "[" + ", ".join(_attr_text(v) for v in value) + "]"
    elif isinstance(value, str):
        text = repr(value)
    elif isinstance(value, Graph):
        text = f"<graph {value.name}>"
    elif isinstance(value, (onnx.TypeProto, onnx.SparseTensorProto)):
        text = f"<{type(value).__name__}>"
    else:
        text = str(value)
    return text if len(text) <= _MAX_ATTR_TEXT else text[: _MAX_ATTR_TEXT - 3] + "..."


def _value_ref(node: Node, index: int) -> str:
    name = node._out_names[index] if index < len(node._out_names) else ""
    return f"%{name}" if name else f"%{node._name}:{index}"


def node_line(node: Node) -> str:
    """One node as the readable dump writes it: `%out: dtype[shape] = Type[attrs](%in, ...)`
    and its name."""
    outs = []
    for i, name in enumerate(node._out_names):
        if not name:
            outs.append("_")
            continue
        text = f"%{name}"
        if node.has_output_desc(i) or is_const(node):
            text += f": {format_desc(node.get_output_desc(i))}"
        outs.append(text)
    ins = []
    for producer in node._inputs:
        ins.append("_" if producer is None else _value_ref(*producer))
    attrs = []
    for key, stored in node._attrs.items():
        kind, value = decode_attr(stored)
        if kind not in GRAPH_KINDS:
            attrs.append(f"{key}={_attr_text(value)}")
        else:
            attrs.append(f"{key}=<{kind_name(kind).lower()}>")
    op = node._type if not node._domain else f"{node._domain}::{node._type}"
    attr_text = f"[{', '.join(attrs)}]" if attrs else ""
    ctrl = ""
    if node._ctrl_in:
        ctrl = " after " + ", ".join(n._name for n in node._ctrl_in)
    lhs = (", ".join(outs) + " = ") if outs else ""
    return f"{lhs}{op}{attr_text}({', '.join(ins)}){ctrl}  # {node._name}"


def readable(graph: Graph, indent: str = "") -> str:
    """The readable dump of `graph` and its subgraphs."""
    lines: list[str] = []
    if graph.parent_node is None:
        opsets = ", ".join(f"{d or 'ai.onnx'}={v}" for d, v in graph.opset_imports.items())
        lines.append(f"{indent}graph {graph.name} (opset {opsets})")
    else:
        lines.append(f"{indent}graph {graph.name}")
    try:
        order = graph.topological_order()
    except GraphError:  # a cycle: dumps are for looking at broken graphs too
        order = graph.get_direct_nodes()
    for node in order:
        lines.append(f"{indent}  {node_line(node)}")
        for label, sub in labelled_bodies(node):
            lines.append(f"{indent}    {label}:")
            lines.append(readable(sub, indent + "      "))
    return "\n".join(lines)


def dump_text(graph: Graph, format: DumpFormat = DumpFormat.kReadable) -> str:
    if format == DumpFormat.kReadable:
        return readable(graph) + "\n"
    model = graph.to_onnx()
    if format == DumpFormat.kOnnx:
        return onnx.printer.to_text(model)
    if format == DumpFormat.kTxt:
        return str(model)
    from ge.errors import GraphTypeError

    raise GraphTypeError(f"unknown dump format {format!r}")


def dump_file(graph: Graph, format: DumpFormat = DumpFormat.kReadable, suffix: str = "") -> str:
    """Write a dump into `DUMP_GRAPH_PATH` (default: the working directory); return its path."""
    folder = Path(os.environ.get("DUMP_GRAPH_PATH") or ".")
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"ge_graph_{graph.name}{'_' + suffix if suffix else ''}"
    if format == DumpFormat.kOnnx:
        path = folder / f"{stem}.onnx"
        graph.save(path)
    else:
        path = folder / (f"{stem}.txt" if format == DumpFormat.kReadable else f"{stem}.pbtxt")
        path.write_text(dump_text(graph, format))
    return str(path)
