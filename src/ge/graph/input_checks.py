"""What every command checks of the model it was given before doing anything with it
(`ge compile`, `ge run`, `ge.compile`; `ge inspect` notes it): no cycle
(`validation.check_acyclic`), and no node onnx's checker refuses against its operator's
schema (an attribute of the wrong type, or whose type field and value disagree; a required
output given no name; a `Constant` reading an input).

onnxruntime refuses such a node too, so a compilation could only do one of two wrong
things with it: stop at the final validation, or, when a pass removes the node first (a
one-input `Concat` with `axis="zero"` taken for an identity), write another model than the
one given. The check is onnx's own (`onnx.checker.check_node`, one node at a time, its
bodies checked as nodes of their own), on the nodes as read: about 0.3 s per 100,000
nodes, once per model (`Graph` keeps the mutation count it was checked at). Nodes without a
schema (custom domains, operators ONNX lacks at the model's opset, deprecated ones) are left
to the checks that say more of them (`validation.unknown_operators`, inference).
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

import onnx
from onnx import AttributeProto, defs
from onnx.checker import C

from ge.errors import ValidationProblem
from ge.graph.domains import ONNX_DOMAINS
from ge.graph.export_names import written_name
from ge.graph.graph import CONST, DATA, NET_OUTPUT, Graph
from ge.graph.node import Node
from ge.graph.places import body_owner, graph_place, node_label
from ge.graph.validation import (
    attribute_problems,
    cycle_problems,
    function_set_problems,
    refuse_model,
)

__all__ = ["check_model_as_given", "node_checker_problems"]

_BODY_KINDS = (AttributeProto.GRAPH, AttributeProto.GRAPHS)
#: onnx's checker ends each message with where it was ("==> Context: Bad node spec for
#: node. Name: relu OpType: Concat"), which the problem says in ge's words.
_CONTEXT = "==> Context:"
#: onnx's checker's words for an attribute whose value is in another field than its type
_FIELD_MISMATCH = "type field and data field mismatch"


@lru_cache(maxsize=4096)
def _checked(op_type: str, domain: str, version: int) -> bool:
    """Whether onnx's checker has a schema to hold a node of this operator against: an
    operator of ONNX's domains that exists, not deprecated, at the model's opset."""
    if domain not in ONNX_DOMAINS:
        return False
    try:
        schema = defs.get_schema(op_type, version, domain)
    except defs.SchemaError:
        return False
    return not schema.deprecated


def _without_bodies(proto: onnx.NodeProto) -> onnx.NodeProto:
    """`proto` with each body emptied (its own nodes are checked as nodes of their graph,
    where the values of the graphs around them are known)."""
    copy = onnx.NodeProto()
    copy.CopyFrom(proto)
    for attr in copy.attribute:
        if attr.type == AttributeProto.GRAPH:
            attr.g.CopyFrom(onnx.GraphProto(name=attr.g.name))
        elif attr.type == AttributeProto.GRAPHS:
            for body in attr.graphs:
                body.CopyFrom(onnx.GraphProto(name=body.name))
    return copy


def _refusal(proto: onnx.NodeProto, context: C.CheckerContext,
             scope: C.LexicalScopeContext) -> str | None:
    """onnx's checker's text for the node `proto`, or None when it accepts it."""
    if any(attr.type in _BODY_KINDS for attr in proto.attribute):
        proto = _without_bodies(proto)
    try:
        C.check_node(proto.SerializeToString(), context, scope)
    except C.ValidationError as exc:
        text = str(exc).split(_CONTEXT)[0].strip()
        return text.rstrip(".")
    return None


def node_checker_problems(graph: Graph) -> list[ValidationProblem]:
    """The nodes of `graph` and its bodies, as read from ONNX, that onnx's checker refuses
    against their schemas: one `onnx-checker` problem each, naming the node."""
    model = graph.root_graph().model
    context = C.CheckerContext()
    context.ir_version = model.ir_version if model is not None else onnx.IR_VERSION
    context.opset_imports = dict(model.opset_imports) if model is not None else {}
    scope = C.LexicalScopeContext()
    problems: list[ValidationProblem] = []
    for g in [graph, *graph.get_all_subgraphs()]:
        place = ""
        for node in g.get_direct_nodes():
            proto = _proto_as_read(node)
            if proto is None:
                continue
            version = g.get_opset_version(proto.domain)
            if version is None or not _checked(proto.op_type, proto.domain, version):
                continue
            refused = _refusal(proto, context, scope)
            if refused is None:
                continue
            # ge's own words where its validation says it (an attribute the operator does
            # not define, or of another type), as the final validation would; no advice:
            # that is for a pass's author. Not for an attribute whose value is in another
            # field than its type says, which ge would name by the type alone.
            said = ([] if _FIELD_MISMATCH in refused
                    else [replace(p, advice="") for p in attribute_problems(node)])
            if not said:
                if not place:
                    owner = body_owner(g, as_read=True)
                    place = graph_place(g.name, owner) if owner is not None else " "
                said = [ValidationProblem(
                    "onnx-checker", (node.name,),
                    f"{_label(node, proto)}: onnx's checker refuses it, and so do runtimes: "
                    f"{refused}", g.name, subjects=(node,), place=place.strip())]
            problems += said
    return problems


def _label(node: Node, proto: onnx.NodeProto) -> str:
    """The node as its model names it, by the operator the file gives it (a `Constant`,
    which ge holds as a constant)."""
    return node_label(proto.op_type, written_name(node), domain=proto.domain,
                      outputs=node._out_names)


def _proto_as_read(node: Node) -> onnx.NodeProto | None:
    """The `NodeProto` a node was read from while it still says what the node is (a node
    owning bodies is marked changed when read: its bodies are written anew)."""
    proto = node._proto
    if proto is None or node._type in (DATA, NET_OUTPUT):
        return None
    if node._type == CONST and proto.op_type != "Constant":
        return None
    if node._clean or any(attr.type in _BODY_KINDS for attr in proto.attribute):
        return proto
    return None


def check_model_as_given(graph: Graph, path: str | None = None) -> None:
    """`GraphValidationError` (GE1003, about the model: `path` named when given) for what
    no command can take of a model: its cycles and local functions' call cycles
    (`check_acyclic`'s), and the nodes onnx's checker refuses (`node_checker_problems`).
    A graph checked before and unchanged since is not checked again."""
    root = graph.root_graph()
    stamp = (root._journal, root.mutation_count)
    if root._checked_as_given == stamp:
        return
    problems = cycle_problems(graph) + function_set_problems(graph)
    refuse_model(problems or node_checker_problems(graph), path)
    root._checked_as_given = stamp
