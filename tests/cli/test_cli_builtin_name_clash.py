"""A plugin pass named like a built-in pass is refused (E13030) however the built-in is
switched: names are how --disable, --enable, the fusion switch file and reports tell passes
apart. The hint says to rename the pass: `ge.passes.disabled_plugins` cannot leave a
built-in out, and --no-builtin or --disable does not free its name (trial E)."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from cli_helpers import run_ge
from onnx import TensorProto, helper

pytestmark = pytest.mark.builtin_passes

PLUGIN = """
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="MatMulAddFusion", stage=PassStage.AFTER_INFER_SHAPE)
class Mine(FusionBasePass):
    def run(self, graph, context):
        return 1
"""


@pytest.mark.parametrize("switch", [["--no-builtin"], ["--disable", "MatMulAddFusion"], []])
def test_a_plugin_pass_with_a_builtins_name_is_told_to_rename(
        tmp_path: Path, switch: list[str]) -> None:
    model = _relu_model(tmp_path)
    plugin = tmp_path / "mine.py"
    plugin.write_text(PLUGIN)
    out = tmp_path / "out.onnx"
    code, stdout, _ = run_ge("compile", str(model), "-o", str(out), "--pass-path",
                             str(plugin), "--json", *switch)
    assert code == 1 and not out.exists()
    error = json.loads(stdout)
    assert (error["code"], error["type"]) == ("E13030", "DuplicatePassNameError")
    assert error["message"] == (
        f"python pass name already exists: MatMulAddFusion; Mine ({plugin}:6) reuses the "
        "name of MatMulAddFusion (built-in); a plugin pass may not take the name of a "
        "built-in pass (names are how --disable, --enable, the fusion switch file and "
        "reports tell passes apart), with the built-in turned off too: rename your pass")
    assert "disabled_plugins" not in error["message"]


def _relu_model(tmp_path: Path) -> Path:
    model = tmp_path / "relu.onnx"
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    return model


BUILTIN_CLASH = ("python pass name already exists: MatMulAddFusion; Mine ({plugin}:6) reuses "
                 "the name of MatMulAddFusion (built-in)")


@pytest.mark.parametrize("where", ["pass-path", "environment"])
def test_a_builtins_name_is_told_beside_the_other_failures(
        tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial V: three plugins named like a built-in were "2 failed to register" (the second
    and third against the first), and a built-in clash beside an import error was the
    import error alone; the first's clash with the built-in is told too, after them."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    for name in ("a_mine", "b_mine", "c_mine"):
        (folder / f"{name}.py").write_text(PLUGIN)
    (folder / "d_broken.py").write_text("import no_such_module_here\n")
    out = tmp_path / "out.onnx"
    args = ["compile", str(_relu_model(tmp_path)), "-o", str(out), "--json"]
    if where == "pass-path":
        code, stdout, _ = run_ge(*args, "--pass-path", str(folder))
    else:
        monkeypatch.setenv("ASCEND_GE_PY_PASS_PATH", str(folder))
        code, stdout, _ = run_ge(*args)
    assert code == 1 and not out.exists()
    message = json.loads(stdout)["message"]
    assert message.startswith("4 python pass plugins failed to load:")
    first = folder / "a_mine.py"
    for later in ("b_mine", "c_mine"):
        assert (f"Mine at {folder / later}.py:6 reuses the name of Mine at {first}:6"
                in message)
    assert "No module named 'no_such_module_here'" in message
    assert BUILTIN_CLASH.format(plugin=first) in message
    assert message.index("no_such_module_here") < message.index("(built-in)")
