"""`ge passes explain` on a DecomposePass: each node of its op types, rewritten or refused
by meet_requirements (what it returned or raised, at the user's line), as text and JSON,
checked against `ge compile` running the same pass.

The trial's reproducer: a Gelu decomposition whose meet_requirements refuses the tanh Gelu
of `gelu_mlp_opset20` was refused by explain with GE1701."""

from __future__ import annotations

import json
from pathlib import Path

from cli_helpers import run_ge

from model_paths import shared_model

GELU_MLP = str(shared_model("gelu_mlp_opset20"))  # /act1/Gelu (erf), /act2/Gelu (tanh)

DECOMPOSE_GELU = """
import ge.es.all as es
from ge.es import GraphBuilder
from ge.graph import DataType
from ge.passes import DecomposePass, PassStage, infer_shape, register_decompose_pass


@register_decompose_pass(name="DecomposeGelu", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=["Gelu"])
class DecomposeGelu(DecomposePass):
    def meet_requirements(self, node):
        approximate = node.get_attr("approximate")
        dt = node.get_input_desc(0).get_data_type()
        return approximate == "none" and dt == DataType.DT_FLOAT

    def replacement(self, node):
        builder = GraphBuilder("replacement")
        (x,) = builder.create_inputs(1)
        y = x * 0.5 * (es.Erf(x / 1.4142135623730951) + 1.0)
        graph = builder.build_and_reset([y])
        infer_shape(graph, node)
        return graph
"""
EARLY_GELU = DECOMPOSE_GELU.replace("AFTER_INFER_SHAPE", "BEFORE_INFER_SHAPE").replace(
    "DecomposeGelu", "EarlyGelu")
RAISING = DECOMPOSE_GELU.replace(
    '        approximate = node.get_attr("approximate")\n',
    '        approximate = node.get_attr("approximate")\n'
    '        if approximate == "tanh":\n'
    '            raise ValueError("tanh is not supported")\n').replace(
    "DecomposeGelu", "RaisingGelu")
BROKEN = DECOMPOSE_GELU.replace(
    "class DecomposeGelu(DecomposePass):\n",
    "class BrokenGelu(DecomposePass):\n"
    "    def __init__(self):\n"
    "        raise RuntimeError('no config')\n\n").replace('name="DecomposeGelu"',
                                                       'name="BrokenGelu"')


def _line(source: str, text: str) -> int:
    """The line of `text` in a plugin file written from `source`."""
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


def _compile(plugin: Path, tmp_path: Path, name: str) -> tuple[int, dict[str, object] | str]:
    """`ge compile` of the model with the plugin only: its record of pass `name`, or the
    error line."""
    code, out, _ = run_ge("compile", GELU_MLP, "-o", str(tmp_path / "out.onnx"),
                          "--pass-path", str(plugin), "--no-builtin", "--json")
    data = json.loads(out)
    if code != 0:
        return code, data["message"]
    (record,) = [p for p in data["passes"] if p["name"] == name]
    return code, record


def test_the_refused_tanh_gelu_is_explained(write, tmp_path: Path) -> None:
    plugin = write("plugins/gelu.py", DECOMPOSE_GELU)
    code, out, err = run_ge("passes", "explain", "DecomposeGelu", GELU_MLP, "--pass-path",
                            str(plugin))
    assert code == 0 and err == ""
    returned = _line(DECOMPOSE_GELU, 'return approximate == "none"')
    assert out.splitlines() == [
        f"DecomposeGelu (decompose, AfterInferShape, {plugin}:"
        f"{_line(DECOMPOSE_GELU, 'class DecomposeGelu')}) on {GELU_MLP} (graph "
        "main_graph, opsets ai.onnx=20)",
        "matched against the model after shape inference: the pass's stage",
        "op types Gelu (graph main_graph): 2 candidate(s), 1 would be rewritten",
        "  rewrite at '/act1/Gelu' (Gelu)",
        "  refused (top 1 of 1):",
        f"    1. '/act2/Gelu' (Gelu): meet_requirements returned False (at {plugin}:"
        f"{returned}): the pass refuses this node; its inputs: input_0 float[4, 64]",
    ]
    code, record = _compile(plugin, tmp_path, "DecomposeGelu")
    assert code == 0 and isinstance(record, dict)
    assert (record["outcome"], record["matches"], record["rewrites"]) == ("success", 2, 1)


def test_the_explanation_as_json(write) -> None:
    plugin = write("plugins/gelu.py", DECOMPOSE_GELU)
    code, out, err = run_ge("passes", "explain", "DecomposeGelu", GELU_MLP, "--pass-path",
                            str(plugin), "--json")
    assert code == 0 and err == ""
    data = json.loads(out)
    assert {k: data[k] for k in ("pass", "kind", "stage", "shape_inference", "state",
                                 "op_types", "node", "top", "warnings")} == {
        "pass": "DecomposeGelu", "kind": "decompose", "stage": "AfterInferShape",
        "shape_inference": "ok", "state": "after shape inference: the pass's stage",
        "op_types": ["Gelu"], "node": None, "top": 5, "warnings": []}
    assert "patterns" not in data
    (graph,) = data["graphs"]
    assert {k: graph[k] for k in ("graph", "op_types", "candidates", "rewrite_count",
                                  "not_rewritten", "note")} == {
        "graph": "main_graph", "op_types": ["Gelu"], "candidates": 2, "rewrite_count": 1,
        "not_rewritten": 1, "note": None}
    assert [c["candidate"] for c in graph["rewrites"]] == ["/act1/Gelu"]
    (refused,) = graph["refused"]
    assert refused["candidate"] == "/act2/Gelu" and refused["rewritten"] is False
    assert refused["reason"]["kind"] == "meet_requirements"
    assert refused["reason"]["details"] == {
        "inputs": {"input_0": "float[4, 64]"}, "error_message": None,
        "location": f"{plugin}:{_line(DECOMPOSE_GELU, 'return approximate')}"}


def test_node_and_top(write) -> None:
    plugin = write("plugins/gelu.py", DECOMPOSE_GELU)
    base = ("passes", "explain", "DecomposeGelu", GELU_MLP, "--pass-path", str(plugin))
    code, out, _ = run_ge(*base, "--node", "/act2/Gelu")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].endswith(", node '/act2/Gelu'")
    assert lines[2] == "op types Gelu (graph main_graph): 1 candidate(s), 0 would be rewritten"
    assert lines[4].startswith("    1. '/act2/Gelu' (Gelu): meet_requirements returned False")
    code, out, _ = run_ge(*base, "--node", "/fc1/Gemm")
    assert code == 0
    assert out.splitlines()[2:] == [
        "op types Gelu (graph main_graph): 0 candidate(s), 0 would be rewritten",
        "  note: '/fc1/Gemm' (Gemm) is not a candidate: the pass decomposes Gelu nodes"]
    early = write("plugins/early.py", EARLY_GELU)
    code, out, _ = run_ge("passes", "explain", "EarlyGelu", GELU_MLP, "--pass-path",
                          str(early), "--top", "1")
    assert code == 0
    lines = out.splitlines()
    assert "  refused (top 1 of 2):" in lines
    assert not any(line.startswith("    2. ") for line in lines)
    data = json.loads(run_ge("passes", "explain", "EarlyGelu", GELU_MLP, "--pass-path",
                             str(early), "--top", "1", "--json")[1])
    assert len(data["graphs"][0]["refused"]) == 1 and data["graphs"][0]["not_rewritten"] == 2


def test_an_unknown_node_is_one_line(write) -> None:
    plugin = write("plugins/gelu.py", DECOMPOSE_GELU)
    code, out, err = run_ge("passes", "explain", "DecomposeGelu", GELU_MLP, "--pass-path",
                            str(plugin), "--node", "Gelu")
    assert code == 1 and out == ""
    assert err == ("ge: [GE1701] graph 'main_graph' has no node named 'Gelu'; did you mean "
                   "'/act1/Gelu', '/act2/Gelu'?\n")


def test_a_before_infer_shape_decomposition_refuses_untyped_gelus(write,
                                                                  tmp_path: Path) -> None:
    """At BeforeInferShape the Gelus' inputs have no type yet: both refused, as the
    compilation does, and the warning says why."""
    plugin = write("plugins/early.py", EARLY_GELU)
    code, out, err = run_ge("passes", "explain", "EarlyGelu", GELU_MLP, "--pass-path",
                            str(plugin))
    assert code == 0
    lines = out.splitlines()
    assert lines[1] == ("matched against the model as loaded, before shape inference: the "
                        "pass's stage")
    assert lines[2] == "op types Gelu (graph main_graph): 2 candidate(s), 0 would be rewritten"
    assert lines[4].endswith("the pass refuses this node; its inputs: input_0 unknown "
                             "type[unknown rank]")
    assert lines[5].startswith("      warning: meet_requirements returned False while shape or "
                               "type information is missing (input 0 of '/act1/Gelu', output "
                               "0 of '/act1/Gelu' unknown): the pass runs at BeforeInferShape")
    assert err.startswith("ge: warning: op types Gelu (graph main_graph): 2 check(s) made "
                          "while shape, type or schema information was missing")
    code, record = _compile(plugin, tmp_path, "EarlyGelu")
    assert code == 0 and isinstance(record, dict)
    assert (record["outcome"], record["matches"], record["rewrites"]) == ("not_changed", 2, 0)


def test_a_raising_hook_is_explained_where_a_compilation_fails(write, tmp_path: Path) -> None:
    """explain shows the exception at the user's line, as the E13028 of `ge compile`
    names it; explaining is not running, so the command succeeds."""
    plugin = write("plugins/raising.py", RAISING)
    code, out, err = run_ge("passes", "explain", "RaisingGelu", GELU_MLP, "--pass-path",
                            str(plugin))
    assert code == 0 and err == ""
    at = f"{plugin}:{_line(RAISING, 'raise ValueError')}"
    assert out.splitlines()[5] == (
        f"    1. '/act2/Gelu' (Gelu): meet_requirements raised ValueError: tanh is not "
        f"supported (at {at}); its inputs: input_0 float[4, 64]")
    code, message = _compile(plugin, tmp_path, "RaisingGelu")
    assert code == 1
    assert message == ("Failed to run custom fusion pass RaisingGelu. Return code: FAILED. "
                       "Reason: ValueError: tanh is not supported.")
    _, _, err = run_ge("compile", GELU_MLP, "-o", str(tmp_path / "out.onnx"), "--pass-path",
                       str(plugin), "--no-builtin")
    assert err.endswith(f"(pass RaisingGelu, stage AfterInferShape, at {at})\n")


def test_a_pass_that_cannot_be_created_is_E13028(write) -> None:
    plugin = write("plugins/broken.py", BROKEN)
    code, out, err = run_ge("passes", "explain", "BrokenGelu", GELU_MLP, "--pass-path",
                            str(plugin))
    assert code == 1 and out == ""
    at = f"{plugin}:{_line(BROKEN, 'raise RuntimeError')}"
    assert err == ("ge: [E13028] Failed to run custom fusion pass BrokenGelu. Return code: "
                   "FAILED. Reason: could not create the pass: RuntimeError: no config. (pass "
                   f"BrokenGelu, stage AfterInferShape, at {at})\n")


def test_the_example_of_docs_passes_md_is_what_the_command_prints(tmp_path: Path) -> None:
    """docs/passes.md shows `my_passes/gelu.py` and the explanation of it (its paths under
    /home/me): written with its header line, the pass explains as printed."""
    import re

    doc = (Path(__file__).resolve().parents[2] / "docs" / "passes.md").read_text()
    (source,) = re.findall(r"```python\n(# my_passes/gelu\.py\n.*?)```", doc, re.S)
    (printed,) = re.findall(r"```console\n\$ ge passes explain DecomposeGelu (.*?)\n(.*?)```",
                            doc, re.S)
    command, output = printed
    plugin = tmp_path / "my_passes" / "gelu.py"
    plugin.parent.mkdir()
    plugin.write_text(source)
    model = tmp_path / "gelu_mlp_opset20.onnx"
    model.write_bytes(Path(GELU_MLP).read_bytes())
    assert command == "gelu_mlp_opset20.onnx --pass-path my_passes/gelu.py"
    code, out, err = run_ge("passes", "explain", "DecomposeGelu", str(model), "--pass-path",
                            str(plugin))
    assert code == 0 and err == ""
    expected = output.replace("/home/me/my_passes/gelu.py", str(plugin)).replace(
        " on gelu_mlp_opset20.onnx ", f" on {model} ")
    assert out == expected
