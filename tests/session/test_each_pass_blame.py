"""`verify="each-pass"` names what the failing pass did and where in its code (trial AD):
a constant it changed in place (not made: folding makes many) among the nodes, and the
line of its file that changed them (a FusionBasePass) or its `replacement` (a pattern
pass), where the class statement was all it gave."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from onnx import helper, numpy_helper

import ge
from ge.errors import VerificationError
from ge.testing import make_model

# Folds Mul(Mul(x, c1), c2) into the inner constant in place, whatever else reads it.
IN_PLACE = """\
import numpy as np

from ge.graph import Tensor
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="FoldInPlace", stage=PassStage.AFTER_INFER_SHAPE)
class FoldInPlace(FusionBasePass):
    def run(self, graph, context):
        outer = graph.find_node_by_name("outer")
        inner, _ = outer.get_in_data_nodes_and_port_indexes(0)
        c1, _ = inner.get_in_data_nodes_and_port_indexes(1)
        c2, _ = outer.get_in_data_nodes_and_port_indexes(1)
        folded = c1.get_attr("value").numpy() * c2.get_attr("value").numpy()
        c1.set_attr("value", Tensor(np.asarray(folded, np.float32)))  # THE BUG
        graph.replace_all_uses(outer, 0, inner, 0)
        graph.remove_node(outer)
        return True
"""

# Gemm with transB=1: wrong for the square weight.
TRANSPOSED = """\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="BadGemm", stage=PassStage.AFTER_INFER_SHAPE)
class BadGemm(PatternFusionPass):
    @pattern
    def linear(self, inputs):
        return es.MatMul(inputs[0], inputs[1]) + inputs[2]

    def replacement(self, inputs):
        return es.Gemm(inputs[0], inputs[1], inputs[2], transB=1)
"""


# Each MatMul + Add as a Gemm whose output has a new name; the second transposed (wrong).
NEW_NAMES = """\
from ge.passes import FusionBasePass, PassStage, register_fusion_pass


@register_fusion_pass(name="GemmNewNames", stage=PassStage.BEFORE_INFER_SHAPE)
class GemmNewNames(FusionBasePass):
    def run(self, graph, context):
        for i in range(3):
            mm, add = graph.find_node_by_name(f"mm{i}"), graph.find_node_by_name(f"add{i}")
            gemm = graph.add_node("Gemm", name=f"gemm{i}", num_inputs=3,
                                  attrs={"transB": int(i == 1)})  # THE BUG
            for port, (node, index) in enumerate((mm.get_in_data_nodes_and_port_indexes(0),
                                                  mm.get_in_data_nodes_and_port_indexes(1),
                                                  add.get_in_data_nodes_and_port_indexes(1))):
                graph.add_data_edge(node, index, gemm, port)
            graph.replace_all_uses(add, 0, gemm, 0)
            graph.remove_nodes([mm, add])
        return True
"""


def _plugin(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "plugin.py"
    path.write_text(source)
    return path


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_constant_changed_in_place_is_named_with_its_line(tmp_path: Path) -> None:
    """`z = Relu(Mul(x, c1))` reads the inner Mul too: folding c2 into c1 in place changes
    z. The error named no node (the constant was left out) and the class line."""
    plugin = _plugin(tmp_path, IN_PLACE)
    model = make_model(
        [helper.make_node("Mul", ["x", "c1"], ["m"], name="inner"),
         helper.make_node("Mul", ["m", "c2"], ["y"], name="outer"),
         helper.make_node("Relu", ["m"], ["z"], name="relu")],
        [("x", [4])], [("y", [4]), ("z", [4])],
        [numpy_helper.from_array(np.full(4, 0.5, np.float32), "c1"),
         numpy_helper.from_array(np.full(4, 3.0, np.float32), "c2")])
    with pytest.raises(VerificationError) as caught:
        ge.compile(model, pass_paths=[plugin], verify="each-pass")
    err = caught.value
    assert err.pass_name == "FoldInPlace"
    assert err.message.endswith("; pass FoldInPlace changed 'c1'; the first value it changed "
                                "that differs from the original's: constant 'c1' (max abs "
                                "diff 1)")  # (it named no node)
    assert err.location is not None
    assert (err.location.file, err.location.line) == (str(plugin), _line(plugin, "THE BUG"))


def _three_linear_layers() -> Any:
    """x -> 3 x (MatMul 4x4, Add, Relu) -> y; the first and last weights symmetric, so that
    a Gemm of the weight transposed is right for them and wrong for the second."""
    rng = np.random.default_rng(0)
    nodes, constants = [], []
    for i in range(3):
        source = "x" if i == 0 else f"r{i - 1}"
        nodes += [helper.make_node("MatMul", [source, f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node("Relu", [f"a{i}"], [f"r{i}" if i < 2 else "y"],
                                   name=f"relu{i}")]
        weight = rng.standard_normal((4, 4)).astype(np.float32)
        constants += [numpy_helper.from_array(weight if i == 1 else weight + weight.T,
                                              f"w{i}"),
                      numpy_helper.from_array(np.full(4, 0.1, np.float32), f"b{i}")]
    return make_model(nodes, [("x", [2, 4])], [("y", [2, 4])], constants)


def test_a_rewrite_giving_a_new_name_is_named_through_its_reader(tmp_path: Path) -> None:
    """Trial AE: the wrong Gemm's output has a name the original lacks; its reader, the
    Relu, was named as the first difference and the line of the first Gemm given."""
    plugin = _plugin(tmp_path, NEW_NAMES)
    with pytest.raises(VerificationError) as caught:
        ge.compile(_three_linear_layers(), pass_paths=[plugin], verify="each-pass")
    err = caught.value
    assert "; the first value it changed that differs from the original's: 'r1' of Relu " \
        "node 'relu1' (max abs diff " in err.message
    assert err.message.endswith(", which reads 'gemm1:0' of Gemm node 'gemm1', a value the "
                                "original has no name for")
    # (the line that last changed gemm1: its last input wired)
    assert err.location is not None and err.location.line == _line(
        plugin, "graph.add_data_edge(node, index, gemm, port)")


def test_a_pattern_pass_is_located_at_its_replacement_and_its_wrong_rewrite_named(
        tmp_path: Path) -> None:
    """Three Linear layers, the pass writing each as a Gemm of the weight transposed: right
    for the first and the last, whose weights are symmetric, wrong for the second. The
    error names the pass, its replacement's line, and the first value that differs: the
    second Gemm's (trial AD cut the model up by hand to find it)."""
    plugin = _plugin(tmp_path, TRANSPOSED)
    model = _three_linear_layers()
    with pytest.raises(VerificationError) as caught:
        ge.compile(model, pass_paths=[plugin], verify="each-pass")
    err = caught.value
    assert err.pass_name == "BadGemm" and "; pass BadGemm changed " in err.message
    assert "; the first value it changed that differs from the original's: 'a1' of Gemm " \
        "node " in err.message
    assert err.location is not None
    assert (err.location.file, err.location.line) == (str(plugin),
                                                      _line(plugin, "def replacement"))
