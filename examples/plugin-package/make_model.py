"""Build `pad_conv_hardswish.onnx`, a small model on which both passes of this package fire.

    python examples/plugin-package/make_model.py [OUTPUT.onnx]

x [1, 3, 16, 16] -> Pad (zeros, 1 each side) -> Conv + bias -> HardSwish in primitives
(x * Clip(x + 3, 0, 6) / 6) -> Pad (zeros, asymmetric, value given) -> Conv, stride 2, no
bias -> x * HardSigmoid(x) (alpha 1/6) -> Pad (reflect) -> Conv -> y. The reflect Pad is
left alone: Conv cannot pad by reflection.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DEFAULT_PATH = Path(__file__).resolve().parent / "pad_conv_hardswish.onnx"


def build_model(seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)

    def init(name: str, value: np.ndarray) -> onnx.TensorProto:
        return numpy_helper.from_array(value, name)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return init(name, (0.3 * rng.standard_normal(shape)).astype(np.float32))

    scalar = {v: np.array(v, dtype=np.float32) for v in (0.0, 3.0, 6.0)}
    initializers = [
        init("pads_same", np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64)),
        init("pads_asym", np.array([0, 0, 0, 1, 0, 0, 1, 0], dtype=np.int64)),
        init("pads_reflect", np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64)),
        init("zero", scalar[0.0]),
        init("three", scalar[3.0]),
        init("six", scalar[6.0]),
        weight("conv1.w", 8, 3, 3, 3),
        weight("conv1.b", 8),
        weight("conv2.w", 8, 8, 3, 3),
        weight("conv3.w", 4, 8, 3, 3),
        weight("conv3.b", 4),
    ]
    nodes = [
        helper.make_node("Pad", ["x", "pads_same"], ["p1"], name="pad1"),
        helper.make_node("Conv", ["p1", "conv1.w", "conv1.b"], ["c1"], name="conv1",
                         kernel_shape=[3, 3]),
        helper.make_node("Add", ["c1", "three"], ["hs1.add"], name="hs1/add"),
        helper.make_node("Clip", ["hs1.add", "zero", "six"], ["hs1.clip"], name="hs1/clip"),
        helper.make_node("Mul", ["c1", "hs1.clip"], ["hs1.mul"], name="hs1/mul"),
        helper.make_node("Div", ["hs1.mul", "six"], ["a1"], name="hs1/div"),
        helper.make_node("Pad", ["a1", "pads_asym", "zero"], ["p2"], name="pad2",
                         mode="constant"),
        helper.make_node("Conv", ["p2", "conv2.w"], ["c2"], name="conv2", kernel_shape=[3, 3],
                         strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("HardSigmoid", ["c2"], ["hs2.gate"], name="hs2/gate",
                         alpha=1.0 / 6.0, beta=0.5),
        helper.make_node("Mul", ["hs2.gate", "c2"], ["a2"], name="hs2/mul"),
        helper.make_node("Pad", ["a2", "pads_reflect"], ["p3"], name="pad3", mode="reflect"),
        helper.make_node("Conv", ["p3", "conv3.w", "conv3.b"], ["y"], name="conv3",
                         kernel_shape=[3, 3]),
    ]
    graph = helper.make_graph(
        nodes, "pad_conv_hardswish",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 9, 9])],
        initializers)
    # the IR version the opset needs, not onnx's newest: older onnxruntimes read it
    model = helper.make_model_gen_version(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ge-example-passes",
        producer_version="0.1.0")
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_PATH
    onnx.save(build_model(), path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
