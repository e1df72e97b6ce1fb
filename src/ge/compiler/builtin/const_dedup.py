"""`ConstantDeduplication`: keep one `Const` node per distinct constant value.

`Const` nodes whose values have the same `value_key` (dtype, shape and bytes, exactly: 0.0
and -0.0 differ) are merged into the first one in topological order, so the model stores
the value once and common-subexpression elimination sees the same producer. A constant
read by a subgraph body, or feeding a graph output whose name would change, is kept, and
so is a scale or zero point of a quantization node (`_support.quantization_parameter`:
merged, two QuantizeLinear pairs became equal and onnxruntime's own CSE merged them, which
undid its quantized fusions) or a tensor a quantization annotation names (merged into an
equal one, it was gone and the annotation named nothing: trial FF).

Digesting every weight of a large model would cost more than the rest of the pass (about
1 ms per MiB): a constant is digested only when another one has its dtype, shape and first
and last elements, which distinct weights almost never share; and a constant is sampled
only once another one has its dtype and shape (an embedding table of a shape of its own is
never read, and reading copies: BERT-base's pass 82-92 -> 40-43 ms). A constant still held as
the raw bytes it was read with is sampled and digested from those bytes (they are what
numpy's `tobytes()` of its decoded array gives, for the plain numeric types), without
decoding it: decoding took most of the pass's time, and a digest made through `value_key`
leaves the decoded copy in the graph. Reading those bytes copies them out of the proto, so
a constant's sample is kept for the compilation (the pass instance) by the proto it was
read from: BERT-base's 437 MB of weights were copied once per run (3 runs, 0.52 s of a
0.86 s compile), now once.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from ge.compiler.builtin._support import (
    annotation_parameters,
    quantization_parameter,
    raw_bytes,
    raw_item_size,
    rewirable,
)
from ge.compiler.pass_registry import builtin_pass
from ge.graph import CONST, Graph, Node, Tensor
from ge.graph.keys import value_key
from ge.passes import NOT_CHANGED, FusionBasePass, PassContext
from ge.passes.status import SUCCESS, StatusLike

__all__ = ["ConstantDeduplication"]


@builtin_pass(name="ConstantDeduplication", step="origin_graph_optimize")
class ConstantDeduplication(FusionBasePass):
    """Merge `Const` nodes holding equal values (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        # id(source proto) -> (that proto, its sample key), for the compilation: a proto
        # still held is the same value (kept alive here, so its id is not reused)
        self._samples: dict[int, tuple[object, Hashable]] = {}

    def _sample(self, value: Tensor) -> Hashable:
        proto = value._source_proto()
        if proto is None:
            return _sample_key(value, None)
        known = self._samples.get(id(proto))
        if known is not None and known[0] is proto:
            return known[1]
        key = _sample_key(value, raw_bytes(value))
        self._samples[id(proto)] = (proto, key)
        return key

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        # (dtype, shape) -> the only constant of that type and shape so far, not sampled:
        # a weight of a shape of its own (an embedding table) is never read at all
        alone: dict[Hashable, tuple[Node, Tensor] | None] = {}
        # sample key -> the first constant of each distinct value with that sample, with its
        # value key once another constant needed it (None until then)
        seen: dict[Hashable, list[list[Any]]] = {}
        changed = False
        # the tensors annotations name, read from every graph of the model: only once a
        # merge is at hand (per run of every body it made a model of 750 If/Loop bodies
        # spend 0.5 s of 5.6 collecting none)
        annotated: set[str] | None = None
        # whether each kept constant is read as a quantization parameter, asked once: it
        # gains the readers of every constant merged into it (none of them such a read), so
        # asking at each merge walked them all again (2,000 merges of one scale: 2M reads)
        kept_parameters: dict[Node, bool] = {}
        for node in graph.topological_order():
            if node.type != CONST or node.domain or not node.has_attr("value"):
                continue
            value = node.get_attr("value")
            if not isinstance(value, Tensor):
                continue  # a sparse constant
            kind = (int(value.data_type), tuple(value.shape))
            if kind not in alone:
                alone[kind] = (node, value)
                continue
            earlier = alone[kind]
            if earlier is not None:  # its shape is shared now: sample the first one too
                _first_equal(seen.setdefault(self._sample(earlier[1]), []), *earlier)
                alone[kind] = None  # (sampled: in `seen`)
            first = _first_equal(seen.setdefault(self._sample(value), []), node, value)
            if first is node or not node.get_out_data_nodes_and_port_indexes(0):
                continue  # the first of its value, or unused (dead-code elimination's)
            if not rewirable(node) or quantization_parameter(node):
                continue
            first_parameter = kept_parameters.get(first)
            if first_parameter is None:
                first_parameter = kept_parameters[first] = quantization_parameter(first)
            if first_parameter:
                continue
            if annotated is None:
                annotated = annotation_parameters(graph)
            if node.get_output_name(0) in annotated:
                continue
            graph.replace_all_uses(node, 0, first, 0)
            graph.remove_node(node)
            changed = True
        return SUCCESS if changed else NOT_CHANGED


def _sample_key(value: Tensor, raw: bytes | None) -> Hashable:
    """Dtype, shape and the first and last elements' bytes: equal for equal values, and
    for distinct weights almost never equal (strings: the dtype and shape alone). `raw`:
    `raw_bytes(value)`, or None to decode the value."""
    if raw is not None:
        if not raw:
            return (int(value.data_type), tuple(value.shape))
        itemsize = raw_item_size(value)
        return (int(value.data_type), tuple(value.shape), raw[:itemsize], raw[-itemsize:])
    array = value.numpy()
    if array.dtype.kind == "O" or array.size == 0:
        return (int(value.data_type), tuple(value.shape))
    flat = array.reshape(-1)
    return (int(value.data_type), tuple(value.shape), flat[:1].tobytes(), flat[-1:].tobytes())


def _first_equal(bucket: list[list[Any]], node: Node, value: Tensor) -> Node:
    """The first constant of `bucket` (one sample key) equal to `node`, else `node` itself
    (then added to the bucket). Value keys are made only when the bucket is shared."""
    if not bucket:
        bucket.append([node, None, value])
        return node
    key = value_key(value, raw_bytes(value))
    for entry in bucket:
        if entry[1] is None:
            entry[1] = value_key(entry[2], raw_bytes(entry[2]))
        if entry[1] == key:
            return entry[0]
    bucket.append([node, key, value])
    return node
