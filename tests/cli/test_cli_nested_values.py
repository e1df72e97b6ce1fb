"""`ge compile --verify/--inputs` and `ge run` on models with sequence, map and optional
inputs and outputs (sklearn's ZipMap and DictVectorizer, SplitToSequence): verified within
tolerance and labelled with their type; `ge run --output` writes them so that `--inputs`
reads them back. Trial E found ZipMap outputs compared as strings, exactly, labelled
"string", written as pickled object arrays that `--inputs` refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from cli_helpers import listing, run_ge

from ge.session.npz import VALUES_ENTRY, read_npz
from nested_value_models import (
    dict_vectorizer,
    sequence_concat,
    split_to_sequence,
    zipmap,
    zipmap_inputs,
)


def _saved(folder: Path, name: str, model: onnx.ModelProto) -> Path:
    path = folder / f"{name}.onnx"
    onnx.save(model, path)
    return path


@pytest.mark.builtin_passes
def test_a_zipmap_output_a_last_bit_off_verifies_and_is_labelled_its_type(
        tmp_path: Path) -> None:
    """ReciprocalMulFusion makes X * (1/S) X / S: some probabilities a last bit off."""
    model = _saved(tmp_path, "zipmap", zipmap())
    inputs = tmp_path / "in.npz"
    np.savez(inputs, **zipmap_inputs())
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                                  "--inputs", str(inputs), "--disable", "ConstantFolding")
    assert code == 0, stderr
    assert "ReciprocalMulFusion" in stdout
    row = next(line for line in stdout.splitlines() if line.startswith("│ Y "))
    assert "seq(map(int64, float))" in row and "[64]" in row and "string" not in row
    assert "/192" in row  # its 64 x 3 probabilities, each compared
    assert "verification ok: 1 output(s) match" in stdout
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                                  "--inputs", str(inputs), "--disable", "ConstantFolding",
                                  "--json")
    assert code == 0, stderr
    (y,) = json.loads(stdout)["verification"]["outputs"]
    assert y["ok"] and 0 < y["max_abs_diff"] < 1e-6  # not equal: within tolerance


WRONG_AXIS = """
    from ge.passes import FusionBasePass, PassStage, register_fusion_pass

    @register_fusion_pass(name="WrongAxis", stage=PassStage.AFTER_ORIGIN_GRAPH_OPTIMIZE)
    class WrongAxis(FusionBasePass):
        def run(self, graph, context):
            for node in graph.get_direct_nodes():
                if node.type == "Softmax":
                    node.set_attr("axis", 0)
                    return True
            return False
    """


def test_a_zipmap_output_that_differs_fails_naming_the_element(tmp_path: Path,
                                                                write) -> None:
    model = _saved(tmp_path, "zipmap", zipmap())
    plugin = write("plugins/wrong.py", WRONG_AXIS)
    before = listing(tmp_path)
    code, _, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                             "--pass-path", str(plugin), "--verify")
    assert code == 1 and listing(tmp_path) == before
    assert stderr.startswith("ge: [GE1603] the compiled model's outputs differ from the "
                             "original's: FAILED: 1 of 1 output(s) differ (rtol=0.0001, "
                             "atol=1e-05); worst output 'Y': max abs diff ")
    assert ", worst at [" in stderr and "] (expected " in stderr
    code, stdout, _ = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                             "--pass-path", str(plugin), "--verify", "--json")
    (y,) = json.loads(stdout)["verification"]["outputs"]
    assert y["expected_dtype"] == "seq(map(int64, float))" and y["ok"] is False
    assert len(y["worst_path"]) == 2 and y["worst_index"] == []


def test_a_map_input_is_generated_for_verification(tmp_path: Path) -> None:
    model = _saved(tmp_path, "dv", dict_vectorizer())
    code, stdout, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                                  "--verify")
    assert code == 0, stderr
    assert "verification ok" in stdout
    code, stdout, stderr = run_ge("run", str(model), "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["inputs"]["d"] == {"dtype": "map(string, float)", "shape": [4]}


def test_run_writes_sequences_and_maps_that_inputs_reads(tmp_path: Path) -> None:
    split = _saved(tmp_path, "split", split_to_sequence())
    inputs = tmp_path / "in.npz"
    np.savez(inputs, x=np.array([1, 2, 3], np.float32), split=np.array([1, 2], np.int64))
    out = tmp_path / "out.npz"
    code, stdout, stderr = run_ge("run", str(split), "--inputs", str(inputs), "--output",
                                  str(out))
    assert code == 0, stderr
    assert "seq(tensor(float))" in stdout
    back = read_npz(out)
    assert [a.tolist() for a in back["y"]] == [[1], [2, 3]]
    # what SplitToSequence gave is what ConcatFromSequence takes: renamed x, read back
    concat = _saved(tmp_path, "concat", sequence_concat())
    with np.load(out) as data:
        entries = {name: data[name] for name in data.files}
    described = json.loads(str(entries.pop(VALUES_ENTRY)))
    np.savez(tmp_path / "x.npz", **entries, **{VALUES_ENTRY: np.array(json.dumps(
        {"x": described["y"]}))})
    code, stdout, stderr = run_ge("run", str(concat), "--inputs", str(tmp_path / "x.npz"),
                                  "--json")
    assert code == 0, stderr
    assert json.loads(stdout)["outputs"]["y"]["values"] == [1, 2, 3]


def test_run_writes_a_zipmap_output_without_pickle(tmp_path: Path) -> None:
    model = _saved(tmp_path, "zipmap", zipmap())
    out = tmp_path / "out.npz"
    code, _, stderr = run_ge("run", str(model), "--output", str(out))
    assert code == 0, stderr
    with np.load(out, allow_pickle=False) as data:  # (was: a pickled object array)
        assert data.files == [VALUES_ENTRY]
    (y,) = read_npz(out).values()
    assert len(y) == 2 and all(sorted(row) == [0, 1, 2] for row in y)


def test_an_object_array_of_strings_is_refused_saying_what_works(tmp_path: Path) -> None:
    model = _saved(tmp_path, "dv", dict_vectorizer())
    inputs = tmp_path / "obj.npz"
    np.savez(inputs, d=np.array([["the cat"]], dtype=object))
    code, _, stderr = run_ge("compile", str(model), "-o", str(tmp_path / "out.onnx"),
                             "--inputs", str(inputs))
    assert code == 1 and stderr.count("\n") == 1
    assert stderr.startswith(f"ge: [GE1602] cannot read inputs from {inputs}: 'd' is an "
                             "object array (dtype=object)")
    assert "save strings with a str dtype" in stderr
