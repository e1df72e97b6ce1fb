"""Small ONNX models that exercise the fusion passes, built with onnx.helper.

    python examples/models/make_fusion_models.py [OUTDIR]

writes one `<name>.onnx` per model into OUTDIR (default: this folder, where `*.onnx` are
git-ignored); every model passes `onnx.checker.check_model(full_check=True)`. Importable:
`build_model(name)`, `build_all()` and `MODELS` (name → description); `unavailable()` says
which models this onnx/onnxruntime cannot build or run, and why.

| model | what it holds |
|---|---|
| `linear_matmul_add` | two Linear layers as 2-D MatMul + Add (bias), Relu between (opset 17) |
| `conv_bn` | Conv + BatchNormalization blocks, with and without Conv bias (opset 17) |
| `conv_mul_add` | Conv followed by Mul and Add of per-channel constants (opset 17) |
| `gemm_bn` | Gemm (transB) + BatchNormalization on [N, C] (opset 17) |
| `keras_bn_pad` | tf2onnx's Keras: Pad + Conv; BN as Mul + Add after Conv, ConvTranspose, Dense |
| `attention_layernorm` | attention, LayerNormalization in primitives (opset 17) |
| `gelu_erf_tanh` | GELU in its Erf form and its Tanh form after Linear layers, opset 20 |
| `rmsnorm` | RMSNorm in primitives (Pow, ReduceMean, Add, Sqrt, Div, Mul), opset 23 |
| `layout_chains` | Transpose, Reshape, Cast, Unsqueeze/Squeeze chains (opset 17) |
| `llama_block` | Llama decoder layer: RMSNorm, GQA rotary attention, SiLU MLP (opset 17) |

The layer norm in primitives is ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul,
Add; weights are random (seeded) and every input shape is static. `llama_block` keeps the
exporter's shape arithmetic (Shape, Gather, Unsqueeze, Concat, Range) although its shapes
are static, as the TorchScript exporter writes it for dynamic axes.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
FLOAT = TensorProto.FLOAT

MODELS: dict[str, str] = {
    "linear_matmul_add": "two Linear layers as MatMul + Add (2-D)",
    "conv_bn": "Conv + BatchNormalization blocks",
    "conv_mul_add": "Conv + Mul/Add by per-channel constants",
    "gemm_bn": "Gemm + BatchNormalization",
    "keras_bn_pad": "Keras (tf2onnx): Pad + Conv, BN as Mul/Add after Conv, ConvTranspose, Dense",
    "attention_layernorm": "attention block, LayerNormalization in primitives (opset 17)",
    "gelu_erf_tanh": "GELU in Erf and Tanh forms (opset 20)",
    "rmsnorm": "RMSNorm in primitives (opset 23)",
    "layout_chains": "Transpose/Reshape/Cast/Squeeze-Unsqueeze chains",
    "llama_block": "one Llama decoder layer (RMSNorm, GQA + rotary attention, SiLU MLP)",
}

#: The opset each model is built at.
OPSETS: dict[str, int] = {name: 17 for name in MODELS} | {"gelu_erf_tanh": 20, "rmsnorm": 23}


class _Builder:
    """Collects nodes and initializers; names are unique by a counter."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._count = 0

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, value: np.ndarray | float | list[int], hint: str = "c",
              dtype: type = np.float32) -> str:
        name = self._name(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def weight(self, *shape: int, hint: str = "w", scale: float = 0.3) -> str:
        return self.const(scale * self.rng.standard_normal(shape), hint)

    def positive(self, *shape: int, hint: str = "var") -> str:
        return self.const(self.rng.uniform(0.5, 1.5, shape), hint)

    def op(self, op_type: str, inputs: list[str], hint: str | None = None, **attrs: Any) -> str:
        out = self._name(hint or op_type.lower())
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=f"{out}/{op_type}",
                                           **attrs))
        return out

    def model(self, name: str, inputs: list[tuple[str, list[int]]], output: str,
              output_shape: list[int], opset: int) -> onnx.ModelProto:
        for node in self.nodes:  # the graph output is called "output"
            node.input[:] = ["output" if i == output else i for i in node.input]
            node.output[:] = ["output" if o == output else o for o in node.output]
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info(n, FLOAT, shape) for n, shape in inputs],
            [helper.make_tensor_value_info("output", FLOAT, output_shape)],
            self.initializers, doc_string=f"ge fusion example: {MODELS[name]}")
        # the IR version the opset needs, not onnx's newest: older onnxruntimes read it
        model = helper.make_model_gen_version(
            graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="ge-examples",
            producer_version="1")
        onnx.checker.check_model(model, full_check=True)
        return model

    def linear(self, x: str, n_in: int, n_out: int) -> str:
        """A Linear layer as MatMul + Add (what exporters write for 2-D or 3-D inputs)."""
        mm = self.op("MatMul", [x, self.weight(n_in, n_out)], "linear.mm")
        return self.op("Add", [mm, self.weight(n_out, hint="bias")], "linear.add")

    def batch_norm(self, x: str, channels: int) -> str:
        return self.op("BatchNormalization", [
            x, self.positive(channels, hint="bn.scale"), self.weight(channels, hint="bn.bias"),
            self.weight(channels, hint="bn.mean"), self.positive(channels, hint="bn.var")],
            "bn", epsilon=1e-5)


def _linear_matmul_add(b: _Builder) -> onnx.ModelProto:
    h = b.op("Relu", [b.linear("x", 16, 32)])
    return b.model("linear_matmul_add", [("x", [4, 16])], b.linear(h, 32, 8), [4, 8], 17)


def _conv_bn(b: _Builder) -> onnx.ModelProto:
    c1 = b.op("Conv", ["x", b.weight(8, 3, 3, 3), b.weight(8, hint="conv.bias")], "conv",
              kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    h = b.op("Relu", [b.batch_norm(c1, 8)])
    c2 = b.op("Conv", [h, b.weight(8, 8, 3, 3)], "conv", kernel_shape=[3, 3], strides=[2, 2])
    out = b.op("Relu", [b.batch_norm(c2, 8)])
    return b.model("conv_bn", [("x", [1, 3, 16, 16])], out, [1, 8, 7, 7], 17)


def _conv_mul_add(b: _Builder) -> onnx.ModelProto:
    c1 = b.op("Conv", ["x", b.weight(8, 3, 3, 3), b.weight(8, hint="conv.bias")], "conv",
              kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    scaled = b.op("Mul", [c1, b.positive(8, 1, 1, hint="scale")])
    shifted = b.op("Add", [scaled, b.weight(1, 8, 1, 1, hint="shift")])
    h = b.op("Relu", [shifted])
    c2 = b.op("Conv", [h, b.weight(4, 8, 1, 1)], "conv", kernel_shape=[1, 1])
    out = b.op("Add", [b.op("Mul", [c2, b.positive(1, 4, 1, 1, hint="scale")]),
                       b.weight(4, 1, 1, hint="shift")])
    return b.model("conv_mul_add", [("x", [1, 3, 8, 8])], out, [1, 4, 8, 8], 17)


def _gemm_bn(b: _Builder) -> onnx.ModelProto:
    g1 = b.op("Gemm", ["x", b.weight(32, 16), b.weight(32, hint="gemm.bias")], "gemm", transB=1)
    h = b.op("Relu", [b.batch_norm(g1, 32)])
    g2 = b.op("Gemm", [h, b.weight(32, 8)], "gemm")
    out = b.batch_norm(g2, 8)
    return b.model("gemm_bn", [("x", [4, 16])], out, [4, 8], 17)


def _keras_bn(b: _Builder, x: str, channels: int, shape: tuple[int, ...]) -> str:
    """Keras' BatchNormalization in inference as tf2onnx writes it: Mul and Add by folded
    per-channel constants (`shape`: `[C, 1, 1]` after a convolution, `[C]` after Dense)."""
    scaled = b.op("Mul", [x, b.positive(*shape, hint="bn.mul")], "bn.mul")
    return b.op("Add", [scaled, b.weight(*shape, hint="bn.sub")], "bn.add")


def _keras_bn_pad(b: _Builder) -> onnx.ModelProto:
    # ZeroPadding2D / "same" padding of a stride-2 Conv: a Pad of the bottom and right edges
    padded = b.op("Pad", ["x", b.const([0, 0, 0, 0, 0, 0, 1, 1], "pads", np.int64)], "pad")
    c1 = b.op("Conv", [padded, b.weight(8, 3, 3, 3)], "conv", kernel_shape=[3, 3],
              strides=[2, 2])
    h = b.op("Relu", [_keras_bn(b, c1, 8, (8, 1, 1))])
    up = b.op("ConvTranspose", [h, b.weight(8, 4, 2, 2), b.weight(4, hint="deconv.bias")],
              "deconv", kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Relu", [_keras_bn(b, up, 4, (4, 1, 1))])
    pooled = b.op("Flatten", [b.op("GlobalAveragePool", [h])])
    dense = b.op("Add", [b.op("MatMul", [pooled, b.weight(4, 6)], "dense.mm"),
                         b.weight(6, hint="dense.bias")], "dense.add")
    out = _keras_bn(b, dense, 6, (6,))
    return b.model("keras_bn_pad", [("x", [2, 3, 16, 16])], out, [2, 6], 17)


def _layer_norm_primitives(b: _Builder, x: str, dim: int) -> str:
    """LayerNormalization over the last axis as exporters without the op write it (opset 17:
    ReduceMean takes `axes` as an attribute)."""
    mean = b.op("ReduceMean", [x], "ln.mean", axes=[-1], keepdims=1)
    centered = b.op("Sub", [x, mean], "ln.sub")
    squared = b.op("Pow", [centered, b.const(2.0, "two")], "ln.pow")
    var = b.op("ReduceMean", [squared], "ln.var", axes=[-1], keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [var, b.const(1e-5, "eps")], "ln.add_eps")], "ln.sqrt")
    normed = b.op("Div", [centered, std], "ln.div")
    scaled = b.op("Mul", [normed, b.positive(dim, hint="ln.gamma")], "ln.mul")
    return b.op("Add", [scaled, b.weight(dim, hint="ln.beta")], "ln.add")


def _attention_layernorm(b: _Builder) -> onnx.ModelProto:
    seq, dim, heads = 8, 16, 2
    head_dim = dim // heads
    normed = _layer_norm_primitives(b, "x", dim)
    split = b.const([1, seq, heads, head_dim], "heads_shape", np.int64)

    def project(perm: list[int]) -> str:
        return b.op("Transpose", [b.op("Reshape", [b.linear(normed, dim, dim), split])],
                    perm=perm)

    q, k, v = project([0, 2, 1, 3]), project([0, 2, 3, 1]), project([0, 2, 1, 3])
    scores = b.op("Div", [b.op("MatMul", [q, k]), b.const(math.sqrt(head_dim), "sqrt_d")])
    context = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    merged = b.op("Reshape", [b.op("Transpose", [context], perm=[0, 2, 1, 3]),
                              b.const([1, seq, dim], "merged_shape", np.int64)])
    attended = b.op("Add", ["x", b.linear(merged, dim, dim)], "residual")
    out = _layer_norm_primitives(b, attended, dim)
    return b.model("attention_layernorm", [("x", [1, seq, dim])], out, [1, seq, dim], 17)


def _gelu_erf(b: _Builder, x: str) -> str:
    """0.5 * x * (1 + erf(x / sqrt(2))), as PyTorch's TorchScript exporter writes it."""
    erf = b.op("Erf", [b.op("Div", [x, b.const(math.sqrt(2.0), "sqrt2")])])
    one_plus = b.op("Add", [erf, b.const(1.0, "one")])
    return b.op("Mul", [b.op("Mul", [x, one_plus]), b.const(0.5, "half")])


def _gelu_tanh(b: _Builder, x: str) -> str:
    """0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))."""
    cube = b.op("Pow", [x, b.const(3.0, "three")])
    inner = b.op("Add", [x, b.op("Mul", [cube, b.const(0.044715, "coef")])])
    tanh = b.op("Tanh", [b.op("Mul", [inner, b.const(math.sqrt(2.0 / math.pi), "k")])])
    one_plus = b.op("Add", [tanh, b.const(1.0, "one")])
    return b.op("Mul", [b.op("Mul", [x, b.const(0.5, "half")]), one_plus])


def _gelu_erf_tanh(b: _Builder) -> onnx.ModelProto:
    h = _gelu_erf(b, b.linear("x", 32, 64))
    h = _gelu_tanh(b, b.linear(h, 64, 64))
    return b.model("gelu_erf_tanh", [("x", [4, 32])], b.linear(h, 64, 10), [4, 10], 20)


def _rmsnorm(b: _Builder) -> onnx.ModelProto:
    dim = 16

    def rms_norm(x: str) -> str:
        """x / sqrt(mean(x^2) + eps) * weight, ReduceMean's axes as an input (opset >= 18)."""
        squared = b.op("Pow", [x, b.const(2.0, "two")], "rms.pow")
        mean = b.op("ReduceMean", [squared, b.const([-1], "axes", np.int64)], "rms.mean",
                    keepdims=1)
        std = b.op("Sqrt", [b.op("Add", [mean, b.const(1e-6, "eps")], "rms.add_eps")])
        return b.op("Mul", [b.op("Div", [x, std], "rms.div"), b.positive(dim, hint="rms.w")],
                    "rms.mul")

    h = rms_norm("x")
    h = b.op("Add", [h, b.linear(b.op("Relu", [b.linear(h, dim, 32)]), 32, dim)], "residual")
    return b.model("rmsnorm", [("x", [2, 8, dim])], rms_norm(h), [2, 8, dim], 23)


def _layout_chains(b: _Builder) -> onnx.ModelProto:
    # Transpose then its inverse; a Transpose pair that composes to another permutation.
    t = b.op("Transpose", ["x"], perm=[0, 2, 3, 1])
    t = b.op("Transpose", [t], perm=[0, 3, 1, 2])
    t = b.op("Relu", [t])
    t = b.op("Transpose", [b.op("Transpose", [t], perm=[0, 2, 1, 3])], perm=[0, 1, 3, 2])
    # Reshape of a Reshape; Cast float -> double -> float (exact); Unsqueeze then Squeeze.
    r = b.op("Reshape", [t, b.const([2, 60], "shape", np.int64)])
    r = b.op("Reshape", [r, b.const([6, 20], "shape", np.int64)])
    c = b.op("Cast", [b.op("Cast", [r], to=TensorProto.DOUBLE)], to=FLOAT)
    axes = b.const([0, 2], "axes", np.int64)
    s = b.op("Squeeze", [b.op("Unsqueeze", [c, axes]), axes])
    out = b.op("Add", [s, b.weight(20, hint="bias")])
    return b.model("layout_chains", [("x", [2, 3, 4, 5])], out, [6, 20], 17)


def _rms_norm_hf(b: _Builder, x: str, dim: int, prefix: str) -> str:
    """LlamaRMSNorm as the TorchScript exporter writes it (opset 17): the casts of
    `hidden_states.to(torch.float32)` and `.to(input_dtype)` (float to float here), Pow,
    ReduceMean(axes=[-1]), Add(eps), Sqrt, `rsqrt` as Div(1, ·), Mul(x, ·), Mul(weight, ·)."""
    xf = b.op("Cast", [x], f"{prefix}.cast", to=FLOAT)
    squared = b.op("Pow", [xf, b.const(2.0, "two")], f"{prefix}.pow")
    variance = b.op("ReduceMean", [squared], f"{prefix}.mean", axes=[-1], keepdims=1)
    std = b.op("Sqrt", [b.op("Add", [variance, b.const(1e-6, "eps")], f"{prefix}.add_eps")],
               f"{prefix}.sqrt")
    inverse = b.op("Div", [b.const(1.0, "one"), std], f"{prefix}.rsqrt")
    normed = b.op("Cast", [b.op("Mul", [xf, inverse], f"{prefix}.mul")], f"{prefix}.cast",
                  to=FLOAT)
    return b.op("Mul", [b.positive(dim, hint=f"{prefix}.weight"), normed], f"{prefix}.scale")


def _llama_block(b: _Builder) -> onnx.ModelProto:
    """HF transformers' LlamaDecoderLayer (eager attention, as in 4.36) the way
    `torch.onnx.export` (TorchScript, opset 17) writes it, with LlamaModel's position_ids
    (arange over the sequence) and causal mask (`_make_causal_mask`) computed in the graph:
    every `size()` is Shape + Gather, every `view`/`reshape`/`expand` target a Concat of
    Unsqueezed sizes and constants. Hidden 32, 4 heads of 8, 2 key/value heads, MLP 64."""
    batch, seq, hidden, heads, kv_heads, intermediate = 1, 8, 32, 4, 2, 64
    head_dim, max_positions = hidden // heads, 16
    n_rep = heads // kv_heads

    def i64(value: int | list[int], hint: str = "c") -> str:
        return b.const(value, hint, np.int64)

    def size(x: str, axis: int) -> str:  # x.size(axis): a scalar
        return b.op("Gather", [b.op("Shape", [x], "size.shape"), i64(axis, "idx")], "size",
                    axis=0)

    def dims(*parts: str | int) -> str:  # a shape list: sizes Unsqueezed, ints constant
        return b.op("Concat", [b.op("Unsqueeze", [p, i64([0], "axes")], "dim")
                               if isinstance(p, str) else i64([p], "dim") for p in parts],
                    "shape", axis=0)

    def projection(x: str, n_out: int, hint: str) -> str:  # nn.Linear(bias=False)
        return b.op("MatMul", [x, b.weight(hidden, n_out, hint=f"{hint}.weight", scale=0.2)],
                    hint)

    # LlamaModel: position_ids = arange(seq).unsqueeze(0); the causal mask, from input sizes
    bsz, tgt = size("x", 0), size("x", 1)
    positions = b.op("Unsqueeze", [b.op("Range", [i64(0), tgt, i64(1)], "arange"),
                                   i64([0], "axes")], "position_ids")
    full = b.op("ConstantOfShape", [dims(tgt, tgt)], "mask.full",
                value=helper.make_tensor("value", FLOAT, [1], [np.finfo(np.float32).min]))
    cond = b.op("Range", [i64(0), size(full, 1), i64(1)], "mask.cond")
    after = b.op("Reshape", [b.op("Add", [cond, i64(1)], "mask.add"), dims(size(full, 1), 1)],
                 "mask.view")
    mask = b.op("Where", [b.op("Less", [cond, after], "mask.less"), b.const(0.0, "zero"),
                          full], "mask.fill")
    mask = b.op("Cast", [mask], "mask.to", to=FLOAT)
    mask = b.op("Unsqueeze", [b.op("Unsqueeze", [mask, i64([0], "axes")], "mask.none"),
                              i64([1], "axes")], "mask.none")
    mask = b.op("Expand", [mask, dims(bsz, 1, tgt, tgt)], "mask.expand")

    # LlamaDecoderLayer
    normed = _rms_norm_hf(b, "x", hidden, "input_layernorm")
    q_bsz, q_len = size(normed, 0), size(normed, 1)

    def heads_of(x: str, n_heads: int) -> str:  # .view(bsz, q_len, n, head_dim).transpose(1, 2)
        return b.op("Transpose", [b.op("Reshape", [x, dims(q_bsz, q_len, n_heads, head_dim)],
                                       "view")], "transpose", perm=[0, 2, 1, 3])

    q = heads_of(projection(normed, hidden, "q_proj"), heads)
    k = heads_of(projection(normed, kv_heads * head_dim, "k_proj"), kv_heads)
    v = heads_of(projection(normed, kv_heads * head_dim, "v_proj"), kv_heads)

    # LlamaRotaryEmbedding: cos_cached[:seq_len].to(dtype), then cos[position_ids].unsqueeze(1)
    inv_freq = 1.0 / 10000.0 ** (np.arange(0, head_dim, 2) / head_dim)
    emb = np.concatenate([np.outer(np.arange(max_positions), inv_freq)] * 2, axis=-1)
    kv_len = size(k, 2)

    def table(values: np.ndarray, hint: str) -> str:
        cached = b.op("Slice", [b.const(values, f"{hint}_cached"), i64([0], "starts"),
                                b.op("Unsqueeze", [kv_len, i64([0], "axes")], "end"),
                                i64([0], "axes"), i64([1], "steps")], f"{hint}.slice")
        cast = b.op("Cast", [cached], f"{hint}.to", to=FLOAT)
        return b.op("Unsqueeze", [b.op("Gather", [cast, positions], f"{hint}.gather", axis=0),
                                  i64([1], "axes")], f"{hint}.unsqueeze")

    cos, sin = table(np.cos(emb), "cos"), table(np.sin(emb), "sin")

    def rotary(x: str) -> str:  # x * cos + rotate_half(x) * sin
        half = b.op("Unsqueeze", [b.op("Div", [size(x, 3), i64(2)], "half"), i64([0], "axes")],
                    "half")
        x1 = b.op("Slice", [x, i64([0], "starts"), half, i64([3], "axes"), i64([1], "steps")],
                  "x1")
        x2 = b.op("Slice", [x, half, i64([np.iinfo(np.int64).max], "ends"), i64([3], "axes"),
                            i64([1], "steps")], "x2")
        rotated = b.op("Concat", [b.op("Neg", [x2], "neg"), x1], "rotate_half", axis=-1)
        return b.op("Add", [b.op("Mul", [x, cos], "rope.cos"),
                            b.op("Mul", [rotated, sin], "rope.sin")], "rope")

    def repeat_kv(x: str) -> str:  # x[:, :, None].expand(...).reshape(b, kv * n_rep, s, d)
        shape = b.op("Shape", [x], "repeat_kv.shape")
        b_, kv, s, d = (b.op("Gather", [shape, i64(i, "idx")], "repeat_kv.size", axis=0)
                        for i in range(4))
        expanded = b.op("Expand", [b.op("Unsqueeze", [x, i64([2], "axes")], "repeat_kv.none"),
                                   dims(b_, kv, n_rep, s, d)], "repeat_kv.expand")
        return b.op("Reshape", [expanded, dims(b_, b.op("Mul", [kv, i64(n_rep)], "kv_x_rep"),
                                               s, d)], "repeat_kv.reshape")

    q, k = rotary(q), rotary(k)
    k, v = repeat_kv(k), repeat_kv(v)
    scores = b.op("Div", [b.op("MatMul", [q, b.op("Transpose", [k], "k_t", perm=[0, 1, 3, 2])],
                               "qk"), b.const(math.sqrt(head_dim), "sqrt_d")], "scale")
    scores = b.op("Add", [scores, mask], "masked")
    probs = b.op("Cast", [b.op("Softmax", [b.op("Cast", [scores], "softmax.cast", to=FLOAT)],
                               "softmax", axis=-1)], "softmax.to", to=FLOAT)
    context = b.op("Transpose", [b.op("MatMul", [probs, v], "context")], "context.t",
                   perm=[0, 2, 1, 3])
    merged = b.op("Reshape", [context, dims(q_bsz, q_len, hidden)], "context.reshape")
    attended = b.op("Add", ["x", projection(merged, hidden, "o_proj")], "residual")

    # LlamaMLP: down_proj(act_fn(gate_proj(x)) * up_proj(x)), SiLU as x * Sigmoid(x)
    normed = _rms_norm_hf(b, attended, hidden, "post_attention_layernorm")
    gate = b.op("MatMul", [normed, b.weight(hidden, intermediate, hint="gate_proj.weight",
                                            scale=0.2)], "gate_proj")
    silu = b.op("Mul", [gate, b.op("Sigmoid", [gate], "act.sigmoid")], "act")
    up = b.op("MatMul", [normed, b.weight(hidden, intermediate, hint="up_proj.weight",
                                          scale=0.2)], "up_proj")
    down = b.op("MatMul", [b.op("Mul", [silu, up], "gated"),
                           b.weight(intermediate, hidden, hint="down_proj.weight", scale=0.2)],
                "down_proj")
    out = b.op("Add", [attended, down], "residual")
    return b.model("llama_block", [("x", [batch, seq, hidden])], out, [batch, seq, hidden], 17)


_BUILDERS: dict[str, Callable[[_Builder], onnx.ModelProto]] = {
    "linear_matmul_add": _linear_matmul_add,
    "conv_bn": _conv_bn,
    "conv_mul_add": _conv_mul_add,
    "gemm_bn": _gemm_bn,
    "keras_bn_pad": _keras_bn_pad,
    "attention_layernorm": _attention_layernorm,
    "gelu_erf_tanh": _gelu_erf_tanh,
    "rmsnorm": _rmsnorm,
    "layout_chains": _layout_chains,
    "llama_block": _llama_block,
}


def unavailable() -> dict[str, str]:
    """Models this onnx (or onnxruntime) cannot build or run, with the reason."""
    reasons: dict[str, str] = {}
    newest = onnx.defs.onnx_opset_version()
    try:
        ort_newest: int | None = _ort_max_opset()
    except ImportError:  # no onnxruntime: only onnx's limit applies
        ort_newest = None
    for name, opset in OPSETS.items():
        if opset > newest:
            reasons[name] = f"needs opset {opset}; onnx {onnx.__version__} knows up to {newest}"
        elif ort_newest is not None and opset > ort_newest:
            reasons[name] = f"needs opset {opset}; this onnxruntime runs up to {ort_newest}"
    return reasons


def _ort_max_opset() -> int:
    """The newest ai.onnx opset this onnxruntime accepts (tried on an Identity model)."""
    import onnxruntime as ort

    best = 0
    for opset in range(17, onnx.defs.onnx_opset_version() + 1):
        graph = helper.make_graph(
            [helper.make_node("Identity", ["x"], ["y"])], "probe",
            [helper.make_tensor_value_info("x", FLOAT, [1])],
            [helper.make_tensor_value_info("y", FLOAT, [1])])
        # the IR version the opset needs, not onnx's newest: older onnxruntimes read it
        model = helper.make_model_gen_version(
            graph, opset_imports=[helper.make_opsetid("", opset)])
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:
            break
        best = opset
    return best


def build_model(name: str, seed: int = 0) -> onnx.ModelProto:
    """The model `name` (one of MODELS), checker-valid; ValueError for an unknown name."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    return _BUILDERS[name](_Builder(seed))


def build_all(seed: int = 0) -> dict[str, onnx.ModelProto]:
    """Every model this onnx/onnxruntime supports (see `unavailable()`), by name."""
    skipped = unavailable()
    return {name: build_model(name, seed) for name in MODELS if name not in skipped}


def main(argv: list[str]) -> int:
    out_dir = Path(argv[1]) if len(argv) > 1 else HERE
    out_dir.mkdir(parents=True, exist_ok=True)
    skipped = unavailable()
    for name in MODELS:
        if name in skipped:
            print(f"skipped {name}: {skipped[name]}")
            continue
        path = out_dir / f"{name}.onnx"
        onnx.save(build_model(name), path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
