"""E13028 of a hook that raised inside a helper module of the user's names the helper's line
beside the pass file's (trial KK: `meet_requirements` calling `_helpers.last_dim`, which
raised at line 3, was reported at the pass file's call line only)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper

import ge
from ge.cli import cli
from ge.errors import PassRunError
from ge.passes.source import innermost_user_location
from ge.testing import load_passes, run_pass

#: The pass; {call} is what its meet_requirements returns (line 13 of the file).
PASS = """\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass
from _helpers import Mixin, last_dim, parsed, shape_of_missing


@register_fusion_pass(name="UsesHelper", stage=PassStage.AFTER_INFER_SHAPE)
class UsesHelper({bases}):
    @pattern
    def silu(self, inputs):
        return inputs[0] * es.Sigmoid(inputs[0])
{hook}
    def replacement(self, inputs):
        return es.Sigmoid(inputs[0]) * inputs[0]
"""
HOOK = """
    def meet_requirements(self, match_result):
        x = match_result.get_captured_tensor(0)
        return {call}
"""
CALL_LINE = 14  # the `return` of HOOK in PASS

HELPERS = """\
def last_dim(desc):
    dims = list(desc.get_shape())
    return dims[7]


def parsed(text):
    import json
    return json.loads(text)


def shape_of_missing(match_result):
    return match_result.get_captured_tensor(5)


class Mixin:
    def meet_requirements(self, match_result, context):
        return 1 / 0
"""


def _model(path: Path) -> Path:
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 16]) for n in "xy"]
    graph = helper.make_graph([helper.make_node("Sigmoid", ["x"], ["s"], name="sig"),
                               helper.make_node("Mul", ["x", "s"], ["y"], name="mul")],
                              "g", vi[:1], vi[1:])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _plugins(tmp_path: Path, call: str | None, bases: str = "PatternFusionPass") -> Path:
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "_helpers.py").write_text(HELPERS)
    hook = textwrap.dedent(HOOK).format(call=call) if call is not None else ""
    (folder / "p.py").write_text(PASS.format(hook=textwrap.indent(hook, "    "), bases=bases))
    return folder


def _error(tmp_path: Path, call: str | None, bases: str = "PatternFusionPass"
           ) -> tuple[PassRunError, Path]:
    folder = _plugins(tmp_path, call, bases)
    with pytest.raises(PassRunError) as caught:
        ge.compile(_model(tmp_path / "m.onnx"), pass_paths=[folder])
    return caught.value, folder


def test_a_helper_module_that_raised_is_named(tmp_path: Path) -> None:
    err, folder = _error(tmp_path, "last_dim(x.node.get_output_desc(x.index)) == 3")
    assert (err.location.file, err.location.line) == (str(folder / "p.py"), CALL_LINE)
    assert (err.raised_in.file, err.raised_in.line) == (str(folder / "_helpers.py"), 3)
    assert str(err).endswith(f"(pass UsesHelper, stage AfterInferShape, at {folder}/p.py:"
                             f"{CALL_LINE}, raised in {folder}/_helpers.py:3)")
    assert err.details()["raised_in"] == f"{folder}/_helpers.py:3"


def test_the_line_that_called_the_library_is_named(tmp_path: Path) -> None:
    """json raised, in the standard library: the helper's line calling it is the user's."""
    err, folder = _error(tmp_path, "parsed('{')")
    assert str(err.raised_in) == f"{folder}/_helpers.py:8"


def test_the_line_that_called_ge_is_named(tmp_path: Path) -> None:
    err, folder = _error(tmp_path, "shape_of_missing(match_result) is not None")
    assert str(err.raised_in) == f"{folder}/_helpers.py:12"
    assert str(err.location) == f"{folder}/p.py:{CALL_LINE}"


def test_a_hook_inherited_from_a_helper_module(tmp_path: Path) -> None:
    """No line of the pass file raised: the location is its class, the helper's line
    where it raised is added."""
    err, folder = _error(tmp_path, None, bases="Mixin, PatternFusionPass")
    assert str(err.location) == f"{folder}/p.py:7"  # its class statement
    assert str(err.raised_in) == f"{folder}/_helpers.py:17"


def test_an_error_in_the_pass_file_adds_nothing(tmp_path: Path) -> None:
    err, folder = _error(tmp_path, "[][1]")
    assert str(err.location) == f"{folder}/p.py:{CALL_LINE}"
    assert err.raised_in is None and "raised in" not in str(err)
    assert err.details()["raised_in"] is None


def test_ge_testing_and_the_command_name_it_too(tmp_path: Path) -> None:
    folder = _plugins(tmp_path, "last_dim(x.node.get_output_desc(x.index)) == 3")
    model = _model(tmp_path / "m.onnx")
    with load_passes([folder]) as passes, pytest.raises(PassRunError) as caught:
        run_pass("UsesHelper", model, passes=passes)
    assert str(caught.value.raised_in) == f"{folder}/_helpers.py:3"
    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(tmp_path / "o.onnx"),
                                      "--pass-path", str(folder)])
    assert result.exit_code != 0
    assert f"at {folder}/p.py:{CALL_LINE}, raised in {folder}/_helpers.py:3)" in result.stderr


def test_library_frames_are_not_the_users(tmp_path: Path) -> None:
    """The standard library's frames are passed over, but a file in the plugin's own
    folder is the user's even there (a plugin installed as a package)."""
    def raise_in_json() -> None:
        import json
        json.loads("{")

    with pytest.raises(ValueError) as caught:
        raise_in_json()
    tb = caught.value.__traceback__
    assert innermost_user_location(tb).file == __file__
    json_file = innermost_user_location(tb, plugin_file=json_module_file()).file
    assert Path(json_file).parent == Path(json_module_file()).parent


def json_module_file() -> str:
    import json.decoder

    return str(json.decoder.__file__)
