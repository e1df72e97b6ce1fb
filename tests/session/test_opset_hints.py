"""`ge.session.hints.opset_hints` and the `hint:` line of `ge compile`: the layer norms and
GELUs the fusion passes would fuse at a newer opset, counted by the passes themselves on
the compiled graph (nothing changed), and gone once the model is compiled at that opset."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner

import ge
from ge.cli import cli
from ge.session.hints import OpsetHint, opset_hints
from model_paths import shared_model
from versions import needs_opset

DISTILBERT = shared_model("distilbert_tiny")
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.builtin_passes


def _layer_norms_at_14() -> onnx.ModelProto:
    """The example attention block with its two layer norms in primitives, imported at opset
    14 (the operators it uses have the same schemas there)."""
    sys.path.insert(0, str(ROOT / "examples" / "models"))
    try:
        import make_fusion_models
    finally:
        sys.path.pop(0)
    model = make_fusion_models.build_model("attention_layernorm")
    model.opset_import[0].version = 14
    onnx.checker.check_model(model, full_check=True)
    return model


def test_distilberts_gelus_are_counted_and_gone_at_20() -> None:
    result = ge.compile(DISTILBERT)
    before = result.graph.to_onnx().SerializeToString()
    hints = opset_hints(result.graph)
    assert hints == [OpsetHint("GeluFusion", "GELU", "Gelu", 20, 2)]
    assert str(hints[0]) == ("2 GELU(s) written in primitives would become Gelu at opset 20 "
                             "(--opset 20)")
    assert result.graph.to_onnx().SerializeToString() == before  # nothing changed
    assert result.graph.opset_imports[""] == 17
    assert opset_hints(result.graph, disabled=["GeluFusion"]) == []
    assert opset_hints(ge.compile(DISTILBERT, opset=20).graph) == []


@needs_opset(23, "the compilation verifies")
def test_rms_norms_below_18_are_counted_in_their_form_and_fuse_when_converted() -> None:
    """T5's RMS norms at its own opset 17, where ReduceMean takes its axes as an attribute:
    counted in that form (the converter moves the axes into an input), and the count is
    what `opset=23` fuses; the same from opset 18."""
    import onnx.version_converter

    t5 = onnx.load(shared_model("t5_encoder_tiny"))
    expected = [OpsetHint("RMSNormFusion", "RMS norm", "RMSNormalization", 23, 5)]
    assert opset_hints(ge.compile(t5).graph) == expected
    converted = ge.compile(t5, opset=23, verify=True)
    assert converted.report.rewrites_by_pass().get("RMSNormFusion") == 5
    assert opset_hints(converted.graph) == []
    at_18 = onnx.version_converter.convert_version(t5, 18)
    assert opset_hints(ge.compile(at_18).graph) == expected


def test_layer_norms_below_17_are_counted_and_fuse_when_converted() -> None:
    model = _layer_norms_at_14()
    assert opset_hints(ge.compile(model).graph) == [
        OpsetHint("LayerNormFusion", "layer norm", "LayerNormalization", 17, 2)]
    converted = ge.compile(model, opset=17, verify=True)
    assert converted.report.rewrites_by_pass().get("LayerNormFusion") == 2
    assert opset_hints(converted.graph) == []


def test_a_keras_layer_norm_below_17_is_counted_and_fuses_when_converted() -> None:
    """tf2onnx's form, whose `Reciprocal(s) * gamma` ReciprocalMulFusion turns into a Div
    before the hints are counted: the count knows that form too."""
    sys.path.insert(0, str(ROOT / "tests" / "compiler"))
    try:
        from norm_models import keras_layer_norm
    finally:
        sys.path.pop(0)
    model = keras_layer_norm(16)
    compiled = ge.compile(model)
    assert compiled.report.rewrites_by_pass().get("ReciprocalMulFusion") == 1
    assert opset_hints(compiled.graph) == [
        OpsetHint("LayerNormFusion", "layer norm", "LayerNormalization", 17, 1)]
    converted = ge.compile(model, opset=17, verify=True)
    assert converted.report.rewrites_by_pass().get("LayerNormFusion") == 1
    assert opset_hints(converted.graph) == []


def test_the_llama_layers_silu_is_counted_for_24_only_when_swish_is_enabled() -> None:
    """SwishFusion is off by default (onnxruntime runs Swish slower than Mul(x, Sigmoid(x))):
    no hint recommends it unless the compilation enables it. (The block's two RMS norms, at
    opset 17, are hinted for 23.)"""
    sys.path.insert(0, str(ROOT / "examples" / "models"))
    try:
        import make_fusion_models
    finally:
        sys.path.pop(0)
    model = make_fusion_models.build_model("llama_block")
    rms = OpsetHint("RMSNormFusion", "RMS norm", "RMSNormalization", 23, 2)
    assert opset_hints(ge.compile(model).graph) == [rms]
    enabled = ge.compile(model, enable=["SwishFusion"]).graph
    assert opset_hints(enabled, enabled=["SwishFusion"]) == [
        rms, OpsetHint("SwishFusion", "SiLU", "Swish", 24, 1)]
    assert opset_hints(ge.compile(model, opset=24, enable=["SwishFusion"]).graph,
                       enabled=["SwishFusion"]) == []


def test_the_cli_prints_the_hint_and_puts_it_in_the_json(tmp_path: Path) -> None:
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(cli, ["compile", str(DISTILBERT), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    assert ("hint: 2 GELU(s) written in primitives would become Gelu at opset 20 (--opset 20)"
            in result.stdout)
    result = CliRunner().invoke(cli, ["compile", str(DISTILBERT), "-o", str(out), "--json"])
    payload = json.loads(result.stdout)
    assert [(h["pass_name"], h["count"], h["opset"]) for h in payload["hints"]] == [
        ("GeluFusion", 2, 20)]
    for flags in (["--opset", "20"], ["--no-builtin"], ["--disable", "GeluFusion"]):
        result = CliRunner().invoke(cli, ["compile", str(DISTILBERT), "-o", str(out), *flags])
        assert result.exit_code == 0 and "hint:" not in result.stdout, flags


def test_the_cli_hints_follow_the_fusion_switch_file(tmp_path: Path) -> None:
    """Hints count what the compilation ran: a fusion switch file turning GeluFusion off
    leaves no GELU hint (the CLI re-derived that from --disable/--enable alone)."""
    out = tmp_path / "out.onnx"
    switch = tmp_path / "fusion_switch.cfg"
    switch.write_text('{"Switch": {"GraphFusion": {"GeluFusion": "off"}}}')
    result = CliRunner().invoke(cli, ["compile", str(DISTILBERT), "-o", str(out), "--option",
                                      f"ge.fusionSwitchFile={switch}"])
    assert result.exit_code == 0, result.stderr
    assert "hint:" not in result.stdout


def _gelu_in_a_branch() -> onnx.ModelProto:
    """y = If(c, then: Relu(GELU(x)) written in primitives, else: x), at opset 18."""
    import numpy as np
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx import numpy_helper as nh

    gelu = [h.make_node("Div", ["x", "sqrt2"], ["d"]), h.make_node("Erf", ["d"], ["e"]),
            h.make_node("Add", ["e", "one"], ["t"]), h.make_node("Mul", ["x", "t"], ["xt"]),
            h.make_node("Mul", ["xt", "half"], ["g"]), h.make_node("Relu", ["g"], ["then_out"])]
    out = [h.make_tensor_value_info(n, TP.FLOAT, ["n", 8]) for n in ("then_out", "else_out")]
    then_g = h.make_graph(gelu, "then_g", [], [out[0]])
    else_g = h.make_graph([h.make_node("Identity", ["x"], ["else_out"])], "else_g", [], [out[1]])
    inits = [nh.from_array(np.array(v, np.float32), n)
             for n, v in (("sqrt2", 1.4142135), ("one", 1.0), ("half", 0.5))]
    graph = h.make_graph(
        [h.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)], "main",
        [h.make_tensor_value_info("x", TP.FLOAT, ["n", 8]),
         h.make_tensor_value_info("c", TP.BOOL, [])],
        [h.make_tensor_value_info("y", TP.FLOAT, ["n", 8])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    onnx.checker.check_model(model, full_check=True)
    return model


def test_what_bodies_hold_is_counted_too() -> None:
    """A GELU in an If branch: hinted as the main graph's would be, and fused at 20."""
    model = _gelu_in_a_branch()
    assert opset_hints(ge.compile(model).graph) == [
        OpsetHint("GeluFusion", "GELU", "Gelu", 20, 1)]
    converted = ge.compile(model, opset=20)
    assert converted.report.rewrites_by_pass().get("GeluFusion") == 1
    assert opset_hints(converted.graph) == []


_LATE_DECOMPOSITION = '''
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, PassStage, register_decompose_pass


@register_decompose_pass(name="LateLayerNormDecomposition",
                         stage=PassStage.AFTER_ORIGIN_GRAPH_OPTIMIZE,
                         op_types=["LayerNormalization"])
class LateLayerNormDecomposition(DecomposePass):
    def replacement(self, node):
        builder = GraphBuilder("decomposed")
        x, scale, bias = builder.create_inputs(3)
        d = x - es.ReduceMean(x, axes=[-1], keepdims=1)
        var = es.ReduceMean(d * d, axes=[-1], keepdims=1)
        return builder.build_and_reset([d / es.Sqrt(var + 1e-12) * scale + bias])
'''


def test_what_a_pass_made_after_the_fusions_is_not_hinted(tmp_path: Path) -> None:
    """A plugin decomposing LayerNormalization after the fusions (a backend without it)
    leaves norms written out that no fusion sees, at any opset: no hint for them (its
    centred inner part had been hinted as 5 RMS norms that --opset 23 did not fuse)."""
    plugin = tmp_path / "late.py"
    plugin.write_text(_LATE_DECOMPOSITION)
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(cli, ["compile", str(DISTILBERT), "-o", str(out), "--json",
                                      "--pass-path", str(plugin)])
    assert result.exit_code == 0, result.stderr
    payload = json.loads(result.stdout)
    assert payload["ops_after"].get("LayerNormalization", 0) == 0  # the plugin ran
    assert [(h["pass_name"], h["count"]) for h in payload["hints"]
            if "pass_name" in h] == [("GeluFusion", 2)]
    # the same graph, counted as if nothing ran late: the norms would have been hinted
    compiled = ge.compile(out, builtin_passes=False)
    assert any(h.pass_name == "RMSNormFusion" for h in opset_hints(compiled.graph))


def test_a_hint_beyond_the_installed_runtime_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial AB: `--opset 23` makes a model only a runtime of opset 23 runs; when the
    onnxruntime installed runs less, the hint says so (and nothing when it runs it)."""
    import onnxruntime

    import ge._compat

    hint = OpsetHint("RMSNormFusion", "RMS norm", "RMSNormalization", 23, 3)
    monkeypatch.setattr(ge._compat, "runtime_opset", lambda: 23)
    assert str(hint) == ("3 RMS norm(s) written in primitives would become RMSNormalization "
                         "at opset 23 (--opset 23)")
    monkeypatch.setattr(ge._compat, "runtime_opset", lambda: 21)
    assert str(hint) == (
        "3 RMS norm(s) written in primitives would become RMSNormalization at opset 23 "
        "(--opset 23; the compiled model would then need a newer onnxruntime than this one, "
        f"{onnxruntime.__version__}, which runs opsets up to 21)")
