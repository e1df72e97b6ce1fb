"""pyatc's `--input_shape` changing static dims as atc does (re-batching a batch-1 export,
`-1` making a static dim dynamic), and the check that the compiled model computes with the
new shape: run in onnxruntime on a batch against the original model on each sample. The
models that compute with their declared batch (a Reshape target, a constant, an If
branch's declaration) are the ones trial P wrote wrong models from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_helpers import DISTILBERT, listing
from onnx import TensorProto, helper, numpy_helper

from ge.pyatc import main

pytestmark = pytest.mark.builtin_passes

MOBILENET = DISTILBERT.with_name("mobilenet_like.onnx")
OPSET = [helper.make_opsetid("", 17)]


def _dims(value: onnx.ValueInfoProto) -> list[object]:
    return [d.dim_param or (d.dim_value if d.HasField("dim_value") else "?")
            for d in value.type.tensor_type.shape.dim]


def _feeds(session: ort.InferenceSession, batch: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    feeds = {}
    for arg in session.get_inputs():
        shape = [batch if i == 0 else d
                 for i, d in enumerate(arg.shape)]
        feeds[arg.name] = (np.array(True) if arg.type == "tensor(bool)"
                           else rng.standard_normal(shape).astype(np.float32))
    return feeds


def _runs_like_the_original(compiled: Path, original: Path, batch: int, axis: int = 0) -> None:
    """The compiled model on a batch of `batch` gives the original's outputs on each sample
    (which the original takes at its declared batch of one), stacked on `axis`."""
    session = ort.InferenceSession(str(compiled), providers=["CPUExecutionProvider"])
    reference = ort.InferenceSession(str(original), providers=["CPUExecutionProvider"])
    feeds = _feeds(session, batch)
    got = session.run(None, feeds)
    samples = [reference.run(None, {k: v[i:i + 1] if v.ndim else v for k, v in feeds.items()})
               for i in range(batch)]
    for k, value in enumerate(got):
        want = np.concatenate([sample[k] for sample in samples], axis=axis)
        np.testing.assert_allclose(value, want, rtol=1e-5, atol=1e-6)


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    onnx.save(helper.make_model(graph, opset_imports=OPSET), path)
    return path


def test_a_static_batch_is_changed_as_atc_changes_it(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """The output is declared with the new batch, without the warning about the old
    declaration the flag made stale (refused before: trial A of stop 47)."""
    assert main(args=["--model", str(MOBILENET), "--output", str(tmp_path / "b4"),
                      "--input_shape", "input:4,3,32,32"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "wrote" in captured.out
    compiled = onnx.load(tmp_path / "b4.onnx")
    assert [_dims(v) for v in (*compiled.graph.input, *compiled.graph.output)] == [
        [4, 3, 32, 32], [4, 10]]
    _runs_like_the_original(tmp_path / "b4.onnx", MOBILENET, 4)


def test_minus_one_makes_a_static_dim_dynamic(tmp_path: Path,
                                              capsys: pytest.CaptureFixture) -> None:
    assert main(args=["--model", str(MOBILENET), "--output", str(tmp_path / "dyn"),
                      "--input_shape", "input:-1,3,32,32"]) == 0
    assert capsys.readouterr().err == ""
    compiled = onnx.load(tmp_path / "dyn.onnx")
    assert _dims(compiled.graph.input[0])[0] == "?"
    _runs_like_the_original(tmp_path / "dyn.onnx", MOBILENET, 3)


def test_another_static_dim_is_checked_by_running_the_model(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """An image size is no batch: nothing to compare sample by sample, so the compiled model
    is run once at the new shape (it runs: the classifier pools globally)."""
    assert main(args=["--model", str(MOBILENET), "--output", str(tmp_path / "big"),
                      "--input_shape", "input:1,3,64,64"]) == 0
    assert capsys.readouterr().err == ""
    compiled = onnx.load(tmp_path / "big.onnx")
    assert _dims(compiled.graph.input[0]) == [1, 3, 64, 64]


def _reshaped(path: Path, target: list[int]) -> Path:
    """x: float32[1, 2, 3] -> Reshape(x, target) -> Relu = o (a batch of one written into
    the target, as an export without dynamic axes writes `x.view(1, -1)`)."""
    shape = numpy_helper.from_array(np.array(target, np.int64), "target")
    return _save(helper.make_graph(
        [helper.make_node("Reshape", ["x", "target"], ["r"]),
         helper.make_node("Relu", ["r"], ["o"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3])],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [1, 6])],
        initializer=[shape]), path)


@pytest.mark.parametrize(("target", "said"), [
    # infers fine, runs, and flattens the batch of 4 into one row: the wrong model trial P
    # had written
    ([1, -1], "does not compute on a batch of 4 what the model computes on each sample: "
              "output 'o' has shape [1, 24] where each sample gives [1, 6]: "),
    # onnx's inference does not count elements: onnxruntime refuses to run it
    ([1, 6], "does not run with it: "),
])
def test_a_batch_written_into_the_model_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture, target: list[int], said: str) -> None:
    model = _reshaped(tmp_path / "in.onnx", target)
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out" / "m"),
                      "--input_shape", "x:4,2,3"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pyatc: [GE1701] --input_shape changed dim 0 of input 'x' from 1 to "
                          f"4, and the compiled model {said}")
    assert "it may compute with the shape it declares" in err
    assert listing(tmp_path) == ["in.onnx"]


def test_a_model_failing_to_compile_is_said_in_the_flags_terms(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A dynamo export writes its batch of one into constants; the compilation's own words
    (a pass's bug, an invalid model) would blame ge or the model for what the flag did."""
    model = DISTILBERT.with_name("distilbert_tiny_dynamo.onnx")
    assert main(args=["--model", str(model), "--output", str(tmp_path / "b4"),
                      "--input_shape", "input_ids:4,12;attention_mask:4,12"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "pyatc: [GE1701] --input_shape changed dim 0 of input 'input_ids' from 1 to 4; dim 0 "
        "of input 'attention_mask' from 1 to 4, and the model does not compile with it: it "
        "may compute with the shape it declares (")
    assert "(what failed: [GE1305] " in err
    assert "This is a bug in ge" not in err and "input model is invalid" not in err
    assert listing(tmp_path) == []


def test_if_branches_declaring_the_old_batch_are_inferred_anew(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Branches declaring `[1, 3]` outputs: refused as the model's fault, or (with -1)
    written declaring a batch of one, before (trial P)."""
    w = numpy_helper.from_array(np.eye(3, dtype=np.float32) * 2, "w")
    out = [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 3])]
    then = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["b"])], "then", [], out)
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["b"])], "other", [], out)
    model = _save(helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], initializer=[w]),
        tmp_path / "if.onnx")
    for shape, batch in (("x:4,3", 4), ("x:-1,3", 3)):
        assert main(args=["--model", str(model), "--output", str(tmp_path / "out"),
                          "--input_shape", shape]) == 0
        assert capsys.readouterr().err == ""
        compiled = onnx.load(tmp_path / "out.onnx")
        declared = _dims(compiled.graph.output[0])[0]
        assert declared == 4 if batch == 4 else not isinstance(declared, int)  # (a name)
        _runs_like_the_original(tmp_path / "out.onnx", model, batch)


def test_a_loop_scan_output_is_compared_on_its_batch_axis(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A Loop's scan output stacks its iterations first: the batch is its axis 1."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"]),
         helper.make_node("Sin", ["xc"], ["xo"]),
         helper.make_node("Identity", ["xo"], ["scan"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("xc", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("xo", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("scan", TensorProto.FLOAT, [1, 3])])
    trips = numpy_helper.from_array(np.array(3, np.int64), "n")
    model = _save(helper.make_graph(
        [helper.make_node("Loop", ["n", "", "x"], ["xf", "scans"], body=body)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
        [helper.make_tensor_value_info("xf", TensorProto.FLOAT, [1, 3]),
         helper.make_tensor_value_info("scans", TensorProto.FLOAT, [3, 1, 3])],
        initializer=[trips]), tmp_path / "loop.onnx")
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out"),
                      "--input_shape", "x:4,3"]) == 0
    assert capsys.readouterr().err == ""
    session = ort.InferenceSession(str(tmp_path / "out.onnx"),
                                   providers=["CPUExecutionProvider"])
    x = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    xf, scans = session.run(None, {"x": x})
    np.testing.assert_allclose(xf, np.sin(np.sin(np.sin(x))), rtol=1e-6)
    assert scans.shape == (3, 4, 3)


def _one_node(path: Path, node: onnx.NodeProto, x: list[int], y: list[int] | None,
              initializer: list[onnx.TensorProto] | None = None,
              x_type: int = TensorProto.FLOAT) -> Path:
    """A model of one node reading input x (float32 unless said) and writing output y."""
    out = (helper.make_tensor_value_info("y", TensorProto.FLOAT, y) if y is not None
           else helper.make_tensor_sequence_value_info("y", TensorProto.FLOAT, None))
    return _save(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", x_type, x)],
                                   [out], initializer=initializer or []), path)


def test_a_dim_made_dynamic_is_checked_at_another_size_than_it_had(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`-1` on a static batch of 2 was checked at 2, where a Reshape to [2, 12] runs: the
    model written failed at any other batch (lstm_tagger, trial Q)."""
    target = numpy_helper.from_array(np.array([2, 12], np.int64), "t")
    model = _one_node(tmp_path / "in.onnx", helper.make_node("Reshape", ["x", "t"], ["y"]),
                      [2, 3, 4], [2, 12], [target])
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out"),
                      "--input_shape", "x:-1,3,4"]) == 1
    assert "and the compiled model does not run with it: " in capsys.readouterr().err
    assert listing(tmp_path) == ["in.onnx"]


def test_a_reduction_over_the_batch_is_refused_in_its_own_words(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = _one_node(tmp_path / "in.onnx",
                      helper.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1),
                      [1, 4], [1, 4], [numpy_helper.from_array(np.array([0], np.int64), "axes")])
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out"),
                      "--input_shape", "x:8,4"]) == 1
    assert capsys.readouterr().err.endswith(
        "output 'y' has the shape of each sample's ([1, 4]) while the samples give it "
        "different values: the model computes across the batch (a reduction or a choice "
        "over dim 0)\n")
    assert listing(tmp_path) == ["in.onnx"]


def test_a_random_output_is_checked_for_its_shape(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture) -> None:
    """Its values are drawn at random, its shape is not: a Reshape to [1, -1] after a
    random term was written unchecked (trial Q)."""
    target = numpy_helper.from_array(np.array([1, -1], np.int64), "t")
    graph = helper.make_graph(
        [helper.make_node("RandomNormalLike", ["x"], ["noise"]),
         helper.make_node("Add", ["x", "noise"], ["sum"]),
         helper.make_node("Reshape", ["sum", "t"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12])], initializer=[target])
    model = _save(graph, tmp_path / "in.onnx")
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out"),
                      "--input_shape", "x:8,3,4"]) == 1
    assert "output 'y' has shape [1, 96] where each sample gives [1, 12]" in \
        capsys.readouterr().err
    assert listing(tmp_path) == ["in.onnx"]


def test_a_sequence_output_keeps_its_type(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Forgetting declared shapes declared the sequence a tensor: GE1701 (trial Q)."""
    model = _one_node(tmp_path / "in.onnx",
                      helper.make_node("SplitToSequence", ["x"], ["y"], axis=1, keepdims=0),
                      [1, 4], None)
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out"),
                      "--input_shape", "x:8,4"]) == 0
    assert capsys.readouterr().err == ""
    compiled = onnx.load(tmp_path / "out.onnx")
    assert compiled.graph.output[0].type.HasField("sequence_type")


def test_generated_inputs_the_model_does_not_take_leave_it_unchecked(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Token type ids into a table of 2 rows: the generated ids (0..3) are out of range for
    the original model too, so the check cannot tell; the model is written with a warning
    (it was a false GE1701 blaming the declared shape, trial Q)."""
    table = numpy_helper.from_array(np.ones((2, 3), np.float32), "table")
    model = _one_node(tmp_path / "in.onnx", helper.make_node("Gather", ["table", "x"], ["y"]),
                      [1, 6], [1, 6, 3], [table], x_type=TensorProto.INT64)
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out"),
                      "--input_shape", "x:8,6"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("pyatc: warning: --input_shape changed dim 0 of input 'x' from 1 to "
                          "8: the compiled model could not be checked: the model does not "
                          "run on generated inputs either (")
    assert listing(tmp_path) == ["in.onnx", "out.onnx"]


@pytest.mark.parametrize("io", ["float16", "float32"])
def test_a_float16_model_is_compared_at_its_precision(
        tmp_path: Path, capsys: pytest.CaptureFixture, io: str) -> None:
    """Trial W: a float16 Conv + BatchNormalization, folded, is one float16 step off the
    original at some elements (0.0156 at values near 16); --verify accepts it (float16 is
    held to its precision), and the re-batch check refused it with float32's tolerances;
    trial X: also when the model takes and gives float32, casting to float16 inside."""
    rng = np.random.default_rng(0)  # (a seed whose fold is a step off: 0.0156 before)
    channels = 8
    inits = [numpy_helper.from_array(a.astype(np.float16), n) for n, a in (
        ("w", rng.standard_normal((channels, 3, 3, 3)) * 0.5),
        ("sc", rng.random(channels) + 0.5), ("b", rng.standard_normal(channels)),
        ("m", rng.standard_normal(channels)), ("v", rng.random(channels) + 0.1))]
    nodes = [helper.make_node("Conv", ["x16", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "sc", "b", "m", "v"], ["y16"])]
    elem = TensorProto.FLOAT16 if io == "float16" else TensorProto.FLOAT
    if io == "float16":
        nodes[0].input[0], nodes[1].output[0] = "x", "y"
    else:
        nodes = [helper.make_node("Cast", ["x"], ["x16"], to=TensorProto.FLOAT16), *nodes,
                 helper.make_node("Cast", ["y16"], ["y"], to=TensorProto.FLOAT)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", elem, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", elem, [1, channels, 8, 8])], inits)
    source = _save(graph, tmp_path / "conv_bn16.onnx")
    assert main(args=["--model", str(source), "--output", str(tmp_path / "b4"),
                      "--input_shape", "x:4,3,8,8", "--log=null"]) == 0, capsys.readouterr()
    compiled = onnx.load(tmp_path / "b4.onnx")
    assert "BatchNormalization" not in [n.op_type for n in compiled.graph.node]  # (folded)
    session = ort.InferenceSession(str(tmp_path / "b4.onnx"), providers=["CPUExecutionProvider"])
    reference = ort.InferenceSession(str(source), providers=["CPUExecutionProvider"])
    x = rng.standard_normal((4, 3, 8, 8)).astype(np.float16 if io == "float16" else np.float32)
    got = session.run(None, {"x": x})[0]
    want = np.concatenate([reference.run(None, {"x": x[i:i + 1]})[0] for i in range(4)])
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=2 ** -10, atol=2 ** -10 * scale)


def test_a_model_that_never_compiles_is_told_so_not_blamed_on_the_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Trial X: a MatMul of [2, 3] by [4, 5] was said not to compile "with" --input_shape
    ("it may compute with the shape it declares"): it fails without the flag too, and that
    failure is the one said."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["a", "b"], ["y"], name="mm")], "g",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    source = _save(graph, tmp_path / "mm.onnx")
    assert main(args=["--model", str(source), "--output", str(tmp_path / "p"),
                      "--input_shape", "a:4,3"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pyatc: [GE1305] {source}: shape inference of graph 'g' failed: ")
    assert "--input_shape" not in err and err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mm.onnx"]
