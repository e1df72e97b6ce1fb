"""`ge run` (generated or given inputs, outputs shown or saved) and `ge inspect`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from cli_helpers import DISTILBERT, listing, run_ge
from onnx import TensorProto, helper, numpy_helper

from ge.graph.payloads import payload_nbytes
from model_paths import shared_model
from sample_models import cyclic_model


def _reference(model: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def test_run_with_generated_inputs_shows_the_outputs() -> None:
    code, stdout, stderr = run_ge("run", str(DISTILBERT))
    assert code == 0, stderr
    assert "output" in stdout and "float32" in stdout and "[1, 12, 48]" in stdout
    assert "generated (seed 0)" in stdout
    code, stdout, _ = run_ge("run", str(DISTILBERT), "--json", "--seed", "3")
    assert code == 0
    data = json.loads(stdout)
    assert data["inputs"] == {"input_ids": {"dtype": "int64", "shape": [1, 12]},
                              "attention_mask": {"dtype": "int64", "shape": [1, 12]}}
    out = data["outputs"]["output"]
    assert (out["dtype"], out["shape"], len(out["values"])) == ("float32", [1, 12, 48], 6)
    assert data["warnings"] == []


def test_run_with_inputs_writes_the_outputs(tmp_path: Path) -> None:
    feeds = {"input_ids": np.arange(12, dtype=np.int64).reshape(1, 12) * 7,
             "attention_mask": np.ones((1, 12), dtype=np.int64)}
    inputs, output = tmp_path / "in.npz", tmp_path / "out.npz"
    np.savez(inputs, **feeds)
    code, stdout, stderr = run_ge("run", str(DISTILBERT), "--inputs", str(inputs),
                                  "--output", str(output))
    assert code == 0, stderr
    assert f"wrote {output}" in stdout
    with np.load(output) as saved:
        assert saved.files == ["output"]
        np.testing.assert_allclose(saved["output"], _reference(DISTILBERT, feeds)["output"],
                                   rtol=1e-5, atol=1e-6)
    assert listing(tmp_path) == ["in.npz", "out.npz"]  # no temporary left behind


def test_run_refuses_bad_inputs_and_bad_output(tmp_path: Path) -> None:
    inputs = tmp_path / "in.npz"
    np.savez(inputs, input_ids=np.zeros((1, 12), np.int64))
    code, _, stderr = run_ge("run", str(DISTILBERT), "--inputs", str(inputs))
    assert code == 1 and stderr.startswith("ge: [GE1602] ") and "attention_mask" in stderr
    code, _, stderr = run_ge("run", str(DISTILBERT), "--output",
                             str(tmp_path / "absent" / "o.npz"))
    assert code == 1 and stderr.startswith("ge: [GE1701] ")
    code, stdout, _ = run_ge("run", str(DISTILBERT), "--output", str(tmp_path / "o.txt"),
                             "--json")
    assert code == 1 and json.loads(stdout)["code"] == "GE1701"
    assert listing(tmp_path) == ["in.npz"]


def test_inspect_shows_the_model() -> None:
    code, stdout, stderr = run_ge("inspect", str(DISTILBERT))
    assert code == 0, stderr
    for text in ("input_ids", "attention_mask", "int64", "[1, 12]", "ai.onnx=17",
                 "ir_version 8", "LayerNormalization", "external data: none",
                 "114 node(s) and 29 Constant node(s) (143 in graph.node); 17 "
                 "initializer(s)"):
        assert text in stdout, text
    code, stdout, _ = run_ge("inspect", str(DISTILBERT), "--json")
    data = json.loads(stdout)
    proto = onnx.load(DISTILBERT)
    constant_ops = sum(n.op_type == "Constant" for n in proto.graph.node)
    assert data["graph_nodes"] == len(proto.graph.node) == sum(data["ops"].values())
    assert data["nodes"] == len(proto.graph.node) - constant_ops == 114
    assert data["constant_nodes"] == data["ops"]["Constant"] == constant_ops
    assert data["constants"] == constant_ops + len(proto.graph.initializer) == 46
    assert data["opsets"] == {"ai.onnx": 17} and data["ir_version"] == proto.ir_version
    assert data["file_bytes"] == DISTILBERT.stat().st_size
    assert data["initializers"] == {
        "count": len(proto.graph.initializer), "in_subgraphs": 0,
        "bytes": sum(numpy_helper.to_array(t).nbytes for t in proto.graph.initializer)}
    assert data["inputs"][0] == {"name": "input_ids", "dtype": "int64", "shape": [1, 12],
                                 "kind": "tensor", "has_default": False, "constant": False}
    assert data["outputs"] == [{"name": "output", "dtype": "float32", "shape": [1, 12, 48],
                                "kind": "tensor"}]


def test_inspect_names_the_type_of_a_map_or_sequence(tmp_path: Path) -> None:
    """A map input was shown as dtype "map" of "(any shape)" (trial E): its ONNX type now,
    and no shape."""
    from nested_value_models import dict_vectorizer, sequence_identity

    for model, name, text, kind in [
            (dict_vectorizer(), "d", "map(string, tensor(float))", "map"),
            (sequence_identity(), "x", "seq(tensor(float) [2])", "sequence")]:
        path = tmp_path / f"{kind}.onnx"
        onnx.save(model, path)
        code, stdout, stderr = run_ge("inspect", str(path), "--json")
        assert code == 0, stderr
        assert json.loads(stdout)["inputs"][0] == {
            "name": name, "dtype": text, "shape": None, "kind": kind, "has_default": False,
            "constant": False}
        code, stdout, _ = run_ge("inspect", str(path))
        row = next(line for line in stdout.splitlines() if f" {name} " in line)
        assert text in row and "(any shape)" not in row and " - " in row


def test_inspect_counts_subgraphs() -> None:
    code, stdout, _ = run_ge("inspect", str(shared_model("control_flow")), "--json")
    assert code == 0
    data = json.loads(stdout)
    assert (data["subgraphs"], data["nodes"], data["subgraph_nodes"]) == (3, 6, 10)
    assert data["graph_nodes"] == 9 and data["constant_nodes"] == 3
    assert "6 node(s) and 3 Constant node(s) (9 in graph.node), 10 in 3 subgraph(s); " in (
        run_ge("inspect", str(shared_model("control_flow")))[1])


def test_inspect_lists_external_data(tmp_path: Path) -> None:
    weight = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])],
                              [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "ext.onnx"
    onnx.save(model, path, save_as_external_data=True, location="ext.data",
              size_threshold=0)
    code, stdout, _ = run_ge("inspect", str(path), "--json")
    assert code == 0
    data = json.loads(stdout)
    assert data["external_data"] == [{"file": "ext.data", "tensors": 1, "exists": True,
                                      "bytes": 64 * 64 * 4, "tensor_bytes": 64 * 64 * 4}]
    assert data["initializers"]["bytes"] == 64 * 64 * 4
    assert data["inputs"][0]["shape"] == ["n", 64]
    (tmp_path / "ext.data").unlink()  # (was a row "MISSING", exit status 0)
    code, stdout, stderr = run_ge("inspect", str(path))
    assert code == 1 and stdout == "" and stderr.startswith("ge: [GE1103] ")
    assert "external data file 'ext.data' does not exist" in stderr


_SUB_BYTE = [name for name in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "FLOAT6E2M3")
             if hasattr(TensorProto, name)]


@pytest.mark.parametrize("type_name", _SUB_BYTE)
def test_inspect_counts_a_sub_byte_tensor_in_its_packed_bytes(tmp_path: Path,
                                                              type_name: str) -> None:
    """5 int4 take 3 bytes whether in raw_data, packed two to a byte, or in int32_data (it
    counted 5 there: numpy's int4 takes a byte); the same as `payload_nbytes` says and as
    an external data file holds them."""
    data_type = getattr(TensorProto, type_name)
    values = np.array([1, 0, 1, 1, 0]).astype(helper.tensor_dtype_to_np_dtype(data_type))
    raw = numpy_helper.from_array(values, "raw")  # packed (make_tensor packs from onnx 1.20)
    typed = helper.make_tensor("typed", data_type, [5], values.tolist())
    assert not typed.HasField("raw_data") and typed.int32_data
    packed = len(raw.raw_data)  # 3 for 4 bits, 2 for 2 bits, 4 for 6 bits
    assert packed == payload_nbytes(data_type, [5]) < 5
    bytes_of = {}
    for tensor in (raw, typed):
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
                                  [tensor])
        for external in (False, True):
            path = tmp_path / f"{tensor.name}{external}.onnx"
            onnx.save(helper.make_model(graph), path, save_as_external_data=external,
                      location=f"{path.name}.data", size_threshold=0)
            code, stdout, _ = run_ge("inspect", str(path), "--json")
            assert code == 0
            bytes_of[tensor.name, external] = json.loads(stdout)["initializers"]["bytes"]
    assert bytes_of == dict.fromkeys(bytes_of, packed)


@pytest.mark.parametrize("as_json", [False, True])
def test_inspect_refuses_what_is_not_a_model(tmp_path: Path, as_json: bool) -> None:
    bogus = tmp_path / "bogus.onnx"
    bogus.write_bytes(b"\xff\xfe not onnx")
    code, stdout, stderr = run_ge("inspect", str(bogus), *(["--json"] if as_json else []))
    assert code == 1
    if as_json:
        assert json.loads(stdout)["code"] == "GE1101"
    else:
        assert stderr.startswith("ge: [GE1101] ") and stderr.count("\n") == 1
    code, _, stderr = run_ge("inspect", str(tmp_path / "absent.onnx"))
    assert code == 1 and stderr.startswith("ge: [GE1102] ")


@pytest.mark.parametrize("kind", ["truncated", "empty", "text"])
def test_a_file_that_is_not_a_model_is_told_the_same_by_inspect_compile_and_run(
    tmp_path: Path, kind: str
) -> None:
    """Trial JJ: a truncated file was "not a readable ONNX model (the file is truncated or
    not ONNX)" to ge compile and ge run, "not an ONNX model" to ge inspect."""
    path = tmp_path / f"{kind}.onnx"
    path.write_bytes({"truncated": DISTILBERT.read_bytes()[:100_000], "empty": b"",
                      "text": b"hello\n"}[kind])
    said = {
        "truncated": f"{path} is not a readable ONNX model (the file is truncated or not ONNX): "
                     "Error parsing message with type 'onnx.ModelProto': ",
        "text": f"{path} is not a readable ONNX model (the file is truncated or not ONNX): "
                "Error parsing message with type 'onnx.ModelProto': ",
        "empty": f"{path} is not an ONNX model: it has no graph (the file is truncated or not "
                 "ONNX)",
    }[kind]
    before = sorted(tmp_path.iterdir())
    lines = []
    for command in (["inspect", str(path)], ["compile", str(path), "-o", str(tmp_path / "o.onnx")],
                    ["run", str(path), "--output", str(tmp_path / "o.npz")]):
        code, stdout, stderr = run_ge(*command)
        assert code == 1 and stdout == "" and stderr.count("\n") == 1, command
        assert stderr.startswith(f"ge: [GE1101] {said}"), (command, stderr)
        lines.append(stderr)
    assert len(set(lines)) == 1, lines
    assert sorted(tmp_path.iterdir()) == before


TWICE_OP = '''\
import numpy as np

from ge.ops import register_op


def _infer(ctx):
    return [ctx.input_descs[0]]


register_op("Twice", domain="trial.ops", inputs=["x"], outputs=["y"], infer=_infer,
            kernel=lambda x: np.asarray(x) * 2)
'''


def test_run_loads_the_plugins_that_register_a_models_custom_operator(tmp_path: Path) -> None:
    """A model compiled with a plugin's custom operator runs with that plugin's kernel, from
    the environment or --pass-path; without the plugin, onnxruntime's error names the op."""
    import os
    import subprocess
    import sys

    from cli_helpers import SRC

    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "twice.py").write_text(TWICE_OP)
    graph = helper.make_graph(
        [helper.make_node("Twice", ["x"], ["y"], domain="trial.ops")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
    model = tmp_path / "twice.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("trial.ops", 1)]), model)
    inputs = tmp_path / "x.npz"
    np.savez(inputs, x=np.array([1.0, 2.0, 3.0], dtype=np.float32))

    def ge_run(*extra: str, env_path: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(SRC), "GE_DISABLE_PLUGIN_AUTOLOAD": "1"}
        env.pop("ASCEND_GE_PY_PASS_PATH", None)
        if env_path is not None:
            env["ASCEND_GE_PY_PASS_PATH"] = env_path
        return subprocess.run(
            [sys.executable, "-m", "ge", "run", str(model), "--inputs", str(inputs), "--json",
             *extra], capture_output=True, text=True, env=env, timeout=300, check=False)

    missing = ge_run()
    assert missing.returncode == 1 and "Traceback" not in missing.stderr
    error = json.loads(missing.stdout)
    assert error["code"] == "GE1601" and error["path"] == str(model)
    assert error["message"] == (
        f"{model}: graph 'g' uses trial.ops::Twice, which no loaded plugin registers "
        "(ge.ops.register_op with a kernel or a decomposition) and no function of the model "
        "defines: load the plugin that registers it (--pass-path or ASCEND_GE_PY_PASS_PATH; "
        "in Python, pass_paths= or ge.testing.load_passes)")
    for result in (ge_run(env_path=str(tmp_path / "ops")),
                   ge_run("--pass-path", str(tmp_path / "ops" / "twice.py"))):
        assert result.returncode == 0, result.stdout + result.stderr
        assert json.loads(result.stdout)["outputs"]["y"]["values"] == [2.0, 4.0, 6.0]


def test_inspect_shows_symbolic_dims(tmp_path: Path) -> None:
    """`[batch, 3]` is text, not rich markup (it printed as an empty cell)."""
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])])
    model = tmp_path / "sym.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    code, out, _ = run_ge("inspect", str(model))
    assert code == 0 and out.count("[batch, 3]") == 2


def test_run_describes_a_sequence_of_maps_as_such(tmp_path: Path) -> None:
    """ZipMap (ai.onnx.ml) gives a list of {class: probability}: shown as its type,
    seq(map(int64, float)), of its length, not as a string array; its values are the maps
    and min, max and mean those of the probabilities."""
    ml = "ai.onnx.ml"
    classifier = helper.make_node(
        "LinearClassifier", ["x"], ["label", "probabilities"], domain=ml,
        classlabels_ints=[0, 1, 2], coefficients=[0.1 * i for i in range(12)],
        intercepts=[0.1, 0.2, 0.3], post_transform="SOFTMAX")
    zipmap = helper.make_node("ZipMap", ["probabilities"], ["classes"], domain=ml,
                              classlabels_int64s=[0, 1, 2])
    maps = onnx.TypeProto()
    maps.sequence_type.elem_type.map_type.key_type = TensorProto.INT64
    maps.sequence_type.elem_type.map_type.value_type.tensor_type.elem_type = TensorProto.FLOAT
    graph = helper.make_graph(
        [classifier, zipmap], "classifier",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, ["N"]),
         helper.make_value_info("classes", maps)])
    model = tmp_path / "classifier.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15),
                                                      helper.make_opsetid(ml, 3)]), model)
    code, stdout, stderr = run_ge("run", str(model), "--json")
    assert code == 0, stderr
    outputs = json.loads(stdout)["outputs"]
    classes = outputs["classes"]
    assert (classes["dtype"], classes["shape"]) == ("seq(map(int64, float))", [2])
    assert (outputs["label"]["dtype"], outputs["label"]["shape"]) == ("int64", [2])
    assert len(classes["values"]) == 2
    assert [sorted(row) for row in classes["values"]] == [["0", "1", "2"]] * 2  # (JSON keys)
    assert sum(classes["values"][0].values()) == pytest.approx(1.0, abs=1e-6)
    assert 0 <= classes["min"] <= classes["mean"] <= classes["max"] <= 1


@pytest.mark.parametrize("in_body", [False, True], ids=["root", "body"])
def test_run_says_a_model_with_a_cycle_is_invalid_not_its_inputs(tmp_path: Path,
                                                                 in_body: bool) -> None:
    """No input runs a graph with a cycle: GE1003 names the cycle (as a compilation's
    validation does), not the generated inputs; nothing is written."""
    model, out = tmp_path / "cycle.onnx", tmp_path / "out.npz"
    onnx.save(cyclic_model(in_body), model)
    graph = "then" if in_body else "g"
    place = "then, then_branch of If node 'if'" if in_body else "g"  # (a body by its owner)
    for args in ((), ("--output", str(out))):
        code, _, stderr = run_ge("run", str(model), *args)
        assert code == 1
        assert stderr == (f"ge: [GE1003] {model}: graph is invalid (1 problem(s)): graph "
                          f"{place}: cycle: graph {graph!r} has a cycle through nodes: add, "
                          "relu\n")
    code, stdout, _ = run_ge("run", str(model), "--json")
    error = json.loads(stdout)
    assert (code, error["code"], error["nodes"], error["path"]) == (
        1, "GE1003", ["add", "relu"], str(model))
    assert "generated" not in error["message"]
    assert listing(tmp_path) == ["cycle.onnx"]


def test_a_graph_that_cannot_be_exported_is_no_failure_of_its_inputs() -> None:
    """ModelRunner on such a graph: RuntimeLoadError (no input would make it run), which
    every caller leaves without the note about generated inputs."""
    import ge.graph
    from ge.errors import RuntimeLoadError
    from ge.session.runner import ModelRunner

    with pytest.raises(RuntimeLoadError) as caught:
        ModelRunner(ge.graph.load(cyclic_model(False)))
    assert caught.value.code == "GE1601" and caught.value.nodes == ("add", "relu")
    assert "cannot be exported to run" in caught.value.message
