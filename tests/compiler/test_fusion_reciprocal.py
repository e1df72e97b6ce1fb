"""`ReciprocalMulFusion` (built-in fusion): `X * Reciprocal(S)` and `X * (1 / S)` → `X / S`
for floating-point values with a `1` that leaves S's shape alone, nothing elsewhere. Run as
the engine runs it, the result saved, checked by onnx's full checker and run in onnxruntime
against the original."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from builtin_helpers import I64, F, assert_fused, histogram, init, load, model, run_pass, vi
from onnx import helper

import ge
from ge.compiler.builtin import ReciprocalMulFusion

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about a built-in pass
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]

node = helper.make_node
F16 = onnx.TensorProto.FLOAT16
RNG = np.random.default_rng(0)


def one_over(*, form: str = "one", one: object = 1.0, one_shape: tuple[int, ...] = (),
             s_shape: tuple[int, ...] = (3,), mul_first: bool = False, elem: int = F,
             extra: tuple[onnx.NodeProto, ...] = (),
             outputs: tuple[onnx.ValueInfoProto, ...] = (),
             mul_name: str = "mul") -> onnx.ModelProto:
    """y = x * inverse(s), x [2, 3] an input, s a positive input of `s_shape`; `inverse` is
    Reciprocal (form "reciprocal") or Div(one, s) with `one` a constant of `one_shape`."""
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    inits = []
    if form == "reciprocal":
        inverse = node("Reciprocal", ["s"], ["inv"], name="inv")
        inverse_shape = s_shape
    else:
        inits.append(init("one", np.full(one_shape, one), dtype))
        inverse = node("Div", ["one", "s"], ["inv"], name="inv")
        inverse_shape = tuple(np.broadcast_shapes(one_shape, s_shape))
    product = node("Mul", ["inv", "x"] if mul_first else ["x", "inv"], ["y"], name=mul_name)
    out_shape = list(np.broadcast_shapes((2, 3), inverse_shape))
    return model([inverse, product, *extra], [vi("x", elem, [2, 3]), vi("s", elem, s_shape)],
                 [vi("y", elem, out_shape), *outputs], inits)


def feeds(source: onnx.ModelProto) -> list[dict[str, np.ndarray]]:
    """x normal, s in [0.5, 2) (a divisor away from zero), of the inputs' types."""
    result = []
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        feed = {}
        for value in source.graph.input:
            tt = value.type.tensor_type
            shape = [d.dim_value for d in tt.shape.dim]
            dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
            if value.name == "s":
                feed["s"] = rng.uniform(0.5, 2.0, shape).astype(dtype)
            else:
                feed[value.name] = rng.standard_normal(shape).astype(dtype)
        result.append(feed)
    return result


def assert_divides(source: onnx.ModelProto, tmp_path: Path, *, tol: float = 1e-4) -> None:
    graph = load(source)
    assert run_pass(ReciprocalMulFusion, graph)
    hist = histogram(graph)
    assert hist.get("Div") == 1 and "Mul" not in hist and "Reciprocal" not in hist
    saved = assert_fused(graph, source, tmp_path, feeds(source), tol=tol)
    (div,) = [n for n in saved.graph.node if n.op_type == "Div"]
    assert list(div.input) == ["x", "s"] and list(div.output) == ["y"]


def assert_untouched(source: onnx.ModelProto, tmp_path: Path) -> None:
    graph = load(source)
    before = histogram(graph)
    assert not run_pass(ReciprocalMulFusion, graph)
    assert histogram(graph) == before
    assert_fused(graph, source, tmp_path, feeds(source))


# -- where it fires -------------------------------------------------------------------------


@pytest.mark.parametrize("mul_first", [False, True], ids=["x-first", "inverse-first"])
@pytest.mark.parametrize("form", ["reciprocal", "one"])
def test_a_product_with_a_reciprocal_becomes_a_division(form: str, mul_first: bool,
                                                        tmp_path: Path) -> None:
    assert_divides(one_over(form=form, mul_first=mul_first), tmp_path)


@pytest.mark.parametrize("one_shape", [(), (1,), (3,), (1, 1)], ids=str)
def test_a_one_of_any_shape_that_does_not_grow_the_divisor(one_shape: tuple[int, ...],
                                                            tmp_path: Path) -> None:
    assert_divides(one_over(one_shape=one_shape, s_shape=(2, 3)), tmp_path)


def test_float16_and_double(tmp_path: Path) -> None:
    assert_divides(one_over(elem=F16), tmp_path, tol=1e-2)
    assert_divides(one_over(form="reciprocal", elem=onnx.TensorProto.DOUBLE), tmp_path)


def test_the_llama_rms_norm_loses_its_one_over(tmp_path: Path) -> None:
    """`torch.rsqrt` exported at opset 17 (`Div(1, Sqrt(...))`) in the example Llama layer:
    both norms divide, the compiled model computes what the original does."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "models"))
    try:
        import make_fusion_models
    finally:
        sys.path.pop(0)
    source = make_fusion_models.build_model("llama_block")
    result = ge.compile(source, verify=True)
    assert result.verification is not None and result.verification.ok
    assert result.report.rewrites_by_pass().get("ReciprocalMulFusion") == 2


# -- where it must not fire -----------------------------------------------------------------


def test_not_for_integers(tmp_path: Path) -> None:
    """Integer Div truncates: x * (1 / 3) is x * 0, x / 3 is not."""
    source = model(
        [node("Div", ["one", "s"], ["inv"]), node("Mul", ["x", "inv"], ["y"])],
        [vi("x", I64, [2, 3]), vi("s", I64, [3])], [vi("y", I64, [2, 3])],
        [init("one", 1, np.int64)])
    graph = load(source)
    assert not run_pass(ReciprocalMulFusion, graph)
    x = np.arange(6, dtype=np.int64).reshape(2, 3)
    assert_fused(graph, source, tmp_path, [{"x": x, "s": np.array([1, 2, 3], dtype=np.int64)}])


def test_not_when_the_numerator_is_not_one(tmp_path: Path) -> None:
    assert_untouched(one_over(one=2.0), tmp_path)
    assert_untouched(one_over(one=[1.0, 1.0, 2.0], one_shape=(3,)), tmp_path)


def test_not_when_the_one_broadcasts_the_divisor_up(tmp_path: Path) -> None:
    """A [2, 1] one over a [3] divisor makes the product [2, 3]: `x / s` would stay [2, 3]
    only by luck of x's shape; a [4, 2, 3] one would grow the result."""
    assert_untouched(one_over(one_shape=(2, 1)), tmp_path)
    assert_untouched(one_over(one_shape=(4, 2, 3), s_shape=(3,)), tmp_path)


def test_not_when_the_reciprocal_is_read_elsewhere(tmp_path: Path) -> None:
    assert_untouched(one_over(extra=(node("Neg", ["inv"], ["z"]),),
                              outputs=(vi("z", F, [3]),)), tmp_path)
    assert_untouched(one_over(form="reciprocal", outputs=(vi("inv", F, [3]),)), tmp_path)


def test_not_when_the_one_is_an_input() -> None:
    source = model(
        [node("Div", ["one", "s"], ["inv"]), node("Mul", ["x", "inv"], ["y"])],
        [vi("x", F, [2, 3]), vi("s", F, [3]), vi("one", F, [])], [vi("y", F, [2, 3])])
    assert not run_pass(ReciprocalMulFusion, load(source))


def test_the_division_takes_the_products_names() -> None:
    """The Div is named as the Mul it replaces and produces its value under its name (here
    an intermediate `p`, read by a Relu; a graph output's name was always kept)."""
    source = one_over(extra=(node("Relu", ["y"], ["z"], name="relu"),),
                      outputs=(vi("z", F, [2, 3]),))
    graph = load(source)
    assert run_pass(ReciprocalMulFusion, graph)
    (div,) = [n for n in graph.nodes_of_type("Div") if n.name != "inv"]
    assert div.name == "mul"
    assert div.get_output_name(0) == "y"


@pytest.mark.parametrize(("mul_name", "taken", "div_name"), [
    ("/ln/Mul_1", "relu", "/ln/Div_1"),  # the exporter's scope kept, the operator swapped
    ("/ln/Mul", "relu", "/ln/Div"),      # the name of the Div(1, s) the fusion removed
    ("/ln/Mul_1", "/ln/Div_1", "/ln/Div_1_1"),  # taken by the Relu: made unique
    ("Mul_7", "relu", "Div_7"),
    ("/ln/Multiply", "relu", "/ln/Multiply"),  # not the operator's name: kept
])
def test_the_division_is_not_named_as_a_product(mul_name: str, taken: str,
                                                div_name: str) -> None:
    """A Mul whose name spells its operator gives the Div its name with Div for Mul (a Div
    named `.../Mul` misleads whoever reads the model); a name taken stays unique."""
    source = one_over(mul_name=mul_name, extra=(node("Relu", ["y"], ["z"], name=taken),),
                      outputs=(vi("z", F, [2, 3]),))
    source.graph.node[0].name = "/ln/Div"  # the Div(1, s) the fusion removes
    graph = load(source)
    assert run_pass(ReciprocalMulFusion, graph)
    (div,) = graph.nodes_of_type("Div")
    assert div.name == div_name
    assert div.get_output_name(0) == "y"
