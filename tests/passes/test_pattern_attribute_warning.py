"""A plugin pattern that sets attributes while attribute matching is off (GE's default) gets
a PassDefinitionWarning at its `@pattern` line: the attributes are not compared, so
`Transpose(x, perm=[1, 0])` matches every Transpose (trial R wrote two such patterns, one
of them the docs' own example, and one matched attention's 4-D Transpose), and a required
one too: `Cast(x, to=DOUBLE)` matched a Cast to int32 (trial EE)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from onnx import helper

import ge
from ge.errors import PassDefinitionWarning
from ge.testing import make_model

PLUGIN = '''
import ge.es.all as es
from ge.passes import (
    PassStage,
    PatternFusionPass,
    PatternMatcherConfigBuilder,
    pattern,
    register_fusion_pass,
)


@register_fusion_pass(name="DropTranspose", stage=PassStage.AFTER_INFER_SHAPE)
class DropTranspose(PatternFusionPass):
    def __init__(self):
        super().__init__({config})

    @pattern
    def swap(self, inputs):
        return es.Relu(es.{op})

    def replacement(self, inputs):
        return es.Sigmoid(es.{op})
'''


def _compile(tmp_path: Path, config: str, op: str, source: str = PLUGIN
             ) -> list[warnings.WarningMessage]:
    plugin = tmp_path / "drop_transpose.py"
    plugin.write_text(source.format(config=config, op=op))
    model = make_model([helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0]),
                        helper.make_node("Relu", ["t"], ["y"])], [("x", [2, 3])], [("y", [3, 2])])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ge.compile(model, pass_paths=[plugin], builtin_passes=False)
    return [w for w in caught if issubclass(w.category, PassDefinitionWarning)]


def test_an_optional_attribute_not_compared_is_warned_at_the_pattern(tmp_path: Path) -> None:
    (warning,) = _compile(tmp_path, "", "Transpose(inputs[0], perm=[1, 0])")
    line = PLUGIN.splitlines().index("    @pattern") + 1
    assert (warning.filename, warning.lineno) == (str(tmp_path / "drop_transpose.py"), line)
    assert str(warning.message) == (
        "pattern 'DropTranspose_swap_pattern' of DropTranspose sets attributes of "
        "Transpose(perm), which are not compared: the matcher compares attributes only with "
        "PatternMatcherConfigBuilder().enable_ir_attr_match() (GE's rule), so the pattern "
        "matches those operators whatever their attributes are; enable it, or leave that "
        "attribute unset in the pattern (Transpose(perm)) and check it in meet_requirements "
        f"(at {tmp_path / 'drop_transpose.py'}:{line})")


def test_a_required_attribute_not_compared_is_warned_too(tmp_path: Path) -> None:
    """Given because the operator needs it, still read as what the pattern wants, unless
    the pass has a meet_requirements, which may check it (trial FF's read the real axis:
    the warning on every compilation was noise)."""
    (warning,) = _compile(tmp_path, "", "Concat([inputs[0], inputs[0]], axis=0)")
    assert "sets attributes of Concat(axis), which are not compared" in str(warning.message)
    checked = PLUGIN.replace("    def replacement(self, inputs):",
                             "    def meet_requirements(self, match_result):\n"
                             "        return True\n\n"
                             "    def replacement(self, inputs):")
    assert _compile(tmp_path, "", "Concat([inputs[0], inputs[0]], axis=0)", checked) == []
    (warning,) = _compile(tmp_path, "", "Concat([inputs[0], inputs[0]], axis=0)")
    assert str(warning.message).endswith(  # (no optional one: a meet_requirements is the way)
        "enable it, or check them in meet_requirements "
        f"(at {tmp_path / 'drop_transpose.py'}:{PLUGIN.splitlines().index('    @pattern') + 1})")
    (warning,) = _compile(tmp_path, "", "Transpose(inputs[0], perm=[1, 0])", checked)
    assert "Transpose(perm)" in str(warning.message)  # an optional one, set: still warned
    # what the warning says to do silences it: the attribute left unset, checked in the hook
    assert _compile(tmp_path, "", "Transpose(inputs[0])", checked) == []


@pytest.mark.parametrize(("config", "op"), [
    ("PatternMatcherConfigBuilder().enable_ir_attr_match().build()",
     "Transpose(inputs[0], perm=[1, 0])"),
    ("PatternMatcherConfigBuilder().enable_ir_attr_match().build()",
     "Concat([inputs[0], inputs[0]], axis=0)"),
    ("", "Transpose(inputs[0])"),
], ids=["compared", "required-compared", "none-set"])
def test_no_warning_when_attributes_are_compared_or_none_is_chosen(
        tmp_path: Path, config: str, op: str) -> None:
    assert _compile(tmp_path, config, op) == []
