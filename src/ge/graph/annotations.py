"""What a model says beside its computation: the doc strings and `metadata_props` of its
nodes, values, tensors, graphs and functions (an exporter's namespaces and stack traces,
ge's own `ge.origin_pass`). Given back where a tool that rebuilds protos dropped them
(`merge_annotations`), or left out of a file on request (`strip_annotations`)."""

from __future__ import annotations

from typing import Any

import onnx
from onnx import AttributeProto

from ge.graph.attributes import GRAPH_KINDS
from ge.graph.domains import proto_graphs
from ge.graph.external_data import iter_tensors

__all__ = ["merge_annotations", "strip_annotations"]


def merge_annotations(source: Any, target: Any) -> None:
    """Give `target` (a node, value info, tensor or graph proto) `source`'s metadata entries
    it lacks, and `source`'s doc string where it has none: what a tool that rebuilds a
    proto (a converter, an inliner, inference) drops, given back without overriding."""
    own = {p.key for p in target.metadata_props}
    target.metadata_props.extend(p for p in source.metadata_props if p.key not in own)
    if source.doc_string and not target.doc_string:
        target.doc_string = source.doc_string


def strip_annotations(model: onnx.ModelProto) -> None:
    """Clear, in place, the doc strings and `metadata_props` of `model`'s graphs, bodies and
    functions, and of their nodes, attributes, values and tensors (every one `iter_tensors`
    finds: initializers, sparse ones' values and indices, a `Constant`'s value): what
    exporters write beside the computation (a dynamo export's `namespace` and
    `pkg.torch.onnx.*`, a quarter of the vendored DistilBERT's file) and ge's own
    `ge.origin_pass`, `ge.origin_nodes`. The model's own doc string and metadata (a licence,
    a version) stay."""
    bodies = (body for f in model.functions for n in f.node for a in n.attribute
              if a.type in GRAPH_KINDS
              for body in (a.graphs if a.type == AttributeProto.GRAPHS else [a.g]))
    graphs = [graph for root in (model.graph, *bodies) for graph in proto_graphs(root)]
    nodes = [*(n for f in model.functions for n in f.node), *(n for g in graphs for n in g.node)]
    annotated: list[Any] = [
        *model.functions, *(v for f in model.functions for v in getattr(f, "value_info", ())),
        *graphs, *(v for g in graphs for v in (*g.input, *g.output, *g.value_info)),
        *nodes, *(a for n in nodes for a in n.attribute), *iter_tensors(model)]
    for proto in annotated:
        if len(getattr(proto, "metadata_props", ())):  # (none on an attribute)
            proto.ClearField("metadata_props")
        if proto.doc_string:
            proto.ClearField("doc_string")
