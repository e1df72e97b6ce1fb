"""Whole-model shape inference (`infer_shapes`): onnx's inference of the exported model,
its results written back into the IR; kept apart from one node's inference (`inference`).

`infer_shapes(graph)` types a whole graph, subgraphs included. It exports the graph once
and runs `onnx.shape_inference.infer_shapes(data_prop=True)`, then writes the results back
into the IR. One C++ pass over the model is both correct (ONNX's rules for If/Loop/Scan
bodies, outer-scope values, symbolic dims and shape data propagation through
Shape/Gather/Concat chains) and much faster than a Python loop over nodes. Custom operators,
which onnx does not know, are typed by their registered functions between onnx passes
until nothing changes, and so are the `ai.onnx.ml` operators onnx has no inference
function for (`ge.ops.ml_shapes`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import onnx
from onnx import shape_inference

from ge.errors import ShapeInferenceError
from ge.graph.allocation import no_gc_pauses
from ge.graph.domains import defined_value_names, proto_graphs
from ge.graph.graph import CONST, DATA, Graph
from ge.graph.node import Node, is_const
from ge.graph.onnx_export import graph_to_model, initializers_as_inputs
from ge.graph.sparse import dense_initializers
from ge.graph.tensor import Tensor
from ge.graph.tensor_desc import Dim, TensorDesc
from ge.graph.types import DataType, data_type_to_onnx
from ge.graph.value_info import TypeDecoder, is_known_type
from ge.ops import inference as node_inference
from ge.ops.custom_typing import provisional_nodes, ready, settled, type_in_order, typed
from ge.ops.expanded_defaults import write_expanded_defaults
from ge.ops.functions import FunctionKey, called_function, function_key, opaque_functions
from ge.ops.inference import (
    _fresh_symbol,
    _known,
    _loop_carried,
    _merged,
    _write,
    check_declared_node,
    infer_node,
    is_runtime_domain_node,
    typed_by_ge,
)
from ge.ops.loop_claims import (
    CLAIM_ROUNDS,
    LoopClaims,
    add_claims,
    carried_types,
    corrected_claims,
    loop_claims,
    relax_carried_outputs,
)
from ge.ops.model_inference_errors import declared_elsewise, inference_error
from ge.ops.refinement import refine_output_descs
from ge.ops.registry import get_custom_op

__all__ = ["contradicted_outputs", "declared_outputs", "infer_shapes"]

# (node, output index) -> the name the value was exported under, when not its IR name.
ExportedNames = dict[tuple[Node, int], str]


def _custom_output_names(graph: Graph, exported: ExportedNames) -> set[str]:
    """The exported names of the typed outputs of the operators onnx cannot type (custom
    ones, and `ai.onnx.ml` ones without an inference function)."""
    names: set[str] = set()
    for node in graph.get_all_nodes():
        if typed_by_ge(node):
            names.update(exported.get((node, i), n) for i, n in enumerate(node.get_output_names())
                         if n and node.has_output_desc(i))
    return names


def _relax_outputs(gp: onnx.GraphProto) -> None:
    """Hand the graph's outputs to onnx with their rank but not their dims, so that what it
    infers for them follows from the inputs alone. onnx otherwise takes a declared dim
    over an inferred one, and an export that declares an output read inside the graph with
    its traced size (`[1, 5, 4]` where the inputs are `[batch, seq, 4]`: dynamic axes
    given for the inputs only) had that size folded into the graph (a `Size` of it became
    20 at every size). Dims inference cannot name still come from the file (`_merged`);
    the declared types are written back unchanged, and the compiler warns about a
    declared size its inputs contradict. An output that is a graph input is handed with
    the input's type, an initializer's as declared: onnx reads the one type the value has
    from both entries, and the relaxed one made every value computed from that input lose
    its symbolic dims (`Add(x[N, 4], W)` became `[unk__0, 4]`; trial M, through pyatc's
    --input_shape, which fixes an input's dims)."""
    inputs = {vi.name: vi for vi in gp.input}
    initializers = {t.name for t in gp.initializer}
    for vi in gp.output:
        if vi.name in inputs:
            vi.type.CopyFrom(inputs[vi.name].type)
            continue
        if not vi.type.HasField("tensor_type") or vi.name in initializers:
            continue
        shape = vi.type.tensor_type
        if not shape.HasField("shape"):
            continue
        for dim in shape.shape.dim:
            dim.Clear()


def _strip(gp: onnx.GraphProto, keep: set[str]) -> None:
    """Drop what the IR said about inner values so stale descs cannot mask new results.

    Graph outputs keep their declared types: they are the model's contract (and onnx merges
    them with what it infers, as it does for a model as read).
    """
    kept = [vi for vi in gp.value_info if vi.name in keep]
    del gp.value_info[:]
    gp.value_info.extend(kept)
    for node in gp.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _strip(attr.g, keep)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub in attr.graphs:
                    _strip(sub, keep)


class _Decoder(TypeDecoder):
    """The desc of each inferred value's type (`TypeDecoder`), or None when the type says
    nothing (`is_known_type`: what inference writes back); each value gets a copy."""

    __slots__ = ()

    def typed(self, vi: onnx.ValueInfoProto) -> TensorDesc | None:
        tp = vi.type
        return self.template(tp) if is_known_type(tp) else None


class _Types:
    """The typed value infos of one graph proto, by name: a graph output's type before an
    inferred value info's before a graph input's (a name in several takes the first typed
    one there). Each is checked only when it is looked up.
    """

    def __init__(self, gp: onnx.GraphProto, decoder: _Decoder) -> None:
        self._decoder = decoder
        self._lists = [gp.output, gp.value_info, gp.input]
        self._maps: list[dict[str, onnx.ValueInfoProto]] = []
        for vis in self._lists:
            by_name = {vi.name: vi for vi in vis}
            self._maps.append(by_name if len(by_name) == len(vis) else {})

    def get(self, name: str) -> tuple[onnx.ValueInfoProto, TensorDesc] | None:
        """The value info of `name` with the desc of its type (`_Decoder.typed`)."""
        typed = self._decoder.typed
        for vis, by_name in zip(self._lists, self._maps):
            if by_name:
                vi = by_name.get(name)
                template = typed(vi) if vi is not None else None
                if vi is not None and template is not None:
                    return vi, template
                continue
            # a name listed twice (never made by onnx): the last typed one, as written
            for vi in reversed(vis):
                if vi.name == name:
                    template = typed(vi)
                    if template is not None:
                        return vi, template
        return None


def _same_info(old: onnx.ValueInfoProto, new: onnx.ValueInfoProto) -> bool:
    """Whether two value infos are equal messages: a slot holding `old` undecoded then
    decodes and exports exactly as one holding `new`'s desc (`ge.graph.value_info`)."""
    return old.name == new.name and old == new


def _copy_back(graph: Graph, gp: onnx.GraphProto, exported: ExportedNames,
               decoder: _Decoder | None = None, strict: bool = False) -> None:
    """Write the types onnx inferred in `gp` back into `graph`'s nodes (subgraphs too).

    `exported` holds the names values were exported under when not their IR names (a new
    producer of a graph output is written under the output's name). With `strict`, a
    value_info of the file declaring another element type than the node computes is a
    `ShapeInferenceError`, as onnx says it of a graph output (`declared_elsewise`):
    onnxruntime refuses such a model, and onnx's full check; inference is given no value
    info (`graph_to_model`), so it cannot say it itself.
    """
    if decoder is None:
        decoder = _Decoder()
    types = _Types(gp, decoder)
    # Only nodes owning subgraphs need their exported proto back; index them on first need.
    protos_by_output: dict[str, onnx.NodeProto] | None = None
    protos_by_name: dict[str, onnx.NodeProto] = {}
    # (node, output, desc) to write: fresh descs, handed to the graph in one step
    inferred: list[tuple[Node, int, TensorDesc]] = []
    for node in graph.get_direct_nodes():
        if node.type == CONST and not node.domain:
            continue
        for i, name in enumerate(node.get_output_names()):
            if exported and name:
                name = exported.get((node, i), name)
            found = types.get(name)
            if found is None:
                continue
            vi, template = found
            if not node.has_output_desc(i):  # nothing known: no format to keep
                inferred.append((node, i, template.copy()))
                continue
            slot = node._out_slot(i)
            if isinstance(slot, onnx.ValueInfoProto) and _same_info(slot, vi):
                continue  # read from the model, still undecoded, and inference agrees
            old = node.get_output_desc(i)
            if node.type == DATA and _known(old):
                continue  # a declared input type is the user's, not inference's
            # the file's value_info, of a node as read: its dims stand where onnx has none
            declared = node._clean and (isinstance(slot, onnx.ValueInfoProto)
                                        or getattr(slot, "_source", None) is not None)
            if declared and strict:
                declared_elsewise(graph, node, template, old)
            inferred.append((node, i, _merged(template.copy(), old, from_file=declared)))
        subs = node.get_subgraphs()
        if not subs:
            continue
        if protos_by_output is None:
            protos_by_output = {p.output[0]: p for p in gp.node if len(p.output) and p.output[0]}
            protos_by_name = {p.name: p for p in gp.node if p.name}
        outs = node.get_output_names()
        first = exported.get((node, 0), outs[0]) if outs and outs[0] else ""
        proto = protos_by_output.get(first) if first else None
        if proto is None:
            proto = protos_by_name.get(node.name)
        if proto is None:
            continue
        attrs = {a.name: a for a in proto.attribute}
        for key in node.get_attr_names():
            attr = attrs.get(key)
            if attr is None:
                continue
            if attr.type == onnx.AttributeProto.GRAPH:
                _copy_back(node.get_attr(key), attr.g, exported, decoder, strict)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for sub, sub_proto in zip(node.get_attr(key), attr.graphs):
                    _copy_back(sub, sub_proto, exported, decoder, strict)
    graph._take_output_descs(inferred)


#: onnx's data propagation represents the value of a 1-D tensor it has no data for (a
#: graph input, a value computed from a constant) as one unknown dim per element, about
#: 140 bytes each, for every operator it propagates through (Gather, Mul, Concat, Cast...):
#: a model holding a 1-D graph input or constant of more elements than this is typed
#: without data propagation (700 MB of 1-D weights and a graph input of their length took
#: more than 20 GB with it). Shape data, what it is for, is never that long.
_DATA_PROP_ELEMENTS = 1 << 20

#: The element types whose 1-D initializers onnx's data propagation reads the values of
#: (and fails on when they are missing).
_PROPAGATED_TYPES = frozenset({onnx.TensorProto.INT32, onnx.TensorProto.INT64})


def _onnx_pass(root: Graph, known_values: Mapping[str, Tensor], strict: bool,
               custom: bool, opaque: set[FunctionKey], claims: LoopClaims | None = None
               ) -> LoopClaims | None:
    """One run of onnx's inference over the exported model, its results written back;
    `custom`: whether the model has custom operators (their typed outputs are kept);
    `opaque`: the model-local functions onnx is not given (`opaque_functions`);
    `claims`: types of Loop outputs onnx is handed (`ge.ops.loop_claims`). When the run
    does not prove them all, nothing is written back: the corrected claims are returned
    (else None)."""
    exported: ExportedNames = {}
    root_constants = {n.get_output_name(0) for n in root.nodes_of_type(CONST)}
    stubs: set[str] = set()  # constants of the root graph written as typed graph inputs
    long_1d: list[str] = []  # constants too long for onnx's data propagation

    def typed_only(tensor: Tensor, name: str) -> onnx.TensorProto | None:
        """A constant of more than `VALUE_ELEMENTS` elements without its data: a typed
        graph input (`stubs`) in the root graph, else an initializer without data. A 1-D
        float (or other non-int32/int64) one stays an initializer: onnx's data propagation
        gives a 1-D graph input read by Gather one unknown dim per element (300 MB of
        weights took 5.6 GB), and it reads an initializer only when it is int32 or int64,
        which, without data, it fails on: those are typed inputs. A body's inputs are
        positional: its constants stay initializers."""
        shape = tensor.shape
        if len(shape) == 1 and tensor.size > _DATA_PROP_ELEMENTS:
            long_1d.append(name)
        if tensor.size <= node_inference.VALUE_ELEMENTS:  # (read when called: one limit)
            return None  # written with its data
        elem_type = data_type_to_onnx(tensor.data_type)
        if name in root_constants and (len(shape) != 1 or elem_type in _PROPAGATED_TYPES):
            stubs.add(name)
        return onnx.TensorProto(name=name, data_type=elem_type, dims=shape)

    # Without custom operators no value info is kept: none is exported (the same as
    # exporting them all and stripping them, without writing or walking them). `Constant`
    # operators are lifted into initializers: so their values too go through `typed_only`.
    model = graph_to_model(root, value_names=exported, tensor_sink=typed_only,
                           value_info=custom, lift_constants=True, name_every_node=True)
    if opaque:  # their calls are unknown operators to onnx, typed by ge (`ge.ops.functions`)
        kept = [f for f in model.functions if function_key(f) not in opaque]
        del model.functions[:]
        model.functions.extend(kept)
    gp = model.graph
    # onnx types a sparse initializer `sparse_tensor`, which no operator takes: it gets the
    # dense tensor it stands for, as onnxruntime reads it, the large ones as other constants
    for stand_in in dense_initializers(gp, node_inference.VALUE_ELEMENTS):
        typed_only(Tensor.from_proto(stand_in), stand_in.name)
    initializers_as_inputs(gp, stubs)
    _relax_outputs(gp)
    write_expanded_defaults(root, gp, root.get_opset_version("") or 1)
    if any(g.count_of_type("Loop") for g in (root, *root.get_all_subgraphs())):
        relax_carried_outputs(gp)  # (a walk of every exported node: 0.2 s at 100k nodes)
    if custom:
        _strip(gp, _custom_output_names(root, exported))
    if claims:
        add_claims(gp, claims, exported)
    if known_values:
        by_name = {n.name: n.get_output_name(0) for n in root.get_data_nodes()}
        for data_name, tensor in known_values.items():
            value_name = by_name.get(data_name)
            if value_name is None:
                raise ShapeInferenceError(f"known_values names {data_name!r}, not a Data node")
            kept = [vi for vi in gp.input if vi.name != value_name]
            del gp.input[:]
            gp.input.extend(kept)
            gp.initializer.append(tensor.to_proto(value_name))
    # onnx's data propagation keys the values it propagates by name across the whole model:
    # two sibling bodies defining the same name (legal) would read each other's values, and
    # a Reshape in one branch would get the other's shape. Then types are inferred without it.
    data_prop = not (long_1d or _long_1d_input(gp)
                     or (root.get_all_subgraphs() and _names_repeat_across_graphs(gp)))
    # onnx serializes the model for its C++ side anyway: handing it the bytes lets the
    # Python message go first (about 150 MB less at the peak for 200,000 nodes).
    serialized = model.SerializeToString()
    del model, gp
    try:
        inferred = _infer(serialized, strict, data_prop)
    except Exception as err:
        if not data_prop:
            raise inference_error(root, err, serialized, _infer) from err
        # onnx's data propagation has faults of its own (1.23 rejects x[4] * Unsqueeze(v[3],
        # -1), which broadcasts to [3, 4]): the model is judged without it.
        try:
            inferred = _infer(serialized, strict, False)
        except Exception as plain:
            raise inference_error(root, plain, serialized, _infer) from plain
    decoder = _Decoder()
    if claims:
        types = _Types(inferred.graph, decoder)
        typed = carried_types(inferred.graph, exported, types.get, decoder.typed)
        corrected = corrected_claims(claims, typed)
        if corrected is not None:
            return corrected
    _copy_back(root, inferred.graph, exported, decoder, strict)
    _fill_from_declared_outputs(root)
    return None


def declared_outputs(graph: Graph) -> Iterator[tuple[int, Node, int, TensorDesc]]:
    """(graph output position, producer, its output index, declared desc) of each output
    of `graph` whose type the model declares (the NetOutput's own input desc: a model's
    graph output carries its type on the output, not on the node computing it)."""
    net_output = graph.get_net_output()
    if net_output is None:
        return
    for i in range(net_output.get_inputs_size()):
        producer = net_output.get_input_producer(i)
        if producer is not None and net_output.has_input_desc(i):
            yield i, producer[0], producer[1], net_output.get_input_desc(i)


def _fill_from_declared_outputs(root: Graph) -> None:
    """Give each graph output's producer the dims the model declares for the output where
    inference could not name them (`unk__N`, unknown; a Loop's outputs): onnx saw the
    outputs without their dims (`_relax_outputs`)."""
    for _, node, index, declared in declared_outputs(root):
        if node.type == DATA or is_const(node) or not node.has_output_desc(index):
            continue
        held = node.get_output_desc(index)
        filled = _merged(held, declared, from_file=True)
        if filled is not held:
            _write(node, index, filled)


def contradicted_outputs(root: Graph) -> list[tuple[str, list[Dim], list[Dim], Node]]:
    """The graph outputs whose declared dims contradict what inference gives from the
    inputs: (name, declared, inferred, producer) where a declared size meets another size or a
    symbol of the inputs (`[1, 5, 4]` declared for a `[batch, seq, 4]` value: an export
    with dynamic axes given for its inputs only). A dim inference made up (`unk__N`) or
    left unknown is no contradiction."""
    found = []
    names = root._output_names  # (as the model writes them: a pass may rewire an output)
    for i, node, index, declared in declared_outputs(root):
        said_shape, got_shape = declared.get_shape(), node.get_output_desc(index).get_shape()
        if said_shape.is_unknown_rank() or got_shape.is_unknown_rank():
            continue
        said, got = list(said_shape), list(got_shape)
        if len(said) == len(got) and any(
                isinstance(d, int) and d >= 0 and d != g and not _fresh_symbol(g)
                and g != -1 for d, g in zip(said, got)):
            name = names[i] if i < len(names) and names[i] else node.get_output_name(index)
            found.append((name, said, got, node))
    return found


def _long_1d_input(gp: onnx.GraphProto) -> bool:
    """Whether a graph input of `gp` is 1-D of more than `_DATA_PROP_ELEMENTS` elements."""
    for vi in gp.input:
        if not vi.type.HasField("tensor_type"):
            continue
        dims = vi.type.tensor_type.shape.dim
        if len(dims) == 1 and dims[0].dim_value > _DATA_PROP_ELEMENTS:
            return True
    return False


def _infer(serialized: bytes, strict: bool, data_prop: bool) -> onnx.ModelProto:
    return shape_inference.infer_shapes(
        serialized, check_type=strict, strict_mode=strict, data_prop=data_prop)


def _names_repeat_across_graphs(graph: onnx.GraphProto) -> bool:
    """Whether two graphs of a model (sibling bodies: a body may not reuse an outer name)
    define a value of the same name."""
    seen: set[str] = set()
    for each in proto_graphs(graph):
        names = defined_value_names(each)
        if not names.isdisjoint(seen):
            return True
        seen.update(names)
    return False


def infer_shapes(
    graph: Graph, *, known_values: Mapping[str, Tensor] | None = None, strict: bool = False
) -> None:
    """Infer the output descs of every node of `graph`'s model, subgraphs included, in place.

    `known_values` maps `Data` node names to constant values that inference may use (a
    replacement's boundary inputs fed by constants). With `strict=True`, onnx's type errors
    become a `ShapeInferenceError`; otherwise nodes onnx cannot type keep their descs.
    Declared graph-input descs are never changed.
    """
    with no_gc_pauses():  # a desc per node: a bulk rewrite of the graph
        _infer_shapes(graph.root_graph(), known_values or {}, strict)


def _shape_bodies(root: Graph) -> None:
    """Infer again, node by node, the body values onnx left without a shape: its inference
    gives an If branch's values a type only where they derive from outer values (an
    exported `torch.cond`'s layer norms then had no rank, and no fusion checking shapes
    fired in them)."""
    unshaped = [n for body in root.get_all_subgraphs() for n in body.get_direct_nodes()
                if not typed_by_ge(n) and any(n._output_dtype(i) == DataType.DT_UNDEFINED
                       or n.get_output_desc(i).get_shape().is_unknown_rank()
                       for i in range(n.get_outputs_size()))]
    if unshaped:  # (those typed by ge wait for final inputs: `ge.ops.custom_typing`)
        refine_output_descs(unshaped, leave=typed_by_ge)


#: Custom operators are typed by their own functions once onnx's whole-model inference has
#: typed their inputs from final values (`ge.ops.custom_typing`), which then runs again to
#: carry their outputs on. A chain of hundreds of them with standard operators between (an
#: onnxruntime-optimised transformer has a few per layer) would re-run it once per link:
#: after this many rounds the rest is typed node by node (`type_in_order`), and one more
#: whole-model run settles it.
_WHOLE_MODEL_ROUNDS = 4


def _pass_through_loops(root: Graph, known_values: Mapping[str, Tensor], strict: bool,
                        custom: bool, opaque: set[FunctionKey], settled: LoopClaims
                        ) -> LoopClaims:
    """A whole-model run, the types of the root graph's Loop outputs handed to onnx
    (`ge.ops.loop_claims`: those an earlier run `settled` on, the bodies' for the others)
    and run again until each is proven (`CLAIM_ROUNDS`), else a run without them; the
    claims it settled on. A run refused with claims is done again without them: the
    model's error is the one onnx gives it as it is."""
    claims: LoopClaims | None = {**loop_claims(root), **settled}
    for _ in range(CLAIM_ROUNDS):
        if not claims:
            break
        try:
            corrected = _onnx_pass(root, known_values, strict, custom, opaque, claims)
        except ShapeInferenceError:
            break
        if corrected is None:
            return claims
        claims = corrected
    _onnx_pass(root, known_values, strict, custom, opaque)
    return {}


def _infer_shapes(root: Graph, known_values: Mapping[str, Tensor], strict: bool) -> None:
    custom = [n for n in root.get_all_nodes() if n.domain and typed_by_ge(n)]
    # functions whose bodies onnx cannot type: their calls are typed with the custom ones
    opaque = opaque_functions(root.model.functions) if custom else set()
    claims = _pass_through_loops(root, known_values, strict, bool(custom), opaque, {})
    for loop in [n for g in (root, *root.get_all_subgraphs()) for n in g.nodes_of_type("Loop")]:
        held = [loop.get_output_desc(i) for i in range(loop.get_outputs_size())]
        for k, desc in _loop_carried(loop, held).items():
            _write(loop, k, desc)
    _shape_bodies(root)
    # custom operators whose types the file declares: inference skips them, so they are
    # checked against their registered functions or onnxruntime once their inputs are typed
    # (below)
    declared = [n for n in custom if strict and typed(n) and called_function(n) is None and (
        is_runtime_domain_node(n) or get_custom_op(n.type, n.domain) is not None)]
    for rounds in range(1, len(custom) + 2):
        pending = [n for n in custom if not settled(n)]
        if not pending:
            break
        # what the last run typed from their missing outputs: not final yet
        provisional = provisional_nodes(pending)
        if rounds > _WHOLE_MODEL_ROUNDS:  # a long chain of them: the rest node by node
            changed = type_in_order(root, provisional)
        else:
            changed = False
            for node in pending:
                if not settled(node) and ready(node, provisional) and (
                        infer_node(node) is not None):
                    changed = True
        if not changed:
            # none became final: those whose inputs stay provisional (behind a node nothing
            # types) are typed from what is known of them, unknown ranks included
            for node in pending:
                if not settled(node) and infer_node(node) is not None:
                    changed = True
            if not changed:
                break
        claims = _pass_through_loops(root, known_values, strict, True, opaque, claims)
    for node in declared:
        check_declared_node(node)
