"""Graph dumps: `ge.compile(dump=DIR)` and GE's DUMP_GE_GRAPH / DUMP_GRAPH_PATH /
DUMP_GRAPH_LEVEL variables write the graph after each step (and pass) in pipeline order."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import onnx
import pytest

import ge
import ge.graph
from ge.compiler.scheduler import PIPELINE, step_label
from ge.errors import CompilerOptionError
from plugin_fixtures import ADDS_NEG, small_graph
from sample_models import two_ifs_with_bodies_named_alike

STEPS = [step_label(s) for s in PIPELINE]


def stems(folder: Path, suffix: str) -> list[str]:
    return sorted(p.name[: -len(suffix)] for p in folder.glob(f"*{suffix}"))


def test_level_2_dumps_the_input_and_every_step_in_pipeline_order(tmp_path: Path) -> None:
    ge.compile(small_graph(), dump=tmp_path / "dumps")
    names = stems(tmp_path / "dumps", ".txt")
    assert [n.split("_", 2)[2] for n in names] == ["Input", *STEPS]
    assert stems(tmp_path / "dumps", ".onnx") == names
    final = tmp_path / "dumps" / f"{names[-1]}.onnx"
    onnx.checker.check_model(onnx.load(final), full_check=True)
    assert len(ge.graph.load(final).nodes_of_type("Relu")) == 2
    assert "Relu" in (tmp_path / "dumps" / f"{names[-1]}.txt").read_text()


def test_level_1_adds_every_pass_that_changed_the_graph(write, tmp_path: Path) -> None:
    path = write("neg.py", ADDS_NEG)
    ge.compile(small_graph(), pass_paths=[path], dump=tmp_path / "d", dump_level="1")
    labels = [n.split("_", 2)[2] for n in stems(tmp_path / "d", ".txt")]
    assert labels.index("AfterInferShape_AddsNeg") == labels.index("InferShape") + 1
    assert labels.index("AfterInferShape") == labels.index("AfterInferShape_AddsNeg") + 1
    after_pass = next((tmp_path / "d").glob("*_AfterInferShape_AddsNeg.txt")).read_text()
    assert "neg" in after_pass


NEGATES_E2 = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="NegatesE2", stage="AfterInferShape")
class NegatesE2(FusionBasePass):
    def run(self, graph, context):
        for node in graph.nodes_of_type("Neg"):
            if node.get_output_name(0) == "e2":
                neg = graph.add_node("Neg", name="neg_again", num_inputs=1)
                graph.replace_all_uses(node, 0, neg, 0)
                graph.add_data_edge(node, 0, neg, 0)
"""


def test_a_pass_that_changed_one_body_is_dumped_under_its_path(write, tmp_path: Path) -> None:
    """Level 1 names the dump of a pass that changed one body after the body's path, not
    its name: exporters may name every body alike ('sub_graph' here, four times)."""
    path = write("negates.py", NEGATES_E2)
    source = tmp_path / "two_ifs.onnx"
    onnx.save(two_ifs_with_bodies_named_alike(), source)
    ge.compile(source, pass_paths=[path], dump=tmp_path / "d", dump_level="1")
    labels = [n.split("_", 2)[2] for n in stems(tmp_path / "d", ".txt")]
    assert "AfterInferShape_NegatesE2_if2.else_branch" in labels
    dumped = next((tmp_path / "d").glob("*_NegatesE2_if2.else_branch.onnx"))
    assert "neg_again" in [n.name for n in ge.graph.load(dumped).get_all_nodes()]


@pytest.mark.parametrize(("level", "expected"), [
    ("3", ["FinalValidation"]),
    ("4", ["Input"]),
    ("InferShape|Input", ["Input", "BeforeInferShape", "InferShape", "AfterInferShape"]),
])
def test_other_levels_pick_what_is_dumped(level: str, expected: list[str],
                                          tmp_path: Path) -> None:
    ge.compile(small_graph(), dump=tmp_path, dump_level=level)
    assert [n.split("_", 2)[2] for n in stems(tmp_path, ".txt")] == expected


def test_the_ge_variables_turn_dumps_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "2")  # readable text only, no weights
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "ge_dumps"))
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "3")
    ge.compile(small_graph())
    assert sorted(p.name for p in (tmp_path / "ge_dumps").iterdir()) == [
        "ge_0000_FinalValidation.txt", "ge_dump_manifest.json"]
    monkeypatch.setenv("DUMP_GE_GRAPH", "0")
    ge.compile(small_graph())
    assert len(list((tmp_path / "ge_dumps").iterdir())) == 2


@pytest.mark.parametrize(("mode", "formats", "files"), [
    ("1", "readable", ["ge_0000_FinalValidation.txt"]),
    ("1", "onnx", ["ge_0000_FinalValidation.onnx"]),
    ("1", " ge_proto | onnx ", ["ge_0000_FinalValidation.onnx"]),  # GE's default: ONNX
    ("1", "ge_proto|readable", ["ge_0000_FinalValidation.onnx", "ge_0000_FinalValidation.txt"]),
    ("2", "readable", ["ge_0000_FinalValidation.txt"]),
])
def test_dump_graph_format_picks_the_files(mode: str, formats: str, files: list[str],
                                           tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """GE's DUMP_GRAPH_FORMAT (trial X: it was ignored, both files were always written)."""
    monkeypatch.setenv("DUMP_GE_GRAPH", mode)
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "ge_dumps"))
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "3")
    monkeypatch.setenv("DUMP_GRAPH_FORMAT", formats)
    ge.compile(small_graph())
    assert sorted(p.name for p in (tmp_path / "ge_dumps").iterdir()) == [
        *files, "ge_dump_manifest.json"]


def test_onnx_dumps_asked_for_without_weights_dump_the_text_and_say_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DUMP_GE_GRAPH 2 leaves the weights out, which ONNX files hold: asked for beside the
    text, the text is dumped alone with a CompileWarning (asked for alone: the GE1202
    below)."""
    from ge.errors import CompileWarning

    monkeypatch.setenv("DUMP_GE_GRAPH", "2")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "ge_dumps"))
    monkeypatch.setenv("DUMP_GRAPH_LEVEL", "3")
    monkeypatch.setenv("DUMP_GRAPH_FORMAT", "onnx|readable")
    with pytest.warns(CompileWarning) as caught:
        ge.compile(small_graph())
    assert [str(w.message) for w in caught] == [
        "DUMP_GRAPH_FORMAT 'onnx|readable' asks for ONNX files, which hold the weights, but "
        "DUMP_GE_GRAPH=2 dumps without them: only the readable text is dumped"]
    assert sorted(p.name for p in (tmp_path / "ge_dumps").iterdir()) == [
        "ge_0000_FinalValidation.txt", "ge_dump_manifest.json"]


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("DUMP_GE_GRAPH", "7", "DUMP_GE_GRAPH must be 1, 2 or 3 (0 or unset: no dumps), got '7'"),
    ("DUMP_GRAPH_LEVEL", "9",
     "DUMP_GRAPH_LEVEL must be 1, 2, 3, 4 or '|'-separated names, got '9'"),
    ("DUMP_GRAPH_FORMAT", "onnx|svg",
     "DUMP_GRAPH_FORMAT must be '|'-separated formats among ge_proto, onnx and readable "
     "(ge_proto and onnx both dump ONNX files: ONNX replaces GE's formats), got 'onnx|svg'"),
    ("DUMP_GRAPH_FORMAT", "|",
     "DUMP_GRAPH_FORMAT must be '|'-separated formats among ge_proto, onnx and readable "
     "(ge_proto and onnx both dump ONNX files: ONNX replaces GE's formats), got '|'"),
    ("DUMP_GE_GRAPH=3 DUMP_GRAPH_FORMAT", "onnx",
     "DUMP_GRAPH_FORMAT 'onnx' asks for ONNX files, which hold the weights, but "
     "DUMP_GE_GRAPH=3 dumps without them: set DUMP_GE_GRAPH=1, or add readable to "
     "DUMP_GRAPH_FORMAT"),
])
def test_bad_dump_settings_are_option_errors_before_anything_runs(
        variable: str, value: str, message: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DUMP_GE_GRAPH", "1")
    monkeypatch.setenv("DUMP_GRAPH_PATH", str(tmp_path / "never"))
    if variable.startswith("DUMP_GE_GRAPH="):
        mode, variable = variable.split(" ")
        monkeypatch.setenv("DUMP_GE_GRAPH", mode.split("=")[1])
    monkeypatch.setenv(variable, value)
    graph = small_graph()
    count = graph.mutation_count
    with pytest.raises(CompilerOptionError) as info:
        ge.compile(graph)
    assert info.value.code == "GE1202" and info.value.message == message
    assert graph.mutation_count == count
    assert not (tmp_path / "never").exists()


def _conv_bn(path: Path) -> Path:
    """x [1, 64, 8, 8] -> Conv (a 147 KiB weight) -> BatchNormalization -> Relu -> y."""
    import numpy as np
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
             for name, shape in (("w", (64, 64, 3, 3)), ("scale", (64,)), ("bias", (64,)),
                                 ("mean", (64,)))]
    inits.append(numpy_helper.from_array(rng.random(64).astype(np.float32) + 0.5, "var"))
    vi = helper.make_tensor_value_info
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"],
                              ["b"]),
             helper.make_node("Relu", ["b"], ["y"])]
    graph = helper.make_graph(nodes, "conv_bn", [vi("x", onnx.TensorProto.FLOAT, [1, 64, 8, 8])],
                              [vi("y", onnx.TensorProto.FLOAT, [1, 64, 8, 8])], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_the_onnx_dumps_share_one_weights_file(tmp_path: Path) -> None:
    """Each weight is written once for all of a compilation's dumps (a copy per dump made
    --dump write about twelve times the model): the dumps point into one `ge_weights_*`
    file beside them, each loads (onnx, with its checker, and ge) and runs as the graph it
    is. A second compilation into the folder replaces the first's dumps, its weights file
    included, and writes a file of its own (`test_dump_runs`)."""
    import numpy as np

    from ge.session import run_model

    source = _conv_bn(tmp_path / "conv_bn.onnx")  # the BatchNorm is folded into the Conv
    weights_bytes = sum(t.ByteSize() for t in onnx.load(source).graph.initializer)
    ge.compile(source, dump=tmp_path / "d", dump_level="1")
    (shared,) = (tmp_path / "d").glob("ge_weights_*.data")
    dumps = sorted((tmp_path / "d").glob("*.onnx"))
    assert len(dumps) >= 9
    # the weight and the folded one, each once: not a copy per dump
    assert shared.stat().st_size < 2.2 * weights_bytes
    # every dump file readable as the umask lets a new file be (the weights file was 0600,
    # which a CI collector running as another user could not read: trial P)
    umask = os.umask(0)
    os.umask(umask)
    assert {p.name: stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "d").iterdir()} == {
        p.name: 0o666 & ~umask for p in (tmp_path / "d").iterdir()}
    assert all(p.stat().st_size < weights_bytes / 20 for p in dumps)
    inputs = {"x": np.random.default_rng(1).standard_normal((1, 64, 8, 8), dtype=np.float32)}
    expected = run_model(onnx.load(source), inputs)["y"]
    for dump in (dumps[0], dumps[-1]):
        model = onnx.load(dump, load_external_data=False)
        locations = {e.value for t in model.graph.initializer for e in t.external_data
                     if e.key == "location"}
        assert locations == {shared.name}
        onnx.checker.check_model(str(dump), full_check=True)
        got = run_model(ge.graph.load(dump), inputs)["y"]
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    ge.compile(source, dump=tmp_path / "d", dump_level="3")
    (second,) = (tmp_path / "d").glob("ge_weights_*.data")
    assert second != shared
    assert sorted(p.name for p in (tmp_path / "d").glob("*.onnx")) == [
        "ge_0000_FinalValidation.onnx"]
    got = run_model(ge.graph.load(tmp_path / "d" / "ge_0000_FinalValidation.onnx"), inputs)
    np.testing.assert_allclose(got["y"], expected, rtol=1e-4, atol=1e-4)


def test_a_weight_that_stays_is_hashed_once_for_all_dumps(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A weight kept from one dump to the next is known again by the object holding it (its
    source proto, a folded array), not read out and hashed again for each dump: the bytes
    hashed over all dumps are about the bytes stored, not the dumps times the model."""
    import hashlib

    import ge.graph.external_data as external_data

    hashed: list[int] = []
    blake2b = hashlib.blake2b

    def counting(data: memoryview, **kwargs: object) -> object:
        hashed.append(memoryview(data).nbytes)
        return blake2b(data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(external_data.hashlib, "blake2b", counting)
    source = _conv_bn(tmp_path / "conv_bn.onnx")
    weights_bytes = sum(t.ByteSize() for t in onnx.load(source).graph.initializer)
    ge.compile(source, dump=tmp_path / "d", dump_level="1")
    (shared,) = (tmp_path / "d").glob("ge_weights_*.data")
    assert len(list((tmp_path / "d").glob("*.onnx"))) >= 9
    assert sum(hashed) <= shared.stat().st_size < 2.2 * weights_bytes


def test_a_model_without_large_tensors_leaves_no_weights_file(tmp_path: Path) -> None:
    ge.compile(small_graph(), dump=tmp_path / "d")
    assert not list((tmp_path / "d").glob("ge_weights_*"))
