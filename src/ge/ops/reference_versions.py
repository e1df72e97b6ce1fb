"""Which operator versions onnx's reference evaluator computes as they are written.

The reference evaluator (`onnx.reference`) has one implementation of most operators, written
for their newest version, and a few versioned ones (`ReduceSum_1`, `ReduceSum_13`). A node of
an older version runs the implementation of the nearest version the evaluator has, which is
right when the two versions differ only in the types they accept, and wrong when the
operator's meaning changed: Softmax before opset 13 normalises over the dims from `axis` on
flattened into one (the implementation of 13 over `axis` alone), RoiAlign-10 samples as
RoiAlign-16 does with `coordinate_transformation_mode="output_half_pixel"` (the
implementation takes 16's default, "half_pixel"), and Add-6 with `broadcast=1, axis=0`
aligns its second input at axis 0 (the implementation broadcasts numpy's way, from the last
axis).

`version_gap` tells such nodes apart from their signatures: the inputs, outputs and
attributes (with their defaults) of the node's version against those of the version the
evaluator implements. Where they differ, the node is not computed as written, except for the
differences `_SAME_MEANING` lists: attributes an operator gained whose default is what the
earlier versions did (MaxPool's `ceil_mode`), inputs that became optional, and the
`consumed_inputs` hint of opset 1, which no runtime reads. Constant evaluation
(`ge.ops.evaluation`) refuses a node with a gap, so constant folding leaves it to the runtime.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

import onnx
import onnx.defs

from ge.graph.node import Node
from ge.ops.onnx_node import node_opset
from ge.ops.schemas import normalize_domain

__all__ = ["version_gap"]

#: Differences between an operator's versions that keep its meaning, by operator: an
#: attribute name (added later, defaulting to what the earlier versions did; or read by the
#: older implementation the evaluator runs for a newer version), or "inputs" (an input that
#: became optional). Each was checked against the ONNX operator changelog.
_SAME_MEANING: dict[str, frozenset[str]] = {
    "AveragePool": frozenset({"ceil_mode"}),  # (the evaluator's AveragePool_7 reads it)
    "CastLike": frozenset({"round_mode"}),  # (float8/float4 targets only)
    "DepthToSpace": frozenset({"mode"}),  # DCR, what DepthToSpace-1 does
    "GRU": frozenset({"layout"}),
    "GatherND": frozenset({"batch_dims"}),
    "Gemm": frozenset({"inputs"}),  # C optional from 11
    "LSTM": frozenset({"layout"}),
    "LpPool": frozenset({"ceil_mode", "dilations"}),
    "MaxPool": frozenset({"ceil_mode", "dilations"}),
    "OptionalHasElement": frozenset({"inputs"}),
    "QuantizeLinear": frozenset({"axis"}),  # (the evaluator's QuantizeLinear_10 reads it)
    "Range": frozenset({"stash_type"}),
    "Resize": frozenset({"antialias", "axes", "keep_aspect_ratio_policy",
                         "inputs"}),  # roi optional from 13
    "ScatterElements": frozenset({"reduction"}),
    "ScatterND": frozenset({"reduction"}),
    "SpaceToDepth": frozenset({"mode"}),
}
#: An opset-1 hint to runtimes that could reuse an input's buffer; nothing computes with it.
_IGNORED_EVERYWHERE = frozenset({"consumed_inputs"})
_VERSIONED_CLASS = re.compile(r"_(\d+)$")


def version_gap(node: Node) -> str | None:
    """Why onnx's reference evaluator would not compute `node` as its version means (a
    sentence), or None when it does or when the node is not one of ONNX's operators."""
    domain = normalize_domain(node.domain)
    if domain not in ("", "ai.onnx.ml"):
        return None
    return _gap(domain, node.type, node_opset(node))


@functools.cache
def _gap(domain: str, op_type: str, opset: int) -> str | None:
    try:
        written = onnx.defs.get_schema(op_type, opset, domain)
        from onnx.reference.ops import load_op

        implementation = load_op(domain, op_type, written.since_version)
    except Exception:  # no schema or no implementation: evaluation says so
        return None
    versioned = _VERSIONED_CLASS.search(implementation.__name__)
    try:
        implemented = (onnx.defs.get_schema(op_type, int(versioned.group(1)), domain)
                       if versioned else onnx.defs.get_schema(op_type, domain=domain))
    except onnx.defs.SchemaError:
        return None
    if implemented.since_version == written.since_version:
        return None
    different = _differences(written, implemented) - _SAME_MEANING.get(op_type, frozenset())
    if not different:
        return None
    formals = [d for d in ("inputs", "outputs") if d in different]
    what = ", ".join(formals + [f"attribute {d}" for d in sorted(different - set(formals))])
    return (f"onnx's reference evaluator computes {op_type} as version "
            f"{implemented.since_version} does, and {op_type}-{written.since_version} "
            f"differs from it ({what})")


def _differences(written: onnx.defs.OpSchema, implemented: onnx.defs.OpSchema) -> set[str]:
    """What differs between two versions' signatures: "inputs", "outputs" and the names of
    the attributes that one has and the other not, or has with another default."""
    found = set()
    if _formals(written.inputs) != _formals(implemented.inputs):
        found.add("inputs")
    if _formals(written.outputs) != _formals(implemented.outputs):
        found.add("outputs")
    mine, theirs = _attributes(written), _attributes(implemented)
    found.update(name for name in mine.keys() | theirs.keys()
                 if mine.get(name) != theirs.get(name) and name not in _IGNORED_EVERYWHERE)
    return found


def _formals(formals: Sequence[onnx.defs.OpSchema.FormalParameter]) -> list[tuple[str, str]]:
    return [(f.name, str(f.option)) for f in formals]


def _attributes(schema: onnx.defs.OpSchema) -> dict[str, tuple[bytes, bool]]:
    return {name: (attr.default_value.SerializeToString() if attr.default_value.type else b"",
                   attr.required)
            for name, attr in schema.attributes.items()}
