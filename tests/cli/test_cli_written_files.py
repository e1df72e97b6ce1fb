"""The files `ge compile -o OUT` writes and names (trial VV): through a symbolic link, the
file it names and the data file beside that file; a data file that cannot be written
refused before any work; a data file an earlier run left and this one does not write
named, not deleted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from cli_helpers import run_ge
from onnx import TensorProto, helper


def _matmul_model(seed: int) -> onnx.ModelProto:
    """y = x @ w, w a 32x32 float tensor (4 KiB: over the external data threshold) drawn
    from `seed`, so that two models differ only in their weights."""
    w = np.random.default_rng(seed).standard_normal((32, 32)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32])],
        [onnx.numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _weights(seed: int) -> np.ndarray:
    return onnx.numpy_helper.to_array(_matmul_model(seed).graph.initializer[0])


def _run_file(path: Path) -> np.ndarray:
    """y of onnxruntime's session of the model file `path` (its data file read from
    beside it), for x = 1..32."""
    x = np.arange(1, 33, dtype=np.float32).reshape(1, 32)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(["y"], {"x": x})[0]


def _expected(seed: int) -> np.ndarray:
    return np.arange(1, 33, dtype=np.float32).reshape(1, 32) @ _weights(seed)


def _location(path: Path) -> str:
    (tensor,) = onnx.load(path, load_external_data=False).graph.initializer
    return {entry.key: entry.value for entry in tensor.external_data}["location"]


def test_a_link_as_out_gets_its_data_file_beside_the_file_it_names(tmp_path: Path) -> None:
    """`-o symout/current.onnx` linking to `v1/model.onnx`: the model goes to the file the
    link names, its data file beside it named after it (`v1/model.onnx.data`), which the
    model refers to, and the `wrote` line says so. ge once wrote `current.onnx.data` beside
    the link and the model referred to that: onnxruntime and ge refused the real file."""
    model = tmp_path / "small.onnx"
    onnx.save(_matmul_model(1), model)
    (tmp_path / "symout" / "v1").mkdir(parents=True)
    (tmp_path / "symout" / "v1" / "model.onnx").touch()
    link = tmp_path / "symout" / "current.onnx"
    link.symlink_to(Path("v1") / "model.onnx")
    real = (tmp_path / "symout" / "v1" / "model.onnx").resolve()

    code, stdout, stderr = run_ge("compile", str(model), "-o", str(link), "-q",
                                  "--external-data")
    assert code == 0, stderr
    assert " ".join(stdout.split()).endswith(
        f"wrote {real}, the file {link} links to (its weights in {real}.data)")
    assert sorted(p.name for p in link.parent.iterdir()) == ["current.onnx", "v1"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    assert os.readlink(link) == os.path.join("v1", "model.onnx")  # the link stays
    assert _location(real) == "model.onnx.data"
    np.testing.assert_allclose(_run_file(real), _expected(1), rtol=1e-5)
    # onnxruntime, onnx and ge look for the data beside the path given: a warning says so
    assert stderr.strip() == (
        f"ge: warning: {link} links to a file in another folder; its weights went beside "
        f"that file ({real}.data), where the model refers to them, but onnx, onnxruntime and "
        f"ge look for them beside the path they are given: open {real}, not the link")

    code, stdout, stderr = run_ge("compile", str(model), "-o", str(link), "--external-data",
                                  "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["output_data"] == f"{real}.data"


def test_a_re_pointed_link_leaves_the_previous_version_its_own_weights(
        tmp_path: Path) -> None:
    """A deploy folder where `current.onnx` links to the live version: compiled through the
    link, re-pointed, compiled again. The first version keeps reading its own weights (ge
    once wrote both versions' weights to `current.onnx.data`, so the rollback model read
    the new weights)."""
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(_matmul_model(1), a)
    onnx.save(_matmul_model(2), b)
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    current = deploy / "current.onnx"
    (deploy / "model_v1.onnx").touch()
    current.symlink_to("model_v1.onnx")
    assert run_ge("compile", str(a), "-o", str(current), "-q", "--external-data")[0] == 0
    current.unlink()
    current.symlink_to("model_v2.onnx")
    (deploy / "model_v2.onnx").touch()
    assert run_ge("compile", str(b), "-o", str(current), "-q", "--external-data")[0] == 0

    assert sorted(p.name for p in deploy.iterdir()) == [
        "current.onnx", "model_v1.onnx", "model_v1.onnx.data", "model_v2.onnx",
        "model_v2.onnx.data"]
    np.testing.assert_allclose(_run_file(deploy / "model_v1.onnx"), _expected(1), rtol=1e-5)
    np.testing.assert_allclose(_run_file(deploy / "model_v2.onnx"), _expected(2), rtol=1e-5)


def test_a_report_may_not_replace_the_data_file_of_the_file_a_link_names(
        tmp_path: Path) -> None:
    """OUT a link: the data file a report or page must not replace is the one beside the
    file it names (refused before compiling), and one named after the link is free."""
    model = tmp_path / "small.onnx"
    onnx.save(_matmul_model(1), model)
    (tmp_path / "v1").mkdir()
    (tmp_path / "v1" / "model.onnx").touch()
    link = tmp_path / "current.onnx"
    link.symlink_to(Path("v1") / "model.onnx")
    taken = tmp_path / "v1" / "model.onnx.data"
    code, _, stderr = run_ge("compile", str(model), "-o", str(link), "--report", str(taken))
    assert code == 1
    assert stderr.strip() == (f"ge: [GE1701] cannot write the report to {taken}: it is the "
                              "output model's external data file")
    assert not taken.exists()
    free = tmp_path / "current.onnx.data"
    code, _, stderr = run_ge("compile", str(model), "-o", str(link), "--report", str(free))
    assert code == 0, stderr
    assert json.loads(free.read_text())["output"] == str(link)


def test_a_data_file_that_is_a_folder_is_refused_before_any_work(tmp_path: Path) -> None:
    """`OUT.data` a folder and `--external-data`: refused at once, naming the folder (ge
    once compiled the whole model, then failed with 'Not a directory'). MODEL is not even
    read: a file that is no model gets the same error."""
    folder = tmp_path / "dd"
    (folder / "out.onnx.data").mkdir(parents=True)
    not_a_model = tmp_path / "garbage.onnx"
    not_a_model.write_bytes(b"not a model")
    out = folder / "out.onnx"
    for model in (not_a_model, tmp_path / "missing.onnx"):
        code, stdout, stderr = run_ge("compile", str(model), "-o", str(out),
                                      "--external-data")
        assert (code, stdout) == (1, "")
        assert stderr.strip() == (
            f"ge: [GE1104] cannot save to {out}: its external data file {out}.data is a "
            "folder; remove or rename it, or save elsewhere")
    assert sorted(p.name for p in folder.iterdir()) == ["out.onnx.data"]
    assert list((folder / "out.onnx.data").iterdir()) == []
    # without --external-data the small model is written inline: no data file, no error
    model = tmp_path / "small.onnx"
    onnx.save(_matmul_model(1), model)
    code, _, stderr = run_ge("compile", str(model), "-o", str(out), "-q")
    assert code == 0, stderr
    assert sorted(p.name for p in folder.iterdir()) == ["out.onnx", "out.onnx.data"]


def test_a_data_file_the_model_written_does_not_read_is_named(tmp_path: Path) -> None:
    """Recompiling to OUT without --external-data left the previous run's `OUT.data`
    beside it without a word (it would ship with the folder, unread): a warning names it,
    and it stays (another model may read it). Not when the model reads it."""
    model = tmp_path / "small.onnx"
    onnx.save(_matmul_model(1), model)
    out = tmp_path / "out.onnx"
    code, _, stderr = run_ge("compile", str(model), "-o", str(out), "-q", "--external-data")
    assert (code, stderr) == (0, "")
    previous = (tmp_path / "out.onnx.data").read_bytes()
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(out), "-q")
    assert code == 0
    assert " ".join(stdout.split()).endswith(f"wrote {out}")
    assert stderr == (
        f"ge: warning: {out}.data is not read by the model written, {out} (its weights are "
        "inside it), and ge left it as it was (an earlier save with external data wrote it, "
        "or another program did); delete it if no other model reads it\n")
    assert (tmp_path / "out.onnx.data").read_bytes() == previous
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--json")
    assert [w["message"] for w in json.loads(stdout)["warnings"]] == [
        stderr.removeprefix("ge: warning: ").strip()]
    code, _, stderr = run_ge("compile", str(model), "-o", str(out), "-q", "--external-data")
    assert (code, stderr) == (0, "")  # (read again: nothing to say)
