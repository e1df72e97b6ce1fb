"""The types of a Loop's carried outputs, handed to onnx's whole-model inference so that
the values computed from them are typed too.

onnx's Loop inference gives a carried output its element type only (a carried value may
change shape between iterations). ge types it afterwards (`_loop_carried`: the dims its
initial value and the body's next value share), but onnx has typed the graph by then:
everything computed from the output stayed `float32?`, and no fusion that checks shapes
fired after the first Loop of a model (trial VV: 52 of a decoder's 60 LayerNorms).

So the whole-model pass is handed, as value infos, a claim for each carried output of a
root-graph Loop: the type its body declares for the carried value (a body input with a
shape), which onnx keeps where it infers no shape, carrying it on with its symbols and
its shape data (a Reshape to `Concat(Shape(x)[:2], [16])` is `[batch, seq, 16]`). A claim
stands only when, after the pass, it is what `_loop_carried` proves from the initial
value and the body's next value; otherwise the pass runs again with the proven type
(nothing is claimed where nothing is proven), and after `CLAIM_ROUNDS` runs that did not
settle, without claims (as before). A model whose bodies declare their carried values
as they are (the usual case) is typed in one pass. Loops inside bodies are left out:
the values computed from them are typed node by node (`_shape_bodies`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import onnx

from ge.graph.domains import proto_graphs
from ge.graph.graph import Graph
from ge.graph.node import Node, is_const
from ge.graph.tensor_desc import TensorDesc
from ge.graph.types import DataType
from ge.ops.inference import carried_desc, loop_body
from ge.ops.onnx_node import type_proto

__all__ = [
    "CLAIM_ROUNDS",
    "CarriedTypes",
    "LoopClaims",
    "add_claims",
    "carried_types",
    "corrected_claims",
    "loop_claims",
    "relax_carried_outputs",
]

#: (Loop node, carried output index) -> the type claimed for that output.
LoopClaims = dict[tuple[Node, int], TensorDesc]

#: (Loop, carried output index) -> the types a run of inference gave its initial value and
#: the body's next value (None where it gave none).
CarriedTypes = Callable[[Node, int], tuple[TensorDesc | None, TensorDesc | None]]

#: Whole-model runs with claims before inference gives up on them (each run corrects at
#: least the first wrong claim of a chain of Loops).
CLAIM_ROUNDS = 3


def _same(a: TensorDesc, b: TensorDesc) -> bool:
    return a.data_type == b.data_type and list(a.get_shape()) == list(b.get_shape())


def loop_claims(root: Graph) -> LoopClaims:
    """A claim for each carried output of a root-graph Loop that something reads: the type
    (with a shape) the body declares for its carried input."""
    claims: LoopClaims = {}
    for loop in root.nodes_of_type("Loop"):
        body = loop_body(loop)
        if body is None:
            continue
        inputs = body.get_data_nodes()
        carried = min(loop.get_inputs_size() - 2, loop.get_outputs_size(), len(inputs) - 2)
        for k in range(carried):
            if not loop.get_output_name(k) or not loop.get_out_data_nodes_and_port_indexes(k):
                continue
            data = inputs[2 + k]
            if not data.has_output_desc(0):
                continue
            declared = data.get_output_desc(0)
            if (declared.data_type == DataType.DT_UNDEFINED
                    or declared.get_shape().is_unknown_rank()):
                continue
            claims[(loop, k)] = TensorDesc(list(declared.get_shape()),
                                           data_type=declared.data_type)
    return claims


def corrected_claims(claims: LoopClaims, typed: CarriedTypes) -> LoopClaims | None:
    """None when every claim is what `carried_desc` proves from the types a run of
    inference gave the Loop's initial value and the body's next value (`typed`); else the
    claims replaced by what it proves (dropped where it proves nothing)."""
    corrected: LoopClaims = {}
    wrong = False
    for (loop, k), claim in claims.items():
        first, following = typed(loop, k)
        found = (carried_desc(first, following)
                 if first is not None and following is not None else None)
        if found is None or not _same(found, claim):
            wrong = True
        if found is not None:
            corrected[(loop, k)] = found
    return corrected if wrong else None


def _body_proto(loop: onnx.NodeProto) -> onnx.GraphProto | None:
    """The body graph an exported Loop node holds, if any."""
    return next((a.g for a in loop.attribute if a.name == "body"), None)


def _loop_protos(gp: onnx.GraphProto, exported: Mapping[tuple[Node, int], str]
                 ) -> Callable[[Node], onnx.GraphProto | None]:
    """The exported body of a root-graph Loop of `gp`, by the Loop."""
    by_output = {p.output[0]: p for p in gp.node if p.op_type == "Loop" and len(p.output)}
    by_name = {p.name: p for p in gp.node if p.op_type == "Loop" and p.name}

    def body(loop: Node) -> onnx.GraphProto | None:
        name = exported.get((loop, 0), loop.get_output_name(0))
        proto = by_output.get(name) if name else None
        if proto is None:
            proto = by_name.get(loop.name)
        return _body_proto(proto) if proto else None

    return body


def carried_types(gp: onnx.GraphProto, exported: Mapping[tuple[Node, int], str],
                  lookup: Callable[[str], tuple[onnx.ValueInfoProto, TensorDesc] | None],
                  decode: Callable[[onnx.ValueInfoProto], TensorDesc | None]) -> CarriedTypes:
    """The types the inferred root graph `gp` gives a Loop's initial carried values (by
    `lookup` of their exported names; a constant's as ge holds it) and its body's next
    values (its outputs, by `decode`: inferred, `relax_carried_outputs` having cleared their
    dims)."""
    body_of = _loop_protos(gp, exported)

    def typed(loop: Node, k: int) -> tuple[TensorDesc | None, TensorDesc | None]:
        first = following = None
        producer = loop.get_input_producer(2 + k)
        if producer is not None:
            src, index = producer
            if is_const(src):
                first = src.get_output_desc(index) if src.has_output_desc(index) else None
            else:
                found = lookup(exported.get((src, index), src.get_output_name(index)))
                first = found[1] if found is not None else None
        body = body_of(loop)
        if body is not None and 1 + k < len(body.output):
            following = decode(body.output[1 + k])
        return first, following

    return typed


def relax_carried_outputs(gp: onnx.GraphProto) -> None:
    """Clear the dims the body of every Loop in the exported model `gp` (at any depth)
    declares for its carried next values (their rank stays), so that what onnx infers for
    them follows from the body's nodes alone: onnx takes a declared dim over an inferred
    one, and a body that outgrows what it declares (`Concat(v, v)` declared `[L, 4]` like
    v: trial AA; fuzzer seeds 34669, 35654) would prove its claim (`carried_types`) or,
    for a Loop nothing in the root graph reads, type its output (`_loop_carried`) with
    dims it does not keep. The declared types are written back unchanged."""
    for graph in proto_graphs(gp):
        for node in graph.node:
            if node.op_type != "Loop" or node.domain not in ("", "ai.onnx"):
                continue
            body = _body_proto(node)
            if body is None:
                continue
            carried = max(0, len(node.input) - 2)
            for vi in body.output[1:1 + carried]:
                tensor = vi.type.tensor_type
                if vi.type.HasField("tensor_type") and tensor.HasField("shape"):
                    for dim in tensor.shape.dim:
                        dim.Clear()


def add_claims(gp: onnx.GraphProto, claims: LoopClaims,
               exported: Mapping[tuple[Node, int], str]) -> None:
    """Write `claims` into the exported root graph `gp` as value infos (replacing what it
    says of those values; a graph output keeps its own entry). The bodies' declared next
    values are relaxed for every run (`relax_carried_outputs`): what onnx infers for them
    follows from the body's nodes alone, which `carried_types` reads."""
    if not claims:
        return
    outputs = {vi.name for vi in gp.output}
    infos = {}
    for (loop, k), desc in claims.items():
        name = exported.get((loop, k), loop.get_output_name(k))
        tp = type_proto(desc)
        if name and name not in outputs and tp is not None:
            infos[name] = onnx.helper.make_value_info(name, tp)
    kept = [vi for vi in gp.value_info if vi.name not in infos]
    del gp.value_info[:]
    gp.value_info.extend(kept)
    gp.value_info.extend(infos.values())
