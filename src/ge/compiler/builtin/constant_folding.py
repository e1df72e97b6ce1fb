"""`ConstantFolding`: replace nodes computable at compile time by `Const` nodes.

A deterministic node whose connected inputs are all constants is evaluated with onnx's
reference evaluator (`ge.ops.evaluate_node`); `Shape` and `Size` are also folded when the
shape of their input is static, constant or not, and `Gather(Shape(x), i)` when the dims
it picks are (x's others may be symbolic); so is a comparison of integers whose operands'
bounds decide every element (`Equal(S, -1)` of a shape vector S built from dims, which a
TorchScript `expand` writes: a dim is never negative; `dim_bounds`). Nodes are visited in
topological order,
so a chain of foldable nodes folds in one run; a small computation repeated across the
model (inputs up to 4 KiB, e.g. a scale in every block) is evaluated once per run and its
result given to each fold. The readers of the new constants get their output descs
refined (`ge.ops.refinement`): inference ran before folding, so a shape computed from
constants left their dims unknown, which the passes after this one would read. Folding
never makes the model much bigger:
an output larger than `ge.constant_folding.size_limit` bytes is only folded when it is no
larger than the constants it is computed from that nothing else reads (a weight shared with
another reader stays, so folding it would copy it). A `DequantizeLinear` is never folded: in a
quantized model it is how a weight is stored (`_STORAGE_OPS`). Nor is a node onnxruntime
would compute otherwise than the reference evaluator (`runtime_differences`: NaN among
compared values, integer overflow, out-of-range casts, lengths a Resize scale does not
divide ...): the folded model computes what the original computes in the runtime.

Speed on large models: the walk first asks the one cheap question most nodes fail (is
every input a `Const`?) and only then the others; evaluation goes through the pass
instance's `ge.ops.evaluation.NodeEvaluator`, which builds one reference evaluator per
operator signature for the whole compilation instead of one per fold (same operator code,
same arrays, same results); each input constant is fetched once per fold, and sized and
keyed from its raw TensorProto bytes where it still is those (`_support.raw_bytes`), so a
memoised computation decodes nothing.
"""

from __future__ import annotations

import math
from collections.abc import Hashable

import numpy as np

from ge.compiler.builtin._support import (
    const_input,
    input_dims,
    is_operator,
    known_dtype,
    raw_bytes,
    read_by_body,
    shape_dims,
    static_dims,
    tensor_nbytes,
    unique_node_name,
    unsound_dims,
    used_outputs,
)
from ge.compiler.builtin.dim_bounds import COMPARISONS, comparison_value
from ge.compiler.builtin.runtime_differences import computed_otherwise
from ge.compiler.options import OPTION_CONSTANT_FOLDING_SIZE_LIMIT, size_limit_value
from ge.compiler.pass_registry import builtin_pass
from ge.errors import ConstantEvaluationError, KernelError, OpNotFoundError
from ge.graph import CONST, Graph, Node, Tensor, TensorDesc
from ge.graph.keys import value_key
from ge.graph.node import is_const
from ge.graph.types import DataType, data_type_to_numpy
from ge.ops.evaluation import NodeEvaluator, Signature
from ge.ops.onnx_node import STRUCTURAL, node_opset, node_spec
from ge.ops.randomness import is_random
from ge.ops.refinement import refine_output_descs
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["DEFAULT_SIZE_LIMIT", "SIZE_LIMIT_OPTION", "ConstantFolding", "gathered_dims",
           "size_limit"]

#: The option capping the bytes of a folded output (a decimal integer string); its value is
#: checked when the compiler parses the options (`ge.compiler.options`), before any pass runs.
SIZE_LIMIT_OPTION = OPTION_CONSTANT_FOLDING_SIZE_LIMIT
#: Its default: 1 MiB.
DEFAULT_SIZE_LIMIT = 1 << 20

# Type strings of values that are not plain tensors: the evaluator's results for those
# cannot become a `Const`.
_NON_TENSOR_TYPES = ("seq(", "optional(", "map(", "sparse_tensor(")
# Folded from the input's desc, whatever produces the input.
_SHAPE_OPS = frozenset({"Shape", "Size"})
#: How a model stores its weights, not a computation to do once: a `DequantizeLinear` of a
#: constant is a quantized model's weight (its QDQ format: int8, int4, uint16 ... with a
#: scale). Folded, the weight would be stored in float (4x the bytes of int8, 8x of int4)
#: and the quantized operators onnxruntime makes of DequantizeLinear -> op -> QuantizeLinear
#: would compute in float, slower and with other results. Never folded (onnxruntime's own
#: constant folding leaves them too).
_STORAGE_OPS = frozenset({"DequantizeLinear"})


def size_limit(context: PassContext) -> int:
    """The size cap in bytes from the options (the default when the option is not set).

    A compilation has checked the value already; a context made otherwise (a test's) still
    gets the same CompilerOptionError for a bad one."""
    try:
        raw = context.get_option_value(SIZE_LIMIT_OPTION)
    except RuntimeError:
        return DEFAULT_SIZE_LIMIT
    return size_limit_value(raw)


def _maybe_non_tensor(node: Node) -> list[int]:
    """The outputs whose schema allows a sequence, optional, map or sparse value (all of them
    when the schema is unknown)."""
    try:
        spec = node_spec(node)
    except OpNotFoundError:
        return list(range(node.get_outputs_size()))
    schema = spec.schema
    if schema is None:  # a custom operator: its kernel returns arrays
        return []
    allowed = {c.type_param_str: list(c.allowed_type_strs) for c in schema.type_constraints}
    flagged: list[int] = []
    for i in range(node.get_outputs_size()):
        param = schema.outputs[min(i, len(schema.outputs) - 1)] if schema.outputs else None
        if param is None:
            flagged.append(i)
            continue
        types = allowed.get(param.type_str, [param.type_str])
        if any(t.startswith(_NON_TENSOR_TYPES) for t in types):
            flagged.append(i)
    return flagged


def _item_size(dtype: DataType) -> int | None:
    """The bytes of one element of `dtype` in numpy, None when only the computed value
    can tell (strings, a type numpy cannot hold)."""
    try:
        numpy_type = data_type_to_numpy(dtype)
    except Exception:  # a type numpy cannot hold: the value check after evaluation decides
        return None
    return None if numpy_type.kind == "O" else numpy_type.itemsize


_ITEM_SIZES = {dtype: _item_size(dtype) for dtype in DataType}


def _estimated_nbytes(desc: TensorDesc) -> int | None:
    """The bytes of an output as its desc tells (None when the desc does not say)."""
    dtype = known_dtype(desc)
    if dtype is None:
        return None
    itemsize = _ITEM_SIZES[dtype]
    if itemsize is None:
        return None
    dims = static_dims(desc)
    return None if dims is None else math.prod(dims) * itemsize


def gathered_dims(node: Node) -> tuple[list[int | str], tuple[int, ...]] | None:
    """The dims `Gather(Shape(x), i)` picks with constant indices (axis 0, a scalar or 1-D
    index), static or symbolic, and the shape of the result; None when it is not such a
    Gather or a picked dim is unknown (or out of range: the runtime's error)."""
    producer = node.get_input_producer(0)
    if producer is None or producer[0].type != "Shape" or producer[0].domain:
        return None
    if node.has_attr("axis") and int(node.get_attr("axis")) != 0:
        return None
    dims = shape_dims(producer[0])
    indices = const_input(node, 1)
    if dims is None or indices is None:
        return None
    picked = np.asarray(indices.numpy())
    if picked.dtype.kind not in "iu" or picked.ndim > 1:
        return None
    values: list[int | str] = []
    for index in picked.reshape(-1).tolist():
        if not -len(dims) <= index < len(dims):
            return None
        dim = dims[index]
        if not isinstance(dim, str) and dim < 0:
            return None
        values.append(dim)
    return values, picked.shape


def _gathered_dims(node: Node) -> Tensor | None:
    """`Gather(Shape(x), i)` with constant indices picking static dims of x, as a constant,
    while x's other dims are symbolic (`x.shape[-1] // 2` of rotate_half, a head size in
    the attention scale: the whole Shape cannot fold, these dims can); else None."""
    found = gathered_dims(node)
    if found is None or any(isinstance(d, str) for d in found[0]):
        return None
    values, shape = found
    return Tensor(np.array(values, dtype=np.int64).reshape(shape))


def _shape_value(node: Node) -> Tensor | None:
    """`Shape` or `Size` of an input whose (selected) dims are static, else None."""
    if node.type == "Size":
        dims = input_dims(node)
        if dims is None or any(isinstance(d, str) or d < 0 for d in dims):
            return None
        return Tensor(np.array(math.prod(int(d) for d in dims), dtype=np.int64))
    selected = shape_dims(node)
    if selected is None or any(isinstance(d, str) or d < 0 for d in selected):
        return None
    return Tensor(np.array([int(d) for d in selected], dtype=np.int64))


#: Inputs up to this many bytes in all are small enough to key a memoised evaluation by
#: their values (a layer's scale or mask, repeated in every block); larger ones (weights)
#: are evaluated each time, as they are rarely equal and costly to digest.
_MEMO_INPUT_BYTES = 4096


def _may_fold(node: Node) -> bool:
    """A necessary condition for `_Folder.values` to fold `node`, cheap enough to ask of
    every node: a `Shape`/`Size`, or an operator whose connected inputs are all `Const`s."""
    op_type = node.type
    if op_type in _SHAPE_OPS:
        return True
    if op_type in STRUCTURAL and not node.domain:
        return False
    if op_type == "Gather" and not node.domain:
        producer = node.get_input_producer(0)
        if producer is not None and producer[0].type == "Shape":
            return True  # `_gathered_dims`
    if op_type in COMPARISONS and not node.domain:
        return True  # `comparison_value`: a dim compared with a negative constant
    return all(is_const(producer) for producer in node.get_in_data_nodes())


def _constant_inputs(node: Node) -> list[Tensor | None] | None:
    """The values of `node`'s inputs (None for an absent one) when every connected input is
    a `Const` holding a tensor, else None."""
    values: list[Tensor | None] = []
    for i in range(node.get_inputs_size()):
        producer = node.get_input_producer(i)
        if producer is None:
            values.append(None)
            continue
        src = producer[0]
        if not is_const(src) or not src.has_attr("value"):
            return None
        value = src.get_attr("value")
        if not isinstance(value, Tensor):
            return None
        values.append(value)
    return values


class _Folder:
    """Decides whether a node folds and computes its values, for one run of the pass."""

    def __init__(self, limit: int, evaluator: NodeEvaluator,
                 non_tensor: dict[Hashable, list[int]], unsound: set[Node]) -> None:
        self.limit = limit
        # nodes computed from values whose inferred dims may be wrong (`unsound_dims`)
        self._unsound = unsound
        self._evaluator = evaluator
        # (domain, op type, opset, output count) -> `_maybe_non_tensor`, for the compilation
        self._non_tensor = non_tensor
        # (signature, input value keys) -> the evaluated outputs, for this run.
        self._evaluated: dict[Hashable, list[Tensor]] = {}

    def _evaluate(self, node: Node, inputs: list[Tensor | None], raws: list[bytes | None],
                  input_bytes: int) -> list[Tensor]:
        """`evaluate_node(node)`, once per distinct small computation of this run."""
        signature = self._evaluator.signature(node)
        key = (_evaluation_key(signature, inputs, raws)
               if signature is not None and input_bytes <= _MEMO_INPUT_BYTES else None)
        if key is None:
            return self._evaluator.evaluate(node, inputs, signature)
        results = self._evaluated.get(key)
        if results is None:
            results = self._evaluated[key] = self._evaluator.evaluate(node, inputs, signature)
        return [r.copy() for r in results]  # (each Const its own Tensor, the data shared)

    def _maybe_non_tensor(self, node: Node) -> list[int]:
        key = (node.domain, node.type, node_opset(node), node.get_outputs_size())
        found = self._non_tensor.get(key)
        if found is None:
            found = self._non_tensor[key] = _maybe_non_tensor(node)
        return found

    def values(self, node: Node) -> dict[int, Tensor] | None:
        """The values of `node`'s used outputs if it should be folded, else None."""
        if not is_operator(node) or is_random(node) or node.type in _STORAGE_OPS:
            return None
        if node.get_subgraphs() or node.get_in_control_nodes() or node.get_out_control_nodes():
            return None
        used = used_outputs(node)
        if not used or read_by_body(node):
            return None  # dead (left to dead-code elimination) or read by a body
        # A dim inference may have got wrong (`unsound_dims`) is the runtime's to compute:
        # no shape is folded from it (constant inputs still fold, below).
        dims_trusted = node not in self._unsound
        if dims_trusted and node.type in _SHAPE_OPS and not node.domain:
            value = _shape_value(node)
            if value is not None and self._fits({0: value}, 0):
                return {0: value}
        if dims_trusted and node.type == "Gather" and not node.domain:
            value = _gathered_dims(node)
            if value is not None and _agrees(node.get_output_desc(0), value):
                return {0: value}
        if dims_trusted and node.type in COMPARISONS and not node.domain:
            value = comparison_value(node)
            if value is not None and _agrees(node.get_output_desc(0), value):
                return {0: value}
        inputs = _constant_inputs(node)  # fetched once: sizes, memo key and evaluation
        if inputs is None:
            return None  # (what `is_constant_foldable` says of a node without bodies)
        if node.domain in ("", "ai.onnx.ml") and computed_otherwise(node, inputs):
            return None
        descs = {i: node.get_output_desc(i) for i in used}
        for i in self._maybe_non_tensor(node):
            if i in used and known_dtype(descs[i]) is None:
                return None  # inference did not say it is a tensor: do not guess
        # raw TensorProto bytes where the constants still are that: sized and keyed
        # without decoding them (a memoised computation is never decoded)
        raws = [None if value is None else raw_bytes(value) for value in inputs]
        input_bytes = freed_bytes = 0
        seen: set[tuple[Node, int]] = set()
        for i, value in enumerate(inputs):
            producer = node.get_input_producer(i)
            if value is None or producer is None or producer in seen:
                continue  # absent, or a constant read twice (counted once)
            seen.add(producer)
            raw = raws[i]
            size = len(raw) if raw is not None else tensor_nbytes(value)
            input_bytes += size
            if _freed_by_fold(producer[0], node):
                freed_bytes += size
        estimated = {i: _estimated_nbytes(desc) for i, desc in descs.items()}
        if not self._within(estimated, freed_bytes):
            return None  # the desc already says it is too big: do not even compute it
        try:
            with np.errstate(all="ignore"):  # log(0) and the like: the values are the point
                results = self._evaluate(node, inputs, raws, input_bytes)
        except KernelError:
            raise  # a custom operator's kernel is wrong: its plugin's bug, said, not skipped
        except ConstantEvaluationError:
            return None
        named = [i for i, name in enumerate(node.get_output_names()) if name]
        by_index = dict(zip(named, results))
        values: dict[int, Tensor] = {}
        for i in used:
            value = by_index.get(i)
            if value is None or not _agrees(descs[i], value):
                return None
            values[i] = value
        if not self._fits(values, freed_bytes):
            return None
        return values

    def _within(self, sizes: dict[int, int | None], freed_bytes: int) -> bool:
        """Outputs over the limit are allowed only if together they are no larger than the
        constant inputs the fold frees (those nothing else reads): a weight that stays for
        another reader (an embedding shared with the output projection) is not copied."""
        over = [n for n in sizes.values() if n is not None and n > self.limit]
        return not over or sum(over) <= freed_bytes

    def _fits(self, values: dict[int, Tensor], freed_bytes: int) -> bool:
        return self._within({i: tensor_nbytes(v) for i, v in values.items()}, freed_bytes)


def _freed_by_fold(constant: Node, node: Node) -> bool:
    """Whether folding `node` leaves `constant` (one of its inputs) unread: every reader of
    it (a graph output's NetOutput, a node of a body reading it by name) is `node`."""
    return all(reader is node for reader, _ in constant.get_out_data_nodes_and_port_indexes(0))


def _evaluation_key(signature: Signature, inputs: list[Tensor | None],
                    raws: list[bytes | None]) -> Hashable | None:
    """What decides a constant node's outputs: its signature (operator, opsets, attributes,
    inputs present) and input values (`raws`: their raw bytes where known); None when a
    value is a string tensor: those are not memoised (written when their keys were numpy's
    object pointers; `Tensor.tobytes` now keys them by their strings)."""
    if any(v is not None and v.data_type == DataType.DT_STRING for v in inputs):
        return None
    return signature.key, tuple(
        None if value is None else value_key(value, raw)
        for value, raw in zip(inputs, raws))


def _agrees(desc: TensorDesc, value: Tensor) -> bool:
    """Whether a computed value matches what the output desc says (where it says)."""
    dtype = known_dtype(desc)
    if dtype is not None and dtype != value.data_type:
        return False
    shape = desc.get_shape()
    if shape.is_unknown_rank():
        return True
    if len(shape) != len(value.shape):
        return False
    return all(isinstance(d, str) or d < 0 or d == v for d, v in zip(shape, value.shape))


def _replace(graph: Graph, node: Node, values: dict[int, Tensor]) -> list[Node]:
    """Put one `Const` per used output in place of `node`, under the output's value name
    (so an output of a graph built in memory keeps its name too); returns the consumers."""
    consumers = {i: node.get_out_data_nodes_and_port_indexes(i) for i in values}
    value_names = {i: node.get_output_name(i) for i in values}
    base = f"{node.name}_folded"
    graph.remove_node(node)
    for i, value in values.items():
        const = graph.add_node(CONST, name=unique_node_name(graph, base if len(values) == 1
                                                                 else f"{base}_{i}"),
                               num_outputs=1, output_names=[value_names[i]],
                               attrs={"value": value})
        const.update_output_desc(0, value.get_tensor_desc())
        for consumer, j in consumers[i]:
            graph.add_data_edge(const, 0, consumer, j)
    return [consumer for edges in consumers.values() for consumer, _ in edges]


@builtin_pass(name="ConstantFolding", step="origin_graph_optimize")
class ConstantFolding(FusionBasePass):
    """Evaluate constant subexpressions at compile time (see the module docstring)."""

    #: Its rewrites put in place of nodes the constants they compute: a node rejecting one
    #: rejects what the model computes (`ge.compiler.folded_values`).
    exact_folds = True

    def __init__(self) -> None:
        # Kept for the compilation (the engine makes one instance per compilation): the
        # reference evaluators by operator signature, and the schemas' tensor answers.
        self._evaluator = NodeEvaluator()
        self._non_tensor: dict[Hashable, list[int]] = {}

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        folder = _Folder(size_limit(context), self._evaluator, self._non_tensor,
                         unsound_dims(graph))
        changed = False
        later: list[Node] = []  # readers of new constants that may fold themselves
        for node in graph.topological_order():
            if not _may_fold(node):
                continue
            values = folder.values(node)
            if values is None:
                continue
            changed = True
            # What the new constants decide downstream (a Reshape's dims, a mask's), at
            # once: the descs were inferred before folding, and a Shape further down this
            # order folds only from static dims. (Refined at the end, a deep Swin folded
            # one block's window arithmetic per round and ran out of rounds.) A reader
            # that may fold itself is refined through its constant instead, if it folds.
            now: list[Node] = []
            for reader in _replace(graph, node, values):
                (later if _may_fold(reader) else now).append(reader)
            if now:
                refine_output_descs(now)
        refine_output_descs(later)  # (skips readers folded since, and constants)
        return SUCCESS if changed else NOT_CHANGED
