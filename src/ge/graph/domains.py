"""Operator domains of a model: their canonical spelling, which ones its nodes use, adding
the opset imports of domains new nodes bring and dropping those of domains none uses any more.

ONNX's standard domain is "" or "ai.onnx"; the graph layer compares domains (the op-type
index, node keys, validation) and so do the layers above it, which take `normalize_domain`
from here (`ge.ops.schemas` re-exports it). A compilation that removes the last node of a
domain asks `used_domains` and `drop_opset_imports` to leave no import of it behind; a
replacement copied in (`Graph.copy_in`) or an operator built in place (`ge.es`) of a domain
the model does not import yet adds it with `add_opset_imports`. Both record how to undo the
change in the graph's journal, and `Graph.opset_imports` records the imports as they are
when a transaction first asks for the dict (`record_opset_imports(once=True)`), so that a
change made to the dict directly (a plugin writing `graph.opset_imports[...]`) is undone
too: a pass rolled back leaves the imports exactly as they were, in their order, and the
model saves byte for byte as before.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

import onnx

if TYPE_CHECKING:
    from ge.graph.graph import Graph
    from ge.graph.model_info import ModelInfo

__all__ = ["ONNX_DOMAINS", "add_opset_imports", "defined_value_names", "drop_opset_imports",
           "normalize_domain", "proto_graphs", "proto_nodes", "proto_value_names",
           "qualified_op", "record_opset_imports", "used_domains"]


#: ONNX's own domains (the standard one, under both spellings, and ONNX-ML).
ONNX_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})


def normalize_domain(domain: str) -> str:
    """The canonical spelling of a domain ("ai.onnx" is the standard domain "")."""
    return "" if domain == "ai.onnx" else domain


def qualified_op(op_type: str, domain: str = "", overload: str = "") -> str:
    """An operator as reports, messages and `ge inspect` name it, as ONNX's text format
    writes a call: prefixed by its domain outside ONNX's own (`com.microsoft.Gelu` is not
    ONNX's `Gelu`), suffixed by the overload of a model-local function it calls
    (`local.F:neg`; IR 10 tells two functions of one name apart by it)."""
    domain = normalize_domain(domain)
    label = f"{domain}.{op_type}" if domain else op_type
    return f"{label}:{overload}" if overload else label


def used_domains(graph: Graph) -> set[str]:
    """The domains (canonical spelling) the model of `graph` uses: those of the nodes of its
    root graph and every body, and, for each model-local function, its own domain, the
    domains it imports and those of its nodes."""
    root = graph.root_graph()
    used = {normalize_domain(node._domain) for node in root.get_all_nodes()}
    for function in root.model.functions:
        used.add(normalize_domain(function.domain))
        used.update(normalize_domain(op.domain) for op in function.opset_import)
        used.update(normalize_domain(node.domain) for node in proto_nodes(function.node))
    return used


def proto_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """`graph` and the graphs its nodes' attributes hold, at any depth, depth first."""
    yield graph
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from proto_graphs(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for body in attr.graphs:
                    yield from proto_graphs(body)


def proto_value_names(graph: onnx.GraphProto) -> Iterator[str]:
    """Every value name `graph` and the graphs inside it declare, define or read (inputs,
    outputs, value infos, initializers, node inputs and outputs): the names a new value
    added anywhere in it must avoid."""
    for each in proto_graphs(graph):
        for vi in (*each.input, *each.output, *each.value_info):
            yield vi.name
        for tensor in each.initializer:
            yield tensor.name
        for node in each.node:
            yield from node.input
            yield from node.output


def defined_value_names(graph: onnx.GraphProto) -> set[str]:
    """The values `graph` itself defines (inputs, initializers, node outputs), not those of
    the graphs inside it."""
    names = {vi.name for vi in graph.input}
    names.update(tensor.name for tensor in graph.initializer)
    names.update(sparse.values.name for sparse in graph.sparse_initializer)
    names.update(output for node in graph.node for output in node.output)
    names.discard("")
    return names


def proto_nodes(nodes: Iterable[onnx.NodeProto]) -> Iterator[onnx.NodeProto]:
    """`nodes` and the nodes of the graphs their attributes hold, depth first."""
    for node in nodes:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from proto_nodes(attr.g.node)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for body in attr.graphs:
                    yield from proto_nodes(body.node)


def add_opset_imports(graph: Graph, imports: Mapping[str, int]) -> None:
    """Import each domain of `imports` at its version in the model of `graph`, after those
    it imports already (a domain it imports already keeps its version: the caller decides
    what a different one means); an open transaction that rolls back takes them out again."""
    model_imports = graph.root_graph().model.opset_imports
    imported = {normalize_domain(domain) for domain in model_imports}  # ("ai.onnx" is "")
    added = {domain: version for domain, version in imports.items()
             if normalize_domain(domain) not in imported}
    if added:
        record_opset_imports(graph)
        model_imports.update(added)


def drop_opset_imports(graph: Graph, domains: Iterable[str]) -> None:
    """Remove the opset imports of `domains` from the model of `graph` (a domain it does not
    import is ignored); an open transaction that rolls back puts them back, in their order."""
    imports = graph.root_graph().model.opset_imports
    dropped = [domain for domain in domains if domain in imports]
    if dropped:
        record_opset_imports(graph)
        for domain in dropped:
            imports.pop(domain, None)


def record_opset_imports(graph: Graph, *, once: bool = False) -> None:
    """Record, in the journal of `graph`'s hierarchy, how to put the model's opset imports
    back as they are now (the dict the model holds, its entries and their order); with
    `once`, only if this transaction recorded them with `once` before. A no-op outside a
    transaction."""
    root = graph.root_graph()
    model = root.model
    imports = model.opset_imports
    if once:
        root._journal.record_once(_ONCE_KEY, lambda: (_restore, model, imports, dict(imports)))
    else:
        root._journal.record((_restore, model, imports, dict(imports)))


_ONCE_KEY = ("opset_imports",)


def _restore(model: ModelInfo, imports: dict[str, int], before: dict[str, int]) -> None:
    model.opset_imports = imports
    imports.clear()
    imports.update(before)
