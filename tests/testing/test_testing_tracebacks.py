"""A pass failing under `ge.testing` shows the test's line and the pass's, not ge's (trial
KK: a replacement raising inside `run_pass` gave pytest ~108 lines, `ge/testing/running.py`
frames and the whole source of `Invocation.run` among them, while docs/testing.md said
ge.testing's own frames are hidden).

The project does not enable pytest's `pytester`; a pass author's test folder is written
and pytest run on it in a subprocess, with the `ge` pytest plugin, as the author runs it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ge.passes.bootstrap import ENV_PY_PASS_PATH

SRC = Path(__file__).resolve().parents[2] / "src"

PLUGIN = """\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


class SiluPass(PatternFusionPass):
    @pattern
    def silu(self, inputs):
        return inputs[0] * es.Sigmoid(inputs[0])

    def replacement(self, inputs):
        return es.Sigmoid(inputs[0]) * inputs[0]


@register_fusion_pass(name="RaisesInReplacement", stage=PassStage.AFTER_INFER_SHAPE)
class RaisesInReplacement(SiluPass):
    def replacement(self, inputs):
        return list(inputs[0].get_tensor_desc().get_shape())[5]  # IndexError, line 17


@register_fusion_pass(name="AsksMissingAttribute", stage=PassStage.AFTER_INFER_SHAPE)
class AsksMissingAttribute(SiluPass):
    def meet_requirements(self, match_result):
        return match_result.get_matched_nodes()[0].get_attr("alpha")  # line 23


@register_fusion_pass(name="ReturnsNone", stage=PassStage.AFTER_INFER_SHAPE)
class ReturnsNone(SiluPass):
    def replacement(self, inputs):
        return None


@register_fusion_pass(name="AsksCaptureTwo", stage=PassStage.AFTER_INFER_SHAPE)
class AsksCaptureTwo(SiluPass):
    def meet_requirements(self, match_result):
        return match_result.get_captured_tensor(2)  # line 35
"""

TESTS = """\
from pathlib import Path

from onnx import helper

import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass
from ge.testing import assert_rewrites, find_matches, run_pass

HERE = Path(__file__).parent
NODES = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]


def model(ge_model):
    return ge_model(NODES, [("x", [2, 16])], [("y", [2, 16])])


def test_run_pass(ge_model, ge_passes):
    run_pass("RaisesInReplacement", model(ge_model), passes=ge_passes(HERE / "plugin.py"))


def test_find_matches(ge_model, ge_passes):
    find_matches("AsksMissingAttribute", model(ge_model), passes=ge_passes(HERE / "plugin.py"))


def test_capture_index(ge_model, ge_passes):
    find_matches("AsksCaptureTwo", model(ge_model), passes=ge_passes(HERE / "plugin.py"))


def test_assert_rewrites(ge_model, ge_passes):
    passes = ge_passes(HERE / "plugin.py")
    assert_rewrites("ReturnsNone", model(ge_model), 1, passes=passes)


def test_load_passes(ge_passes):
    ge_passes(HERE / "broken.py")


@register_fusion_pass(name="InTheTestFile", stage=PassStage.AFTER_INFER_SHAPE)
class InTheTestFile(PatternFusionPass):
    @pattern
    def silu(self, inputs):
        return inputs[0] * es.Sigmoid(inputs[0])

    def replacement(self, inputs):
        return inputs[7]


def test_pass_in_the_test_file(ge_model):
    run_pass(InTheTestFile, model(ge_model))
"""


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """pytest's output for each test of the author's folder, by test name."""
    folder = tmp_path_factory.mktemp("author")
    (folder / "plugin.py").write_text(PLUGIN)
    (folder / "broken.py").write_text("import ge.passes\n\nRATIO = 1 / 0\n")
    (folder / "test_author.py").write_text(TESTS)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS", ENV_PY_PASS_PATH)}
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *filter(None, [env.get("PYTHONPATH")])])
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--rootdir", ".",
         "test_author.py"], cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert "6 failed" in run.stdout, run.stdout + run.stderr
    sections = re.split(r"^_{3,} (test_\w+) _{3,}$", run.stdout, flags=re.M)
    return dict(zip(sections[1::2], sections[2::2]))


def _frames(out: str) -> list[str]:
    """The frames pytest printed: `file:line: ...` lines."""
    return re.findall(r"^(\S+\.py):\d+: ", out, re.M)


pytestmark = pytest.mark.slow


def test_a_raising_replacement_shows_its_line_and_the_tests(session: dict[str, str]) -> None:
    out = session["test_run_pass"]
    assert _frames(out) == ["plugin.py", "test_author.py"]
    assert ">       return list(inputs[0].get_tensor_desc().get_shape())[5]" in out
    assert "plugin.py:17: IndexError" in out
    assert '>       run_pass("RaisesInReplacement", model(ge_model)' in out
    assert re.search(r"^E +ge\.errors\.PassRunError: \[E13028\] .* at \S+plugin\.py:17\)$",
                     out, re.M)
    assert len(out.splitlines()) < 40, out


def test_a_ge_error_ends_at_the_users_call(session: dict[str, str]) -> None:
    """What ge raised at the hook's call (a GraphError) ends at the hook's line: the error
    says what is wrong, ge's lines that raised it are ge's."""
    out = session["test_find_matches"]
    assert _frames(out) == ["plugin.py", "test_author.py"]
    assert re.search(r"^E +ge\.errors\.GraphError: \[GE1001\] node .* has no attribute "
                     r"'alpha'$", out, re.M)
    assert "plugin.py:23: GraphError" in out


def test_a_capture_index_out_of_range_ends_at_the_hooks_line(session: dict[str, str]
                                                             ) -> None:
    """Trial U: a MatchResult asked for capture 2 of 2 raised a plain RuntimeError, so the
    traceback kept ge's matcher.py frame (with locals reading `<MatchResult expired>`); it
    is a MatchResultError (GE1503, a RuntimeError), ge's own diagnostic: the hook's line."""
    out = session["test_capture_index"]
    assert _frames(out) == ["plugin.py", "test_author.py"]
    assert "plugin.py:35: MatchResultError" in out
    assert "capture index 2 is out of range; pattern" in out


def test_what_ge_refused_of_a_hook_shows_no_ge_frames(session: dict[str, str]) -> None:
    out = session["test_assert_rewrites"]
    assert _frames(out) == ["test_author.py"]
    assert out.lstrip().startswith("TypeError: Expression-style replacement must return")
    assert "at " in out and "plugin.py:28)" in out  # the E13028 names the hook's line


def test_a_plugin_failing_to_import(session: dict[str, str]) -> None:
    out = session["test_load_passes"]
    assert _frames(out) == ["broken.py", "test_author.py"]
    assert re.search(r"^E +ge\.errors\.PluginLoadError: \[E13029\] ", out, re.M)


def test_a_pass_in_the_test_file(session: dict[str, str]) -> None:
    out = session["test_pass_in_the_test_file"]
    assert _frames(out) == ["test_author.py", "test_author.py"]


def test_no_frame_of_ge_is_shown(session: dict[str, str]) -> None:
    for name, out in session.items():
        assert f"{os.sep}ge{os.sep}" not in out, (name, out)
        assert "Invocation" not in out, (name, out)
