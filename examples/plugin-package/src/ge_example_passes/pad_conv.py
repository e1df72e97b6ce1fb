"""FoldPadIntoConv: a zero `Pad` of the spatial dims in front of a `Conv` becomes the Conv's
own `pads`.

TensorFlow/Keras exports (`ZeroPadding2D` before a `valid` convolution) and PyTorch models
with `nn.ZeroPad2d` or asymmetric "same" padding produce `Pad -> Conv`. ONNX Conv pads its
input with zeros itself, begin and end separately per spatial axis, so

    Conv(Pad(x, pads=[0, 0, t, l, 0, 0, b, r], mode="constant", value=0), w[, bias], pads=P)

equals `Conv(x, w[, bias], pads=P + [t, l, b, r])`: the same products and sums in the same
order, bit for bit, without writing the padded tensor.

Rewritten only when it is exact: Pad's mode is "constant" (the default) and its value zero
(or not given); `pads` is a constant integer tensor, zero on the batch and channel axes and
non-negative elsewhere (a negative pad crops); Pad has no `axes` input (opset 18's fourth
input is not matched) and Conv's `auto_pad` is NOTSET. Pad below opset 11 (pads as an
attribute) has one input and is not matched either.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ge.es.all import Conv, Pad
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass

from ._values import constant_input, first_of_type, text_attr

# Conv attributes carried over unchanged; `pads` is recomputed, `auto_pad` must be NOTSET.
_KEPT_CONV_ATTRS = ("dilations", "group", "kernel_shape", "strides")


def _folded_pads(nodes: list[Any]) -> list[int] | None:
    """The Conv's new `pads` for a matched Pad -> Conv, or None when folding is not exact."""
    pad, conv = first_of_type(nodes, "Pad"), first_of_type(nodes, "Conv")
    if text_attr(pad, "mode", "constant") != "constant":
        return None
    if text_attr(conv, "auto_pad", "NOTSET") != "NOTSET":
        return None
    pads = constant_input(pad, 1)
    if pads is None or pads.dtype.kind not in "iu" or pads.ndim != 1 or pads.size % 2:
        return None
    rank = pads.size // 2
    if rank < 3:
        return None  # Conv needs N, C and at least one spatial axis
    begins, ends = pads[:rank].tolist(), pads[rank:].tolist()
    if begins[:2] != [0, 0] or ends[:2] != [0, 0] or min(begins + ends) < 0:
        return None
    if pad.get_inputs_size() > 2:
        value = constant_input(pad, 2)
        if value is None or value.size > 1 or np.any(value != 0):
            return None
    spatial = rank - 2
    old = list(conv.get_attr("pads")) if conv.has_attr("pads") else [0] * (2 * spatial)
    if len(old) != 2 * spatial:
        return None
    return [int(o) + int(p) for o, p in zip(old, begins[2:] + ends[2:])]


@register_fusion_pass(name="FoldPadIntoConv", stage=PassStage.AFTER_INFER_SHAPE)
class FoldPadIntoConv(PatternFusionPass):
    """Pad(x, pads[, 0]) -> Conv(., w[, bias]) becomes Conv(x, w[, bias]) with the pads folded in.

    Pattern inputs are numbered alike in all four patterns: 0 = x, 1 = pads, 2 = w,
    3 = bias (when Conv has one), then Pad's constant value."""

    @pattern
    def pad_conv(self, inputs):
        return Conv(Pad(inputs[0], inputs[1]), inputs[2])

    @pattern
    def pad_conv_bias(self, inputs):
        return Conv(Pad(inputs[0], inputs[1]), inputs[2], inputs[3])

    @pattern
    def pad_value_conv(self, inputs):
        return Conv(Pad(inputs[0], inputs[1], inputs[3]), inputs[2])

    @pattern
    def pad_value_conv_bias(self, inputs):
        return Conv(Pad(inputs[0], inputs[1], inputs[4]), inputs[2], inputs[3])

    def meet_requirements(self, match_result):
        return _folded_pads(match_result.get_matched_nodes()) is not None

    def replacement(self, inputs, match_result):
        nodes = match_result.get_matched_nodes()
        pads = _folded_pads(nodes)
        conv = first_of_type(nodes, "Conv")
        attrs = {k: conv.get_attr(k) for k in _KEPT_CONV_ATTRS if conv.has_attr(k)}
        bias = inputs[3] if conv.get_inputs_size() > 2 else None
        return Conv(inputs[0], inputs[2], bias, pads=pads, **attrs)
