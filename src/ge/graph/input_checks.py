"""What every command checks of the model it was given before doing anything with it
(`ge compile`, `ge run`, `ge.compile`; `ge inspect` notes it): an output to compute (a
graph without outputs computes nothing: onnxruntime loads it and refuses to run it, and
dead-code elimination would compile it to an empty graph, which onnxruntime cannot even
load), no cycle (`validation.check_acyclic`), no model-local function onnx's checker
refuses, no node it refuses against its operator's schema (an attribute of the wrong type,
or whose type field and value disagree; a required output given no name; a `Constant`
reading an input), and no call of a model-local function that onnx's checker refuses once
the function's body is put in its place (`call_problems`).

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

from collections.abc import Iterator, Sequence
from dataclasses import replace
from functools import lru_cache

import onnx
import onnx.inliner
from onnx import AttributeProto, defs
from onnx.checker import C

from ge._compat import RUNTIME_GUARANTEED_OPSET, runtime_kernel_opsets
from ge._text import first_and_more
from ge.errors import RuntimeLoadError, ValidationProblem
from ge.graph.domains import ONNX_DOMAINS
from ge.graph.export_names import written_name
from ge.graph.graph import CONST, DATA, NET_OUTPUT, Graph
from ge.graph.model_info import call_key
from ge.graph.node import Node
from ge.graph.places import body_owner, graph_place, node_label
from ge.graph.validation import (
    attribute_problems,
    cycle_problems,
    function_problems,
    refuse_model,
)

__all__ = ["call_problems", "check_model_as_given", "check_runtime_kernels",
           "node_checker_problems", "output_problems"]

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
    for g, node, proto in _nodes_as_read(graph):
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
        problems += said or [ValidationProblem(
            "onnx-checker", (node.name,),
            f"{_label(node, proto)}: onnx's checker refuses it, and so do runtimes: "
            f"{refused}", g.name, subjects=(node,), place=_place(g))]
    return problems


def _nodes_as_read(graph: Graph) -> Iterator[tuple[Graph, Node, onnx.NodeProto]]:
    """Each node of `graph` and its bodies that still holds the proto it was read from
    (`_proto_as_read`), with its graph and that proto."""
    for g in [graph, *graph.get_all_subgraphs()]:
        for node in g.get_direct_nodes():
            proto = _proto_as_read(node)
            if proto is not None:
                yield g, node, proto


def _place(graph: Graph) -> str:
    """Where a problem of a node of `graph` is: its body as the file names it, "" for the
    main graph."""
    owner = body_owner(graph, as_read=True)
    return graph_place(graph.name, owner) if owner is not None else ""


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
    no command can take of a model: no output (`output_problems`), its cycles, what onnx's
    checker refuses in its local functions (`function_problems`: functions are few and
    small), the nodes it refuses (`node_checker_problems`) and the calls of local functions
    it refuses inlined (`call_problems`).
    A graph checked before and unchanged since is not checked again."""
    root = graph.root_graph()
    stamp = (root._journal, root.mutation_count)
    if root._checked_as_given == stamp:
        return
    problems = output_problems(graph) + cycle_problems(graph) + function_problems(graph)
    refuse_model(problems or node_checker_problems(graph) + call_problems(graph), path)
    root._checked_as_given = stamp


def output_problems(graph: Graph) -> list[ValidationProblem]:
    """A `structure` problem when the root graph of `graph` has no output: there is
    nothing to compute (onnx's checker passes it; onnxruntime loads it and runs nothing:
    "At least one output should be requested")."""
    root = graph.root_graph()
    if any(node._inputs for node in root.nodes_of_type(NET_OUTPUT)):
        return []
    return [ValidationProblem(
        "structure", (), f"graph {root.name!r} has no outputs: there is nothing to compute "
        "(a model computes its graph's outputs; onnxruntime runs none)", root.name)]


#: onnx's inliner states a broken assertion with its source line ("/project/onnx/inliner/
#: inliner.cc:224: Bind: Assertion `...` failed: Number of actual parameters ..."): its
#: words follow the last "failed: ".
_ASSERTION = "failed: "


def call_problems(graph: Graph) -> list[ValidationProblem]:
    """The calls of model-local functions in `graph` and its bodies, as read, that onnx's
    checker refuses once onnx's inliner put the function's body in their place, as
    onnxruntime does when it loads the model (and refuses them): more inputs or outputs
    than the function declares, an input left out that its body needs, an output its body
    does not compute. onnx's checker passes such a call (it checks a function alone, not
    against its calls). One `function` problem each, naming the node; each kind of call (a
    function, which inputs and outputs it is given, its attributes) is checked once, on a
    model of that call alone."""
    root = graph.root_graph()
    model = root.model
    if model is None or not model.functions or model.ir_version < _FUNCTIONS_FROM_IR:
        return []
    verdicts: dict[tuple[object, ...], str | None] = {}
    problems: list[ValidationProblem] = []
    for g, node, proto in _nodes_as_read(graph):
        function = model.function(call_key(proto))
        if function is None:
            continue
        kind = (call_key(proto), tuple(bool(name) for name in proto.input),
                tuple(bool(name) for name in proto.output),
                tuple(sorted((a.name, a.type) for a in proto.attribute)))
        if kind not in verdicts:
            verdicts[kind] = _inlined_refusal(proto, function, model.ir_version,
                                              model.opset_imports, model.functions)
        refused = verdicts[kind]
        if refused is None:
            continue
        problems.append(ValidationProblem(
            "function", (node.name,),
            f"{_label(node, proto)} {_arity(proto, function)}: onnx's checker refuses "
            "the call with the function's body in its place, where onnxruntime puts it "
            f"(and refuses the model): {refused}", g.name, subjects=(node,), place=_place(g)))
    return problems


#: Model-local functions came with IR version 8 (onnx checks them from there on).
_FUNCTIONS_FROM_IR = 8


def _arity(proto: onnx.NodeProto, function: onnx.FunctionProto) -> str:
    """"gives 1 input and 1 output; function local.F declares inputs 'i', 'j' and
    output 'o'"."""
    def count(names: Sequence[str], what: str) -> str:
        given = sum(1 for name in names if name)
        return f"{given} {what}" + ("" if given == 1 else "s")

    def declared(names: Sequence[str], what: str) -> str:
        listed = ", ".join(repr(n) for n in names) or "none"
        return f"{what}{'' if len(names) == 1 else 's'} {listed}"

    domain = function.domain or "ai.onnx"
    return (f"gives {count(proto.input, 'input')} and {count(proto.output, 'output')}; "
            f"function {domain}.{function.name} declares "
            f"{declared(function.input, 'input')} and {declared(function.output, 'output')}")


def _inlined_refusal(proto: onnx.NodeProto, function: onnx.FunctionProto, ir_version: int,
                     opsets: dict[str, int], functions: Sequence[onnx.FunctionProto]
                     ) -> str | None:
    """onnx's checker's (or inliner's) words for a model of the call `proto` alone with
    the functions' bodies put in its place, or None when it accepts it. The model's
    values around the call are its inputs and outputs (as float scalars: onnx's checker
    infers no type unless asked)."""
    call = onnx.NodeProto()
    call.CopyFrom(proto)
    untyped = onnx.TypeProto()  # (a float scalar: the checker needs a type, reads none)
    untyped.tensor_type.elem_type = onnx.TensorProto.FLOAT
    untyped.tensor_type.shape.SetInParent()
    values = [onnx.ValueInfoProto(name=name, type=untyped)
              for name in dict.fromkeys(name for name in proto.input if name)]
    results = [onnx.ValueInfoProto(name=name, type=untyped)
               for name in proto.output if name]
    alone = onnx.ModelProto(
        ir_version=ir_version, graph=onnx.GraphProto(name="call", node=[call], input=values,
                                                     output=results),
        opset_import=[onnx.OperatorSetIdProto(domain=d, version=v) for d, v in opsets.items()],
        functions=functions)
    try:
        inlined = onnx.inliner.inline_local_functions(alone)
        onnx.checker.check_model(inlined)
    except (C.ValidationError, RuntimeError) as exc:
        text = str(exc).split(_CONTEXT)[0].strip()
        return text.rsplit(_ASSERTION, 1)[-1].strip().rstrip(".")
    return None


def check_runtime_kernels(graph: Graph, path: str | None = None) -> None:
    """`RuntimeLoadError` (GE1601, about the model: `path` named when given) when the
    installed onnxruntime has no kernel for a node of `graph` or its bodies (and the
    operator no function body it could run instead): it cannot load the model, whatever
    its inputs, and neither could it load what a compilation writes of it. Looked for only
    in a model importing ai.onnx below `RUNTIME_GUARANTEED_OPSET` (onnxruntime's own floor:
    from it on its kernels cover ONNX, and onnxruntime is not even imported), where
    onnx's checker passes an Add of opset 1 that onnxruntime refuses to load ("Could not
    find an implementation for Add(1)"). What makes it valid: converting it to a later
    opset (`ge compile --opset`), which a compilation does before this check."""
    missing: dict[str, list[str]] = {}
    for g in [graph, *graph.get_all_subgraphs()]:
        version = g.get_opset_version("")
        if version is None or version >= RUNTIME_GUARANTEED_OPSET:
            continue
        for node in g.get_direct_nodes():
            if node._domain not in ("", "ai.onnx") or node._type in (DATA, CONST, NET_OUTPUT):
                continue
            try:
                schema = defs.get_schema(node._type, version, "")
            except defs.SchemaError:
                continue  # (said by the checks of unknown operators)
            if (schema.has_function  # type: ignore[attr-defined]
                    or schema.has_context_dependent_function):  # type: ignore[attr-defined]
                continue
            ranges = runtime_kernel_opsets(node._type)
            if ranges is None:
                return  # (onnxruntime does not say)
            since = schema.since_version
            if not any(low <= since <= high for low, high in ranges):
                missing.setdefault(f"{node._type}-{since}", []).append(written_name(node))
    if not missing:
        return
    listed = first_and_more([f"{op} (node {nodes[0]!r}" + (
        f" and {len(nodes) - 1} more)" if len(nodes) > 1 else ")")
        for op, nodes in missing.items()])
    error = RuntimeLoadError(
        f"onnxruntime cannot load graph {graph.root_graph().name!r}: it has no kernel for "
        f"{listed}: it runs ai.onnx from opset {RUNTIME_GUARANTEED_OPSET} on (onnx's "
        f"checker passes them; convert the model to opset {RUNTIME_GUARANTEED_OPSET} or "
        "later: ge compile --opset, ge.compile(opset=))",
        nodes=[nodes[0] for nodes in missing.values()])
    error.about_model = True
    if path is not None:
        error.name_model_file(path)
    raise error
