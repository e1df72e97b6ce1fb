"""Every error about the model a command was given names its file, in the message and as
the `--json` error's "path", as a truncated or missing file's does (trial QQ: in a batch's
log, "graph 'g': ..." did not say which model failed): a value nothing produces (GE1101),
an operator ONNX does not have (GE1305), a tensor whose data disagrees with its dims
(GE1101, before any pass: it was blamed on NoOpElimination as "a bug in ge", E13028), in
`ge compile` (with and without --verify), `ge run`, `ge inspect`, `ge diff`, `ge dump`,
`pyatc` and `ge.compile(path)`; not for a model given as a proto or a Graph. Nothing is
written."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from cli_helpers import RELU_NEG, listing, run_ge
from onnx import TensorProto as TP
from onnx import helper as oh

import ge
import ge.graph
from ge.errors import ModelLoadError, PassRunError, ShapeInferenceError
from ge.pyatc import main as pyatc_main

MALFORMED = ("graph 'g': initializer 'c' holds 8 bytes of raw_data, but its dims [4] of FLOAT "
             "need 16 (4 elements of 4 bytes): the model is malformed (a damaged file, or an "
             "exporter that wrote the tensor wrong)")
# (the nodes have no name: said by what finds them in the model, ge.graph.places)
DANGLING = ("graph 'g': input 0 of unnamed Relu node (index 0 in the node list, computing 'y') "
            "reads 'zz', which no node, graph input or initializer produces")
UNKNOWN = ("graph 'g': unnamed Frobnicate node (computing 'y'): ONNX has no operator Frobnicate "
           "in domain "
           f"'ai.onnx' (onnx {onnx.__version__}); onnx.checker and runtimes reject the model (a "
           "custom operator needs a domain of its own)")


def _save(graph: onnx.GraphProto, path: Path) -> Path:
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), path)
    return path


def _io(name: str) -> onnx.ValueInfoProto:
    return oh.make_tensor_value_info(name, TP.FLOAT, [4])


def malformed(folder: Path) -> Path:
    """The trial's model: a float initializer of dims [4] whose raw_data has 8 bytes."""
    c = TP(name="c", data_type=TP.FLOAT, dims=[4], raw_data=b"\0" * 8)
    return _save(oh.make_graph([oh.make_node("Add", ["x", "c"], ["y"])], "g", [_io("x")],
                               [_io("y")], [c]), folder / "rawdata_short.onnx")


def dangling(folder: Path) -> Path:
    return _save(oh.make_graph([oh.make_node("Relu", ["zz"], ["y"])], "g", [_io("x")],
                               [_io("y")]), folder / "dangling.onnx")


def unknown_op(folder: Path) -> Path:
    return _save(oh.make_graph([oh.make_node("Frobnicate", ["x"], ["y"])], "g", [_io("x")],
                               [_io("y")]), folder / "unknown_op.onnx")


@pytest.fixture
def models(tmp_path: Path) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    for make in (malformed, dangling, unknown_op):
        make(folder)
    return folder


def _fails(args: list[str], code: str, message: str, folder: Path, path: Path) -> None:
    """`ge ARGS` fails with one line `ge: [CODE] PATH: MESSAGE`, and with --json the same
    message with "path" PATH; nothing in `folder` changes."""
    before = listing(folder)
    exit_code, _, stderr = run_ge(*args)
    assert (exit_code, stderr) == (1, f"ge: [{code}] {path}: {message}\n")
    exit_code, stdout, _ = run_ge(*args, "--json")
    error = json.loads(stdout)
    assert exit_code == 1
    assert (error["code"], error["message"], error["path"]) == (code, f"{path}: {message}",
                                                                str(path))
    assert listing(folder) == before


@pytest.mark.parametrize("command", ["compile", "compile --verify=final", "run", "diff",
                                     "dump"])
@pytest.mark.parametrize(("make", "message"), [(malformed, MALFORMED), (dangling, DANGLING)],
                         ids=["malformed tensor", "dangling input"])
def test_a_model_ge_refuses_to_load(command: str, make, message: str, models: Path,
                                    tmp_path: Path) -> None:
    path = make(models)
    args = [*command.split(), str(path)]
    if command.startswith("compile"):
        args += ["-o", str(tmp_path / "out.onnx")]
    if command == "diff":
        args.append(str(path))
    if command == "dump":  # (no --json: text)
        before = listing(tmp_path)
        assert run_ge(*args)[::2] == (1, f"ge: [GE1101] {path}: {message}\n")
        assert listing(tmp_path) == before
        return
    _fails(args, "GE1101", message, tmp_path, path)


def test_inspect_refuses_a_malformed_tensor(models: Path) -> None:
    """`ge inspect` reads no graph, but says of the tensor what loading says."""
    path = malformed(models)
    _fails(["inspect", str(path)], "GE1101", MALFORMED, models, path)
    assert run_ge("inspect", str(dangling(models)))[0] == 0  # (it checks no edges)


@pytest.mark.parametrize("verify", [False, True], ids=["compile", "compile --verify"])
def test_an_operator_onnx_does_not_have(verify: bool, models: Path, tmp_path: Path) -> None:
    path = unknown_op(models)
    args = ["compile", str(path), "-o", str(tmp_path / "out.onnx"),
            *(["--verify=final"] * verify)]
    before = listing(tmp_path)
    exit_code, _, stderr = run_ge(*args)
    assert (exit_code, stderr) == (1, f"ge: [GE1305] {path}: {UNKNOWN} (stage InferShape)\n")
    error = json.loads(run_ge(*args, "--json")[1])
    assert (error["code"], error["path"], error["stage"]) == ("GE1305", str(path), "InferShape")
    assert listing(tmp_path) == before


def test_run_names_the_model_onnxruntime_refuses(models: Path) -> None:
    path = unknown_op(models)
    exit_code, _, stderr = run_ge("run", str(path))
    assert exit_code == 1 and stderr.startswith(f"ge: [GE1601] {path}: onnxruntime cannot ")
    assert json.loads(run_ge("run", str(path), "--json")[1])["path"] == str(path)


@pytest.mark.parametrize(("make", "code", "message"), [
    (malformed, "GE1101", MALFORMED), (dangling, "GE1101", DANGLING),
    (unknown_op, "GE1305", f"{UNKNOWN} (stage InferShape)")], ids=["malformed", "dangling",
                                                                   "unknown op"])
def test_pyatc(make, code: str, message: str, models: Path, tmp_path: Path,
               capsys: pytest.CaptureFixture) -> None:
    path = make(models)
    before = listing(tmp_path)
    assert pyatc_main("pyatc", ["--framework=5", f"--model={path}",
                                f"--output={tmp_path / 'out'}"]) == 1
    assert capsys.readouterr().err == f"pyatc: [{code}] {path}: {message}\n"
    assert listing(tmp_path) == before


@pytest.mark.parametrize(("make", "kind", "message"), [
    (malformed, ModelLoadError, MALFORMED), (dangling, ModelLoadError, DANGLING),
    (unknown_op, ShapeInferenceError, UNKNOWN)], ids=["malformed", "dangling", "unknown op"])
@pytest.mark.parametrize("verify", [False, True], ids=["", "verify"])
def test_ge_compile_names_the_path_it_was_given(make, kind: type, message: str, verify: bool,
                                                models: Path) -> None:
    """A path: its errors name it (message and `path`). A proto, or a Graph (even one loaded
    from that file: it may no longer hold what the file does), names none."""
    path = make(models)
    before = listing(models)
    with pytest.raises(kind) as info:
        ge.compile(path, verify=verify)
    assert type(info.value) is kind
    assert (info.value.message, info.value.path) == (f"{path}: {message}", str(path))
    with pytest.raises(kind) as info:
        ge.compile(str(path), verify=verify)
    assert info.value.path == str(path)
    proto = onnx.load(path)
    with pytest.raises(kind) as info:
        ge.compile(proto, verify=verify)
    assert (info.value.message, info.value.path) == (message, None)
    if make is unknown_op:  # (the others do not load)
        with pytest.raises(kind) as info:
            ge.compile(ge.graph.load(path), verify=verify)
        assert (info.value.message, info.value.path) == (message, None)
    assert listing(models) == before


def test_an_error_about_a_pass_names_no_model(models: Path, tmp_path: Path) -> None:
    """What a pass got wrong is not the model's: a plugin raising names its own file (the
    pass's), not the model."""
    model = tmp_path / "ok.onnx"
    _save(oh.make_graph([oh.make_node("Relu", ["x"], ["y"])], "g", [_io("x")], [_io("y")]),
          model)
    plugin = tmp_path / "raising.py"
    plugin.write_text(
        "from ge.passes import FusionBasePass, PassStage, register_fusion_pass\n\n\n"
        "@register_fusion_pass(name='Raising', stage=PassStage.BEFORE_INFER_SHAPE)\n"
        "class Raising(FusionBasePass):\n"
        "    def run(self, graph, context):\n"
        "        raise RuntimeError('boom')\n")
    with pytest.raises(PassRunError) as info:
        ge.compile(model, pass_paths=[plugin])
    assert str(model) not in info.value.message and info.value.path != str(model)



def test_passes_explain_names_a_model_the_converter_refuses(models: Path,
                                                            tmp_path: Path) -> None:
    """`ge passes explain --opset` converts MODEL as `ge compile` does, and names it alike
    when onnx's converter cannot (a LayerNormalization in a model importing opset 16)."""
    layer_norm = oh.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln")
    scale = oh.make_tensor("s", TP.FLOAT, [4], [1.0] * 4)
    bias = oh.make_tensor("b", TP.FLOAT, [4], [0.0] * 4)
    path = models / "ln16.onnx"
    onnx.save(oh.make_model(oh.make_graph([layer_norm], "ln", [_io("x")], [_io("y")],
                                          [scale, bias]),
                            opset_imports=[oh.make_opsetid("", 16)]), path)
    plugin = tmp_path / "relu_neg.py"
    plugin.write_text(RELU_NEG)
    explained = run_ge("passes", "explain", "ReluNeg", str(path), "--pass-path", str(plugin),
                       "--opset", "17")
    compiled = run_ge("compile", str(path), "-o", str(tmp_path / "out.onnx"), "--opset", "17")
    assert explained[0] == compiled[0] == 1
    assert explained[2] == compiled[2]
    assert explained[2].startswith(f"ge: [GE1203] {path}: opset 17: graph 'ln' imports opset "
                                   "16 but uses LayerNormalization")


def test_a_data_file_named_after_the_model_still_names_the_model(tmp_path: Path) -> None:
    """`model.onnx.data` (PyTorch's name for it) holds the model's path: the model was taken
    as named already and went unnamed (trial SS). Named unless its path stands alone."""
    import numpy as np

    weight = onnx.numpy_helper.from_array(np.arange(6, dtype=np.float32), "w")
    graph = oh.make_graph([oh.make_node("Add", ["x", "w"], ["y"])], "g",
                          [oh.make_tensor_value_info("x", TP.FLOAT, [6])],
                          [oh.make_tensor_value_info("y", TP.FLOAT, [6])], [weight])
    model = tmp_path / "model.onnx"
    onnx.save(oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)]), model,
              save_as_external_data=True, location="model.onnx.data", size_threshold=0)
    data = tmp_path / "model.onnx.data"
    data.write_bytes(data.read_bytes()[:10])  # (24 bytes needed)
    before = listing(tmp_path)
    code, _, err = run_ge("compile", str(model), "-o", str(tmp_path / "o.onnx"))
    assert code == 1 and err.startswith(f"ge: [GE1103] {model}: tensor 'w': "), err
    assert "model.onnx.data" in err and listing(tmp_path) == before
