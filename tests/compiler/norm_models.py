"""The written-out norms the LayerNormFusion and RMSNormFusion tests build with onnx.helper
(each exporter's form, selected by keyword), and the checks those tests share."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from builtin_helpers import F, count_rewrites, histogram, init, load, model, vi
from onnx import helper

from ge.graph import Graph

node = helper.make_node
F16 = onnx.TensorProto.FLOAT16
X_SHAPE = (2, 3, 4)
PRIMITIVES = ("ReduceMean", "Sub", "Pow", "Sqrt", "Div", "Reciprocal")
#: The values with X's shape (the others are reduced to [2, 3, 1]).
FULL = {"x", "xc", "d", "dv", "p", "n", "nc", "y0"}


def extra_vi(name: str, dtype: int) -> onnx.ValueInfoProto:
    """An intermediate value as a second graph output (so it has a consumer outside)."""
    return vi(name, dtype, X_SHAPE if name in FULL else (*X_SHAPE[:-1], 1))


def feeds(shape: Sequence[int] = X_SHAPE, dtype: Any = np.float32, seed: int = 0
          ) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": (rng.standard_normal(shape) * 3 + 1).astype(dtype)}]


def fused_node(graph: Graph, op_type: str) -> Any:
    (found,) = [n for n in graph.get_direct_nodes() if n.type == op_type]
    return found


def assert_unchanged(pass_class: type, source: onnx.ModelProto) -> None:
    graph = load(source)
    before = histogram(graph)
    assert count_rewrites(pass_class, graph) == 0
    assert histogram(graph) == before


# -- LayerNormFusion ------------------------------------------------------------------------


def _reduce(name: str, data: str, out: str, axes: Sequence[int], opset: int,
            inits: list[onnx.TensorProto], shared: bool, keepdims: int = 1) -> onnx.NodeProto:
    if opset < 18:
        return node("ReduceMean", [data], [out], name=name, axes=list(axes), keepdims=keepdims)
    axes_name = "axes" if shared else f"{name}_axes"
    if axes_name not in {t.name for t in inits}:
        inits.append(init(axes_name, list(axes), np.int64))
    return node("ReduceMean", [data, axes_name], [out], name=name, keepdims=keepdims)


def _square(data: str, square: str, inits: list[onnx.TensorProto], exponent: float,
            np_type: Any) -> onnx.NodeProto:
    """p = data squared: Pow(data, 2), Mul(data, data), or (`"mul_other"`) Mul(data, e) with
    e a second graph input, which is no square."""
    if square == "pow":
        inits.append(init("two", exponent, np_type))
        return node("Pow", [data, "two"], ["p"], name="pow")
    return node("Mul", [data, data if square == "mul" else "e"], ["p"], name="square")


def _variance(variance: str, opset: int, axes: Sequence[int], x_shape: Sequence[int],
              inits: list[onnx.TensorProto], shared: bool, np_type: Any,
              reshape_to: Sequence[int] | None) -> list[onnx.NodeProto]:
    """v = the mean of p over `axes`, kept: with keepdims=1 ("shared", "own"); as the dynamo
    export of torch.var writes it, keepdims=0 then a Reshape to the kept shape, or to
    `reshape_to` ("own_reshaped"); or the unbiased variance, scaled by N / (N - 1)
    ("unbiased": keepdims=0 and a Reshape from opset 18, as dynamo writes it, else
    keepdims=1 as TorchScript does)."""
    kept = [*x_shape[:len(x_shape) - len(axes)], *[1] * len(axes)]
    reshaped = variance == "own_reshaped" or (variance == "unbiased" and opset >= 18)
    nodes = [_reduce("var", "p", "v0" if reshaped or variance == "unbiased" else "v", axes,
                     opset, inits, shared, keepdims=0 if reshaped else 1)]
    last = "v0"
    if variance == "unbiased":
        count = float(np.prod([x_shape[a] for a in axes]))
        inits += [init("count", count, np_type), init("count_1", count - 1, np_type)]
        last = "vu" if reshaped else "v"
        nodes += [node("Mul", ["v0", "count"], ["vn"], name="times_n"),
                  node("Div", ["vn", "count_1"], [last], name="by_n_1")]
    if reshaped:
        inits.append(init("kept_shape", kept if reshape_to is None else reshape_to, np.int64))
        nodes.append(node("Reshape", [last, "kept_shape"], ["v"], name="restore"))
    return nodes


def layer_norm(opset: int = 17, *, form: str = "div", bias: bool = True,
               axes: Sequence[int] = (-1,), axes2: Sequence[int] | None = None,
               exponent: float = 2.0, eps_input: bool = False, swapped: bool = False,
               gamma_shape: Sequence[int] = (4,), shared_axes: bool = True,
               extra_output: str | None = None, x_shape: Sequence[int] = X_SHAPE,
               dtype: int = F, square: str = "pow", variance: str = "shared",
               var_mean_axes: Sequence[int] | None = None,
               reshape_to: Sequence[int] | None = None) -> onnx.ModelProto:
    """Y = (X - mean) / sqrt(var + eps) * gamma + beta written out in primitives: the square
    as `_square` writes it, the variance of d (`variance="shared"`) or, as torch.var
    exports it, of dv = X - ReduceMean(X, var_mean_axes) computed again ("own",
    "own_reshaped", "unbiased": see `_variance`); `form` "div", "reciprocal" or "one_over"."""
    np_type = np.float16 if dtype == F16 else np.float32
    rng = np.random.default_rng(1)
    inits: list[onnx.TensorProto] = [init("gamma", rng.standard_normal(gamma_shape), np_type),
                                     init("beta", rng.standard_normal(gamma_shape), np_type)]
    inputs = [vi("x", dtype, x_shape)]
    if square == "mul_other":
        inputs.append(vi("e", dtype, x_shape))
    if eps_input:
        inputs.append(vi("eps", dtype, ()))
    else:
        inits.append(init("eps", 1e-3, np_type))
    nodes = [_reduce("mean", "x", "m", axes, opset, inits, shared_axes),
             node("Sub", ["x", "m"], ["d"], name="sub")]
    deviation = "d"
    if variance != "shared":  # torch.var's own mean and difference
        nodes += [_reduce("var_mean", "x", "vm", axes if var_mean_axes is None else
                          var_mean_axes, opset, inits, False),
                  node("Sub", ["x", "vm"], ["dv"], name="var_sub")]
        deviation = "dv"
    nodes += [_square(deviation, square, inits, exponent, np_type),
              *_variance(variance, opset, axes if axes2 is None else axes2, x_shape, inits,
                         shared_axes and axes2 is None, np_type, reshape_to),
              node("Add", ["eps", "v"] if swapped else ["v", "eps"], ["ve"], name="add_eps"),
              node("Sqrt", ["ve"], ["s"], name="sqrt")]
    if form == "div":
        nodes.append(node("Div", ["d", "s"], ["n"], name="div"))
    else:
        if form == "reciprocal":
            nodes.append(node("Reciprocal", ["s"], ["r"], name="reciprocal"))
        else:  # "one_over": torch.rsqrt as the TorchScript exporter writes it
            inits.append(init("one", 1.0, np_type))
            nodes.append(node("Div", ["one", "s"], ["r"], name="one_over"))
        nodes.append(node("Mul", ["r", "d"] if swapped else ["d", "r"], ["n"], name="mul_r"))
    out = "y" if not bias else "y0"
    nodes.append(node("Mul", ["gamma", "n"] if swapped else ["n", "gamma"], [out], name="mul_g"))
    if bias:
        nodes.append(node("Add", ["beta", "y0"] if swapped else ["y0", "beta"], ["y"],
                          name="add_b"))
    else:
        inits = [t for t in inits if t.name != "beta"]
    outputs = [vi("y", dtype, np.broadcast_shapes(tuple(x_shape), tuple(gamma_shape)))]
    if extra_output is not None:
        outputs.append(extra_vi(extra_output, dtype))
    return model(nodes, inputs, outputs, inits, opset=opset)


#: The values of the Keras form with X's shape (the others are reduced to [..., 1]).
KERAS_FULL = {"x", "d", "d2", "inv", "xi", "nm_inv", "b2", "y"}


def keras_layer_norm(opset: int = 17, *, pool: bool = False, offset: str = "neg_bias",
                     swapped: bool = False, x_shape: Sequence[int | str] = ("N", 5, 16),
                     axes: Sequence[int] = (-1,), gamma_shape: Sequence[int] | None = None,
                     eps_input: bool = False, eps: float = 1e-6,
                     extra_output: str | None = None, dtype: int = F,
                     divided: bool = False) -> onnx.ModelProto:
    """Keras' LayerNormalization as tf2onnx writes it (names and constants as in its
    exports: gamma and beta [1, 1, D], a scalar eps, ReduceMean with
    noop_with_empty_axes=1 from opset 18): the mean a ReduceMean over `axes`, or (`pool`)
    a GlobalAveragePool; var = the same mean of Mul(d, d); inv = Reciprocal(Sqrt(var +
    eps)) * gamma; Y = X * inv + `offset`: "neg_bias" -mean * inv + beta (Keras 3),
    "sub_bias" beta - mean * inv (tf.nn.batch_normalization), "neg" -mean * inv (no
    beta); near misses "sub_reversed" (mean * inv - beta) and "no_neg" (mean * inv +
    beta). `swapped` swaps the operands of every Add and Mul; `divided` writes inv as
    Div(gamma, Sqrt(var + eps)), as ReciprocalMulFusion leaves it."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    rank, depth = len(x_shape), x_shape[-1]
    assert isinstance(depth, int)
    shape = tuple(gamma_shape) if gamma_shape is not None else (*[1] * (rank - 1), depth)
    rng = np.random.default_rng(3)
    inits = [init("gamma", rng.uniform(0.5, 1.5, shape), np_type),
             init("beta", rng.standard_normal(shape), np_type)]
    inputs = [vi("x", dtype, x_shape)]
    if eps_input:
        inputs.append(vi("eps", dtype, ()))
    else:
        inits.append(init("eps", eps, np_type))

    def ordered(a: str, b: str) -> list[str]:
        return [b, a] if swapped else [a, b]

    def mean(name: str, data: str, out: str) -> onnx.NodeProto:
        if pool:
            return node("GlobalAveragePool", [data], [out], name=name)
        if opset < 18:
            return node("ReduceMean", [data], [out], name=name, axes=list(axes), keepdims=1)
        if "axes" not in {t.name for t in inits}:
            inits.append(init("axes", list(axes), np.int64))
        return node("ReduceMean", [data, "axes"], [out], name=name, keepdims=1,
                    noop_with_empty_axes=1)

    nodes = [mean("moments/mean", "x", "m"),
             node("Sub", ["x", "m"], ["d"], name="moments/SquaredDifference"),
             node("Mul", ["d", "d"], ["d2"], name="moments/SquaredDifference__1"),
             mean("moments/variance", "d2", "v"),
             node("Add", ordered("v", "eps"), ["ve"], name="add"),
             node("Sqrt", ["ve"], ["s"], name="Rsqrt"),
             *([node("Div", ["gamma", "s"], ["inv"], name="mul")] if divided else
               [node("Reciprocal", ["s"], ["rs"], name="Rsqrt__2"),
                node("Mul", ordered("rs", "gamma"), ["inv"], name="mul")]),
             node("Mul", ordered("x", "inv"), ["xi"], name="mul_2")]
    if offset in ("neg_bias", "neg"):
        nodes += [node("Neg", ["m"], ["nm"], name="Neg"),
                  node("Mul", ordered("nm", "inv"), ["nm_inv"], name="mul_1")]
        shift = "nm_inv"
    else:  # "sub_bias", "sub_reversed", "no_neg": mean * inv first
        nodes.append(node("Mul", ordered("m", "inv"), ["nm_inv"], name="mul_1"))
    if offset == "sub_bias":
        nodes.append(node("Sub", ["beta", "nm_inv"], ["b2"], name="sub"))
    elif offset == "sub_reversed":
        nodes.append(node("Sub", ["nm_inv", "beta"], ["b2"], name="sub"))
    elif offset != "neg":  # "neg_bias", "no_neg"
        nodes.append(node("Add", ordered("nm_inv", "beta"), ["b2"], name="add_1"))
    if offset != "neg":
        shift = "b2"
    else:
        inits = [t for t in inits if t.name != "beta"]
    nodes.append(node("Add", ordered("xi", shift), ["y"], name="add_2"))
    static = all(isinstance(d, int) for d in x_shape)  # (a gamma may add axes)
    outputs = [vi("y", dtype, np.broadcast_shapes(tuple(x_shape), shape) if static  # type: ignore[arg-type]
                  else x_shape)]
    if extra_output is not None:
        kept = tuple(x_shape) if extra_output in KERAS_FULL else (
            *x_shape[:2], *[1] * (rank - 2)) if pool else (*x_shape[:-1], 1)
        outputs.append(vi(extra_output, dtype, kept))
    return model(nodes, inputs, outputs, inits, opset=opset)


def rms_norm(opset: int = 23, *, form: str = "div", cast_in: bool = False,
             cast_out: bool = False, dtype: int = F, exponent: float = 2.0,
             eps_input: bool = False, axes: Sequence[int] = (-1,), cast_in_to: int = F,
             extra_output: str | None = None, swapped: bool = False,
             square: str = "pow") -> onnx.ModelProto:
    """Y = X / sqrt(mean(X^2) + eps) * weight, with T5's or Llama's casts around it; the
    square as `_square` writes it."""
    np_type = np.float16 if dtype == F16 else np.float32
    inner = cast_in_to if cast_in else dtype
    inner_type = np.float16 if inner == F16 else np.float32
    rng = np.random.default_rng(2)
    inits = [init("one", 1.0, inner_type), init("weight", rng.standard_normal(4), np_type)]
    inputs = [vi("x", dtype, X_SHAPE)]
    if square == "mul_other":
        inputs.append(vi("e", inner, X_SHAPE))
    if eps_input:
        inputs.append(vi("eps", inner, ()))
    else:
        inits.append(init("eps", 1e-6, inner_type))
    nodes = []
    data = "x"
    if cast_in:
        nodes.append(node("Cast", ["x"], ["xc"], name="cast_in", to=cast_in_to))
        data = "xc"
    nodes += [_square(data, square, inits, exponent, inner_type),
              _reduce("mean", "p", "ms", axes, opset, inits, True),
              node("Add", ["eps", "ms"] if swapped else ["ms", "eps"], ["mse"], name="add_eps"),
              node("Sqrt", ["mse"], ["s"], name="sqrt")]
    if form == "div":
        nodes.append(node("Div", [data, "s"], ["n"], name="div"))
    else:
        if form == "reciprocal":
            nodes.append(node("Reciprocal", ["s"], ["r"], name="reciprocal"))
        else:
            nodes.append(node("Div", ["one", "s"], ["r"], name="one_over"))
        nodes.append(node("Mul", ["r", data] if swapped else [data, "r"], ["n"], name="mul_r"))
    if cast_out:
        nodes.append(node("Cast", ["n"], ["nc"], name="cast_out", to=dtype))
    scaled = "nc" if cast_out else "n"
    nodes.append(node("Mul", ["weight", scaled] if swapped else [scaled, "weight"], ["y"],
                      name="mul_w"))
    inits = [t for t in inits if t.name != "one" or form == "one_over"]
    outputs = [vi("y", dtype, X_SHAPE)]
    if extra_output is not None:
        outputs.append(extra_vi(extra_output, dtype))
    return model(nodes, inputs, outputs, inits, opset=opset)
