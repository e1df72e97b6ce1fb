"""A graph's formal inputs and outputs: its Data nodes' indexes, and a body's inputs and
outputs against what the operator holding it requires of them.

What an operator requires of its body (a Loop's body takes the int64 iteration number, the
bool condition and the states as the Loop is given them; an If's branches give what the If
declares) is onnx's to say: its inference of the owner node checks the body's signature. A
stand-in of the owner is inferred, holding bodies of the same signature whose nodes only
give outputs of the body's output types, so that the check costs what the signature is
(about 0.1 ms, once per signature and process), never what the body holds. Only element
types are compared (dims are inference's and the runtime's), and only where they are known:
a body whose output types are not known yet (before shape inference) is not checked. The
one rule onnx's inference leaves out, a Loop body's first output being the bool condition,
is ge's.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import TYPE_CHECKING

import onnx
from onnx import helper

from ge.errors import ValidationProblem
from ge.graph.attributes import GRAPH_KINDS, decode_attr, encode_attr
from ge.graph.domains import ONNX_DOMAINS
from ge.graph.node import DATA, NET_OUTPUT
from ge.graph.places import body_owner, graph_place, ir_node_label
from ge.graph.subgraphs import labelled_bodies
from ge.graph.types import DataType, data_type_to_onnx
from ge.graph.value_info import holds_non_tensor

if TYPE_CHECKING:
    from ge.graph.graph import Graph
    from ge.graph.node import Node
    from ge.graph.tensor_desc import TensorDesc

__all__ = ["body_signature_problems", "data_index_problems"]

#: A bare type, serialized (b"": not known), as the signature key holds it.
_Type = bytes
_Signature = tuple[tuple[_Type, ...], tuple[_Type, ...]]  # (input types, output types)
#: (graph attribute name, whether it holds a list of graphs, its bodies' signatures)
_Bodies = tuple[tuple[str, bool, tuple[_Signature, ...]], ...]
_STUB_DOMAIN = "ge.formals.stub"  # an operator of no schema: a value of no known type


def data_index_problems(graph: Graph) -> list[ValidationProblem]:
    """`structure`: the Data nodes of `graph` whose `index` attributes are not 0..n-1 (a
    body input removed or given another index), and `arity`: one without an int index."""
    problems: list[ValidationProblem] = []
    data_nodes = graph.nodes_of_type(DATA)
    indexes = []
    for node in data_nodes:
        index = node.get_attr("index") if node.has_attr("index") else None
        if not isinstance(index, int):
            problems.append(_problem(graph, "arity", (node,),
                                     f"{ir_node_label(node)} has no int 'index'"))
        else:
            indexes.append(index)
    if sorted(indexes) != list(range(len(indexes))):
        named = ", ".join(f"{n._name!r}={n.get_attr('index')!r}" for n in data_nodes
                          if n.has_attr("index"))
        problems.append(_problem(
            graph, "structure", tuple(data_nodes),
            f"Data indexes are {sorted(indexes)}, expected 0..{len(indexes) - 1} ({named})"))
    return problems


def body_signature_problems(owner: Node) -> list[ValidationProblem]:
    """`body`: the bodies of `owner` (a node of ONNX's own domains holding graphs: If,
    Loop, Scan...) whose formal inputs and outputs do not fit what the operator makes of
    them, as onnx's inference of the node says (a Loop body's inputs in another order
    than the iteration number, the condition and the states; an If branch giving another
    element type than the If declares). Nothing for a body whose Data indexes or NetOutput
    are broken (`data_index_problems`, the NetOutput count say so) or whose output types
    are not all known."""
    graph = owner._graph
    if graph is None or owner._domain not in ONNX_DOMAINS:
        return []
    version = graph.get_opset_version(owner._domain)
    bodies = labelled_bodies(owner)
    if version is None or not bodies:
        return []
    miscounted = _count_problems(owner, version, bodies)
    if miscounted:
        return miscounted
    signatures = []
    for _, body in bodies:
        signature = _body_signature(body)
        if signature is None:
            return []
        signatures.append(signature)
    grouped: dict[str, tuple[bool, list[_Signature]]] = {}
    attributes: list[bytes] = []
    for key, stored in owner._attrs.items():
        kind, _ = decode_attr(stored)
        if kind in GRAPH_KINDS:
            grouped[key] = (kind != GRAPH_KINDS[0], [])
        else:
            attributes.append(encode_attr(key, stored, _no_graph).SerializeToString())
    for (label, _), signature in zip(bodies, signatures, strict=True):
        grouped[label.split("[", 1)[0]][1].append(signature)
    inputs = tuple(b"-" if p is None else _value_type(*p) for p in owner._inputs)
    outputs = tuple(_value_type(owner, k) if name else b"-"
                    for k, name in enumerate(owner._out_names))
    said = _refusal(owner._type, owner._domain, version, tuple(attributes), inputs, outputs,
                    tuple((key, many, tuple(sigs)) for key, (many, sigs) in grouped.items()))
    if said is None:
        return []
    attribute, reason = said
    body = next(b for label, b in bodies if label.split("[", 1)[0] == attribute)
    return [_problem(
        body, "body", (owner, *_formals(body)),
        f"{ir_node_label(owner)} (opset {version}) does not take its {attribute} as it is: "
        f"{reason}; the body takes {_listed(body, inputs=True)} and gives "
        f"{_listed(body, inputs=False)}, the node is given "
        f"{_types(inputs)} and declares outputs {_types(outputs)}",
        "a pass changing a body's inputs or outputs (their order, their `index`, their "
        "types) changes them on its owner node too")]


def _count_problems(owner: Node, version: int, bodies: list[tuple[str, Graph]]
                    ) -> list[ValidationProblem]:
    """`body`: an If, Loop or Scan body with another number of formal inputs or outputs than
    its node gives and takes (a Loop body's inputs: the iteration number, the condition and
    one per state; its outputs: the condition, the states and the scan outputs), told
    whatever their types (trial AC: a Data added to a Loop body passed validation, and
    onnxruntime refused the model saved). The rest of the signature is onnx's to judge."""
    n_in, n_out = len(owner._inputs), len(owner._out_names)
    if owner._type == "If":
        want, what = (0, n_out), ("no inputs", "one output per If output")
    elif owner._type == "Loop":
        want, what = (n_in, 1 + n_out), (
            "the iteration number, the condition and one per state",
            "the condition, then one per Loop output")
    elif owner._type == "Scan" and version >= 9:
        want, what = (n_in, n_out), ("one per Scan input", "one per Scan output")
    else:
        return []
    problems = []
    for label, body in bodies:
        nets = body.nodes_of_type(NET_OUTPUT)
        got = (len(body.nodes_of_type(DATA)), len(nets[0]._inputs) if len(nets) == 1 else None)
        for side, wanted, had, said in (("input", want[0], got[0], what[0]),
                                       ("output", want[1], got[1], what[1])):
            if had is None or had == wanted:
                continue
            listed = _listed(body, inputs=side == "input")
            how = (f"gives its {label} {wanted} input(s) ({said}), but the body takes {had}"
                   if side == "input" else
                   f"takes {wanted} output(s) from its {label} ({said}), but the body gives "
                   f"{had}")
            problems.append(_problem(
                body, "body", (owner, *_formals(body)),
                f"{ir_node_label(owner)} (opset {version}) {how}: {listed}",
                "a pass changing a body's inputs or outputs changes them on its owner node "
                "too"))
    return problems


def _no_graph(graph: object) -> onnx.GraphProto:
    raise AssertionError("graph attributes are not encoded here")  # pragma: no cover


def _problem(graph: Graph, kind: str, nodes: tuple[Node, ...], message: str,
             advice: str = "") -> ValidationProblem:
    """A problem of `graph` about `nodes`, named but for a NetOutput (every graph has one
    of that name: naming it would blame whichever pass changed another graph's)."""
    owner = body_owner(graph, as_read=True)
    place = graph_place(graph.name, owner) if owner is not None else ""
    return ValidationProblem(kind, tuple(n._name for n in nodes if n._type != NET_OUTPUT),
                             message, graph.name, advice, nodes, place)


def _formals(body: Graph) -> list[Node]:
    """The Data nodes (by index) and the NetOutput of `body`: what the pass changing the
    signature changed (`ge.compiler.change_sites` finds its line by them)."""
    return [*_data_by_index(body), *body.nodes_of_type(NET_OUTPUT)]


def _data_by_index(body: Graph) -> list[Node]:
    """The Data nodes of `body` by their `index`, those without an int one last: unlike
    `get_data_nodes`, never raising, as validation reports such an index itself
    (`data_index_problems`) and must list the problems it finds, not stop at one."""
    def index(node: Node) -> int | float:
        found = node._attr_value("index") if "index" in node._attrs else None
        return found if isinstance(found, int) and not isinstance(found, bool) else math.inf

    return sorted(body.nodes_of_type(DATA), key=index)


def _body_signature(body: Graph) -> _Signature | None:
    """(input types by index, output types) of `body`, None when it cannot be told: Data
    indexes not 0..n-1, not one NetOutput, an output unconnected or of no known type."""
    outputs = body.nodes_of_type(NET_OUTPUT)
    if len(outputs) != 1:
        return None
    given = _output_types(outputs[0])
    if any(not tp for tp in given):
        return None  # (onnx's inference of a body needs its outputs typed)
    data = body.nodes_of_type(DATA)
    indexed = {n._attr_value("index") if "index" in n._attrs else None: n for n in data}
    if len(indexed) != len(data) or any(i not in indexed for i in range(len(data))):
        return None
    return tuple(_value_type(indexed[i], 0) for i in range(len(data))), given


def _output_types(net_output: Node) -> tuple[_Type, ...]:
    """The types of the values a graph gives (b"" where not known, or unconnected): the
    value's own, else the type the graph declares for the output (before shape inference,
    what the file says)."""
    types = []
    for i, producer in enumerate(net_output._inputs):
        tp = b"" if producer is None else _value_type(*producer)
        if not tp and producer is not None and net_output.has_input_desc(i):
            tp = _bare(net_output.get_input_desc(i))
        types.append(tp)
    return tuple(types)


def _value_type(node: Node, index: int) -> _Type:
    """The type of output `index` of `node` without dims (`_bare`), read without copying
    its desc."""
    desc = node._held_output_desc(index)
    if desc is not None and holds_non_tensor(desc):
        return _bare(desc)
    return _tensor_type(node._output_dtype(index))


def _bare(desc: TensorDesc) -> _Type:
    """The type of `desc` without dims (serialized; b"" when not known)."""
    if not holds_non_tensor(desc):
        return _tensor_type(desc.data_type)
    source = desc._source
    assert source is not None
    tp = onnx.TypeProto()
    tp.CopyFrom(source.type)
    _strip(tp)
    return tp.SerializeToString()


@lru_cache(maxsize=64)
def _tensor_type(dtype: DataType) -> _Type:
    """A tensor of `dtype` of no known dims, serialized; b"" for an unknown one."""
    if dtype == DataType.DT_UNDEFINED:
        return b""
    return helper.make_tensor_type_proto(data_type_to_onnx(dtype), None).SerializeToString()


def _strip(tp: onnx.TypeProto) -> None:
    """Drop the dims of `tp` and of the types inside it."""
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        getattr(tp, kind).ClearField("shape")
    elif kind in ("sequence_type", "optional_type"):
        _strip(getattr(tp, kind).elem_type)
    elif kind == "map_type":
        _strip(tp.map_type.value_type)


@lru_cache(maxsize=1024)
def _refusal(op: str, domain: str, version: int, attributes: tuple[bytes, ...],
             inputs: tuple[_Type, ...], outputs: tuple[_Type, ...], bodies: _Bodies
             ) -> tuple[str, str] | None:
    """(the attribute, why) when onnx's inference of an `op` node given `inputs` and
    declaring `outputs` (b"-": absent, b"": not known), holding bodies of these signatures,
    refuses them; None when it takes them."""
    if op == "Loop" and domain in ("", "ai.onnx"):  # (the schema says so; inference does not)
        condition = helper.make_tensor_type_proto(onnx.TensorProto.BOOL, None)
        for key, _, signatures in bodies:
            for _, given in signatures:
                if given and given[0] != condition.SerializeToString():
                    return key, (f"its first output (the condition) is {_type(given[0])}, "
                                 "where Loop reads tensor(bool)")
    nodes: list[onnx.NodeProto] = []
    graph_inputs: list[onnx.ValueInfoProto] = []
    names = [_value(f"in{i}", tp, nodes, graph_inputs) if tp != b"-" else ""
             for i, tp in enumerate(inputs)]
    node = helper.make_node(op, names, [f"out{k}" if tp != b"-" else ""
                                        for k, tp in enumerate(outputs)],
                            name="owner", domain=domain)
    for raw in attributes:
        node.attribute.add().ParseFromString(raw)
    for key, many, signatures in bodies:
        stubs = []
        for j, (taken, given) in enumerate(signatures):
            prefix = f"{key}{j}_"
            body_nodes = []
            for k, tp in enumerate(given):  # each output: an outer value of its type
                outer = _value(f"{prefix}given{k}", tp, nodes, graph_inputs)
                body_nodes.append(helper.make_node("Identity", [outer], [f"{prefix}out{k}"]))
            stubs.append(helper.make_graph(
                body_nodes, f"{prefix}body",
                [_info(f"{prefix}in{k}", tp) for k, tp in enumerate(taken)],
                [_info(f"{prefix}out{k}", tp) for k, tp in enumerate(given)]))
        node.attribute.append(helper.make_attribute(key, stubs) if many
                              else helper.make_attribute(key, stubs[0]))
    model = helper.make_model(
        helper.make_graph([*nodes, node], "owner", graph_inputs,
                          [_info(f"out{k}", tp) for k, tp in enumerate(outputs) if tp != b"-"]),
        opset_imports=[helper.make_opsetid(domain, version),
                       helper.make_opsetid(_STUB_DOMAIN, 1)])
    try:
        onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except onnx.shape_inference.InferenceError as err:
        return bodies[0][0] if len(bodies) == 1 else _named_body(str(err), bodies), \
            _reason(str(err))
    return None


def _value(name: str, tp: _Type, nodes: list[onnx.NodeProto],
           graph_inputs: list[onnx.ValueInfoProto]) -> str:
    """A value of type `tp` in the stand-in's graph: an input, or made by an operator of
    no schema when the type is not known (onnx's inference wants its inputs typed)."""
    if tp:
        graph_inputs.append(_info(name, tp))
    else:
        nodes.append(helper.make_node("Unknown", [], [name], domain=_STUB_DOMAIN))
    return name


def _info(name: str, tp: _Type) -> onnx.ValueInfoProto:
    info = onnx.ValueInfoProto(name=name)
    if tp:
        info.type.ParseFromString(tp)
    return info


def _named_body(said: str, bodies: _Bodies) -> str:
    """Which graph attribute onnx's message is about (it names none: the first)."""
    return next((key for key, _, _ in bodies if f"'{key}'" in said), bodies[0][0])


_PREFIX = re.compile(r"^(\[\w+\] Inference error\(s\): )?(\(op_type:\w+, node name: owner\): )?")
_ELEM = re.compile(r"\((\d+)\) vs \((\d+)\)|type of (\d+)")


def _reason(said: str) -> str:
    """onnx's message without its prefixes, element type numbers named ("(9) vs (1)":
    "(bool) vs (float)")."""
    text = _PREFIX.sub("", said.strip().splitlines()[0]).strip()

    def name(number: str) -> str:
        try:
            return onnx.TensorProto.DataType.Name(int(number)).lower()
        except ValueError:
            return number

    def named(match: re.Match[str]) -> str:
        if match.group(3) is not None:
            return f"type of {name(match.group(3))}"
        return f"({name(match.group(1))}) vs ({name(match.group(2))})"

    return f"onnx's inference says: {_ELEM.sub(named, text)}"


def _type(tp: _Type) -> str:
    """A bare type as a message says it: "tensor(float)", "?" when not known, "absent"."""
    if tp == b"-":
        return "absent"
    if not tp:
        return "?"
    proto = onnx.TypeProto()
    proto.ParseFromString(tp)
    if proto.WhichOneof("value") == "tensor_type":
        return f"tensor({onnx.TensorProto.DataType.Name(proto.tensor_type.elem_type).lower()})"
    return str(helper.printable_type(proto))


def _types(types: tuple[_Type, ...]) -> str:
    return "(" + ", ".join(_type(t) for t in types) + ")"


def _listed(body: Graph, *, inputs: bool) -> str:
    """A body's formal inputs or outputs with their types: "(int64 'i', bool 'cond')"."""
    if inputs:
        values = [(n._out_names[0], _value_type(n, 0)) for n in _data_by_index(body)]
    else:
        net = body.nodes_of_type(NET_OUTPUT)[0]
        values = [("" if p is None else p[0]._out_names[p[1]], tp)
                  for p, tp in zip(net._inputs, _output_types(net), strict=True)]
    return "(" + ", ".join(f"{name!r}: {_type(tp)}" for name, tp in values) + ")"
