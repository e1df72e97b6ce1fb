"""`ConstantFolding`: replace nodes computable at compile time by `Const` nodes.

A deterministic node whose connected inputs are all constants is evaluated with onnx's
reference evaluator (`ge.ops.evaluate_node`); `Shape` and `Size` are also folded when the
shape of their input is static, constant or not. Nodes are visited in topological order,
so a chain of foldable nodes folds in one run; a small computation repeated across the
model (inputs up to 4 KiB, e.g. a scale in every block) is evaluated once per run and its
result given to each fold. Folding never makes the model much bigger:
an output larger than `ge.constant_folding.size_limit` bytes is only folded when it is no
larger than the constants it is computed from.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable

import numpy as np

from ge.compiler.builtin._support import (
    NONDETERMINISTIC_OPS,
    is_operator,
    known_dtype,
    read_by_body,
    static_dims,
    tensor_nbytes,
    unique_node_name,
    used_outputs,
)
from ge.compiler.pass_registry import builtin_pass
from ge.errors import CompilerOptionError, ConstantEvaluationError, OpNotFoundError
from ge.graph import CONST, Graph, Node, Tensor
from ge.graph.keys import hashable_value, value_key
from ge.graph.types import data_type_to_numpy
from ge.ops import evaluate_node, is_constant_foldable
from ge.ops.onnx_node import node_opset, node_spec
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["DEFAULT_SIZE_LIMIT", "SIZE_LIMIT_OPTION", "ConstantFolding", "size_limit"]

#: The option capping the bytes of a folded output (a decimal integer string).
SIZE_LIMIT_OPTION = "ge.constant_folding.size_limit"
#: Its default: 1 MiB.
DEFAULT_SIZE_LIMIT = 1 << 20

_INTEGER = re.compile(r"\s*\+?\d+\s*")
# Type strings of values that are not plain tensors: the evaluator's results for those
# cannot become a `Const`.
_NON_TENSOR_TYPES = ("seq(", "optional(", "map(", "sparse_tensor(")


def size_limit(context: PassContext) -> int:
    """The size cap in bytes from the options (the default when the option is not set)."""
    try:
        raw = context.get_option_value(SIZE_LIMIT_OPTION)
    except RuntimeError:
        return DEFAULT_SIZE_LIMIT
    if not isinstance(raw, str) or not _INTEGER.fullmatch(raw):
        raise CompilerOptionError(
            f"option {SIZE_LIMIT_OPTION} must be a non-negative integer (bytes), got {raw!r}")
    return int(raw)


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


def _estimated_nbytes(node: Node, index: int) -> int | None:
    """The bytes of output `index` as its desc tells (None when the desc does not say)."""
    desc = node.get_output_desc(index)
    dims, dtype = static_dims(desc), known_dtype(desc)
    if dims is None or dtype is None:
        return None
    try:
        numpy_type = data_type_to_numpy(dtype)
    except Exception:  # a type numpy cannot hold: the value check after evaluation decides
        return None
    if numpy_type.kind == "O":
        return None  # strings: only the computed value tells
    return math.prod(dims) * numpy_type.itemsize


def _shape_value(node: Node) -> Tensor | None:
    """`Shape` or `Size` of an input whose (selected) dims are static, else None."""
    if node.get_input_producer(0) is None:
        return None
    shape = node.get_input_desc(0).get_shape()
    if shape.is_unknown_rank():
        return None
    dims = list(shape)
    if node.type == "Size":
        if shape.is_unknown_shape():
            return None
        return Tensor(np.array(math.prod(int(d) for d in dims), dtype=np.int64))
    rank = len(dims)

    def clamp(value: int) -> int:
        return min(max(value + rank if value < 0 else value, 0), rank)

    start = clamp(int(node.get_attr("start"))) if node.has_attr("start") else 0
    end = clamp(int(node.get_attr("end"))) if node.has_attr("end") else rank
    selected = dims[start:end]
    if any(isinstance(d, str) or d < 0 for d in selected):
        return None
    return Tensor(np.array([int(d) for d in selected], dtype=np.int64))


#: Inputs up to this many bytes in all are small enough to key a memoised evaluation by
#: their values (a layer's scale or mask, repeated in every block); larger ones (weights)
#: are evaluated each time, as they are rarely equal and costly to digest.
_MEMO_INPUT_BYTES = 4096


class _Folder:
    """Decides whether a node folds and computes its values, for one run of the pass."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        # (domain, op type, opset, attributes, input values) -> the evaluated outputs.
        self._evaluated: dict[Hashable, list[Tensor]] = {}

    def _evaluate(self, node: Node, input_bytes: int) -> list[Tensor]:
        """`evaluate_node(node)`, once per distinct small computation of this run."""
        key = _evaluation_key(node) if input_bytes <= _MEMO_INPUT_BYTES else None
        if key is None:
            return evaluate_node(node)
        results = self._evaluated.get(key)
        if results is None:
            results = self._evaluated[key] = evaluate_node(node)
        return [r.copy() for r in results]  # (each Const its own Tensor, the data shared)

    def values(self, node: Node) -> dict[int, Tensor] | None:
        """The values of `node`'s used outputs if it should be folded, else None."""
        if not is_operator(node) or node.type in NONDETERMINISTIC_OPS:
            return None
        if node.get_subgraphs() or node.get_in_control_nodes() or node.get_out_control_nodes():
            return None
        used = used_outputs(node)
        if not used or read_by_body(node):
            return None  # dead (left to dead-code elimination) or read by a body
        if node.type in ("Shape", "Size") and not node.domain:
            value = _shape_value(node)
            if value is not None and self._fits({0: value}, 0):
                return {0: value}
        if not is_constant_foldable(node):
            return None
        for i in _maybe_non_tensor(node):
            if i in used and known_dtype(node.get_output_desc(i)) is None:
                return None  # inference did not say it is a tensor: do not guess
        inputs = {p for p in (node.get_input_producer(i) for i in range(node.get_inputs_size()))
                  if p is not None}
        input_bytes = sum(tensor_nbytes(p[0].get_attr("value")) for p in inputs)
        estimated = {i: _estimated_nbytes(node, i) for i in used}
        if not self._within(estimated, input_bytes):
            return None  # the desc already says it is too big: do not even compute it
        try:
            with np.errstate(all="ignore"):  # log(0) and the like: the values are the point
                results = self._evaluate(node, input_bytes)
        except ConstantEvaluationError:
            return None
        named = [i for i, name in enumerate(node.get_output_names()) if name]
        by_index = dict(zip(named, results))
        values: dict[int, Tensor] = {}
        for i in used:
            value = by_index.get(i)
            if value is None or not _agrees(node, i, value):
                return None
            values[i] = value
        if not self._fits(values, input_bytes):
            return None
        return values

    def _within(self, sizes: dict[int, int | None], input_bytes: int) -> bool:
        """Outputs over the limit are allowed only if together they are no larger than the
        constant inputs."""
        over = [n for n in sizes.values() if n is not None and n > self.limit]
        return not over or sum(over) <= input_bytes

    def _fits(self, values: dict[int, Tensor], input_bytes: int) -> bool:
        return self._within({i: tensor_nbytes(v) for i, v in values.items()}, input_bytes)


def _evaluation_key(node: Node) -> Hashable | None:
    """What decides a constant node's outputs: its operator, opset, attributes and input
    values (None when an attribute has no exact key, e.g. a subgraph)."""
    try:
        attrs = tuple((name, hashable_value(node.get_attr(name)))
                      for name in sorted(node.get_attr_names()))
    except TypeError:
        return None
    if node.get_subgraphs():
        return None
    inputs = tuple(None if producer is None else value_key(producer[0].get_attr("value"))
                   for producer in map(node.get_input_producer, range(node.get_inputs_size())))
    return (node.domain, node.type, node_opset(node), attrs, inputs,
            tuple(bool(name) for name in node.get_output_names()))


def _agrees(node: Node, index: int, value: Tensor) -> bool:
    """Whether a computed value matches what the output desc says (where it says)."""
    desc = node.get_output_desc(index)
    dtype = known_dtype(desc)
    if dtype is not None and dtype != value.data_type:
        return False
    shape = desc.get_shape()
    if shape.is_unknown_rank():
        return True
    if len(shape) != len(value.shape):
        return False
    return all(isinstance(d, str) or d < 0 or d == v for d, v in zip(shape, value.shape))


def _replace(graph: Graph, node: Node, values: dict[int, Tensor]) -> None:
    """Put one `Const` per used output in place of `node`, under the output's value name
    (so an output of a graph built in memory keeps its name too)."""
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


@builtin_pass(name="ConstantFolding", step="origin_graph_optimize")
class ConstantFolding(FusionBasePass):
    """Evaluate constant subexpressions at compile time (see the module docstring)."""

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        folder = _Folder(size_limit(context))
        changed = False
        for node in graph.topological_order():
            values = folder.values(node)
            if values is not None:
                _replace(graph, node, values)
                changed = True
        return SUCCESS if changed else NOT_CHANGED
