"""Operator domains of a model: their canonical spelling, which ones its nodes use, and
dropping the opset imports of those none uses any more.

ONNX's standard domain is "" or "ai.onnx"; the graph layer compares domains (the op-type
index, node keys, validation) and so do the layers above it, which take `normalize_domain`
from here (`ge.ops.schemas` re-exports it). A compilation that removes the last node of a
domain asks `used_domains` and `drop_opset_imports` to leave no import of it behind.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import onnx

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["drop_opset_imports", "normalize_domain", "used_domains"]


def normalize_domain(domain: str) -> str:
    """The canonical spelling of a domain ("ai.onnx" is the standard domain "")."""
    return "" if domain == "ai.onnx" else domain


def used_domains(graph: Graph) -> set[str]:
    """The domains (canonical spelling) the model of `graph` uses: those of the nodes of its
    root graph and every body, and, for each model-local function, its own domain, the
    domains it imports and those of its nodes."""
    root = graph.root_graph()
    used = {normalize_domain(node._domain) for node in root.get_all_nodes()}
    for function in root.model.functions:
        used.add(normalize_domain(function.domain))
        used.update(normalize_domain(op.domain) for op in function.opset_import)
        used.update(normalize_domain(node.domain) for node in _proto_nodes(function.node))
    return used


def _proto_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """`nodes` and the nodes of the graphs their attributes hold, depth first."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _proto_nodes(attr.g.node)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for body in attr.graphs:
                    yield from _proto_nodes(body.node)


def drop_opset_imports(graph: Graph, domains: Iterable[str]) -> None:
    """Remove the opset imports of `domains` from the model of `graph` (a domain it does not
    import is ignored); an open transaction that rolls back puts them back, in their order."""
    root = graph.root_graph()
    imports = root.model.opset_imports
    before = dict(imports)
    for domain in domains:
        imports.pop(domain, None)
    if len(imports) != len(before):
        root._journal.record((_restore, imports, before))


def _restore(imports: dict[str, int], before: dict[str, int]) -> None:
    imports.clear()
    imports.update(before)
