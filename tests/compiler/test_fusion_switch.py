"""GE's fusion switch file (`ge.fusionSwitchFile`, pyatc's `--fusion_switch_file`): passes
turned off and on by name, "ALL", names ge does not have ignored with a warning, and every
malformed file a GE1202 naming the file and the place, before anything runs."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import onnx
import pytest
from onnx import TensorProto, helper

import ge
from ge.compiler.fusion_switch import OPTION_FUSION_SWITCH_FILE, read_fusion_switch
from ge.errors import CompilerOptionError, CompileWarning
from model_paths import shared_model

pytestmark = pytest.mark.builtin_passes

MOBILENET_BN = shared_model("mobilenet_like_bn")  # ConvBatchNormFusion x9 by default


def _switch(tmp_path: Path, content: Any) -> str:
    path = tmp_path / "fusion_switch.cfg"
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return str(path)


def _fired(result: Any) -> dict[str, int]:
    return result.report.rewrites_by_pass()


def _silu() -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])],
        "silu", [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [2, 3])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 24)])


def test_off_leaves_a_pass_out_and_on_runs_one_off_by_default(tmp_path: Path) -> None:
    assert _fired(ge.compile(MOBILENET_BN)).get("ConvBatchNormFusion") == 9
    path = _switch(tmp_path, {"Switch": {"GraphFusion": {"ConvBatchNormFusion": "off"}}})
    result = ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: path})
    assert "ConvBatchNormFusion" not in {r.pass_name for r in result.report.records}
    on = _switch(tmp_path, {"Switch": {"UBFusion": {"SwishFusion": "on"}}})
    assert _fired(ge.compile(_silu(), options={OPTION_FUSION_SWITCH_FILE: on})) == {
        "SwishFusion": 1}


def test_all_off_then_one_on(tmp_path: Path) -> None:
    """"ALL" sets every built-in pass first; the passes named then override it."""
    path = _switch(tmp_path, {"Switch": {"GraphFusion": {"ALL": "off",
                                                         "ConvBatchNormFusion": "on"}}})
    result = ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: path})
    assert {r.pass_name for r in result.report.records} == {"ConvBatchNormFusion"}
    assert _fired(result) == {"ConvBatchNormFusion": 9}


@pytest.mark.parametrize("sections", [
    {"GraphFusion": {"ALL": "off"}, "UBFusion": {"ALL": "on"}},
    {"UBFusion": {"ALL": "on"}, "GraphFusion": {"ALL": "off"}}])
def test_each_sections_all_switches_its_own_kind_of_pass(
        tmp_path: Path, sections: dict[str, Any]) -> None:
    """ge's passes are graph fusions: GraphFusion's "ALL" switches them, UBFusion's (UB
    fusions, which ge has none of) nothing. The section written last won (trial A: graph
    fusions ran, SwishFusion too, in one order; nothing in the other)."""
    path = _switch(tmp_path, {"Switch": sections})
    result = ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: path})
    assert result.report.records == []
    assert _fired(ge.compile(_silu(), options={OPTION_FUSION_SWITCH_FILE: path})) == {}
    ub_off = _switch(tmp_path, {"Switch": {"UBFusion": {"ALL": "off"}}})
    result = ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: ub_off})
    assert _fired(result).get("ConvBatchNormFusion") == 9


def test_all_on_leaves_the_passes_off_by_default_off(tmp_path: Path) -> None:
    """As in FE, whose built-in configuration switches such passes off by name, looked up
    before "ALL": naming one runs it."""
    all_on = _switch(tmp_path, {"Switch": {"GraphFusion": {"ALL": "on"}}})
    assert "SwishFusion" not in _fired(
        ge.compile(_silu(), options={OPTION_FUSION_SWITCH_FILE: all_on}))
    result = ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: all_on})
    assert _fired(result).get("ConvBatchNormFusion") == 9
    named = _switch(tmp_path, {"Switch": {"GraphFusion": {"ALL": "on", "SwishFusion": "on"}}})
    assert _fired(ge.compile(_silu(), options={OPTION_FUSION_SWITCH_FILE: named})) == {
        "SwishFusion": 1}


def test_the_old_text_format_switches_as_the_json_does(tmp_path: Path) -> None:
    """FE reads a file that is not JSON as lines `PassName:on|off` (trial A: a GE1202)."""
    path = _switch(tmp_path, "ConvBatchNormFusion:off\n\n SwishFusion : on \n")
    assert read_fusion_switch(path).off == {"ConvBatchNormFusion"}
    result = ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: path})
    assert "ConvBatchNormFusion" not in {r.pass_name for r in result.report.records}
    assert _fired(ge.compile(_silu(), options={OPTION_FUSION_SWITCH_FILE: path})) == {
        "SwishFusion": 1}
    every = read_fusion_switch(_switch(tmp_path, "ALL:off\nConvBatchNormFusion:on"))
    assert (every.all, every.on) == (False, {"ConvBatchNormFusion"})


def test_names_ge_does_not_have_are_ignored_with_a_warning(tmp_path: Path) -> None:
    """A file written for Ascend names Ascend's passes: compiling goes on without them."""
    path = _switch(tmp_path, {"Switch": {"GraphFusion": {
        "ConvToFullyConnectionFusionPass": "on", "SoftmaxFusionPass": "off"}}})
    with pytest.warns(CompileWarning, match=r"fusion switch file .*fusion_switch\.cfg names "
                      r"pass\(es\) ge does not have, ignored: ConvToFullyConnectionFusionPass, "
                      r"SoftmaxFusionPass"):
        result = ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: path})
    assert _fired(result).get("ConvBatchNormFusion") == 9


def test_explicit_enable_and_disable_win_over_the_file(tmp_path: Path) -> None:
    path = _switch(tmp_path, {"Switch": {"GraphFusion": {"ConvBatchNormFusion": "off"}}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: path},
                            enable=["ConvBatchNormFusion"])
    assert _fired(result).get("ConvBatchNormFusion") == 9


def test_without_built_in_passes_the_warning_names_the_file(tmp_path: Path) -> None:
    """Trial D: `ALL: off` with --no-builtin warned "disabling built-in pass(es)
    ConvBatchNormFusion does nothing", where no --disable was given: a pass the file names
    is said to be the file's, and "ALL", which agrees with --no-builtin, says nothing."""
    every = _switch(tmp_path, "ALL:off\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: every},
                   builtin_passes=False)
    named = _switch(tmp_path, {"Switch": {"GraphFusion": {"ALL": "off",
                                                          "ConvBatchNormFusion": "off"}}})
    with pytest.warns(CompileWarning) as caught:
        ge.compile(MOBILENET_BN, options={OPTION_FUSION_SWITCH_FILE: named},
                   builtin_passes=False)
    assert [str(w.message) for w in caught] == [
        f"fusion switch file {named} switching built-in pass(es) ConvBatchNormFusion does "
        "nothing: the built-in passes are off (builtin_passes=False, --no-builtin)"]


@pytest.mark.parametrize(("content", "message"), [
    (None, r"cannot be read: No such file or directory"),
    ("{not json", r"is not JSON: Expecting property name enclosed in double quotes at line 1 "
                  r"column 2"),
    ([1], r'must be an object with a "Switch" object'),
    ({"Switch": {"Fusion": {}}}, r"\"Switch\" has 'Fusion'; its sections are GraphFusion and "
                                 r"UBFusion"),
    ({"Switch": {"GraphFusion": ["X"]}}, r'"GraphFusion" must be an object of "PassName": '
                                         r'"on" \| "off"'),
    ({"Switch": {"GraphFusion": {"X": "maybe"}}}, r"GraphFusion\.X is 'maybe': \"on\" or "
                                                  r"\"off\""),
    ({"Switch": {"GraphFusion": {"X": "on"}, "UBFusion": {"X": "off"}}},
     r"turns X both on and off"),
    ("  \n", r"is empty"),
    # not JSON: FE's old format, a PassName:on|off per line
    ("ConvBatchNormFusion off", r'is neither JSON \(\{"Switch": \{"GraphFusion": '
                                r'\{"PassName": "off"\}\}\}\) nor the old format of a '
                                r"PassName:on\|off per line: line 1 is 'ConvBatchNormFusion "
                                r"off'$"),
    ("A:on\nB:maybe", r"line 2: B is 'maybe': on or off$"),
    ("A:on\n\nA:off", r"names A twice \(lines 1 and 3\)$"),
    # trial D: json.loads kept the last of a key given twice, where the old format refuses
    ('{"Switch": {"GraphFusion": {"ConvBatchNormFusion": "off", "ConvBatchNormFusion": '
     '"on"}}}', r'"GraphFusion" names ConvBatchNormFusion twice$'),
    ('{"Switch": {"GraphFusion": {"A": "off"}, "GraphFusion": {"B": "off"}}}',
     r'"Switch" names GraphFusion twice$'),
    ('{"Switch": {}, "Switch": {}}', r"the file names Switch twice$"),
    # trial D: it warned "ignored: " with an empty list
    ('{"Switch": {"GraphFusion": {"": "off"}}}', r"\"GraphFusion\" has an entry of no pass "
                                                r"name \(''\)$"),
])
def test_a_malformed_file_is_an_option_error_before_anything_runs(
        tmp_path: Path, content: Any, message: str) -> None:
    path = str(tmp_path / "missing.cfg") if content is None else _switch(tmp_path, content)
    graph = ge.graph.load(MOBILENET_BN)
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(CompilerOptionError) as caught:
        ge.compile(graph, options={OPTION_FUSION_SWITCH_FILE: path}, dump=tmp_path / "dumps")
    assert caught.value.code == "GE1202"
    assert str(caught.value).startswith(f"[GE1202] fusion switch file {path} "
                                        f"({OPTION_FUSION_SWITCH_FILE}): ")
    assert caught.match(message)
    assert graph.to_onnx().SerializeToString() == before
    assert not (tmp_path / "dumps").exists()


@pytest.mark.parametrize("text", [
    '{"Switch": {"GraphFusion": {"ConvBatchNormFusion": "off"}}}', "ConvBatchNormFusion:off\n"])
def test_a_byte_order_mark_is_read_past(tmp_path: Path, text: str) -> None:
    """Trial D: a UTF-8 BOM (which editors on Windows write) made a JSON file be read as the
    old format (GE1202 "line 1: \\ufeff{...") and the first name of an old-format file one
    no pass has (ignored with a warning): both formats are read past it."""
    path = tmp_path / "bom.cfg"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert read_fusion_switch(str(path)).off == {"ConvBatchNormFusion"}


def test_read_fusion_switch_gives_the_names() -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "s.cfg"
        path.write_text('{"Switch": {"GraphFusion": {"A": "ON", "B": "off", "ALL": "on"}}}')
        switch = read_fusion_switch(str(path))
    assert (switch.on, switch.off, switch.all) == ({"A"}, {"B"}, True)
    enable, disable, ignored = switch.apply(["A", "B", "C"], ["C"], ["A", "B", "C"])
    assert (enable, disable, ignored) == (set(), {"B"}, [])
