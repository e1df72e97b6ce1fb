"""Models whose graph calls a model-local function (`ModelProto.functions`, domain "local")
whose body uses an operator onnx does not know: one of onnxruntime's (`com.microsoft`), a
custom one a plugin registers, or one nothing defines. Shared by the ops, compiler and CLI
tests of `ge.ops.functions`.

The graph is `d = Sigmoid(F(a, b))`: the Sigmoid reads the call, so onnx's strict
inference (and its full checker) must be told the call's type.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

LOCAL = "local"
MS = "com.microsoft"
CUSTOM = "com.example.fn"

#: A plugin registering com.example.fn::Widen(x, y) = concat([x, y], axis=-1), whose output
#: is wider than either input (so its registered inference, not a copy of an input's desc,
#: decides the call's shape), and com.example.fn::Repeat(x, times) repeating the last axis.
PLUGIN = textwrap.dedent('''
    import numpy as np

    from ge.graph.tensor_desc import TensorDesc
    from ge.ops import register_op


    def _wider(ctx, factor):
        x = ctx.input_descs[0]
        dims = list(x.get_shape())
        dims[-1] = dims[-1] * factor
        return [TensorDesc(dims, data_type=x.data_type)]


    register_op("Widen", domain="com.example.fn", inputs=["x", "y"], outputs=["z"],
                infer=lambda ctx: _wider(ctx, 2),
                kernel=lambda x, y: np.concatenate([x, y], axis=-1))
    register_op("Repeat", domain="com.example.fn", inputs=["x"], outputs=["z"],
                attributes={"times": ("int", 1)},
                infer=lambda ctx: _wider(ctx, ctx.attrs["times"]),
                kernel=lambda x, times: np.concatenate([x] * times, axis=-1))
''')


def write_plugin(folder: Path) -> Path:
    """The plugin above as `folder/fn_ops.py`."""
    path = folder / "fn_ops.py"
    path.write_text(PLUGIN)
    return path


def function_model(body: Sequence[onnx.NodeProto], *, b_shape: Sequence[int] = (2, 3),
                   out_shape: Sequence[int] = (2, 3), body_domain: str = CUSTOM,
                   attributes: Sequence[str] = (),
                   call_attributes: dict[str, object] | None = None,
                   extra_functions: Sequence[onnx.FunctionProto] = ()) -> onnx.ModelProto:
    """`d = Sigmoid(local.F(a, b))`, F(x, y) -> z being `body`; a: float[2, 3]."""
    extra = [helper.make_opsetid(body_domain, 1)] if body_domain else []
    function = helper.make_function(
        LOCAL, "F", ["x", "y"], ["z"], list(body),
        opset_imports=[helper.make_opsetid("", 17), *extra, helper.make_opsetid(LOCAL, 1)],
        attributes=list(attributes))
    graph = helper.make_graph(
        [helper.make_node("F", ["a", "b"], ["c"], domain=LOCAL, name="call",
                          **(call_attributes or {})),
         helper.make_node("Sigmoid", ["c"], ["d"], name="sigmoid")],
        "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b_shape))],
        [helper.make_tensor_value_info("d", TensorProto.FLOAT, list(out_shape))])
    model = helper.make_model(
        graph, functions=[function, *extra_functions],
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(LOCAL, 1), *extra])
    model.ir_version = 8
    return model


def bias_gelu_model() -> onnx.ModelProto:
    """F(x, y) = com.microsoft::BiasGelu(Relu(x), y), y a bias of [3]."""
    return function_model([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("BiasGelu", ["r", "y"], ["z"], domain=MS)],
                          b_shape=[3], body_domain=MS)


def widen_model() -> onnx.ModelProto:
    """F(x, y) = Widen(Relu(x), y): d is float[2, 6]."""
    return function_model([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Widen", ["r", "y"], ["z"], domain=CUSTOM)],
                          out_shape=[2, 6])


def repeat_model(times: int) -> onnx.ModelProto:
    """F(x, y) = Repeat(x + y, times=F's attribute `times`), called with `times`: onnx's
    inliner gives the body the call's attribute."""
    repeat = helper.make_node("Repeat", ["s"], ["z"], domain=CUSTOM)
    ref = onnx.AttributeProto(name="times", ref_attr_name="times", type=onnx.AttributeProto.INT)
    repeat.attribute.append(ref)
    return function_model([helper.make_node("Add", ["x", "y"], ["s"]), repeat],
                          attributes=["times"], call_attributes={"times": times},
                          out_shape=[2, 3 * times])


def nested_model() -> onnx.ModelProto:
    """F calls local.G, whose body uses Widen: F is opaque to onnx through G."""
    inner = helper.make_function(
        LOCAL, "G", ["p", "q"], ["w"],
        [helper.make_node("Widen", ["p", "q"], ["w"], domain=CUSTOM)],
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(CUSTOM, 1)])
    return function_model([helper.make_node("Neg", ["x"], ["n"]),
                           helper.make_node("G", ["n", "y"], ["z"], domain=LOCAL)],
                          out_shape=[2, 6], extra_functions=[inner])


def unregistered_model() -> onnx.ModelProto:
    """F(x, y) = com.nowhere::Nope(Relu(x), y): nothing defines Nope."""
    return function_model([helper.make_node("Relu", ["x"], ["r"]),
                           helper.make_node("Nope", ["r", "y"], ["z"], domain="com.nowhere")],
                          body_domain="com.nowhere")


def silu_model() -> onnx.ModelProto:
    """F(x, y) = t * Sigmoid(t), t = x + y: a SiLU that only F's body holds (the graph's
    Sigmoid reads the call; it has no Mul)."""
    return function_model([helper.make_node("Add", ["x", "y"], ["t"]),
                           helper.make_node("Sigmoid", ["t"], ["s"]),
                           helper.make_node("Mul", ["t", "s"], ["z"])], body_domain="")


#: A plugin pattern pass "FastSiLU" matching x * Sigmoid(x) (made a HardSwish).
SILU_PASS = textwrap.dedent('''
    import ge.es.all as es
    from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


    @register_fusion_pass(name="FastSiLU", stage=PassStage.AFTER_INFER_SHAPE)
    class FastSiLU(PatternFusionPass):
        @pattern
        def silu(self, inputs):
            return inputs[0] * es.Sigmoid(inputs[0])

        def replacement(self, inputs):
            return es.HardSwish(inputs[0])
''')


def feeds(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Random float inputs of the model's (static) input shapes."""
    rng = np.random.default_rng(seed)
    return {vi.name: rng.standard_normal(
        [d.dim_value for d in vi.type.tensor_type.shape.dim]).astype(np.float32)
        for vi in model.graph.input}
