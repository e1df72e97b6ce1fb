"""Generate the bundled demo model: a small classifier head with a symbolic batch dim.

Run as a script to (re)write `examples/models/demo_mlp.onnx`; `make demo` does it for you.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
DEFAULT_PATH = HERE / "demo_mlp.onnx"


def build_demo_model(seed: int = 0) -> onnx.ModelProto:
    """MatMul+Add → Relu → MatMul+Add → Softmax, with a LayerNormalization in between."""
    rng = np.random.default_rng(seed)

    def weight(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    initializers = [
        weight("fc1.weight", 16, 32),
        weight("fc1.bias", 32),
        weight("ln.scale", 32),
        weight("ln.bias", 32),
        weight("fc2.weight", 32, 4),
        weight("fc2.bias", 4),
    ]
    nodes = [
        helper.make_node("MatMul", ["features", "fc1.weight"], ["fc1.mm"], name="fc1/MatMul"),
        helper.make_node("Add", ["fc1.mm", "fc1.bias"], ["fc1.out"], name="fc1/Add"),
        helper.make_node("Relu", ["fc1.out"], ["act"], name="act/Relu"),
        helper.make_node("LayerNormalization", ["act", "ln.scale", "ln.bias"], ["ln.out"],
                         name="ln/LayerNormalization", axis=-1, epsilon=1e-5),
        helper.make_node("MatMul", ["ln.out", "fc2.weight"], ["fc2.mm"], name="fc2/MatMul"),
        helper.make_node("Add", ["fc2.mm", "fc2.bias"], ["logits"], name="fc2/Add"),
        helper.make_node("Softmax", ["logits"], ["probs"], name="head/Softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes,
        "demo_mlp",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", 16])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 4])],
        initializers,
        doc_string="ge demo: a small classifier head",
    )
    # the IR version the opset needs, not onnx's newest: older onnxruntimes read it
    model = helper.make_model_gen_version(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="ge-examples",
        producer_version="1")
    onnx.checker.check_model(model, full_check=True)
    return model


def main(argv: list[str]) -> int:
    path = Path(argv[1]) if len(argv) > 1 else DEFAULT_PATH
    onnx.save(build_demo_model(), path)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
