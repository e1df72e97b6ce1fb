"""`Graph.copy_in`: copy a replacement graph into a graph through a value map.

The rewriting primitive the matcher and decompositions build on: replacement `Data` index
*i* reads the target producer `inputs[i]`, every other node is copied (attributes and descs
included) under names the target's naming makes unique, and replacement output *j* comes
back as a producer of the target, a new node's output or, for a pass-through, an input.

The copied nodes bring their domains: one the target's model does not import yet is imported
at the version the replacement's model declares for it (a replacement built with
`GraphBuilder` declares every custom domain it uses), journaled like the nodes, so a rollback
takes the import out with them. A domain outside ONNX's own that both import at different
versions is a `GraphError` naming both, raised before anything is copied: an operator of one
version of a custom domain is not known to mean the same at the other. ONNX's own domains
keep the target's version (a builder made outside a compilation builds at the newest
opset), and the validation checks the nodes against the target's schemas.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple

from ge.errors import GraphError, GraphTypeError
from ge.graph.cloning import copy_desc_slot
from ge.graph.domains import ONNX_DOMAINS, add_opset_imports, normalize_domain
from ge.graph.node import Node

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["CopyResult", "copy_in"]

Producer = tuple[Node, int]


class CopyResult(NamedTuple):
    """The nodes made in the target (replacement order) and the target producer of each
    replacement output."""

    nodes: list[Node]
    outputs: list[Producer]


def _data_index(node: Node) -> int:
    index = node.get_attr("index") if node.has_attr("index") else None
    if not isinstance(index, int) or isinstance(index, bool):
        raise GraphError(f"replacement Data node {node.name!r} has no int 'index'",
                         nodes=[node.name])
    return index


def _imports_needed(target: Graph, replacement: Graph, nodes: Sequence[Node]) -> dict[str, int]:
    """The opset imports `nodes` (of `replacement`) need that the target's model lacks, at
    the versions the replacement's model declares; a `GraphError` naming both versions for
    a domain outside ONNX's own that the two models import at different versions."""
    needed: dict[str, int] = {}
    seen: set[str] = set()
    for node in nodes:
        domain = normalize_domain(node._domain)
        if domain in seen:
            continue
        seen.add(domain)
        declared = replacement.get_opset_version(domain)
        if declared is None:
            continue  # nothing to bring (the validation names a domain nobody imports)
        imported = target.get_opset_version(domain)
        if imported is None:
            needed[domain] = declared
        elif imported != declared and domain not in ONNX_DOMAINS:
            raise GraphError(
                f"replacement {replacement.name!r} imports domain {domain!r} at version "
                f"{declared} (node {node.name!r} is of that domain), the model of graph "
                f"{target.name!r} imports it at version {imported}: an operator is not known "
                "to mean the same at another version of its domain; build the replacement at "
                f"version {imported} (GraphBuilder(opset={{{domain!r}: {imported}, ...}}))",
                nodes=[node.name])
    return needed


def copy_in(target: Graph, replacement: Graph, inputs: Sequence[Producer]) -> CopyResult:
    """Copy `replacement` into `target` (journaled like every mutation); see `Graph.copy_in`."""
    from ge.graph.graph import DATA, NET_OUTPUT, Graph

    if not isinstance(replacement, Graph):
        raise GraphTypeError(
            f"replacement must be a ge.graph.Graph, got {type(replacement).__name__}")
    if replacement is target or replacement in list(target._ancestors()):
        raise GraphError(f"graph {replacement.name!r} cannot be copied into itself")
    bound: list[Producer] = []
    for i, item in enumerate(inputs):
        if (not isinstance(item, tuple) or len(item) != 2 or not isinstance(item[0], Node)
                or not isinstance(item[1], int)):
            raise GraphTypeError(f"inputs[{i}] must be a (Node, output index) pair")
        source_node, source_index = item
        target._check_member(source_node, f"inputs[{i}]", allow_outer=True)
        source_node._check_out(source_index)
        bound.append((source_node, source_index))
    order = replacement.topological_order()
    mapping: dict[Node, Node] = {}
    data: dict[Node, Producer] = {}
    net_output: Node | None = None
    for node in order:
        if node._type == DATA:
            index = _data_index(node)
            if not 0 <= index < len(bound):
                raise GraphError(
                    f"replacement {replacement.name!r} reads input {index} (Data node "
                    f"{node.name!r}) but {len(bound)} input(s) were given", nodes=[node.name])
            data[node] = bound[index]
        elif node._type == NET_OUTPUT:
            net_output = node
        elif node.get_subgraphs():
            raise GraphError(f"copy_in cannot copy node {node.name!r}: it owns subgraphs",
                             nodes=[node.name])
    if net_output is None:
        raise GraphError(f"replacement {replacement.name!r} has no NetOutput node")
    for node in order:
        if node._type in (DATA, NET_OUTPUT):
            continue
        for i, producer in enumerate(node._inputs):
            if producer is not None and producer[0]._graph is not replacement:
                raise GraphError(
                    f"input {i} of replacement node {node.name!r} reads a value outside the "
                    "replacement", nodes=[node.name])
    declared = replacement.root_graph().model.opset_imports
    imported = target.root_graph().model.opset_imports
    if any(imported.get(domain) != version and (domain not in ONNX_DOMAINS
                                                or domain not in imported)
           for domain, version in declared.items()):
        # (not the usual case: a replacement brings no domain the model lacks, and ONNX's
        # own keep the model's versions)
        copied = [node for node in order if node._type not in (DATA, NET_OUTPUT)]
        add_opset_imports(target, _imports_needed(target, replacement, copied))
    made: list[Node] = []
    for node in order:
        if node._type in (DATA, NET_OUTPUT):
            continue
        name = target._naming.node_name(node._name)
        out_names = [target._naming.value_name(f"{name}:{i}") if value else ""
                     for i, value in enumerate(node._out_names)]
        twin = target._new_node(node._type, name, node._domain, len(node._inputs), out_names,
                                dict(node._attrs), None)
        twin._metadata = node.get_metadata() or None
        if node._out_descs is not None:
            twin._out_descs = [copy_desc_slot(d) for d in node._out_descs]
        if node._in_descs is not None:
            twin._in_descs = [copy_desc_slot(d) for d in node._in_descs]
        target._insert(twin)
        mapping[node] = twin
        made.append(twin)
        for i, producer in enumerate(node._inputs):
            if producer is None:
                continue
            source = data.get(producer[0])
            if source is None:
                source = (mapping[producer[0]], producer[1])
            target._connect(source[0], source[1], twin, i)
    outputs: list[Producer] = []
    for j, producer in enumerate(net_output._inputs):
        if producer is None:
            raise GraphError(f"output {j} of replacement {replacement.name!r} is not connected")
        source = data.get(producer[0])
        outputs.append(source if source is not None else (mapping[producer[0]], producer[1]))
    return CopyResult(made, outputs)
