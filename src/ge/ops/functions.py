"""Calls of model-local functions (`ModelProto.functions`) whose bodies onnx cannot type.

onnx's inference types a call by inferring the function's body, with onnx's schemas only:
a body that uses a custom operator (`ge.ops.register_op`), one of onnxruntime's
(`com.microsoft`) or an `ai.onnx.ml` operator ge types itself leaves the call's outputs
untyped, and in strict mode fails the node reading them. Such functions are *opaque* to
onnx (`opaque_functions`): whole-model inference hands onnx the model without them, so
their calls are unknown operators to it, and ge types each call here (`infer_call`) by
inlining it into a one-call model and inferring that with ge's own inference, which
consults the compilation's custom operators (`ge.ops.registry.CustomOpView`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from contextvars import ContextVar

import onnx
from onnx import helper, inliner

from ge.errors import GeError, ShapeInferenceError
from ge.graph.annotations import merge_annotations
from ge.graph.domains import proto_nodes
from ge.graph.graph import CONST
from ge.graph.model_info import FunctionKey, call_key, function_key
from ge.graph.node import Node, overload_of
from ge.graph.onnx_import import model_to_graph
from ge.graph.places import node_named
from ge.graph.tensor_desc import TensorDesc
from ge.ops.ml_shapes import ML_DOMAIN, ml_rule_types
from ge.ops.onnx_node import const_value, node_proto, opset_imports_of, type_proto
from ge.ops.schemas import STANDARD_DOMAINS, normalize_domain

__all__ = ["FunctionKey", "call_key", "called_function", "calls_left", "function_key",
           "infer_call", "inline_local_functions", "inside_call_body", "node_call_key",
           "opaque_functions"]

#: Whether the inference running is of a function's body inlined by `infer_call` (whose
#: values the model cannot declare in its value_info).
_IN_CALL_BODY: ContextVar[bool] = ContextVar("ge_in_call_body", default=False)


def inside_call_body() -> bool:
    """Whether the inference running is typing a model-local function's body
    (`infer_call`), not the model's own graphs."""
    return _IN_CALL_BODY.get()

def node_call_key(node: Node) -> FunctionKey:
    """The function an IR node would call, if the model defines it (`call_key`'s)."""
    return normalize_domain(node.domain), node.type, overload_of(node)


def inline_local_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx's inliner on `model` (changed: see below), each call first given the defaults
    its function declares for the attributes it leaves out (`FunctionProto.attribute_proto`):
    the inliner drops them, so the body's operators took ONNX's own defaults (a LeakyRelu's
    alpha 0.01 where the function says 0.25), while onnxruntime applies them."""
    _defaults_through_references(model.functions)
    defaults = {function_key(f): list(f.attribute_proto) for f in model.functions
                if len(f.attribute_proto)}
    if defaults:
        for nodes in [model.graph.node, *(f.node for f in model.functions)]:
            for node in proto_nodes(nodes):
                declared = defaults.get(call_key(node))
                if declared:
                    given = {a.name for a in node.attribute}
                    node.attribute.extend(a for a in declared if a.name not in given)
    if _imports_apart(model):  # (its calls are left, and keep their function's name)
        return inliner.inline_local_functions(model)
    named = _one_function_per_call(model)
    inlined = inliner.inline_local_functions(model)
    _drop_inliner_suffixes(inlined, named)
    return inlined


def _one_function_per_call(model: onnx.ModelProto) -> set[str]:
    """Give every call its own copy of the function it calls (and so on down nested calls),
    the copy's nodes named under the call's name (`call/Neg`) and carrying the call's
    metadata (`metadata_props` the node does not set itself, its doc string where it has
    none): onnx's inliner drops the call node with what an exporter wrote on it (a scope
    name, a dynamo export's `namespace` and source location), so what was inlined could
    not be told apart or traced back. In place; the copies replace the functions. The
    names given, which the inliner then makes unique by a suffix of its own."""
    by_key = {function_key(f): f for f in model.functions}
    named: set[str] = set()
    if not by_key:
        return named
    taken = {(normalize_domain(f.domain), f.name) for f in model.functions}
    copies: list[onnx.FunctionProto] = []

    def give_own_copy(call: onnx.NodeProto) -> None:
        function = by_key.get(call_key(call))
        if function is None:
            return
        copy = onnx.FunctionProto()
        copy.CopyFrom(function)
        domain, number = normalize_domain(function.domain), len(copies)
        while (domain, f"{function.name}__call{number}") in taken:
            number += 1
        copy.name = call.op_type = f"{function.name}__call{number}"
        taken.add((domain, copy.name))
        copies.append(copy)
        for node in proto_nodes(copy.node):
            _take_call_metadata(node, call)
            named.add(node.name)
        for node in proto_nodes(copy.node):
            give_own_copy(node)

    for node in proto_nodes(model.graph.node):
        give_own_copy(node)
    del model.functions[:]
    model.functions.extend(copies)
    return named


def _drop_inliner_suffixes(model: onnx.ModelProto, named: set[str]) -> None:
    """The inlined nodes named as `_one_function_per_call` named them, without the suffix
    onnx's inliner adds to every inlined node's name (`call/Neg__3`), where the name is
    then still unique in the model."""
    nodes = list(proto_nodes(model.graph.node))
    taken = Counter(n.name for n in nodes)
    bases = Counter(n.name.rpartition("__")[0] for n in nodes)
    for node in nodes:
        base, _, number = node.name.rpartition("__")
        if base in named and number.isdigit() and bases[base] == 1 and not taken[base]:
            node.name = base


def _take_call_metadata(node: onnx.NodeProto, call: onnx.NodeProto) -> None:
    """`node` (of a function's body) named under `call`, with its metadata and doc string
    where `node` has none of its own."""
    if call.name:
        node.name = f"{call.name}/{node.name or node.op_type}"
    merge_annotations(call, node)


def _defaults_through_references(functions: Iterable[onnx.FunctionProto]) -> None:
    """Give a function attribute declared without a default the default of the callee
    attribute it is passed on to (`alpha=@p` in a call of a function declaring alpha's
    default), when every use of it is such a reference to one same default: at a call
    that leaves it out, the reference is unresolved and dropped, and the callee's default
    applies (onnxruntime), which onnx's inliner loses with the reference. In place."""
    functions = list(functions)
    by_key = {function_key(f): f for f in functions}
    changed = True
    while changed:  # (a default can climb through several levels of calls)
        changed = False
        for function in functions:
            defaulted = {a.name for a in function.attribute_proto}
            found: dict[str, list[onnx.AttributeProto | None]] = {}
            for node in proto_nodes(function.node):
                callee = by_key.get(call_key(node))
                declared = {a.name: a for a in callee.attribute_proto} if callee else {}
                for attr in node.attribute:
                    if attr.ref_attr_name and attr.ref_attr_name not in defaulted:
                        found.setdefault(attr.ref_attr_name, []).append(declared.get(attr.name))
            for name, defaults in found.items():
                first = defaults[0]
                if first is None or any(d is None or d.SerializeToString() !=
                                        first.SerializeToString()
                                        for d in defaults[1:] if d is not first):
                    continue  # used otherwise too (an operator's own default applies there)
                default = onnx.AttributeProto()
                default.CopyFrom(first)
                default.name = name
                function.attribute_proto.append(default)
                kept = [a for a in function.attribute if a != name]
                del function.attribute[:]
                function.attribute.extend(kept)
                changed = True


def called_function(node: Node) -> onnx.FunctionProto | None:
    """The model-local function `node` calls, or None when it calls none."""
    graph = node.owner_graph
    if graph is None:
        return None
    return graph.root_graph().model.function(node_call_key(node))


def _typed_by_ge(node: onnx.NodeProto, opsets: Mapping[str, int],
                 functions: set[FunctionKey]) -> bool:
    """Whether onnx leaves a body node's outputs to ge: an operator of a custom domain
    (not a call of another local function), or an `ai.onnx.ml` one ge has a rule for."""
    domain = normalize_domain(node.domain)
    if domain == ML_DOMAIN:
        return ml_rule_types(node.op_type, opsets.get(ML_DOMAIN, 1))
    return domain not in STANDARD_DOMAINS and call_key(node) not in functions


def opaque_functions(functions: Iterable[onnx.FunctionProto]) -> set[FunctionKey]:
    """The functions whose bodies onnx cannot type: those using an operator ge types
    (`_typed_by_ge`), and those calling such a function."""
    functions = list(functions)
    defined = {function_key(f) for f in functions}
    opaque: set[FunctionKey] = set()
    calls: dict[FunctionKey, set[FunctionKey]] = {}
    for function in functions:
        opsets = {normalize_domain(o.domain): o.version for o in function.opset_import}
        nodes = list(proto_nodes(function.node))
        if any(_typed_by_ge(n, opsets, defined) for n in nodes):
            opaque.add(function_key(function))
        calls[function_key(function)] = {call_key(n) for n in nodes} & defined
    changed = True
    while changed:  # a function calling an opaque one is opaque (calls never recurse)
        changed = False
        for key, callees in calls.items():
            if key not in opaque and not callees.isdisjoint(opaque):
                opaque.add(key)
                changed = True
    return opaque


def _call_model(node: Node, function: onnx.FunctionProto) -> onnx.ModelProto:
    """A model of `node`'s call alone: its inputs typed as the graph has them (constants of
    at most `VALUE_ELEMENTS` elements with their values, as per-node inference gives
    them), its outputs untyped, the model's functions and opset imports."""
    from ge.ops.inference import VALUE_ELEMENTS  # (inference imports this module)

    proto = node_proto(node)
    proto.name = ""  # (the body's nodes keep their names: messages name them as written)
    for attr in proto.attribute:
        if attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            raise ShapeInferenceError(
                f"{node_named(node)} calls function {function.domain}.{function.name} with "
                "a graph attribute, which ge cannot infer", nodes=[node.name])
    inputs: list[onnx.ValueInfoProto] = []
    initializers: list[onnx.TensorProto] = []
    seen: set[str] = set()
    for i, name in enumerate(proto.input):
        if not name or name in seen:
            continue
        seen.add(name)
        value = const_value(node, i)
        if value is not None and value.size <= VALUE_ELEMENTS:
            initializers.append(value.to_proto(name))
            continue
        tp = type_proto(node.get_input_desc(i))
        vi = onnx.ValueInfoProto(name=name)
        if tp is not None:
            vi.type.CopyFrom(tp)
        inputs.append(vi)
    outputs = [onnx.ValueInfoProto(name=name) for name in proto.output if name]
    graph = helper.make_graph([proto], f"call_{node.name}", inputs, outputs,
                              initializer=initializers)
    root = node.owner_graph
    assert root is not None  # (a node calling a function of its model has a graph)
    model_info = root.root_graph().model
    model = helper.make_model(graph, opset_imports=opset_imports_of(node),
                              functions=model_info.functions)
    model.ir_version = max(model_info.ir_version, 8)  # (functions need IR 8)
    return model


def calls_left(model: onnx.ModelProto) -> str:
    """Why onnx's inliner left a call in `model` ("" when it left none): it inlines no
    function whose opset imports differ from the model's."""
    defined = {function_key(f) for f in model.functions}
    if not any(call_key(n) in defined for n in proto_nodes(model.graph.node)):
        return ""
    return _imports_apart(model) or "it left a call of a local function"


def _imports_apart(model: onnx.ModelProto) -> str:
    """The first function whose opset imports differ from the model's, said as `calls_left`
    says it ("" when none does): onnx's inliner leaves its calls."""
    imports = {normalize_domain(o.domain): o.version for o in model.opset_import}
    for function in model.functions:
        for o in function.opset_import:
            domain = normalize_domain(o.domain)
            if imports.get(domain, o.version) != o.version:
                return (f"function {function.domain}.{function.name} imports opset "
                        f"{o.version} of domain {domain!r}, the model {imports[domain]}")
    return ""


def infer_call(node: Node) -> list[TensorDesc | None]:
    """The output descs of a call of a model-local function (None for an output the body
    leaves untyped), from its input descs: the call is inlined into a model of its own
    (onnx's inliner: attribute references, nested calls) and typed by ge's whole-model
    inference, custom operators by their registered functions. `ShapeInferenceError`
    naming the call and the function when a body node is rejected or unregistered."""
    from ge.ops.model_inference import infer_shapes  # (it builds on this module)

    function = called_function(node)
    assert function is not None
    what = f"{node_named(node)} calls model-local function {function.domain}.{function.name}"
    try:
        inlined = inline_local_functions(_call_model(node, function))
    except GeError:
        raise
    except Exception as err:
        raise ShapeInferenceError(f"{what}, which onnx's inliner refuses: {err}",
                                  nodes=[node.name]) from err
    left = calls_left(inlined)
    if left:  # (typing it would ask this function again, without end)
        raise ShapeInferenceError(
            f"{what}, which onnx's inliner does not inline ({left}), so ge cannot type "
            "its body (when a conversion to a newer opset than its functions import made "
            "that so, inline them first: ge compile --inline-functions, "
            "ge.compile(inline_functions=True))", nodes=[node.name])
    body = model_to_graph(inlined)
    token = _IN_CALL_BODY.set(True)
    try:
        infer_shapes(body, strict=True)
    except ShapeInferenceError as err:
        raise ShapeInferenceError(f"{what}, whose body cannot be typed: {err.message}",
                                  nodes=[node.name]) from err
    finally:
        _IN_CALL_BODY.reset(token)
    net_output = body.get_net_output()
    outputs: list[TensorDesc | None] = []
    index = 0
    for name in node.get_output_names():
        if not name:
            outputs.append(None)
            continue
        producer = net_output.get_input_producer(index) if net_output is not None else None
        index += 1
        if producer is None:
            outputs.append(None)
            continue
        source, at = producer
        if source.type == CONST and not source.domain:
            value = source.get_attr("value")
            outputs.append(TensorDesc(list(value.shape), data_type=value.data_type))
        elif source.has_output_desc(at):
            outputs.append(source.get_output_desc(at).copy())
        else:
            outputs.append(None)
    return outputs
