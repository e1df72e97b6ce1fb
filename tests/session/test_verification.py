"""Inputs (generated, loaded, checked), output comparison and `verify`."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge.graph
from ge.errors import VerificationError, VerificationInputError
from ge.graph import Tensor
from ge.session import (
    VerificationReport,
    check_inputs,
    compare_outputs,
    generate_inputs,
    load_inputs,
    run_model,
    verify,
)
from ge.session.verification import reference_outputs
from model_paths import shared_model

T = TensorProto


def _vi(name: str, shape: list[Any] | None, elem: int = T.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _typed_model() -> onnx.ModelProto:
    """Inputs of several types and dims: x float32 [batch, 16], ids int64 [3],
    mask bool [2, ?], h float16 [batch], and `bias` with a default (an initializer)."""
    nodes = [helper.make_node("Identity", [n], [f"{n}_out"]) for n in ("x", "ids", "mask", "h")]
    nodes.append(helper.make_node("Identity", ["bias"], ["bias_out"]))
    graph = helper.make_graph(
        nodes, "typed",
        [_vi("x", ["batch", 16]), _vi("ids", [3], T.INT64), _vi("mask", [2, None], T.BOOL),
         _vi("h", ["batch"], T.FLOAT16), _vi("bias", [2])],
        [_vi(f"{n}_out", None) for n in ("x", "ids", "mask", "h", "bias")],
        initializer=[numpy_helper.from_array(np.ones(2, np.float32), "bias")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=8)


def _good_inputs() -> dict[str, np.ndarray]:
    return {"x": np.zeros((2, 16), np.float32), "ids": np.zeros(3, np.int64),
            "mask": np.zeros((2, 5), bool), "h": np.zeros(2, np.float16)}


def _add_model(op: str = "Add") -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node(op, ["a", "b"], ["y"])], "add",
                              [_vi("a", [2, 3]), _vi("b", [2, 3])], [_vi("y", [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


# -- generate_inputs --------------------------------------------------------------------------


@pytest.mark.parametrize("as_graph", [False, True])
def test_generated_inputs_follow_the_input_types(as_graph: bool) -> None:
    model: onnx.ModelProto | ge.graph.Graph = _typed_model()
    if as_graph:
        model = ge.graph.load(model)
    inputs = generate_inputs(model, seed=3)
    assert list(inputs) == ["x", "ids", "mask", "h"]  # `bias` has a default
    assert inputs["x"].dtype == np.float32 and inputs["x"].shape == (2, 16)  # batch -> 2
    assert inputs["ids"].dtype == np.int64 and set(inputs["ids"].tolist()) <= {0, 1, 2, 3}
    assert inputs["mask"].dtype == bool and inputs["mask"].shape == (2, 2)  # unknown -> 2
    assert inputs["h"].dtype == np.float16 and inputs["h"].shape == (2,)
    check_inputs(inputs, model)


def test_generated_inputs_are_deterministic_per_seed_and_take_named_dims() -> None:
    model = _typed_model()
    first, again, other = (generate_inputs(model, seed=s) for s in (7, 7, 8))
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    assert not np.array_equal(first["x"], other["x"])
    sized = generate_inputs(model, dims={"batch": 5})
    assert sized["x"].shape == (5, 16) and sized["h"].shape == (5,)
    ints = generate_inputs(_int_table_model(), seed=0)["i"]
    assert ints.min() >= 0 and ints.max() <= 3 and len(set(ints.ravel().tolist())) > 1


def _int_table_model() -> onnx.ModelProto:
    graph = helper.make_graph([helper.make_node("Identity", ["i"], ["o"])], "ints",
                              [_vi("i", [64], T.INT32)], [_vi("o", [64], T.INT32)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_position_inputs_count_along_their_last_axis() -> None:
    """Trial AK: a decoder's `position_ids` drawn 0..3 at random overran a rotary table as
    long as past + new tokens; positions are 0, 1, 2... along the last axis instead."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["position_ids"], ["p"]),
         helper.make_node("Identity", ["ids"], ["i"])], "g",
        [_vi("position_ids", ["batch", "seq"], T.INT64), _vi("ids", ["batch", "seq"], T.INT64)],
        [_vi("p", ["batch", "seq"], T.INT64), _vi("i", ["batch", "seq"], T.INT64)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    feeds = generate_inputs(model, dims={"batch": 2, "seq": 5})
    assert feeds["position_ids"].dtype == np.int64
    assert feeds["position_ids"].tolist() == [[0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]
    assert feeds["ids"].max() <= 3  # (other integers stay small random indices)
    # (trial AL: "composition" is no position, and positions an int8 cannot hold are not
    # drawn so)
    from ge.session.inputs import _is_positions

    assert [_is_positions(n, T.INT64, (2, 5)) for n in (
        "PositionIds", "decoderPositionIds", "POSITION_IDS", "composition", "Disposition",
        "pos")] == [True, True, True, False, False, False]
    assert not _is_positions("position_ids", T.INT8, (1, 200))
    assert not _is_positions("position_ids", T.FLOAT, (1, 5))


def test_generate_inputs_rejects_unknown_dim_names_and_unknown_ranks() -> None:
    with pytest.raises(VerificationInputError) as info:
        generate_inputs(_typed_model(), dims={"bach": 3})
    assert info.value.code == "GE1602"
    assert "'bach'" in info.value.message and "batch" in info.value.message
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "norank",
                              [_vi("x", None)], [_vi("y", None)])
    with pytest.raises(VerificationInputError,
                       match=r"input 'x' of graph 'norank' is float32 \(any shape\)"):
        generate_inputs(helper.make_model(graph))


def test_generated_inputs_match_the_vendored_sidecars(shared_models: Path) -> None:
    for path in sorted(shared_models.glob("*.onnx")):
        sidecar = json.loads(path.with_suffix(".json").read_text())
        inputs = generate_inputs(ge.graph.load(path))
        assert [i["name"] for i in sidecar["inputs"]] == list(inputs), path.name
        for spec in sidecar["inputs"]:
            value = inputs[spec["name"]]
            assert list(value.shape) == spec["shape"] and value.dtype.name == spec["dtype"]


# -- check_inputs and load_inputs -------------------------------------------------------------


def _problems(inputs: dict[str, Any]) -> str:
    with pytest.raises(VerificationInputError) as info:
        check_inputs(inputs, _typed_model())
    assert info.value.code == "GE1602" and isinstance(info.value, ValueError)
    return info.value.message


def test_each_kind_of_bad_input_is_named_with_what_was_expected_and_given() -> None:
    good = _good_inputs()
    check_inputs(good, _typed_model())
    check_inputs({**good, "bias": np.zeros(2, np.float32)}, _typed_model())  # a default
    cases = {
        "missing": ({k: v for k, v in good.items() if k != "ids"},
                    "input 'ids': missing (expected int64 [3])"),
        "unknown": ({**good, "extra": np.zeros(1)},
                    "input 'extra': not an input of the graph (its inputs: x, ids, mask, h, "
                    "bias)"),
        "dtype": ({**good, "x": np.zeros((2, 16))},
                  "input 'x': expected float32 [batch, 16], got float64 [2, 16]"),
        "rank": ({**good, "ids": np.zeros((3, 1), np.int64)},
                 "input 'ids': expected int64 [3], got int64 [3, 1]"),
        "static dim": ({**good, "x": np.zeros((2, 15), np.float32)},
                       "input 'x': expected float32 [batch, 16], got float32 [2, 15]"),
        "symbolic dim": ({**good, "h": np.zeros(3, np.float16)},
                         "input 'h': dim 'batch' is 3, but input 'x' gave it size 2"),
        "not an array": ({**good, "ids": [0, 1, 2]},
                         "input 'ids': expected int64 [3], got list of 3"),
    }
    for what, (inputs, expected) in cases.items():
        assert _problems(inputs) == f"inputs do not fit graph 'typed': {expected}", what


def test_all_problems_are_listed_in_one_error() -> None:
    message = _problems({"x": np.zeros((2, 16)), "mask": np.zeros((2, 2), np.int8),
                         "h": np.zeros(2, np.float16), "zzz": np.zeros(1)})
    lines = message.splitlines()
    assert lines[0] == "inputs do not fit graph 'typed' (4 problems):"
    assert lines[1:] == [
        "  - input 'x': expected float32 [batch, 16], got float64 [2, 16]",
        "  - input 'ids': missing (expected int64 [3])",
        "  - input 'mask': expected bool [2, ?], got int8 [2, 2]",
        "  - input 'zzz': not an input of the graph (its inputs: x, ids, mask, h, bias)",
    ]


def test_ge_tensors_are_accepted_as_inputs() -> None:
    inputs: dict[str, Any] = dict(_good_inputs())
    inputs["x"] = Tensor(inputs["x"])
    check_inputs(inputs, ge.graph.load(_typed_model()))


def test_load_inputs_reads_and_checks_npz_files(tmp_path: Path) -> None:
    model = _typed_model()
    good = _good_inputs()
    path = tmp_path / "inputs.npz"
    np.savez(path, **good)
    loaded = load_inputs(path, model)
    assert list(loaded) == list(good)
    for name in good:
        np.testing.assert_array_equal(loaded[name], good[name])
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{**good, "x": np.zeros((2, 16))})
    with pytest.raises(VerificationInputError, match="expected float32 \\[batch, 16\\], got "
                                                     "float64 \\[2, 16\\]"):
        load_inputs(bad, model)
    with pytest.raises(VerificationInputError, match=r"cannot read inputs from .*missing\.npz"):
        load_inputs(tmp_path / "missing.npz", model)
    (tmp_path / "inputs.txt").write_text("1 2 3")
    with pytest.raises(VerificationInputError, match=r"must be an \.npz file"):
        load_inputs(tmp_path / "inputs.txt", model)
    (tmp_path / "text.npz").write_text("1 2 3")  # numpy took it for a pickle (audit)
    with pytest.raises(VerificationInputError) as info:
        load_inputs(tmp_path / "text.npz", model)
    assert info.value.code == "GE1602" and info.value.message.endswith(
        "text.npz: it is not an .npz file (a zip archive of arrays, as np.savez writes it)")
    single = tmp_path / "x.npy"
    np.save(single, np.ones((2, 3), np.float32))
    one_input = helper.make_model(helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "one", [_vi("x", [2, 3])], [_vi("y", None)]))
    assert load_inputs(single, one_input)["x"].shape == (2, 3)


# -- compare_outputs --------------------------------------------------------------------------


def test_a_perturbed_output_is_found_at_the_right_index() -> None:
    rng = np.random.default_rng(0)
    expected = {"y": rng.standard_normal((3, 4, 5)).astype(np.float32),
                "z": np.arange(4, dtype=np.int64)}
    assert compare_outputs(expected, {k: v.copy() for k, v in expected.items()}).ok
    actual = {k: v.copy() for k, v in expected.items()}
    actual["y"][1, 2, 3] += 0.5
    actual["y"][0, 0, 0] += 2e-5  # beyond atol for a small value, but not the largest
    report = compare_outputs(expected, actual)
    assert not report.ok and [o.name for o in report.failures] == ["y"]
    worst = report.worst()
    assert worst is not None and worst.name == "y"
    assert worst.worst_index == (1, 2, 3) and worst.mismatches >= 1
    assert worst.max_abs_diff == pytest.approx(0.5, rel=1e-5)
    assert worst.expected_value == expected["y"][1, 2, 3]
    assert worst.actual_value == actual["y"][1, 2, 3] and worst.size == 60
    assert worst.shape_equal and worst.dtype_equal
    assert report.outputs[1].ok and report.outputs[1].max_abs_diff == 0


def test_tolerance_is_absolute_plus_relative_to_the_expected_value() -> None:
    expected = {"y": np.array([1000.0, 0.0], np.float32)}
    within = {"y": np.array([1000.05, 5e-6], np.float32)}
    assert compare_outputs(expected, within).ok
    beyond = compare_outputs(expected, {"y": np.array([1000.5, 0.0], np.float32)})
    assert not beyond.ok and beyond.outputs[0].mismatches == 1
    assert compare_outputs(expected, {"y": np.array([1000.5, 0.0], np.float32)}, rtol=1e-3).ok
    with pytest.raises(VerificationInputError, match="rtol must be a finite number >= 0"):
        compare_outputs(expected, expected, rtol=-1)
    for tolerance in (math.inf, math.nan):  # inf passed anything
        with pytest.raises(VerificationInputError,
                           match=f"atol must be a finite number >= 0, got {tolerance}"):
            compare_outputs(expected, {"y": np.array([0.0, 1e30], np.float32)}, atol=tolerance)
    assert compare_outputs(expected, within, rtol=np.float32(1e-4)).ok  # a numpy scalar


def test_nan_in_the_same_places_is_equal_and_elsewhere_a_failure() -> None:
    expected = {"y": np.array([1.0, np.nan, np.inf, -np.inf], np.float32)}
    assert compare_outputs(expected, {"y": expected["y"].copy()}).ok
    nan_moved = compare_outputs(expected, {"y": np.array([np.nan, 1, np.inf, -np.inf],
                                                         np.float32)})
    out = nan_moved.outputs[0]
    assert not out.ok and out.mismatches == 2 and math.isinf(out.max_abs_diff)
    assert out.worst_index == (0,)
    inf_changed = compare_outputs(expected, {"y": np.array([1, np.nan, 1e30, -np.inf],
                                                           np.float32)})
    assert inf_changed.outputs[0].mismatches == 1 and inf_changed.outputs[0].worst_index == (2,)


def test_missing_extra_reshaped_and_retyped_outputs_fail() -> None:
    y = np.zeros((2, 3), np.float32)
    report = compare_outputs({"y": y, "gone": y}, {"y": y.reshape(3, 2), "new": y})
    by_name = {o.name: o for o in report.outputs}
    assert [o.ok for o in report.outputs] == [False, False, False]
    assert by_name["y"].reason == "shape [3, 2] instead of [2, 3]"
    assert by_name["gone"].reason == "missing from the actual model's outputs"
    assert by_name["new"].reason == "not an output of the expected model"
    retyped = compare_outputs({"y": y}, {"y": y.astype(np.float64)})
    assert not retyped.ok and retyped.outputs[0].max_abs_diff == 0
    assert retyped.outputs[0].reason == "dtype float64 instead of float32"


def test_a_report_is_json_data_with_a_one_line_summary() -> None:
    expected = {"y": np.array([1.0, np.nan], np.float32), "z": np.ones(2, np.float32)}
    report = compare_outputs(expected, {"y": np.array([1.0, 2.0], np.float32),
                                        "z": np.ones(2, np.float32)})
    data = report.as_dict()
    text = json.dumps(data, allow_nan=False)  # strict JSON: infinities are strings
    assert json.loads(text)["outputs"][0]["max_abs_diff"] == "inf"
    assert data["ok"] is False and data["rtol"] == 1e-4 and data["outputs"][1]["ok"] is True
    summary = report.summary()
    assert "\n" not in summary and summary.startswith("FAILED: 1 of 2 output(s) differ")
    assert "'y'" in summary
    ok = compare_outputs({"z": expected["z"]}, {"z": expected["z"]})
    assert ok.summary().startswith("ok: 1 output(s) match") and ok.worst() is not None
    assert VerificationReport([]).ok and VerificationReport([]).worst() is None


# -- verify -----------------------------------------------------------------------------------


def _break_first(model: onnx.ModelProto, op: str, replacement: str) -> onnx.ModelProto:
    broken = onnx.ModelProto()
    broken.CopyFrom(model)
    node = next(n for n in broken.graph.node if n.op_type == op)
    node.op_type = replacement
    return broken


def test_verify_passes_for_the_same_model_and_fails_for_a_broken_copy() -> None:
    path = shared_model("mobilenet_like")
    graph = ge.graph.load(path)
    assert verify(graph, onnx.load(path)).ok
    broken = _break_first(onnx.load(path), "Add", "Sub")
    report = verify(graph, broken, seed=1)
    assert not report.ok
    worst = report.worst()
    assert worst is not None and worst.name == "output"
    with pytest.raises(VerificationError) as info:
        report.raise_if_failed("compiled model")
    err = info.value
    assert err.code == "GE1603" and err.report is report
    assert err.message.startswith("compiled model: output 'output': max abs diff ")
    assert f"{worst.max_abs_diff:.3g}" in err.message
    assert "rtol=0.0001, atol=1e-05" in err.message
    verify(graph, graph).raise_if_failed("same graph")


def test_verify_of_models_with_other_inputs_names_both_sides() -> None:
    original = ge.graph.load(shared_model("mobilenet_like"))
    other = onnx.load(shared_model("mobilenet_like"))
    old = other.graph.input[0].name
    other.graph.input[0].name = "image"
    for node in other.graph.node:
        node.input[:] = ["image" if n == old else n for n in node.input]
    with pytest.raises(VerificationInputError) as info:
        verify(original, other, names=("given", "rewritten"))
    assert info.value.code == "GE1602"
    assert info.value.message.startswith(
        "the inputs the given model ran on do not fit the rewritten model: inputs do not fit "
        "graph "), info.value.message
    assert "input 'image': missing" in info.value.message


def test_verify_uses_given_inputs_and_reference_outputs_run_the_model() -> None:
    inputs = {"a": np.ones((2, 3), np.float32), "b": np.full((2, 3), 2, np.float32)}
    report = verify(_add_model(), _add_model("Sub"), inputs=inputs)
    worst = report.worst()
    assert worst is not None and worst.max_abs_diff == pytest.approx(4.0)
    assert worst.mismatches == 6 and worst.worst_index == (0, 0)
    np.testing.assert_array_equal(reference_outputs(_add_model(), inputs)["y"],
                                  run_model(_add_model(), inputs)["y"])
    with pytest.raises(VerificationInputError):
        verify(_add_model(), _add_model(), inputs={"a": inputs["a"]})


WRONG_THEN = '''\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="WrongThenBranch", stage=PassStage.AFTER_INFER_SHAPE)
class WrongThenBranch(PatternFusionPass):
    @pattern
    def relu_scale(self, inputs):
        return es.Relu(inputs[0]) * 2.0

    def replacement(self, inputs):
        return es.Relu(inputs[0] * 3.0)
'''


@pytest.mark.builtin_passes
def test_generated_inputs_warn_when_a_plugin_changed_a_body(tmp_path: Path) -> None:
    """Trial: a wrong rewrite in an If's then-branch verified 'ok' on generated inputs that
    took the else-branch. The compilation says which changed body the inputs did not run;
    inputs that take that branch catch it."""
    import warnings

    import ge
    from ge.errors import CompileWarning

    plugin = tmp_path / "wrong_then.py"
    plugin.write_text(WRONG_THEN)
    model = shared_model("control_flow")
    with pytest.warns(CompileWarning) as caught:
        ge.compile(model, pass_paths=[plugin], verify=True)
    (warning,) = [w for w in caught if "did not run" in str(w.message)]
    assert str(warning.message) == (
        "the verification's generated inputs did not run body 'sub_graph' (then_branch of "
        "If '/If') (changed by WrongThenBranch), so it did not check what the passes changed "
        "there: give inputs that run it (--inputs FILE.npz, inputs=)")
    positive = {name: np.abs(value) + 1 for name, value in
                generate_inputs(onnx.load(model)).items()}
    with pytest.raises(VerificationError):
        ge.compile(model, pass_paths=[plugin], inputs=positive, verify=True)
    with warnings.catch_warnings():  # built-in passes changing bodies: nothing to say
        warnings.simplefilter("error", CompileWarning)
        ge.compile(model, verify=True)


def _repeating_model(op: str = "Neg") -> onnx.ModelProto:
    """Outputs [y, z, y]: y = op(x), z = Relu(x); three outputs, two distinct values."""
    graph = helper.make_graph(
        [helper.make_node(op, ["x"], ["y"]), helper.make_node("Relu", ["x"], ["z"])], "g",
        [_vi("x", [3])], [_vi("y", [3]), _vi("z", [3]), _vi("y", [3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_a_repeated_output_name_is_counted_as_listed() -> None:
    """Trial VV: outputs [y, z, y] verified as '2 output(s) match'; the model lists 3, two
    of them one value: the summary says both, and the JSON names the repeat."""
    report = verify(_repeating_model(), _repeating_model())
    assert [out.name for out in report.outputs] == ["y", "z"]
    assert report.repeated == {"y": 2}
    assert report.summary() == ("ok: 2 distinct output(s) match (the model lists 3: 'y' "
                                "twice), max abs diff 0 (rtol=0.0001, atol=1e-05)")
    assert report.as_dict()["repeated"] == {"y": 2}
    failed = verify(_repeating_model(), _repeating_model("Abs"))
    assert failed.summary().startswith(
        "FAILED: 1 of 2 distinct output(s) differ (the model lists 3: 'y' twice) "
        "(rtol=0.0001, atol=1e-05); worst output 'y'")
    single = helper.make_model(helper.make_graph(
        [helper.make_node("Neg", ["x"], ["y"])], "g", [_vi("x", [3])], [_vi("y", [3])]),
        opset_imports=[helper.make_opsetid("", 17)])
    assert verify(single, single).summary().startswith("ok: 1 output(s) match, ")
    assert "repeated" not in verify(single, single).as_dict()


def _pair(dtype: str, drift: float) -> tuple[np.ndarray, np.ndarray]:
    """An output reaching 100 and its copy with the smallest element off by `drift`."""
    expected = np.array([[100.0, -80.0], [0.008, 3.0]], dtype=dtype)
    actual = expected.copy()
    actual[1, 0] += drift
    return expected, actual


def _drifted(dtype: str, drift: float, *, shape_off: bool = False,
             atol: float = 1e-5) -> VerificationReport:
    """`_pair`'s comparison (and, with `shape_off`, a second output of another shape)."""
    expected, actual = _pair(dtype, drift)
    given, got = {"y": expected}, {"y": actual}
    if shape_off:
        given["z"], got["z"] = np.zeros(2, dtype), np.zeros(3, dtype)
    return compare_outputs(given, got, atol=atol)


def test_a_difference_the_size_of_rounding_says_so_and_what_accepts_it() -> None:
    """Trial AA: 1,191 layers differed by 1.9e-4 on outputs reaching 110, a GE1603 that read
    as a broken pass. A float32 output off by at most 1e-5 of its typical magnitude (median)
    is said to be rounding, with the atol that accepts it (rounded up); the verdict stays
    FAILED."""
    report = _drifted("float32", 2.1e-4)
    assert not report.ok
    note = ("; output 'y' is off by at most 5.1e-06 of its typical magnitude (median |value| "
            "41.5): the size of difference float rounding reaches when fusions re-order the "
            "arithmetic of a deep model (onnxruntime's own graph optimisations make such "
            "differences too), not the mark of a wrong rewrite; atol=0.0003 (--atol 0.0003) "
            "accepts it")
    assert report.summary().endswith(note)
    with pytest.raises(VerificationError) as caught:
        report.raise_if_failed("after the pass")
    assert caught.value.message.endswith(note)
    assert _drifted("float32", 2.1e-4, atol=3e-4).ok  # (what the note says accepts it)


@pytest.mark.parametrize(("dtype", "drift", "shape_off"), [
    ("float32", 2e-2, False),  # 2e-4 of the largest magnitude: not rounding
    ("float16", 2.1e-4, False),  # (narrow floats are held to their precision already)
    ("float32", 2.1e-4, True),  # another output differs in shape
])
def test_other_differences_get_no_rounding_note(dtype: str, drift: float,
                                                shape_off: bool) -> None:
    report = _drifted(dtype, drift, shape_off=shape_off)
    assert not report.ok or dtype == "float16"
    assert report.rounding_note() == ""
    assert "float rounding" not in report.summary()


def test_a_large_column_does_not_excuse_a_wrong_one() -> None:
    """Trial AC: y = x @ S with a column near 1e6; a rewrite adding 5 to another column,
    whose values are near 1, was 6.7e-6 of the largest value and called rounding."""
    expected = np.array([[7.5e5, -0.86, 1.2], [-6.1e5, 0.4, -0.9]], np.float32)
    actual = expected.copy()
    actual[:, 1] += 5
    report = compare_outputs({"y": expected}, {"y": actual})
    assert not report.ok and report.rounding_note() == ""
