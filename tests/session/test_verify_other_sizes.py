"""Verification at other sizes of the symbolic dims: generated inputs size every symbol 2,
so a pass that baked a size of 2 into a constant verified (trial P). Verification with
generated inputs now runs again with each symbol its own size (3, 5, 7...) wherever the
original runs there with the output shapes it declares, and says where it matched too."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.errors import SessionError, VerificationError
from ge.session import verify
from ge.session.verification import OTHER_SIZES, other_sizes
from ge.testing import assert_numerically_equal

F = TensorProto.FLOAT


def _model(nodes: list[onnx.NodeProto], x_dims: list[int | str], y_dims: list[int | str],
           inits: list[onnx.TensorProto] = (), name: str = "g") -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", F, x_dims)],
                              [helper.make_tensor_value_info("y", F, y_dims)], list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def _shape(name: str, values: list[int]) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(np.array(values, np.int64), name)


def _relu(dims: list[int | str]) -> onnx.ModelProto:
    return _model([helper.make_node("Relu", ["x"], ["y"])], dims, dims)


def _relu_reshaped(shape: list[int], x_dims: list[int | str]) -> onnx.ModelProto:
    """Relu, then a Reshape to the constant `shape`: right only where it is x's shape."""
    return _model([helper.make_node("Relu", ["x"], ["r"]),
                   helper.make_node("Reshape", ["r", "shape"], ["y"])],
                  x_dims, x_dims, [_shape("shape", shape)])


#: A pattern pass reshaping each Relu's output to a batch of 2: right at the default sizes.
BAKED_BATCH = '''
import numpy as np
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="BakedBatch", stage=PassStage.AFTER_INFER_SHAPE)
class BakedBatch(PatternFusionPass):
    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    def replacement(self, inputs):
        return es.Reshape(es.Max(inputs[0], np.float32(0)), np.array(__SHAPE__, np.int64))
'''


def _plugin(tmp_path: Path, shape: list[int]) -> Path:
    path = tmp_path / "baked_batch.py"
    path.write_text(BAKED_BATCH.replace("__SHAPE__", repr(shape)))
    return path


def test_each_symbol_not_sized_gets_its_own_other_size() -> None:
    model = _model([helper.make_node("Add", ["x", "x"], ["y"])], ["batch", "seq", 4],
                   ["batch", "seq", 4])
    assert other_sizes(model) == {"batch": 3, "seq": 5}
    assert other_sizes(model, {"seq": 9}) == {"seq": 9, "batch": 3}
    assert other_sizes(model, {"batch": 4, "seq": 9}) == {}  # nothing left to try
    assert other_sizes(_relu([2, 4])) == {}
    assert 2 not in OTHER_SIZES and len(set(OTHER_SIZES)) == len(OTHER_SIZES)


def test_verify_finds_a_size_baked_in_and_says_where() -> None:
    original = _relu(["batch", 4])
    baked = _relu_reshaped([2, -1], ["batch", 4])  # right at batch 2 only
    assert verify(original, baked, dims={"batch": 2}).ok  # the default sizes alone
    report = verify(original, baked)
    assert not report.ok and report.sizes == {"batch": 3}
    assert report.summary().startswith("FAILED at batch=3: 1 of 1 output(s) differ")
    assert report.as_dict()["sizes"] == {"batch": 3}
    with pytest.raises(VerificationError, match=r"^\[GE1603\] baked at batch=3: output 'y'"):
        report.raise_if_failed("baked")


def test_verify_says_where_the_outputs_matched_too() -> None:
    model = _model([helper.make_node("Add", ["x", "x"], ["y"])], ["batch", "seq", 4],
                   ["batch", "seq", 4])
    report = verify(model, model)
    assert report.ok and report.also_at == {"batch": 3, "seq": 5} and report.sizes == {}
    assert report.summary().endswith("; also at batch=3, seq=5")
    assert report.as_dict()["also_at"] == {"batch": 3, "seq": 5}
    given = {"x": np.ones((2, 2, 4), np.float32)}
    assert verify(model, model, inputs=given).also_at == {}  # given inputs: those only


def test_sizes_the_caller_gave_are_named_as_given() -> None:
    """With `dims` sizing one symbol, the check at other sizes varies the others only: its
    messages name what it chose first and the given sizes as such (trial OO: `also at
    seq=1, batch=3` read as if seq had been varied too)."""
    model = _model([helper.make_node("Add", ["x", "x"], ["y"])], ["batch", "seq", 4],
                   ["batch", "seq", 4])
    report = verify(model, model, dims={"seq": 1})
    assert report.also_at == {"seq": 1, "batch": 3} and report.given_dims == ("seq",)
    assert report.summary().endswith("; also at batch=3 with seq=1 as given")
    assert report.as_dict()["given_dims"] == ["seq"]
    assert "given_dims" not in verify(model, model).as_dict()
    # right at batch 2 only: fails where the check chose batch 3
    baked = _model([helper.make_node("Add", ["x", "x"], ["t"]),
                    helper.make_node("Reshape", ["t", "shape"], ["y"])],
                   ["batch", "seq", 4], ["batch", "seq", 4], [_shape("shape", [2, -1, 4])])
    failed = verify(model, baked, dims={"seq": 2})
    assert not failed.ok and failed.sizes == {"seq": 2, "batch": 3}
    assert failed.summary().startswith("FAILED at batch=3 with seq=2 as given: ")
    with pytest.raises(SessionError, match=r"the compiled model cannot run at batch=3 "
                                           r"with seq=1 as given, where the original runs"):
        verify(model, baked, dims={"seq": 1})  # (3 x 1 x 4 elements: no [2, -1, 4])


def test_an_original_that_runs_only_at_its_traced_size_is_checked_there_only() -> None:
    """An export traced at batch 2 and declared dynamic cannot run at batch 3: the check
    there is left out, not failed."""
    traced = _relu_reshaped([2, 4], ["batch", 4])
    report = verify(traced, _relu([2, 4]))
    assert report.ok and report.also_at == {}
    # ... and the summary says so (a KV-cache model's mask at other sizes: trial JJ)
    assert report.not_at == {"batch": 3}
    assert report.summary().endswith(
        "; not checked at other sizes (batch=3: the original cannot run there; give those "
        "dims with --dims (dims=) to check at sizes of your choice)")
    assert report.as_dict()["not_at"] == {"sizes": {"batch": 3},
                                          "reason": "the original cannot run there"}


def test_outputs_off_their_declared_shape_leave_the_other_sizes_out() -> None:
    """The original runs at batch 3, but its output is declared [2, 4]: ge may rely on
    that declaration, so nothing is compared there."""
    declared = _model([helper.make_node("Relu", ["x"], ["y"])], ["batch", 4], [2, 4])
    report = verify(declared, _relu_reshaped([2, 4], [2, 4]))
    assert report.ok and report.also_at == {}
    assert report.not_at_reason == ("the original's outputs there do not have the shapes "
                                    "its graph outputs declare")
    assert verify(_relu([2, 4]), _relu([2, 4])).not_at == {}  # no symbolic dim: not meant


def test_compile_fails_a_pass_that_baked_a_size_in(tmp_path: Path) -> None:
    model = _relu(["batch", 4])
    plugin = _plugin(tmp_path, [2, -1])
    before = model.SerializeToString()
    with pytest.raises(VerificationError) as info:
        ge.compile(model, pass_paths=[plugin], verify=True)
    assert info.value.code == "GE1603"
    assert info.value.message.startswith(
        "the compiled model's outputs differ from the original's at other sizes of the "
        "symbolic dims than those generated first: FAILED at batch=3: 1 of 1 output(s) "
        "differ")
    assert info.value.message.endswith(
        '(verify="each-pass", --verify each-pass, names the pass that changed them)')
    assert info.value.report is not None and info.value.report.sizes == {"batch": 3}
    assert model.SerializeToString() == before
    with pytest.raises(VerificationError) as info:
        ge.compile(model, pass_paths=[plugin], verify="each-pass")
    assert info.value.pass_name == "BakedBatch"
    assert "after pass BakedBatch (graph g): FAILED at batch=3" in info.value.message
    # the operators the pass made (trial P: the error named none; constants left out)
    assert info.value.message.endswith("; pass BakedBatch changed 'Max', 'Reshape'")
    assert info.value.nodes == ("Max", "Reshape")
    result = ge.compile(model, pass_paths=[plugin], verify=True, dims={"batch": 2})
    assert result.verification is not None and result.verification.ok  # sized: only there


def test_compile_says_when_the_compiled_model_cannot_run_where_the_original_does(
        tmp_path: Path) -> None:
    model = _relu(["batch", "seq", 4])
    plugin = _plugin(tmp_path, [2, -1, 4])  # 60 elements at batch=3, seq=5: no [2, ?, 4]
    with pytest.raises(SessionError) as info:
        ge.compile(model, pass_paths=[plugin], verify=True)
    assert info.value.code == "GE1601"
    assert info.value.message.startswith(
        "the compiled model cannot run at batch=3, seq=5, where the original runs: "
        "onnxruntime failed to run graph 'g'")
    # the pass that made the node onnxruntime names is named, and --verify each-pass,
    # which says after which pass it first cannot run
    assert info.value.message.endswith(
        "; node 'Reshape' was last changed by pass BakedBatch (AfterInferShape) "
        '(verify="each-pass", --verify each-pass, names the first pass after which it '
        "cannot run)")
    assert info.value.pass_name == "BakedBatch"
    with pytest.raises(SessionError) as info:
        ge.compile(model, pass_paths=[plugin], verify="each-pass")
    assert info.value.pass_name == "BakedBatch"


def test_the_cli_shows_the_other_sizes_and_writes_nothing_on_failure(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from ge.cli import cli

    source, out, report = tmp_path / "m.onnx", tmp_path / "out.onnx", tmp_path / "r.json"
    onnx.save(_relu(["batch", 4]), source)
    run = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--verify",
                                   "--report", str(report)])
    assert run.exit_code == 0, run.stderr
    assert "; also at batch=3" in run.stdout
    assert json.loads(report.read_text())["verification"]["also_at"] == {"batch": 3}
    out.unlink()
    run = CliRunner().invoke(cli, ["compile", str(source), "-o", str(out), "--verify",
                                   "--pass-path", str(_plugin(tmp_path, [2, -1]))])
    assert run.exit_code == 1 and "[GE1603]" in run.stderr and "FAILED at batch=3" in run.stderr
    assert not out.exists()


def test_assert_numerically_equal_names_the_sizes_it_failed_at() -> None:
    with pytest.raises(AssertionError) as info:
        assert_numerically_equal(_relu(["batch", 4]), _relu_reshaped([2, -1], ["batch", 4]))
    assert "inputs (generated with seed 0 at batch=3): x float32[3, 4]" in str(info.value)
