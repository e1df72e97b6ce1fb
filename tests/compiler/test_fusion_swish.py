"""`SwishFusion` (built-in fusion): SiLU written out, `X * Sigmoid(X)` or
`X * Sigmoid(a * X)`, becomes the ONNX `Swish` from opset 24, nothing elsewhere. Run as the
engine runs it, the result saved, checked by onnx's full checker and run in onnxruntime
against the original."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from builtin_helpers import F, assert_fused, histogram, init, load, model, run_pass, vi
from onnx import helper

import ge
from ge.compiler.builtin import SwishFusion
from versions import needs_opset

pytestmark = [
    pytest.mark.builtin_passes,  # these tests are about a built-in pass
    pytest.mark.usefixtures("matching"),  # by the search and by match plans
]

#: The models are run in onnxruntime: Swish is opset 24's.
SWISH = needs_opset(24, "Swish")
node = helper.make_node
F16 = onnx.TensorProto.FLOAT16
ROOT = Path(__file__).resolve().parents[2]


def silu(*, alpha: float | None = None, alpha_shape: tuple[int, ...] = (), opset: int = 24,
         elem: int = F, swap: bool = False, gate: str = "x",
         outputs: tuple[onnx.ValueInfoProto, ...] = ()) -> onnx.ModelProto:
    """y = x * Sigmoid(gate) with x [2, 3] (gate = x, or x * a with `alpha`)."""
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    nodes, inits = [], []
    inputs = [vi("x", elem, [2, 3])]
    if gate == "other":
        inputs.append(vi("other", elem, [2, 3]))
    source = "x" if gate == "x" else "other"
    if alpha is not None:
        inits.append(init("a", np.full(alpha_shape, alpha), dtype))
        nodes.append(node("Mul", ["a", source], ["scaled"], name="scale"))
        source = "scaled"
    nodes += [node("Sigmoid", [source], ["s"], name="sigmoid"),
              node("Mul", ["s", "x"] if swap else ["x", "s"], ["y"], name="mul")]
    shape = list(np.broadcast_shapes((2, 3), alpha_shape))
    return model(nodes, inputs, [vi("y", elem, shape), *outputs], inits, opset=opset)


def assert_swish(source: onnx.ModelProto, tmp_path: Path, alpha: float,
                 tol: float = 1e-5) -> None:
    graph = load(source)
    assert run_pass(SwishFusion, graph)
    hist = histogram(graph)
    assert hist.get("Swish") == 1 and "Sigmoid" not in hist and "Mul" not in hist
    saved = assert_fused(graph, source, tmp_path, tol=tol)
    (swish,) = saved.graph.node
    assert list(swish.input) == ["x"] and list(swish.output) == ["y"]
    got = {a.name: a.f for a in swish.attribute}
    assert got.get("alpha", 1.0) == pytest.approx(alpha)


def assert_untouched(source: onnx.ModelProto, tmp_path: Path) -> None:
    graph = load(source)
    before = histogram(graph)
    assert not run_pass(SwishFusion, graph)
    assert histogram(graph) == before
    assert_fused(graph, source, tmp_path)


# -- where it fires -------------------------------------------------------------------------


@SWISH
@pytest.mark.parametrize("swap", [False, True], ids=["x-first", "sigmoid-first"])
def test_silu_becomes_swish(swap: bool, tmp_path: Path) -> None:
    assert_swish(silu(swap=swap), tmp_path, 1.0)


@SWISH
@pytest.mark.parametrize("alpha_shape", [(), (1,), (1, 1)], ids=str)
def test_a_scaled_sigmoid_gives_swish_its_alpha(alpha_shape: tuple[int, ...],
                                                tmp_path: Path) -> None:
    assert_swish(silu(alpha=1.702, alpha_shape=alpha_shape), tmp_path, 1.702)


@SWISH
def test_float16(tmp_path: Path) -> None:
    assert_swish(silu(elem=F16), tmp_path, 1.0, tol=1e-2)


@SWISH
def test_the_llama_mlp_at_opset_24_when_enabled() -> None:
    """Off by default (onnxruntime 1.32 has no Swish kernel: a trial's EfficientNet-B0 ran
    ~30% slower fused); `enable=` runs it."""
    sys.path.insert(0, str(ROOT / "examples" / "models"))
    try:
        import make_fusion_models
    finally:
        sys.path.pop(0)
    model = make_fusion_models.build_model("llama_block")
    by_default = ge.compile(model, opset=24)
    assert "SwishFusion" not in {r.pass_name for r in by_default.report.records}
    assert histogram(by_default.graph)["Sigmoid"] == 1
    result = ge.compile(model, opset=24, verify=True, enable=["SwishFusion"])
    assert result.verification is not None and result.verification.ok
    assert result.report.rewrites_by_pass().get("SwishFusion") == 1
    assert "Sigmoid" not in histogram(result.graph)


# -- where it must not fire -----------------------------------------------------------------


@needs_opset(23)
def test_not_below_opset_24(tmp_path: Path) -> None:
    assert_untouched(silu(opset=23), tmp_path)


@SWISH
def test_not_of_two_different_values(tmp_path: Path) -> None:
    assert_untouched(silu(gate="other"), tmp_path)


@SWISH
def test_not_when_the_scale_broadcasts_x_up(tmp_path: Path) -> None:
    assert_untouched(silu(alpha=1.702, alpha_shape=(1, 1, 1)), tmp_path)


@SWISH
def test_not_when_the_sigmoid_is_read_elsewhere(tmp_path: Path) -> None:
    assert_untouched(silu(outputs=(vi("s", F, [2, 3]),)), tmp_path)
