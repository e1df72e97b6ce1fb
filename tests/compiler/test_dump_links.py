"""A dump of a graph that has not changed since the previous dump of the compilation is not
serialised again: its files are hard links to the previous dump's (a copy where links are
refused), so every step still has its file, for nothing. What "unchanged" means is
`ge.compiler.dumping.dumped_state`: the hierarchy's mutation count (bodies included) and the
model fields around the graph that change without it (opset imports, doc string, ...).
The time spent dumping is the report's `dump_seconds`."""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ge
import ge.compiler.dumping as dumping
import ge.graph
from ge.compiler.dumping import GraphDumper
from ge.compiler.scheduler import PIPELINE, step_label
from ge.errors import CommandLineError
from plugin_fixtures import ADDS_NEG, small_graph

STEPS = [step_label(s) for s in PIPELINE]
MANIFEST = "ge_dump_manifest.json"
# Level 2 dumps the input and every step, as ONNX and text.
ALL_STEPS = [f"ge_{i:04d}_{label}{suffix}" for i, label in enumerate(["Input", *STEPS])
             for suffix in (".onnx", ".txt")]

ADDS_UNUSED_IMPORT = """
from ge.passes import FusionBasePass, register_fusion_pass

@register_fusion_pass(name="AddsImport", stage="AfterOriginGraphOptimize")
class AddsImport(FusionBasePass):
    def run(self, graph, context):
        graph.opset_imports["my.unused"] = 1   # no node: final validation drops it
"""


def _same(folder: Path, a: str, b: str) -> bool:
    return os.path.samefile(folder / a, folder / b)


def _step_file(folder: Path, label: str, suffix: str) -> str:
    (name,) = [n for n in ALL_STEPS if n.endswith(f"_{label}{suffix}")]
    return name


def _weighted_model() -> onnx.ModelProto:
    """x [2, 64] -> MatMul (a 16 KiB weight: in the shared weights file) -> Relu -> y."""
    weight = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
         helper.make_node("Relu", ["m"], ["y"], name="relu")], "weighted",
        [vi("x", TensorProto.FLOAT, [2, 64])], [vi("y", TensorProto.FLOAT, [2, 64])],
        [numpy_helper.from_array(weight, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_unchanged_steps_are_links_and_every_step_has_its_files(
        tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    """With a plugin pass changing the graph at AfterInferShape (and no built-in pass):
    BeforeInferShape is the input's files, AfterInferShape new ones (the pass's Neg), and
    every step after it the same files again; each name exists, loads in onnx (checked)
    and ge, and the manifest lists every name."""
    folder = tmp_path / "d"
    report = ge.compile(small_graph(), pass_paths=[write("neg.py", ADDS_NEG)],
                        dump=folder).report
    assert sorted(p.name for p in folder.iterdir()) == sorted([*ALL_STEPS, MANIFEST])
    for suffix in (".onnx", ".txt"):
        names = [_step_file(folder, label, suffix) for label in ["Input", *STEPS]]
        assert _same(folder, names[0], names[1])  # BeforeInferShape: no pass ran
        after = names.index(_step_file(folder, "AfterInferShape", suffix))
        assert not _same(folder, names[after - 1], names[after])  # the pass changed it
        assert all(_same(folder, names[after], later) for later in names[after + 1:])
        assert os.stat(folder / names[after]).st_nlink == len(names) - after
    after_pass = (folder / _step_file(folder, "AfterInferShape", ".txt")).read_text()
    assert "Neg" in after_pass
    assert "Neg" not in (folder / _step_file(folder, "InferShape", ".txt")).read_text()
    for name in ALL_STEPS[::2]:  # every .onnx
        assert len(ge.graph.load(folder / name).nodes_of_type("Relu")) == 2
    for name in ALL_STEPS[4::2]:  # (before shape inference, the graph built here is untyped)
        onnx.checker.check_model(str(folder / name), full_check=True)
    listed = {f["name"] for f in json.loads((folder / MANIFEST).read_text())["files"]}
    assert listed == set(ALL_STEPS)
    assert report.dump_seconds > 0


def test_links_hold_what_serialising_again_would_write(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same compilation dumped with links and with every snapshot serialised (no state
    ever equal to another): the same text files byte for byte, and the same ONNX files
    but for the name of the weights file they point into."""
    ge.compile(_weighted_model(), dump=tmp_path / "links")
    monkeypatch.setattr(dumping, "dumped_state", lambda graph: (object(),))
    ge.compile(_weighted_model(), dump=tmp_path / "written")
    assert os.stat(tmp_path / "written" / ALL_STEPS[0]).st_nlink == 1

    def model_bytes(path: Path) -> bytes:
        model = onnx.load(path, load_external_data=False)
        for tensor in model.graph.initializer:
            for entry in tensor.external_data:
                if entry.key == "location":
                    entry.value = "weights"
        return model.SerializeToString()

    for name in ALL_STEPS:
        linked, written = tmp_path / "links" / name, tmp_path / "written" / name
        if name.endswith(".txt"):
            assert linked.read_bytes() == written.read_bytes(), name
        else:
            assert model_bytes(linked) == model_bytes(written), name
    # (and the weights went to the shared file, which both point into)
    assert len(list((tmp_path / "links").glob("ge_weights_*.data"))) == 1


def _if_model() -> onnx.ModelProto:
    """c (bool), x [2] -> If(then: Relu(x), else: Neg(x)) -> y: a model with bodies."""
    vi = helper.make_tensor_value_info
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")],
                             "then", [], [vi("t", TensorProto.FLOAT, [2])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")],
                              "else", [], [vi("e", TensorProto.FLOAT, [2])])
    graph = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], name="if", then_branch=then, else_branch=other)],
        "with_if", [vi("c", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [2])],
        [vi("y", TensorProto.FLOAT, [2])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_what_counts_as_a_change(tmp_path: Path) -> None:
    """Driving the dumper step by step: no change is a link; a change inside a body (the
    mutation count of the root covers its bodies) and changes of the model around the
    graph that no mutation counts (an opset import written into the dict, the doc string,
    metadata, the IR version) are each a new file, holding the change."""
    folder = tmp_path / "d"
    graph = ge.graph.load(_if_model())
    dumper = GraphDumper(folder, level="2")
    dumper.step_started(0, STEPS[0], graph)  # ge_0000_Input
    dumper.step_finished(0, STEPS[0], graph)  # unchanged
    (body_neg,) = [n for n in graph.get_all_nodes() if n.type == "Neg"]
    count = graph.mutation_count
    body_neg.set_attr("note", 1)  # (an attribute onnx's Neg does not have: text only)
    assert graph.mutation_count > count
    dumper.step_finished(1, STEPS[1], graph)
    changes: list[tuple[Callable[[], object], str]] = [
        (lambda: graph.opset_imports.__setitem__("my.domain", 3), "my.domain=3"),
        (lambda: setattr(graph.model, "doc_string", "documented"), "documented"),
        (lambda: graph.model.metadata_props.__setitem__("owner", "me"), "owner"),
        (lambda: setattr(graph.model, "ir_version", 9), "ir_version: 9"),
    ]
    for index, (change, shown) in enumerate(changes, start=2):
        count = graph.mutation_count
        change()
        assert graph.mutation_count == count  # what the mutation count does not see
        dumper.step_finished(index, STEPS[index], graph)
        text = (folder / f"ge_{index + 1:04d}_{STEPS[index]}.txt").read_text()
        model = onnx.load(folder / f"ge_{index + 1:04d}_{STEPS[index]}.onnx")
        assert shown in text or shown in str(model), shown
    dumper.step_finished(len(STEPS) - 1, STEPS[-1], graph)  # unchanged again: a link
    names = [f"ge_{i:04d}_{label}" for i, label in enumerate(["Input", *STEPS[:6]])]
    names.append(f"ge_0007_{STEPS[-1]}")
    for suffix in (".onnx", ".txt"):
        same = [_same(folder, f"{a}{suffix}", f"{b}{suffix}")
                for a, b in itertools.pairwise(names)]
        assert same == [True, False, False, False, False, False, True]
    assert "note" in (folder / f"{names[2]}.txt").read_text()
    assert dumper.linked == 2


def test_a_model_change_only_final_validation_makes_is_a_new_file(
        tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    """A pass adding an opset import and no node changes no mutation count; the scheduler
    drops that import again before final validation (`drop_emptied_opset_imports`): the
    pass's step shows the import, the final graph does not, each in files of its own."""
    folder = tmp_path / "d"
    ge.compile(small_graph(), pass_paths=[write("imports.py", ADDS_UNUSED_IMPORT)],
               dump=folder)
    names = {label: _step_file(folder, label, ".txt")
             for label in ("OriginGraphOptimize", "AfterOriginGraphOptimize",
                           "FinalValidation")}
    texts = {label: (folder / name).read_text() for label, name in names.items()}
    assert "my.unused" not in texts["OriginGraphOptimize"]
    assert "my.unused=1" in texts["AfterOriginGraphOptimize"]
    assert "my.unused" not in texts["FinalValidation"]
    assert not _same(folder, names["OriginGraphOptimize"], names["AfterOriginGraphOptimize"])
    assert not _same(folder, names["AfterOriginGraphOptimize"], names["FinalValidation"])
    final = onnx.load(folder / _step_file(folder, "FinalValidation", ".onnx"))
    assert {o.domain for o in final.opset_import} == {""}


def test_a_second_run_replaces_the_first_without_touching_its_files_kept_elsewhere(
        tmp_path: Path, write: Callable[[str, str], Path]) -> None:
    """Run 1 dumps (its later steps links of one file); the user keeps one of its dumps
    by a hard link outside the folder. Run 2, of another graph, replaces run 1's dumps:
    the kept file still holds run 1's graph, and run 2's files hold run 2's."""
    folder = tmp_path / "d"
    ge.compile(small_graph(), pass_paths=[write("neg.py", ADDS_NEG)], dump=folder)
    final = _step_file(folder, "FinalValidation", ".txt")
    kept = tmp_path / "kept.txt"
    os.link(folder / final, kept)
    first = kept.read_text()
    assert "Neg" in first
    ge.compile(_weighted_model(), dump=folder)
    assert kept.read_text() == first
    assert not os.path.samefile(kept, folder / final)
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("ge_weights_")) \
        == sorted([*ALL_STEPS, MANIFEST])
    assert "MatMul" in (folder / final).read_text() and "Neg" not in (folder / final).read_text()
    assert os.stat(folder / final).st_nlink > 1  # run 2's own links
    onnx.checker.check_model(str(folder / final.replace(".txt", ".onnx")), full_check=True)


def test_a_dump_edited_in_place_is_refused_under_each_of_its_names(tmp_path: Path) -> None:
    """Editing a linked dump in place edits the one file all its names are: the next run
    refuses the folder naming each of them, and removes nothing."""
    folder = tmp_path / "d"
    ge.compile(small_graph(), dump=folder)
    first, second = ALL_STEPS[1], ALL_STEPS[3]  # Input.txt, BeforeInferShape.txt
    assert _same(folder, first, second)
    with (folder / second).open("a") as edited:
        edited.write("# my note\n")
    with pytest.raises(CommandLineError) as info:
        ge.compile(small_graph(), dump=folder)
    assert f"({first}, {second}" in info.value.message
    assert (folder / first).read_text().endswith("# my note\n")


def test_links_refused_by_the_filesystem_are_copies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(source: object, target: object) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(dumping.os, "link", refused)
    folder = tmp_path / "d"
    ge.compile(small_graph(), dump=folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted([*ALL_STEPS, MANIFEST])
    assert not _same(folder, ALL_STEPS[0], ALL_STEPS[2])
    assert (folder / ALL_STEPS[0]).read_bytes() == (folder / ALL_STEPS[2]).read_bytes()
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary left
    ge.compile(small_graph(), dump=folder)  # the manifest lists the copies: replaced


def test_the_report_says_how_long_dumping_took(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`dump_seconds` is part of `seconds`, in the JSON always, and in the summary line
    when it is more than a tenth of the compilation."""
    import time

    report = ge.compile(small_graph()).report
    assert report.dump_seconds == 0.0 and report.as_dict()["dump_seconds"] == 0.0
    assert "dumps" not in report.summary()
    real = dumping.save_model

    def slow(*args: object, **kwargs: object) -> object:
        time.sleep(0.05)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dumping, "save_model", slow)
    report = ge.compile(small_graph(), dump=tmp_path / "d").report
    # written: Input, InferShape (its types); linked: the 7 others
    assert 0.1 <= report.dump_seconds <= report.seconds
    assert sum(s.seconds for s in report.steps) + report.dump_seconds <= report.seconds
    assert report.as_dict()["dump_seconds"] == report.dump_seconds
    assert report.summary().endswith(f", of which dumps {report.dump_seconds * 1000:.1f} ms")


def test_ge_compile_json_has_dump_seconds(tmp_path: Path) -> None:
    """`ge compile --json`: `dump_seconds` beside `seconds`, 0.0 without `--dump`."""
    from click.testing import CliRunner

    from ge.cli import cli

    source = tmp_path / "m.onnx"
    onnx.save(_weighted_model(), source)
    for dump in (None, tmp_path / "d"):
        args = ["compile", str(source), "-o", str(tmp_path / "out.onnx"), "--json"]
        result = CliRunner().invoke(cli, [*args, *(["--dump", str(dump)] if dump else [])])
        assert result.exit_code == 0, result.output
        data = json.loads(result.stdout)
        if dump is None:
            assert data["dump_seconds"] == 0.0
        else:
            assert 0 < data["dump_seconds"] <= data["seconds"]
            assert sum(step["seconds"] for step in data["steps"]) + data["dump_seconds"] \
                <= data["seconds"]
