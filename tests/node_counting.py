"""ONNX's own count of a model's nodes, the way ge's reports define node counts
(`ge.compiler.report.NodeCounts`), read straight from the protos so that tests can hold
ge's numbers against it: the main graph's `node` without `Constant` operators; the nodes
of If/Loop/Scan bodies likewise; constants = initializers (but an input's default) and
`Constant` operators of every graph, but a sparse one (`sparse_value`), which ge keeps as
the operator it is, in `graph.node` of the model it writes: a node."""

from __future__ import annotations

import onnx

from ge.graph.domains import proto_graphs


def _constant_op(node: onnx.NodeProto) -> bool:
    return (node.op_type == "Constant" and node.domain in ("", "ai.onnx")
            and not any(a.name == "sparse_value" for a in node.attribute))


def onnx_node_counts(model: onnx.ModelProto) -> tuple[int, int, int]:
    """(nodes, subgraph nodes, constants) of `model`, counted from its protos."""
    root, *bodies = list(proto_graphs(model.graph))
    nodes = sum(not _constant_op(n) for n in root.node)
    subgraph_nodes = sum(not _constant_op(n) for g in bodies for n in g.node)
    constants = 0
    for g in (root, *bodies):
        inputs = {vi.name for vi in g.input} if model.ir_version >= 4 else set()
        constants += sum(t.name not in inputs for t in g.initializer)
        constants += len(g.sparse_initializer) + sum(_constant_op(n) for n in g.node)
    return nodes, subgraph_nodes, constants
