"""A model that declares what ONNX does not define is refused when it is loaded, by every
command alike, with one GE1101 line naming the file and the value, tensor, node or attribute
(trial Q): an input or output of element type 99 (`ge inspect` and `--verify` printed a
ValueError traceback, compile and pyatc a GE1305, `ge diff` exited 0), an initializer of
element type 99 (a KeyError traceback, or "unknown ONNX element type 99" naming nothing), an
input dim of -5 (numpy's "negative dimensions are not allowed", "Incompatible dimensions",
`ge run` exiting 0), an op type that is not UTF-8 text (`ge inspect` crashed), an attribute
of type UNDEFINED and an initializer marked EXTERNAL without a location (both blamed on a
built-in pass, "This is a bug in ge"). Nothing is written."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import onnx
import pytest
from cli_helpers import listing, run_ge
from onnx import TensorProto as TP
from onnx import helper as oh

import ge.graph
from ge.errors import ModelLoadError, ModelSaveError
from ge.pyatc import main as pyatc_main
from sample_models import add_relu_neg_model

ONNX = f"onnx {onnx.__version__}"
TENSOR_TAIL = (": the model is malformed (a damaged file, or an exporter that wrote the tensor "
               "wrong)")


def _input_type_99(m: onnx.ModelProto) -> None:
    m.graph.input[0].type.tensor_type.elem_type = 99


def _output_type_99(m: onnx.ModelProto) -> None:
    m.graph.output[0].type.tensor_type.elem_type = 99


def _initializer_type_99(m: onnx.ModelProto) -> None:
    m.graph.initializer[0].data_type = 99


def _negative_dim(m: onnx.ModelProto) -> None:
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -5


def _minus_one_dim(m: onnx.ModelProto) -> None:
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_value = -1


def _undefined_attribute(m: onnx.ModelProto) -> None:
    concat = oh.make_node("Concat", ["y", "y"], ["c"], name="cat", axis=0)
    concat.attribute[0].type = onnx.AttributeProto.UNDEFINED
    m.graph.node.append(concat)
    m.graph.output.append(oh.make_tensor_value_info("c", TP.FLOAT, [4, 3]))


def _external_without_location(m: onnx.ModelProto) -> None:
    m.graph.initializer[0].data_location = TP.EXTERNAL  # (its raw_data kept)


# (each bad UTF-8 field: the field set to a marker, replaced by bytes that are not UTF-8)
_MARK, _BAD = b"QQQZ", b"QQ\xf5Z"


def _graph_doc(m: onnx.ModelProto) -> None:
    m.graph.doc_string = _MARK.decode()


def _input_doc(m: onnx.ModelProto) -> None:
    m.graph.input[0].doc_string = _MARK.decode()


def _dim_param(m: onnx.ModelProto) -> None:
    m.graph.input[0].type.tensor_type.shape.dim[0].dim_param = _MARK.decode()


def _annotation(m: onnx.ModelProto) -> None:
    m.graph.quantization_annotation.add().tensor_name = _MARK.decode()


def _output_name(m: onnx.ModelProto) -> None:
    m.graph.output[0].name = m.graph.node[1].output[0] = _MARK.decode()


CORRUPT = f"is not valid UTF-8 text ({_BAD!r}); the model file is corrupt"
DIM = ("dim 0 of {} (shape [{}, 3]): a dim cannot be negative; declare an unknown dim by a "
       "name (dim_param) or by no value")
CASES: dict[str, tuple[Callable[[onnx.ModelProto], None], str]] = {
    "input type 99": (_input_type_99, "graph 'g': input 'x' is declared with element type "
                                      f"99, which ONNX ({ONNX}) does not define"),
    "output type 99": (_output_type_99, "graph 'g': output 'y' is declared with element "
                                        f"type 99, which ONNX ({ONNX}) does not define"),
    "initializer type 99": (_initializer_type_99, "graph 'g': initializer 'W' has element "
                            f"type 99, which ONNX ({ONNX}) does not define{TENSOR_TAIL}"),
    "dim -5": (_negative_dim, "graph 'g': input 'x' is declared with " + DIM.format(-5, -5)),
    "attribute UNDEFINED": (_undefined_attribute, "graph 'g': Concat node 'cat': attribute "
                            "'axis' is declared with type UNDEFINED (0): an attribute's type "
                            "says which field holds its value (onnx's checker and onnxruntime "
                            "refuse it: \"type field and data field mismatch\")"),
    "EXTERNAL without location": (_external_without_location, "graph 'g': initializer 'W' is "
                                  "marked as stored in an external data file but names none "
                                  f"(no 'location' entry){TENSOR_TAIL}"),
    "op type not UTF-8": (lambda m: None, f"graph 'g': a node's op type {CORRUPT}"
                          .replace(repr(_BAD), repr(b"Rel\xf5"))),
    "graph doc string": (_graph_doc, f"graph 'g': the graph's doc string {CORRUPT}"),
    "input doc string": (_input_doc, f"graph 'g': the doc string of input 'x' {CORRUPT}"),
    "dim_param": (_dim_param, "graph 'g': input 'x' is declared with dim 0 named by bytes "
                              f"that are not UTF-8 text ({_BAD!r}); the model file is corrupt"),
    "annotation": (_annotation, "graph 'g': a value named by a quantization annotation "
                                + CORRUPT),
    "output name": (_output_name, f"graph 'g': the name of output 0 {CORRUPT}"),
}


def _write(case: str, folder: Path) -> Path:
    change, _ = CASES[case]
    model = add_relu_neg_model()
    change(model)
    data = model.SerializeToString()
    if case == "op type not UTF-8":
        data = data.replace(b"Relu", b"Rel\xf5")
    data = data.replace(_MARK, _BAD)
    path = folder / "m.onnx"
    path.write_bytes(data)
    return path


@pytest.fixture(params=list(CASES))
def case(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("command", ["inspect", "compile", "compile --verify=final", "run",
                                     "diff", "dump"])
def test_every_command_refuses_it_at_load(case: str, command: str, tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    path = _write(case, models)
    message = CASES[case][1]
    args = [*command.split(), str(path)]
    if command.startswith("compile"):
        args += ["-o", str(tmp_path / "out.onnx")]
    if command == "diff":
        args.append(str(path))
    before = listing(tmp_path)
    exit_code, _, stderr = run_ge(*args)
    assert (exit_code, stderr) == (1, f"ge: [GE1101] {path}: {message}\n")
    if command != "dump":  # (no --json)
        exit_code, stdout, _ = run_ge(*args, "--json")
        error = json.loads(stdout)
        assert (exit_code, error["code"], error["message"], error["path"]) == (
            1, "GE1101", f"{path}: {message}", str(path))
    assert listing(tmp_path) == before


def test_pyatc_and_load_say_the_same(case: str, tmp_path: Path,
                                     capsys: pytest.CaptureFixture) -> None:
    path = _write(case, tmp_path)
    message = CASES[case][1]
    before = listing(tmp_path)
    assert pyatc_main("pyatc", [f"--model={path}", f"--output={tmp_path / 'out'}"]) == 1
    assert capsys.readouterr().err == f"pyatc: [GE1101] {path}: {message}\n"
    with pytest.raises(ModelLoadError) as info:
        ge.graph.load(path)
    assert type(info.value) is ModelLoadError
    assert (info.value.code, info.value.message, info.value.path) == (
        "GE1101", f"{path}: {message}", str(path))
    assert listing(tmp_path) == before


def test_a_value_info_of_an_unknown_element_type(tmp_path: Path) -> None:
    """onnxruntime refuses it; its dims are not checked (inference replaces them)."""
    model = add_relu_neg_model()
    model.graph.value_info.append(oh.make_tensor_value_info("a", 99, [2, 3]))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelLoadError) as info:
        ge.graph.load(path)
    assert info.value.message == (f"{path}: graph 'g': value_info 'a' is declared with element "
                                  f"type 99, which ONNX ({ONNX}) does not define")
    model = add_relu_neg_model()
    model.graph.value_info.append(oh.make_tensor_value_info("a", TP.FLOAT, [-1, 3]))
    ge.graph.load(model)  # (accepted)


LONG = "a" * 300


@pytest.mark.parametrize(("args", "code", "message"), [
    (["compile", "{model}", "-o", f"{LONG}.onnx"], "GE1104",
     f"cannot save to {LONG}.onnx: File name too long"),
    (["compile", "{model}", "-o", "out.onnx", "--report", f"{LONG}.json"], "GE1701",
     f"cannot write the report to {LONG}.json: File name too long"),
    (["compile", f"{LONG}.onnx", "-o", "out.onnx"], "GE1101",
     f"cannot read {LONG}.onnx: File name too long"),
    (["inspect", f"{LONG}.onnx"], "GE1101", f"cannot read {LONG}.onnx: File name too long"),
    (["run", "{model}", "--output", f"{LONG}.npz"], "GE1701",
     f"cannot write the outputs to {LONG}.npz: File name too long"),
    (["run", "{model}", "--inputs", f"{LONG}.npz"], "GE1602",
     f"cannot read inputs from {LONG}.npz: [Errno 36] File name too long: '{LONG}.npz'"),
], ids=["-o", "--report", "model", "inspect", "run --output", "run --inputs"])
def test_a_file_name_too_long(args: list[str], code: str, message: str, tmp_path: Path,
                              monkeypatch: pytest.MonkeyPatch) -> None:
    """One coded line, before any work (an OSError traceback from pathlib's stat)."""
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "m.onnx"
    onnx.save(add_relu_neg_model(), model)
    before = listing(tmp_path)
    exit_code, _, stderr = run_ge(*(a.replace("{model}", str(model)) for a in args))
    assert (exit_code, stderr) == (1, f"ge: [{code}] {message}\n")
    assert listing(tmp_path) == before


def test_a_pass_path_too_long(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "m.onnx"
    onnx.save(add_relu_neg_model(), model)
    exit_code, _, stderr = run_ge("compile", str(model), "-o", "out.onnx",
                                  "--pass-path", f"{LONG}.py")
    assert (exit_code, stderr) == (1, f"ge: [E13029] python pass path cannot be read: "
                                      f"{tmp_path / LONG}.py: File name too long (given as a "
                                      "pass path: --pass-path or pass_paths=)\n")
    assert listing(tmp_path) == ["m.onnx"]


def test_pyatc_output_too_long(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture) -> None:
    monkeypatch.chdir(tmp_path)
    onnx.save(add_relu_neg_model(), tmp_path / "m.onnx")
    assert pyatc_main("pyatc", ["--model=m.onnx", f"--output={LONG}"]) == 1
    assert capsys.readouterr().err == (f"pyatc: [GE1104] cannot save to {LONG}.onnx: File "
                                       "name too long\n")
    with pytest.raises(ModelSaveError):
        ge.graph.load(tmp_path / "m.onnx").save(tmp_path / f"{LONG}.onnx")
    assert listing(tmp_path) == ["m.onnx"]


def test_no_opset_of_the_default_domain(tmp_path: Path) -> None:
    """onnx's "No opset import for domain  optype Add" names the empty domain."""
    model = add_relu_neg_model()
    del model.opset_import[:]
    model.opset_import.append(oh.make_opsetid("com.x", 1))
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    exit_code, _, stderr = run_ge("compile", str(path), "-o", str(tmp_path / "out.onnx"))
    assert exit_code == 1
    assert ("No opset import for domain '' (the default ONNX domain), op type Add "
            "(stage InferShape)\n") in stderr
    assert listing(tmp_path) == ["m.onnx"]


def test_a_dim_of_minus_one_is_an_unknown_dim(tmp_path: Path) -> None:
    """-1, which exporters write for an unknown dim and onnxruntime reads so, is not refused
    as -5 is: `ge run` and `ge inspect` take the model (generated inputs give the dim a
    size: numpy refused -1 with a traceback before); compiling it is onnx's shape
    inference's refusal, one line, with and without --verify."""
    model = add_relu_neg_model()
    _minus_one_dim(model)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    assert run_ge("inspect", str(path))[0] == 0
    exit_code, stdout, stderr = run_ge("run", str(path), "--json")
    assert exit_code == 0, stderr
    assert json.loads(stdout)["outputs"]["y"]["shape"][1] == 3
    for verify in ([], ["--verify"]):
        exit_code, _, stderr = run_ge("compile", str(path), "-o", str(tmp_path / "o.onnx"),
                                      *verify)
        assert exit_code == 1 and stderr.startswith("ge: [GE1305]"), stderr
        assert "Incompatible dimensions" in stderr and "Traceback" not in stderr
    assert listing(tmp_path) == ["m.onnx"]
