"""How messages say where something of a model is, so that its reader can find it there.

A body is named by the node and attribute holding it ("then_branch of If node 'cond_if'"),
beside its graph's name: exporters name every body alike (`sub_graph`, `sub_graph1`...;
torch names both branches of every If `body`). A node the model gives no name (exporters
leave many unnamed; ge names them `Relu`, `Relu_1` inside) is named by its operator, its
index in its graph's or function's node list and the values it computes: "unnamed Constant
node (index 3 in the node list, computing 'k')", in every message (`node_label`); the index
only where it is that of the model as read (loading's errors, the checker's), not in a check
of the IR (`ir_node_label`), which may run after a pass removed nodes before it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import onnx

from ge.graph.domains import qualified_op
from ge.graph.export_names import written_name
from ge.graph.subgraphs import body_attribute

if TYPE_CHECKING:
    from ge.graph.graph import Graph
    from ge.graph.node import Node

__all__ = ["BodyOwner", "attribute_graphs", "body_owner", "graph_label", "graph_place",
           "ir_node_label", "listed_node", "model_node_label", "node_label", "node_named",
           "node_ref", "proto_bodies", "proto_body_owner"]


def node_label(op_type: str, name: str, *, domain: str = "", index: int | None = None,
               outputs: Iterable[str] = ()) -> str:
    """A node as a message names it: `Constant node 'k'`; without a name, by what finds it
    in the model: `unnamed Constant node (index 3 in the node list, computing 'k')` (the
    index where known: the node list of its graph or function, from 0)."""
    op = qualified_op(op_type, domain)
    if name:
        return f"{op} node {name!r}"
    computed = ", ".join(repr(o) for o in outputs if o)
    said = [f"index {index} in the node list" if index is not None else "",
            f"computing {computed}" if computed else ""]
    details = ", ".join(s for s in said if s)
    return f"unnamed {op} node" + (f" ({details})" if details else "")


def model_node_label(node: Node, *, loading: bool = False) -> str:
    """`node_label` of an IR node as its model names it: by the name it was read with (a
    node of a graph that repeats a name has another in the IR), and a node read without
    one by the values it computes, and with `loading` (the errors of loading) its index in
    the node list of its graph as read, which a pass removing nodes would change."""
    written = written_name(node)
    index = _index_as_read(node) if loading and not written else None
    return node_label(node._type, written, domain=node._domain, index=index,
                      outputs=node._out_names)


def ir_node_label(node: Node) -> str:
    """`node_label` of an IR node as the checks of the IR name it: by its IR name (as
    `err.nodes` and dumps name it: "Relu node 'r'"), and a node the model gives no name
    (ge's name for it is in no file) as `model_node_label` names it, by the values it
    computes: "unnamed Relu node (computing 't')" (not by its index as read, which a pass
    removing nodes before it makes wrong)."""
    if not written_name(node):
        return model_node_label(node)
    return node_label(node._type, node._name, domain=node._domain)


def node_ref(node: Node) -> str:
    """A node where a message says what it is already ("input 0 of 'r'"): its IR name
    quoted, and a node the model gives no name as `ir_node_label` names it."""
    return repr(node._name) if written_name(node) else model_node_label(node)


def node_named(node: Node) -> str:
    """A node where a message names its operator itself ("node 'n' uses domain 'x'"):
    "node 'n'" by its IR name, and a node the model gives no name as `ir_node_label` names it."""
    return f"node {node._name!r}" if written_name(node) else model_node_label(node)


def listed_node(node: Node) -> str:
    """A node in a list of node names (a cycle's): its IR name, bare; a node the model gives
    no name as `ir_node_label` names it ("unnamed Add node (computing 'a')")."""
    return node._name if written_name(node) else model_node_label(node)


def _index_as_read(node: Node) -> int | None:
    """The index of `node` in its graph's node list as read (the nodes made from it, in the
    order made; the graph's inputs and initializers are not in it), or None for a node that
    was not read from a model."""
    graph = node._graph
    if node._proto is None or graph is None:
        return None
    index = 0
    for other in graph._nodes:  # (in the order made: a loaded graph's file order)
        if other is node:
            return index
        if other._proto is not None:
            index += 1
    return None


@dataclass(frozen=True)
class BodyOwner:
    """The node owning a body (`node`, of `type` in `domain`, in graph `graph`) and the
    attribute holding it (`attribute`: "then_branch", "branches[1]"); `within`: the owner
    of the body the node is in, when it is in one (bodies share names: named by owners).
    A node of no name (`node` "") is named by `index` and `outputs` (`node_label`)."""

    node: str
    type: str
    domain: str
    attribute: str
    graph: str
    within: BodyOwner | None = None
    index: int | None = None
    outputs: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f" in the {self.within}" if self.within is not None else ""
        label = node_label(self.type, self.node, domain=self.domain, index=self.index,
                           outputs=self.outputs)
        return f"{self.attribute} of {label}{where}"

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "type": self.type, "domain": self.domain,
                "attribute": self.attribute, "graph": self.graph,
                "within": None if self.within is None else self.within.as_dict(),
                "index": self.index, "outputs": list(self.outputs)}


def attribute_graphs(attr: onnx.AttributeProto) -> list[tuple[str, onnx.GraphProto]]:
    """The bodies an attribute proto holds, each labelled as messages name the attribute
    ("then_branch", "branches[1]"); none for an attribute of another kind."""
    if attr.type == onnx.AttributeProto.GRAPH:
        return [(attr.name, attr.g)]
    if attr.type == onnx.AttributeProto.GRAPHS:
        return [(f"{attr.name}[{i}]", body) for i, body in enumerate(attr.graphs)]
    return []


def proto_body_owner(node: onnx.NodeProto, index: int, attribute: str,
                     within: BodyOwner | None = None) -> BodyOwner:
    """The `BodyOwner` of a body a node proto holds in `attribute` ("then_branch",
    "branches[1]"): the node at `index` of its node list, in the body `within` owns; as
    loading names it (a node of no name by its index and outputs)."""
    return BodyOwner(node.name, node.op_type, node.domain, attribute, "", within,
                     None if node.name else index, tuple(node.output))


def proto_bodies(nodes: Iterable[onnx.NodeProto], within: BodyOwner | None = None
                 ) -> Iterator[tuple[onnx.GraphProto, BodyOwner]]:
    """The bodies the attributes of `nodes` (a graph's or a function's node list, in the
    body `within` owns) hold, at any depth, depth first (`proto_graphs`' order), each with
    its owner, for a message to name it as loading does (`graph_place`)."""
    for index, node in enumerate(nodes):
        for attr in node.attribute:
            for label, body in attribute_graphs(attr):
                owner = proto_body_owner(node, index, label, within)
                yield body, owner
                yield from proto_bodies(body.node, owner)


def body_owner(graph: Graph, *, as_read: bool = False, loading: bool = False
               ) -> BodyOwner | None:
    """The owner of `graph` and the attribute holding it (and so on outwards); None for the
    root graph, a graph no node owns, or a body whose owner was removed from its graph (the
    body is a graph of its own now). Nodes by their IR names, or with `as_read` as the
    model names them, with `loading` an unnamed one's index too (`model_node_label`); a
    node the model gives no name always as read (ge's name for it is in no file)."""
    owner = graph._parent_node
    attribute = body_attribute(graph)
    if owner is None or attribute is None:
        return None
    outer = owner._graph
    if outer is None:  # (a body whose owner was removed: detached with it)
        return None
    within = body_owner(outer, as_read=as_read, loading=loading)
    written = written_name(owner)
    if not (as_read or loading) and written:
        return BodyOwner(owner._name, owner._type, owner._domain, attribute, outer._name,
                         within)
    # (an owner the model gives no name: by the values it computes, as it is read, not by
    # ge's name for it, which is in no file)
    index = _index_as_read(owner) if loading and not written else None
    return BodyOwner(written, owner._type, owner._domain, attribute, outer._name, within,
                     index, tuple(owner._out_names))


def graph_place(graph: str, owner: BodyOwner | None) -> str:
    """"graph NAME", and for a body the node and attribute holding it ("graph sub_graph,
    then_branch of If node 'cond_if'")."""
    return f"graph {graph}" if owner is None else f"graph {graph}, {owner}"


def graph_label(graph: Graph, *, as_read: bool = False, loading: bool = False) -> str:
    """Where a message about the model puts a graph: "graph 'g'"; for a body the node and
    attribute holding it too ("graph 'body', then_branch of If node 'if_1' in the body of
    Loop node 'loop'"); with `as_read` and `loading`, the nodes as `body_owner` names
    them."""
    return graph_place(repr(graph._name), body_owner(graph, as_read=as_read, loading=loading))
