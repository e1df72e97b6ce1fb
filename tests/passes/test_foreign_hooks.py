"""Hooks of onnxscript's rewriter (a rule's `check`, `rewrite`, `pattern`) in a ge pass are
never called; each gets a PassDefinitionWarning at its `def` line when the plugin loads
(trial EE: a `check` refusing `Pow(d, 3)` never ran, and the LayerNorm fusion fired on it).
A helper of such a name beside the ge hook it would shadow is left alone."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from onnx import helper

import ge
from ge.errors import PassDefinitionWarning, PassRunError
from ge.testing import make_model

PLUGIN = '''
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="ReluToSigmoid", stage=PassStage.AFTER_INFER_SHAPE)
class ReluToSigmoid(PatternFusionPass):
    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    def check(self, context, x):
        return False

    def replacement(self, inputs):
        return es.Sigmoid(inputs[0])


@register_fusion_pass(name="NegToRelu", stage=PassStage.AFTER_INFER_SHAPE)
class NegToRelu(PatternFusionPass):
    def pattern(self, op, x):
        return op.Neg(x)

    def rewrite(self, op, x):
        return op.Relu(x)


class Template(PatternFusionPass):
    """Its hooks call template methods its subclasses give (trial FF's false positive)."""

    def meet_requirements(self, match_result):
        return self.check(match_result)

    def replacement(self, inputs):
        return self.rewrite(inputs)


@register_fusion_pass(name="Templated", stage=PassStage.AFTER_INFER_SHAPE)
class Templated(Template):
    @pattern
    def sigmoid(self, inputs):
        return es.Sigmoid(inputs[0])

    def check(self, match_result):
        return True

    def rewrite(self, inputs):
        return es.Sigmoid(inputs[0])


@register_fusion_pass(name="Helpers", stage=PassStage.AFTER_INFER_SHAPE)
class Helpers(PatternFusionPass):
    @pattern
    def tanh(self, inputs):
        return es.Tanh(inputs[0])

    def check(self, node):
        return True

    def meet_requirements(self, match_result):
        return self.check(match_result)

    def replacement(self, inputs):
        return es.Tanh(inputs[0])
'''


def _warnings(tmp_path: Path) -> list[warnings.WarningMessage]:
    """The PassDefinitionWarnings of a compilation with PLUGIN; it fails, as NegToRelu has
    no patterns at all (E13028 at its class line)."""
    plugin = tmp_path / "rules.py"
    plugin.write_text(PLUGIN)
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], [("y", [2])])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(PassRunError, match=r"NegToRelu\.patterns\(\) is not implemented"):
            ge.compile(model, pass_paths=[plugin], builtin_passes=False)
    return [w for w in caught if issubclass(w.category, PassDefinitionWarning)]


def test_onnxscript_hooks_are_warned_at_their_lines(tmp_path: Path) -> None:
    caught = _warnings(tmp_path)
    lines = PLUGIN.splitlines()
    where = {str(w.message).split("(")[0]: (w.filename, w.lineno) for w in caught}
    plugin = str(tmp_path / "rules.py")
    assert where == {
        "ReluToSigmoid.check": (plugin, lines.index("    def check(self, context, x):") + 1),
        "NegToRelu.pattern": (plugin, lines.index("    def pattern(self, op, x):") + 1),
        "NegToRelu.rewrite": (plugin, lines.index("    def rewrite(self, op, x):") + 1),
    }  # (Helpers' check beside its meet_requirements is its own helper, Templated's
    #    check and rewrite are what its base's hooks call)
    check = next(str(w.message) for w in caught if "ReluToSigmoid" in str(w.message))
    assert check == (
        "ReluToSigmoid.check() is never called: ge calls meet_requirements(), not check() "
        "(onnxscript's rewriter calls a rule's check(); a ge pattern pass's hooks are listed "
        f"in docs/passes.md) (at {plugin}:{where['ReluToSigmoid.check'][1]})")
    pattern = next(str(w.message) for w in caught if "NegToRelu.pattern" in str(w.message))
    assert "ge takes patterns from methods decorated with @pattern" in pattern
