"""HardSwishFusion: HardSwish written out in primitives becomes one `HardSwish` (opset >= 14).

MobileNetV3-style models exported by tools that predate `HardSwish` (or written by hand)
compute it as

    x * Clip(x + 3, 0, 6) / 6          (Keras `hard_swish`, "x * relu6(x + 3) / 6")
    x * (Clip(x + 3, 0, 6) / 6)
    x * HardSigmoid(x, alpha=1/6, beta=0.5)   (PyTorch's export below opset 14)

four or five nodes and as many intermediate tensors. ONNX `HardSwish(x)` is defined as
`x * max(0, min(1, x / 6 + 0.5))`: the same function, one kernel. The rewrite is exact in
real numbers; in float32 the fused kernel may round differently by about one ulp.

Matched with commutative matching (`3 + x`, `Clip(...) * x` match too). Accepted only
when every constant is a single element equal to the value above (3, 0, 6, 6; HardSigmoid's
alpha equal to 1/6 in float32 and beta 0.5) that does not broadcast `x` to a higher rank,
`x` is float16, float or double, and the model's opset is at least 14.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ge.es.all import Clip, HardSigmoid, HardSwish
from ge.graph import DataType
from ge.passes import (
    PassStage,
    PatternFusionPass,
    PatternMatcherConfigBuilder,
    pattern,
    register_fusion_pass,
)

from ._values import constant_output, first_of_type

_FLOAT_TYPES = (DataType.DT_FLOAT16, DataType.DT_FLOAT, DataType.DT_DOUBLE)


def _is_scalar(value: np.ndarray | None, expected: float, rank: int) -> bool:
    """`value` is a one-element float constant equal to `expected` whose rank does not
    exceed `rank` (so it cannot broadcast `x` up)."""
    return (value is not None and value.size == 1 and value.dtype.kind == "f"
            and value.ndim <= max(rank, 0) and float(value.reshape(-1)[0]) == expected)


def _clip_form_ok(match_result: Any, rank: int) -> bool:
    """Captures 1..4 of the Clip patterns are the constants 3, 0, 6 and the divisor 6."""
    values = [constant_output(match_result.get_captured_tensor(i).node) for i in range(1, 5)]
    return all(_is_scalar(v, e, rank) for v, e in zip(values, (3.0, 0.0, 6.0, 6.0)))


def _hard_sigmoid_form_ok(nodes: list[Any]) -> bool:
    sigmoid = first_of_type(nodes, "HardSigmoid")
    alpha = sigmoid.get_attr("alpha") if sigmoid.has_attr("alpha") else 0.2
    beta = sigmoid.get_attr("beta") if sigmoid.has_attr("beta") else 0.5
    return np.float32(alpha) == np.float32(1 / 6) and np.float32(beta) == np.float32(0.5)


@register_fusion_pass(name="HardSwishFusion", stage=PassStage.AFTER_INFER_SHAPE)
class HardSwishFusion(PatternFusionPass):
    def __init__(self):
        super().__init__(PatternMatcherConfigBuilder().enable_commutative_match().build())

    # The constants are pattern inputs (wildcards), not pattern constants: two pattern
    # constants never bind one node, and exporters often share one `6` between Clip and Div.
    # meet_requirements checks that they are constants of the right values.
    @pattern
    def clip_then_div(self, inputs):
        x, three, zero, six, divisor = inputs[:5]
        return x * Clip(x + three, zero, six) / divisor

    @pattern
    def div_then_mul(self, inputs):
        x, three, zero, six, divisor = inputs[:5]
        return x * (Clip(x + three, zero, six) / divisor)

    @pattern
    def hard_sigmoid(self, inputs):
        x = inputs[0]
        return x * HardSigmoid(x)

    def meet_requirements(self, match_result):
        x = match_result.get_captured_tensor(0)
        graph = x.node.owner_graph
        if graph is None or (graph.get_opset_version("") or 0) < 14:
            return False
        desc = x.node.get_output_desc(x.index)
        if desc.get_data_type() not in _FLOAT_TYPES:
            return False
        rank = desc.get_shape().get_dim_num()  # -1 when unknown: only scalars then
        nodes = match_result.get_matched_nodes()
        if any(n.type == "HardSigmoid" for n in nodes):
            return _hard_sigmoid_form_ok(nodes)
        return _clip_form_ok(match_result, rank)

    def replacement(self, inputs):
        return HardSwish(inputs[0])
