"""Where onnx's version converter changes what a model computes, and how ge keeps it.

onnx's converter moves most operators up by their changelog, but two changes of meaning have
no adapter (trial Y; checked in onnxruntime against every target opset from 13 to 18):

- `Hardmax` before opset 13 flattens its input to 2-D at `axis` (default 1) and takes the
  hardmax of each row; from 13 it runs along `axis` alone. The converter keeps the node
  as it is (Softmax and LogSoftmax, which changed alike, it adapts). Before converting,
  each such Hardmax becomes `Reshape(Hardmax(Flatten(x, axis), axis=1), Shape(x))`, the
  old meaning in operators whose meaning stayed (the Reshape with `allowzero` from opset
  14, so that an empty input keeps its dims of 0; at 13 Reshape has no such attribute).
- A linear `Resize` before opset 11 and a linear `Upsample` scale with the "asymmetric"
  coordinate transform (an output pixel `i` reads input `i / scale`); Resize-11 added
  `coordinate_transformation_mode`, default "half_pixel", which the converter leaves
  unset: they then sample other points (0.26 off on a 2x upscale). After converting, each
  linear Resize the converter made of one keeps "asymmetric". Nearest modes are left as
  the converter makes them: with "asymmetric" and Resize-11's default rounding they picked
  other pixels at a 3x upscale (trial AA), where the converter's result matched
  onnxruntime's Resize-10 at every scale tried (3, 2, 1.5, 2.5, 0.5, 0.6).

Both work on the converter's input and output protos (its private copies, see
`ge.session.onnx_tools`), bodies included.
"""

from __future__ import annotations

import onnx
from onnx import helper

from ge.graph.domains import proto_graphs, proto_value_names

__all__ = ["keep_meanings_after", "keep_meanings_before", "old_resizes"]

_COORDINATES = "coordinate_transformation_mode"


def _standard(node: onnx.NodeProto) -> bool:
    return node.domain in ("", "ai.onnx")


def keep_meanings_before(model: onnx.ModelProto, current: int, target: int) -> frozenset[str]:
    """Rewrite, in place, what the converter would carry over with another meaning from
    opset `current` to `target`: each Hardmax before 13 into its flatten form. Returns the
    outputs of the Reshapes it made (`keep_meanings_after` lets them keep dims of 0)."""
    if not current < 13 <= target:
        return frozenset()
    # New value names unique in the whole model: a body reads its enclosing graphs' values.
    taken = set(proto_value_names(model.graph))
    reshaped: set[str] = set()
    for graph in proto_graphs(model.graph):
        nodes: list[onnx.NodeProto] = []
        for node in graph.node:
            if node.op_type == "Hardmax" and _standard(node):
                nodes += _flattened_hardmax(node, taken)
                reshaped.add(node.output[0])
            else:
                nodes.append(node)
        if len(nodes) != len(graph.node):
            del graph.node[:]
            graph.node.extend(nodes)
    return frozenset(reshaped)


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 0
    while name in taken:
        k += 1
        name = f"{base}_{k}"
    taken.add(name)
    return name


def _flattened_hardmax(node: onnx.NodeProto, taken: set[str]) -> list[onnx.NodeProto]:
    """Hardmax-1/11 as Flatten, Hardmax over axis 1 of the 2-D result, and a Reshape back."""
    axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
    (x,), (y,) = node.input, node.output
    stem = node.name or y
    flat, hard, shape = (_fresh(f"{stem}/{part}", taken) for part in ("flat", "hard", "shape"))
    return [
        helper.make_node("Shape", [x], [shape], name=_fresh(f"{stem}/Shape", taken)),
        helper.make_node("Flatten", [x], [flat], name=_fresh(f"{stem}/Flatten", taken),
                         axis=axis),
        helper.make_node("Hardmax", [flat], [hard], name=node.name, axis=1,
                         doc_string=node.doc_string),
        helper.make_node("Reshape", [hard, shape], [y], name=_fresh(f"{stem}/Reshape", taken)),
    ]


def old_resizes(model: onnx.ModelProto, current: int, target: int) -> frozenset[str]:
    """The output names of the Resize-10 and Upsample nodes of `model` that converting from
    opset `current` to `target` makes Resizes of another coordinate transform (read before
    converting, for `keep_meanings_after`)."""
    if not current < 11 <= target:
        return frozenset()
    return frozenset(node.output[0] for graph in proto_graphs(model.graph) for node in graph.node
                     if _standard(node) and node.op_type in ("Resize", "Upsample")
                     and node.output and _mode(node) in (b"linear", b"bilinear"))


def _mode(node: onnx.NodeProto) -> bytes:
    return next((a.s for a in node.attribute if a.name == "mode"), b"nearest")


def keep_meanings_after(converted: onnx.ModelProto, resized: frozenset[str],
                        reshaped: frozenset[str] = frozenset(), target: int = 0) -> None:
    """Give, in place, each Resize the converter made of one of `resized` (`old_resizes`)
    the coordinate transform it had ("asymmetric"), and from opset 14 each Reshape of
    `reshaped` (`keep_meanings_before`'s) `allowzero`, so that an empty input's dims of 0
    are sizes there, not "copy this dim" (trial AA: a [2, 3, 0] input failed)."""
    if not resized and not (reshaped and target >= 14):
        return
    for graph in proto_graphs(converted.graph):
        for node in graph.node:
            if not _standard(node) or not node.output:
                continue
            if (node.op_type == "Resize" and node.output[0] in resized
                    and all(a.name != _COORDINATES for a in node.attribute)):
                node.attribute.append(helper.make_attribute(_COORDINATES, "asymmetric"))
            elif (node.op_type == "Reshape" and node.output[0] in reshaped and target >= 14
                    and all(a.name != "allowzero" for a in node.attribute)):
                node.attribute.append(helper.make_attribute("allowzero", 1))
