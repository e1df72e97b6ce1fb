"""A plugin that defines a complete pass class but registers no pass loaded in silence, and
ge never ran the pass (trial EE, an onnxscript user, forgot the decorator): each such class
gets a PassDefinitionWarning at its class statement, every compilation. A base class (no
hooks of its own, or registered subclasses) does not."""

from __future__ import annotations

import warnings
from pathlib import Path

from onnx import helper

import ge
from ge.errors import PassDefinitionWarning
from ge.testing import make_model

FORGOTTEN = '''
import ge.es.all as es
from ge.passes import PatternFusionPass, pattern


class ReluToSigmoid(PatternFusionPass):
    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    def replacement(self, inputs):
        return es.Sigmoid(inputs[0])


class Base(PatternFusionPass):
    def replacement(self, inputs):
        return es.Sigmoid(inputs[0])
'''

REGISTERED = '''
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


class Base(PatternFusionPass):
    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])


@register_fusion_pass(name="RegisteredReluToSigmoid", stage=PassStage.AFTER_INFER_SHAPE)
class ReluToSigmoid(Base):
    def replacement(self, inputs):
        return es.Sigmoid(inputs[0])
'''


def _definition_warnings(plugin: Path) -> list[warnings.WarningMessage]:
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", [2])], [("y", [2])])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ge.compile(model, pass_paths=[plugin], builtin_passes=False)
    return [w for w in caught if issubclass(w.category, PassDefinitionWarning)]


def test_a_forgotten_decorator_is_warned_at_the_class(tmp_path: Path) -> None:
    plugin = tmp_path / "forgotten.py"
    plugin.write_text(FORGOTTEN)
    line = FORGOTTEN.splitlines().index("class ReluToSigmoid(PatternFusionPass):") + 1
    for _ in range(2):  # every compilation (the second takes the plugin as loaded)
        (warning,) = _definition_warnings(plugin)
        assert (warning.filename, warning.lineno) == (str(plugin), line)
        assert str(warning.message) == (
            f"ReluToSigmoid in {plugin} is never run: the plugin registers no pass, and "
            "ReluToSigmoid has no @register_fusion_pass(name=..., stage=...) "
            f"(at {plugin}:{line})")


def test_a_base_class_of_registered_passes_is_not_warned(tmp_path: Path) -> None:
    plugin = tmp_path / "registered.py"
    plugin.write_text(REGISTERED)
    assert _definition_warnings(plugin) == []


def test_a_class_another_plugin_registers_is_not_warned(tmp_path: Path) -> None:
    """A folder's plugin defines the pass, another imports it by name (its own module of
    the file) and registers it: the class runs, and neither file is warned about (trial
    FF: the first was, as never run)."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "tagneg.py").write_text(FORGOTTEN)
    (folder / "zregister.py").write_text(
        "from ge.passes import PassStage, register_fusion_pass\n"
        "from tagneg import ReluToSigmoid\n"
        "register_fusion_pass(name='TagNeg', stage=PassStage.AFTER_INFER_SHAPE)"
        "(ReluToSigmoid)\n")
    assert _definition_warnings(folder) == []
