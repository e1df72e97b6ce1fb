"""pyatc's error messages speak pyatc (no `ge compile` flag pyatc does not have), its
`--output` folders, and `--input_shape` changing static dims as atc does."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_helpers import DISTILBERT, listing
from onnx import TensorProto, helper

from ge.pyatc import main

pytestmark = pytest.mark.builtin_passes

MOBILENET = DISTILBERT.with_name("mobilenet_like.onnx")


def _dims(value: onnx.ValueInfoProto) -> list[object]:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def _model(path: Path, dims: list[object]) -> Path:
    """x: float32[dims] -> Relu = y."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, dims)])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_output_onto_the_model_names_no_ge_compile_flag(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    model = tmp_path / "m.onnx"
    shutil.copy(DISTILBERT, model)
    before = model.read_bytes()
    for output in (tmp_path / "m", model):  # a prefix, and the model's own name
        assert main(args=["--model", str(model), "--output", str(output)]) == 1
        err = capsys.readouterr().err
        assert err == (f"pyatc: [GE1104] cannot save to {model}: it is the model being "
                       f"compiled ({model}); pyatc never overwrites its input, give --output "
                       "another prefix\n")
        assert "--overwrite-input" not in err and "ge compile" not in err
    assert model.read_bytes() == before
    assert listing(tmp_path) == ["m.onnx"]


def test_the_missing_folders_of_the_output_are_made_once_compiled(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """As atc makes its output's folder (`--output=build/om/model` in a fresh checkout:
    refused before, trial A), pyatc makes every missing folder, after compiling."""
    prefix = tmp_path / "build" / "om" / "model"
    assert main(args=["--model", str(DISTILBERT), "--output", str(prefix)]) == 0
    assert f"wrote {prefix}.onnx" in capsys.readouterr().out
    assert listing(tmp_path) == ["build", "build/om", "build/om/model.onnx"]
    onnx.checker.check_model(str(prefix) + ".onnx", full_check=True)


def test_a_parent_step_is_read_as_mkdir_p_reads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """`new/x/../m` makes new and new/x and writes new/m.onnx (it was a FileExistsError
    traceback, after compiling: trial P)."""
    monkeypatch.chdir(tmp_path)
    assert main(args=["--model", str(DISTILBERT), "--output", "new/x/../m"]) == 0
    assert "wrote new/x/../m.onnx" in capsys.readouterr().out
    assert listing(tmp_path) == ["new", "new/m.onnx", "new/x"]


def test_a_folder_name_too_long_is_refused_before_compiling(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "out" / ("a" * 300) / "m.onnx"
    assert main(args=["--model", str(DISTILBERT), "--output", str(target)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"pyatc: [GE1104] cannot save to {target}: File name too long (")
    assert listing(tmp_path) == []


def test_no_folder_is_left_of_a_failed_run(tmp_path: Path,
                                           capsys: pytest.CaptureFixture) -> None:
    """A model refused before compiling makes no folder; one whose compiled model the
    checker refuses on saving (made after the folders) leaves none behind either."""
    (tmp_path / "models").mkdir()
    models = _bad_models(tmp_path / "models")
    for model in models.values():
        assert main(args=["--model", str(model), "--output",
                          str(tmp_path / "build" / "om" / "model")]) == 1
        assert "pyatc: [GE1003]" in capsys.readouterr().err
    assert listing(tmp_path) == ["models", "models/bogus.onnx", "models/unshaped.onnx"]


def test_a_folder_that_cannot_be_made_is_refused_before_compiling(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "notes.txt").write_text("a file")
    target = tmp_path / "notes.txt" / "om" / "model.onnx"
    assert main(args=["--model", str(DISTILBERT), "--output", str(target)]) == 1
    assert capsys.readouterr().err == (
        f"pyatc: [GE1104] cannot save to {target}: {tmp_path / 'notes.txt'} is not a folder\n")
    assert listing(tmp_path) == ["notes.txt"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write a read-only folder")
def test_a_folder_pyatc_may_not_write_in_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        target = locked / "om" / "model.onnx"
        assert main(args=["--model", str(DISTILBERT), "--output", str(target)]) == 1
        assert capsys.readouterr().err == (
            f"pyatc: [GE1104] cannot save to {target}: permission denied to make folder "
            f"{locked / 'om'}\n")
    finally:
        locked.chmod(0o700)
    assert listing(tmp_path) == ["locked"]


def _shared_symbol_model(path: Path) -> Path:
    """z = x + y, all three float32[N, 8] (one symbol N)."""
    typed = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", 8]) for n in "xyz"]
    graph = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "g", typed[:2],
                              typed[2:])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.parametrize("shape", ["x:4,8", "x:4,8;y:-1,8", "x:4,8;y:4,8"])
def test_a_named_dim_fixed_in_one_input_is_fixed_in_all(
        tmp_path: Path, capsys: pytest.CaptureFixture, shape: str) -> None:
    """y stayed declared ['N', 8] beside an x fixed to 4 (trial A of stop 47): a model a
    runtime then fed a y of another batch."""
    model = _shared_symbol_model(tmp_path / "in.onnx")
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out"),
                      "--input_shape", shape]) == 0
    assert capsys.readouterr().err == ""
    compiled = onnx.load(tmp_path / "out.onnx")
    assert [_dims(v) for v in (*compiled.graph.input, *compiled.graph.output)] == [[4, 8]] * 3
    session = ort.InferenceSession(str(tmp_path / "out.onnx"),
                                   providers=["CPUExecutionProvider"])
    x, y = np.ones((4, 8), np.float32), np.full((4, 8), 2, np.float32)
    np.testing.assert_array_equal(session.run(None, {"x": x, "y": y})[0], x + y)


def test_two_sizes_for_one_named_dim_are_refused(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture) -> None:
    model = _shared_symbol_model(tmp_path / "in.onnx")
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out"),
                      "--input_shape", "x:4,8;y:5,8"]) == 1
    assert capsys.readouterr().err == (
        "pyatc: [GE1701] --input_shape: dim 'N' is 4 in input 'x' and 5 in input 'y': the "
        "model declares one size by one name\n")
    assert listing(tmp_path) == ["in.onnx"]


@pytest.mark.parametrize(("prefix", "why", "example"), [
    ("out/", "ends with a path separator", "out/model"),  # wrote the hidden file out/.onnx
    ("absent/", "ends with a path separator", "absent/model"),
    ("out", "is an existing folder", "out/model"),
    ("", "names no file", "model"),  # wrote .onnx
    (".onnx", "names no file", "model"),
    ("out/.onnx", "names no file", "out/model"),
    (".", "names a folder", "./model"),
])
def test_an_output_prefix_naming_no_file_is_refused_before_any_work(
        prefix: str, why: str, example: str, tmp_path: Path, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Refused before the model is even read: a missing model is not what is reported."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    for model in (str(DISTILBERT), "missing.onnx"):
        assert main(args=[f"--model={model}", "--framework=5", f"--output={prefix}"]) == 1
        assert capsys.readouterr().err == (
            f"pyatc: [GE1701] --output={prefix} {why}: pyatc writes the compiled model to "
            f"PREFIX.onnx; give a file prefix such as {example} (writes {example}.onnx)\n")
    assert listing(tmp_path) == ["out"]


def test_a_file_prefix_in_a_folder_is_written(tmp_path: Path, capsys: pytest.CaptureFixture,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out").mkdir()
    assert main(args=[f"--model={DISTILBERT}", "--output=out/model"]) == 0
    assert "wrote out/model.onnx" in capsys.readouterr().out
    assert listing(tmp_path) == ["out", "out/model.onnx"]


def _bad_models(folder: Path) -> dict[str, Path]:
    """Two models with a problem of their own that the compiled model keeps: a Relu with an
    attribute Relu does not define (the final validation's GE1003), and a graph output
    typed without a shape (onnx's full checker refuses it when saving, GE1003 too)."""
    bogus = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu", bogus=3)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    unshaped = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    paths = {"validation": folder / "bogus.onnx", "checker": folder / "unshaped.onnx"}
    for graph, path in ((bogus, paths["validation"]), (unshaped, paths["checker"])):
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return paths


@pytest.mark.parametrize(("which", "start", "note"), [
    # (onnx's checker refuses the node itself: the model is refused before any pass)
    ("validation", "{model}: graph is invalid (1 problem(s)): ",
     "graph g: attribute: Relu node 'relu' has attribute 'bogus', which Relu (opset 17) "
     "does not define; ONNX runtimes reject it\n"),
    ("checker", "graph is invalid (1 problem(s)): ",
     "(the input model {model} fails this check too: it is not the compilation's doing)"),
])
def test_an_input_models_own_problem_is_said_to_be_the_inputs_as_ge_compile_says(
        tmp_path: Path, capsys: pytest.CaptureFixture, which: str, start: str, note: str
        ) -> None:
    """pyatc's GE1003 says the input model has the problem as ge compile says it (the
    checker's note was missing: pyatc compiles the Graph it loaded, which named no file)."""
    from click.testing import CliRunner

    from ge.cli import cli

    model = _bad_models(tmp_path)[which]
    assert main(args=["--model", str(model), "--output", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("pyatc: [GE1003] " + start.format(model=model))
    assert note.format(model=model.resolve()) in err
    ours, theirs = str(tmp_path / "out.onnx"), str(tmp_path / "ge.onnx")
    compiled = CliRunner().invoke(cli, ["compile", str(model), "-o", theirs])
    assert compiled.stderr.removeprefix("ge: ") == \
        err.removeprefix("pyatc: ").replace(ours, theirs)  # the same words
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bogus.onnx", "unshaped.onnx"]
