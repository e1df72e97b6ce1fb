"""One node's shape and type inference, with ONNX's own inference functions.

`infer_node(node)` types one node's outputs from its input descs, handing constant inputs
(producers that are `Const` nodes) to onnx so data-dependent shapes such as Reshape's
resolve, and filling what a shape computed at run time decides (`ge.ops.shape_values`:
a Reshape to `Concat(Shape(x)[:-1], [64])` is `[batch, seq, 64]`, not `[-1, -1, -1]`);
custom operators are typed by their registered functions. The ES builder calls it
(`infer_new_node`) on every node it creates, and `shape_conflict` asks whether the descs a
node holds still follow from its inputs. Whole-model inference (`infer_shapes`) is in
`model_inference`, which builds on this module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import onnx
from onnx import shape_inference

from ge.errors import InferenceFunctionError, ShapeInferenceError
from ge.graph.graph import Graph
from ge.graph.node import Node
from ge.graph.places import ir_node_label, node_named
from ge.graph.tensor_desc import UNKNOWN_DIM, TensorDesc
from ge.graph.types import DataType, data_type_to_onnx
from ge.graph.value_info import desc_from_value_info, holds_non_tensor, is_known_type
from ge.ops.custom_calls import (
    call_infer,
    descs_text,
    function_location,
    inference_function_text,
)
from ge.ops.expanded_defaults import infer_by_body, typed_by_body
from ge.ops.functions import called_function, infer_call, inside_call_body
from ge.ops.memo import active_memo
from ge.ops.ml_shapes import infer_ml_node, typed_by_ml_rule
from ge.ops.onnx_node import (
    STRUCTURAL,
    const_value,
    input_value_name,
    node_opset,
    node_proto,
    node_spec,
    opset_imports_of,
    outer_inputs,
    type_proto,
)
from ge.ops.registry import CustomOp, InferContext, get_custom_op
from ge.ops.runtime_ops import infer_runtime_node, runtime_domains, runtime_op_spec, runtime_version
from ge.ops.schemas import STANDARD_DOMAINS, OpSpec, ParamOption, normalize_domain
from ge.ops.shape_values import SHAPED_BY_VALUE, refine_from_shape_values

__all__ = [
    "STALE_DESC_ADVICE",
    "VALUE_ELEMENTS",
    "ShapeConflict",
    "check_declared_node",
    "descs_contradict",
    "infer_node",
    "is_custom_node",
    "is_runtime_domain_node",
    "proto_contradicts",
    "shape_conflict",
    "typed_by_ge",
]

#: Constants of more elements than this go to onnx's inference by type and shape only,
#: without their data, here and in whole-model inference (`model_inference`): onnx reads
#: the values of small ones only (a Reshape's shape, a Slice's starts, the shape data it
#: propagates), and copying a weight into a proto for it would cost more than the
#: inference (one of protobuf's 2 GiB or more could not be handed over at all).
VALUE_ELEMENTS = 1024

#: What to do about a node whose output descs its changed inputs or attributes contradict
#: (`shape_conflict`): the pass that changed them infers it again.
STALE_DESC_ADVICE = ("a node keeps its output descs until inferred again: after changing a "
                     "node's inputs or attributes, call ge.ops.infer_node(node) on it and "
                     "then on the nodes that read it, in graph order")


def is_custom_node(node: Node) -> bool:
    """True for an operator of a non-standard domain (typed by its registered function,
    onnxruntime, or the body of the model-local function it calls)."""
    return normalize_domain(node.domain) not in STANDARD_DOMAINS


def typed_by_ge(node: Node) -> bool:
    """Whether onnx's inference leaves `node`'s outputs to ge: a custom operator (typed by
    its registered function or onnxruntime) or an `ai.onnx.ml` operator without an onnx
    inference function (`ge.ops.ml_shapes`). Whole-model inference types these between
    its onnx passes."""
    return is_custom_node(node) or typed_by_ml_rule(node)


def _known(desc: TensorDesc) -> bool:
    """Whether a value's type is known: a tensor's element type, or a sequence's, an
    optional's, a map's (kept as the desc's source)."""
    return desc.data_type != DataType.DT_UNDEFINED or holds_non_tensor(desc)


def _fresh_symbol(dim: object) -> bool:
    """A dim onnx's inference made up (`unk__3`) because it could not name it."""
    return isinstance(dim, str) and dim.startswith("unk__")


def _kept_dims(new: TensorDesc, old: TensorDesc) -> list[int | str] | None:
    """`new`'s dims with every dim onnx's inference made up (`unk__N`) or left unknown
    replaced by `old`'s dim there when that one is known (a number, or a name the exporter
    wrote: `seq`); None when nothing is replaced. An exporter's `[batch, seq, 768]` must not
    become `[batch, unk__2, 768]`: onnxruntime then cannot prove two values the same shape
    and skips fusions (SkipLayerNormalization). Where inference gives no rank at all (the
    values of an If branch reading outer values, which onnx types without shapes), `old`'s
    dims whole."""
    new_shape, old_shape = new.get_shape(), old.get_shape()
    if old_shape.is_unknown_rank():
        return None
    if new_shape.is_unknown_rank():
        return list(old_shape)
    new_dims, old_dims = list(new_shape), list(old_shape)
    if len(new_dims) != len(old_dims):
        return None
    kept = [o if (_fresh_symbol(n) or n == -1) and not _fresh_symbol(o) and o != -1 else n
            for n, o in zip(new_dims, old_dims)]
    return kept if kept != new_dims else None


def _merged(new: TensorDesc, old: TensorDesc | None, *, from_file: bool = False
            ) -> TensorDesc:
    """`new`'s shape and type with the format the anchor already had (inference is ND-blind)
    and, when `old` is the type the model file declared (`from_file`), the dims it knew that
    inference could not name (`_kept_dims`); `new` itself is left as it is."""
    if old is None or not _known(old):
        return new
    dims = (_kept_dims(new, old) if from_file and old.data_type == new.data_type
            else None)
    if dims is not None or new.format != old.format or new.origin_format != old.origin_format:
        new = new.copy()
        new.format = old.format
        new.origin_format = old.origin_format
        if dims is not None:
            new.set_shape(dims)
            new.set_origin_shape(dims)
    return new


def _write(node: Node, index: int, desc: TensorDesc) -> None:
    """Set output `index`'s desc to (a copy of) `desc`, keeping the anchor's format."""
    old = node.get_output_desc(index) if node.has_output_desc(index) else None
    node.update_output_desc(index, _merged(desc, old))


def _check_custom_arity(node: Node, spec: OpSpec) -> None:
    """A `ShapeInferenceError` when `node` does not fit its registered signature (input or
    output count, a required input not connected), said before its inference function is
    called, which would fail on it in its own terms ("list index out of range")."""
    n_in, n_out = node.get_inputs_size(), node.get_outputs_size()
    where = ir_node_label(node)
    signature = f"registered as {spec.summary()}"
    if not spec.min_input <= n_in <= spec.max_input:
        raise ShapeInferenceError(f"{where} has {n_in} input(s), {signature}", nodes=[node.name])
    if not spec.min_output <= n_out <= spec.max_output:
        raise ShapeInferenceError(f"{where} has {n_out} output(s), {signature}",
                                  nodes=[node.name])
    for i, param in enumerate(spec.inputs[:n_in]):
        if param.option is ParamOption.SINGLE and node.get_input_producer(i) is None:
            raise ShapeInferenceError(f"{where}: its required input {i} ({param.name}) is not "
                                      f"connected, {signature}", nodes=[node.name])


def _infer_custom(node: Node) -> list[TensorDesc]:
    """Type a node of a custom domain: a call of a model-local function by its body
    (`ge.ops.functions`), else a registered operator by its function, else one of
    onnxruntime's by onnxruntime."""
    if called_function(node) is not None:  # the model's own definition of the operator
        for i, desc in enumerate(infer_call(node)):
            if desc is not None:
                _write(node, i, desc)
        return [node.get_output_desc(i) for i in range(node.get_outputs_size())]
    custom = get_custom_op(node.type, node.domain)
    if custom is None:
        if runtime_op_spec(node.type, node.domain, node_opset(node)) is not None:
            for i, desc in enumerate(infer_runtime_node(node)):
                if desc is not None:
                    _write(node, i, desc)
            return [node.get_output_desc(i) for i in range(node.get_outputs_size())]
        raise _unregistered(node)
    for i, desc in enumerate(_registered_inference(node, custom)):
        _write(node, i, desc)
    return [node.get_output_desc(i) for i in range(node.get_outputs_size())]


def _registered_inference(node: Node, custom: CustomOp) -> list[TensorDesc]:
    """What the registered operator's inference function gives `node` (checked: one desc
    per output), nothing written."""
    _check_custom_arity(node, custom.spec)
    attrs = {name: spec.default for name, spec in custom.spec.attributes.items()}
    attrs.update({key: node.get_attr(key) for key in node.get_attr_names()})
    size = node.get_inputs_size()
    descs = _input_descs(node)
    values = []
    for i in range(size):
        tensor = const_value(node, i)
        values.append(tensor.numpy() if tensor is not None else None)
    ctx = InferContext(node.type, node.domain, descs, values, attrs, node.get_outputs_size())
    return call_infer(custom, ctx, ir_node_label(node), node.name)


def _unregistered(node: Node) -> ShapeInferenceError:
    """GE1305 for a custom-domain node nothing defines (no registered operator, and not one
    of onnxruntime's), naming the outputs the model leaves untyped: ge compiles around such
    a node where the model types all its outputs (trial Y: an unused second output without
    a type made it "not registered", naming neither; trial Z: a one-output one had no
    hint). Not in a function's body, whose values the model's value_info cannot type, nor
    for an operator of onnxruntime's domains typed nowhere (a misspelt FusedMatmul: typing
    it would not make onnxruntime run it)."""
    untyped = [f"{i} ({name!r})" if name else str(i)
               for i, name in enumerate(node._out_names)
               if node._output_dtype(i) is DataType.DT_UNDEFINED]
    why = ";"
    if untyped and not inside_call_body() and (
            len(untyped) < node.get_outputs_size() or not is_runtime_domain_node(node)):
        why = (f": the model gives no type to its output{'s' if len(untyped) > 1 else ''} "
               f"{', '.join(untyped)}, which ge needs to compile around an operator nothing "
               "defines; declare it in the model's value_info, or")
    return ShapeInferenceError(
        f"{node_named(node)}: custom operator {node.domain}::{node.type} is not "
        f"registered{_runtime_note(node)}{why} a plugin registers it with ge.ops.register_op "
        "(its shape inference, and a kernel or a decomposition to run it)",
        nodes=[node.name],
    )


def check_declared_node(node: Node) -> None:
    """Check a custom-domain node whose output types the model declares, so that inference
    did not need to run for it. A registered operator: GE1305 when its inference function
    gives types that contradict the declared ones (trial V: `[4, 3]` for a declared
    `[2, 3]` was written in silence, and its kernel's `[4, 3]` then failed `ge run`). One of
    onnxruntime's: GE1305 when onnxruntime does not define the operator, refuses the node
    with its inputs, or infers output types that contradict the declared ones (onnxruntime
    would not load the model)."""
    custom = get_custom_op(node.type, node.domain)
    if custom is not None:
        found = _contradicted_output(node, _registered_inference(node, custom))
        if found is not None:
            i, held, desc = found
            raise ShapeInferenceError(
                f"{ir_node_label(node)}: the model declares output {i} as {held!r}, "
                f"{inference_function_text(custom)}, gives {desc!r} from its inputs "
                f"({descs_text(_input_descs(node))}): correct the model's declared type or the "
                "function",
                nodes=[node.name],
                location=function_location(custom.infer))
        return
    if runtime_op_spec(node.type, node.domain, node_opset(node)) is None:
        raise _unregistered(node)
    found = _contradicted_output(node, infer_runtime_node(node))
    if found is not None:
        i, held, desc = found
        raise ShapeInferenceError(
            f"{ir_node_label(node)}: the model declares "
            f"output {i} as {held!r}, onnxruntime {runtime_version()} infers {desc!r} "
            "from its inputs", nodes=[node.name])


def _input_descs(node: Node) -> list[TensorDesc | None]:
    """The descs of `node`'s inputs, None for one not connected (an absent optional input),
    as a registered inference function is given them."""
    return [node.get_input_desc(i) if node.get_input_producer(i) else None
            for i in range(node.get_inputs_size())]


def is_runtime_domain_node(node: Node) -> bool:
    """Whether `node` is of one of onnxruntime's own domains (`com.microsoft` ...)."""
    return normalize_domain(node.domain) in runtime_domains()


def _runtime_note(node: Node) -> str:
    """What onnxruntime says of an unregistered operator of one of its domains."""
    domain = normalize_domain(node.domain)
    if domain not in runtime_domains():
        return ""
    version = runtime_version()
    if runtime_op_spec(node.type, domain, 2**31 - 1) is None:
        return f" (onnxruntime {version} defines no operator {node.type} in {domain!r} either)"
    return (f" (onnxruntime {version} defines {domain}::{node.type} only from a later version "
            f"of domain {domain!r} than the model's {node_opset(node)})")


def infer_node(node: Node, *, quiet: bool = False) -> list[TensorDesc] | None:
    """Infer and set the output descs of one node from its input descs.

    Returns the new output descs, or None when an input's type is not known yet (nothing is
    changed then). Structural nodes (Data, Const, NetOutput) are left as they are. Raises
    `ShapeInferenceError` when onnx rejects the node (wrong types, bad shapes), and
    `OpNotFoundError` for an operator without a schema. Inside `inference_memo_scope`
    (`ge.ops.memo`) a node with the signature of one inferred before takes its result.
    `quiet=True` returns None instead of raising `ShapeInferenceError` (the ES builder: a
    pattern or replacement graph need not be well-typed), but never for an
    `InferenceFunctionError`: a custom operator's own function failing is its author's bug.
    """
    if node._type in STRUCTURAL and not node._domain:
        return [node.get_output_desc(i) for i in range(node.get_outputs_size())]
    memo = active_memo()
    if memo is not None:
        inferred = memo.infer(node, _infer_node, _write_new, quiet=quiet)
    elif not quiet:
        inferred = _infer_node(node)
    else:
        try:
            inferred = _infer_node(node)
        except InferenceFunctionError:
            raise
        except ShapeInferenceError:
            return None
    if inferred is not None and node._type in SHAPED_BY_VALUE and refine_from_shape_values(
            node):
        return [node.get_output_desc(i) for i in range(node.get_outputs_size())]
    return inferred


class Rejection(NamedTuple):
    """Why inference refused a node the ES builder just built (`infer_new_node`): the
    `ShapeInferenceError`'s message, and onnx's reason in its own words where onnx refused
    it. Text, not the error itself: an exception kept in the builder's frame would hold its
    traceback, whose frames hold that frame (a cycle keeping the model's graph alive)."""

    message: str
    reason: str | None


def infer_new_node(node: Node) -> Rejection | None:
    """`infer_node(node, quiet=True)` for a node just built (the ES builder), which needs
    no copies of the descs handed back: a memo hit only writes them. Returns the
    `Rejection` kept quiet when inference refuses the node (the builder judges whether its
    inputs were known enough for that to be the node's fault), else None."""
    if node._type in STRUCTURAL and not node._domain:
        return None
    memo = active_memo()
    try:
        if memo is not None:
            memo.infer(node, _infer_node, _write_new, copies=False)
        else:
            _infer_node(node)
    except InferenceFunctionError:
        raise
    except ShapeInferenceError as err:
        return Rejection(err.message, err.reason)
    if node._type in SHAPED_BY_VALUE:
        refine_from_shape_values(node)
    return None


def _write_new(node: Node, index: int, desc: TensorDesc) -> None:
    """`_write` of a memoised desc: straight into the graph when the output has none yet
    (nothing to merge with; the memo keys the output count, so `index` is one)."""
    descs = node._out_descs
    graph = node._graph
    if graph is not None and (descs is None or descs[index] is None):
        graph._set_desc(node, False, index, desc)  # (what `update_output_desc` does)
    else:
        _write(node, index, desc)


def _inputs_typed(node: Node) -> bool:
    """Whether every connected input of `node` has a known element type (inference waits
    until they have)."""
    return all(node.get_input_producer(i) is None or _known(node.get_input_desc(i))
               for i in range(node.get_inputs_size()))


def _infer_node(node: Node) -> list[TensorDesc] | None:
    if is_custom_node(node):
        return _infer_custom(node) if _inputs_typed(node) else None
    inferred = _ml_outputs(node) if typed_by_ml_rule(node) else _onnx_outputs(node)
    if inferred is None:
        return None
    for i, desc in enumerate(inferred):
        if desc is not None:
            _write(node, i, desc)
    return [node.get_output_desc(i) for i in range(node.get_outputs_size())]


def _ml_outputs(node: Node) -> list[TensorDesc | None] | None:
    """`ge.ops.ml_shapes`' output descs of an `ai.onnx.ml` node onnx cannot type; None when
    an input's type is not known."""
    return infer_ml_node(node) if _inputs_typed(node) else None


def _onnx_outputs(node: Node) -> list[TensorDesc | None] | None:
    """What onnx infers for the outputs of a standard-domain node from its input descs and
    constant inputs (None for an output it cannot type), nothing written; None when an
    input's type is not known. `ShapeInferenceError` when onnx rejects the node."""
    if not _inputs_typed(node):
        return None
    spec = node_spec(node)
    proto = node_proto(node)
    types: dict[str, onnx.TypeProto] = {}
    data: dict[str, onnx.TensorProto] = {}
    for i in range(node.get_inputs_size()):
        name = input_value_name(node, i)
        if not name:
            continue
        tp = type_proto(node.get_input_desc(i))
        if tp is not None:
            types[name] = tp
        value = const_value(node, i)
        if value is not None and value.size <= VALUE_ELEMENTS:
            data[name] = value.to_proto(name)
    for name, (src, index) in outer_inputs(node).items():
        tp = type_proto(src.get_output_desc(index))
        if tp is None:
            return None
        types.setdefault(name, tp)
    assert spec.schema is not None  # standard operators always carry their onnx schema
    try:
        imports = opset_imports_of(node)
        inferred = shape_inference.infer_node_outputs(
            spec.schema, proto, types, data, opset_imports=imports)
        if typed_by_body(spec.schema):  # (per node onnx gives no shape: its body does)
            inferred.update((name, tp) for name, tp in infer_by_body(
                proto, types, data, imports).items() if is_known_type(tp))
    except Exception as err:
        ins = ", ".join(
            repr(node.get_input_desc(i)) if node.get_input_producer(i) else "None"
            for i in range(node.get_inputs_size())
        )
        raise _refused(f"{ir_node_label(node)}: shape inference (opset {spec.since_version} "
                       f"schema) failed for inputs ({ins}): {err}", node, err) from err
    outputs: list[TensorDesc | None] = []
    for out_name in node.get_output_names():
        tp = inferred.get(out_name) if out_name else None
        if tp is None or not is_known_type(tp):
            outputs.append(None)
            continue
        outputs.append(desc_from_value_info(onnx.helper.make_value_info(out_name, tp)))
    if node._type == "Loop":
        for k, desc in _loop_carried(node, outputs).items():
            outputs[k] = desc
    return outputs


def _refused(message: str, node: Node, err: Exception) -> ShapeInferenceError:
    """The GE1305 of a node onnx refused, with onnx's words as its `reason` (made here, not
    in a local of the frame that raises it: the error's traceback holds that frame, and a
    local holding the error would make a cycle keeping the node's graph alive)."""
    error = ShapeInferenceError(message, nodes=[node.name])
    error.reason = str(err).strip()
    return error


def loop_body(node: Node) -> Graph | None:
    """The body of an ONNX `Loop` node (None for another domain's Loop or none held)."""
    if node._domain not in ("", "ai.onnx") or not node.has_attr("body"):
        return None
    body = node._attr_value("body")
    return body if isinstance(body, Graph) else None


def _loop_carried(node: Node, held: Sequence[TensorDesc | None]) -> dict[int, TensorDesc]:
    """The final values of a Loop's carried variables whose rank onnx leaves unknown (it
    lets a carried value change shape between iterations), by output index: the rank its
    initial value and the body's next value share, each dim kept where the two agree. A
    graph output of unknown rank is one onnx.checker refuses. The next value is its
    producer's desc, never the type the body declares for its output (the NetOutput's
    own desc): a body traced for one trip declares `[L, 1]` for a value that grows."""
    body = loop_body(node)
    net = body.get_net_output() if body is not None else None
    if net is None:
        return {}
    found: dict[int, TensorDesc] = {}
    carried = min(node.get_inputs_size() - 2, len(held), net.get_inputs_size() - 1)
    for k in range(carried):
        desc = held[k]
        if desc is not None and not desc.get_shape().is_unknown_rank():
            continue
        source = net.get_input_producer(1 + k)
        if node.get_input_producer(2 + k) is None or source is None:
            continue
        producer, index = source
        if not producer.has_output_desc(index):
            continue
        final = carried_desc(node.get_input_desc(2 + k), producer.get_output_desc(index))
        if final is not None:
            found[k] = final
    return found


def carried_desc(first: TensorDesc, following: TensorDesc) -> TensorDesc | None:
    """The desc of a Loop's carried value from its initial value's (`first`) and the body's
    next value's (`following`): their shared rank, each dim kept where the two agree; None
    when the ranks are not both known and equal or the types differ."""
    dims, next_dims = first.get_shape(), following.get_shape()
    dtype = first.data_type
    if (dims.is_unknown_rank() or next_dims.is_unknown_rank()
            or len(dims) != len(next_dims) or dtype == DataType.DT_UNDEFINED
            or following.data_type not in (dtype, DataType.DT_UNDEFINED)):
        return None
    return TensorDesc([a if a == b else UNKNOWN_DIM for a, b in zip(dims, next_dims)],
                      data_type=dtype)


def proto_contradicts(held: onnx.ValueInfoProto, desc: TensorDesc) -> bool:
    """`descs_contradict` of a value info not decoded into a desc yet and a desc, read from
    the proto as it is (decoding it would cost more than the question: a rewrite asks it of
    every output it replaces)."""
    if held.type.WhichOneof("value") != "tensor_type":
        return False
    tensor = held.type.tensor_type
    dtype = desc._data_type
    if tensor.elem_type and dtype != DataType.DT_UNDEFINED and (
            data_type_to_onnx(dtype) != tensor.elem_type):
        return True
    shape = desc._shape
    if not tensor.HasField("shape") or shape.is_unknown_rank():
        return False
    dims = tensor.shape.dim
    if len(dims) != len(shape):
        return True
    return any(d.HasField("dim_value") and isinstance(x, int) and x >= 0 and d.dim_value != x
               for d, x in zip(dims, shape))


def descs_contradict(held: TensorDesc, inferred: TensorDesc) -> bool:
    """Whether two descs of one value cannot both be right: different known element types,
    ranks, or sizes of a dim (symbolic and unknown dims agree with anything)."""
    if DataType.DT_UNDEFINED not in (held._data_type, inferred._data_type) and (
            held._data_type != inferred._data_type):
        return True
    a, b = held._shape, inferred._shape  # (read only)
    if a == b:
        return False
    if a.is_unknown_rank() or b.is_unknown_rank():
        return False
    if len(a) != len(b):
        return True
    return any(isinstance(x, int) and isinstance(y, int) and x >= 0 and y >= 0 and x != y
               for x, y in zip(a, b))


class ShapeConflict(NamedTuple):
    """Why a node's output descs cannot be what its inputs give (`shape_conflict`).
    `stale`: the node holds descs its inputs or attributes now contradict, which inferring
    it again fixes (`STALE_DESC_ADVICE`); else onnx rejects the node as it is wired."""

    message: str
    stale: bool


def shape_conflict(node: Node) -> ShapeConflict | None:
    """Why `node`'s output descs cannot be what its inputs give, or None: onnx rejects the
    node with its present inputs (a rank-4 input where Gemm takes rank 2), or infers an
    output that contradicts the desc the node holds (`stale`: an input or an attribute
    changed what it computes). The check after a pass (`ge.compiler`) asks it of the nodes
    the pass touched. Standard-domain operators and onnxruntime's (asked of onnxruntime)
    without subgraphs; nothing is written."""
    if (node._type in STRUCTURAL and not node._domain) or node.get_subgraphs():
        return None
    if is_custom_node(node):
        if not is_runtime_domain_node(node) or get_custom_op(node.type, node.domain) is not None:
            return None  # a registered operator's descs are its inference function's
        if not _inputs_typed(node):
            return None
        outputs: Callable[[Node], list[TensorDesc | None] | None] = infer_runtime_node
    else:
        outputs = _ml_outputs if typed_by_ml_rule(node) else _onnx_outputs
    memo = active_memo()
    try:
        inferred = outputs(node) if memo is None else memo.pure(node, outputs)
    except ShapeInferenceError as err:
        return ShapeConflict(err.message, stale=False)
    found = _contradicted_output(node, inferred or ())
    if found is None:
        return None
    i, held, desc = found
    return ShapeConflict(f"output {i} of {ir_node_label(node)} is {held!r} in the "
                         f"graph, but its inputs and attributes now give {desc!r}", stale=True)



def _contradicted_output(node: Node, inferred: Sequence[TensorDesc | None]
                         ) -> tuple[int, TensorDesc, TensorDesc] | None:
    """The first output whose desc `node` holds contradicts the inferred one, as (index,
    held, inferred), or None."""
    for i, desc in enumerate(inferred):
        held = node._held_output_desc(i) if desc is not None else None
        if held is not None and desc is not None and descs_contradict(held, desc):
            return i, held, desc
    return None
