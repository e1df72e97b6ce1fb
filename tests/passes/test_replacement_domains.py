"""A replacement brings the opset imports of its operators' domains, and a rollback takes
them out again.

A replacement graph built with `GraphBuilder` (DecomposePass, PatternFusionPass,
SubgraphRewriter) that uses an operator of a domain the model does not import yet adds the
import as it is copied in, at the version the replacement declares; a custom domain the
model imports at another version is refused naming both. Whatever a pass adds to the opset
imports (copied in or built in place) is undone with the rest of a pass that fails, or is
skipped: the model given back is byte-identical to the model given. A node of a domain
nothing imports is an `opset-import` problem of the pass.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from matcher_helpers import model, outputs_of
from onnx import helper

import ge
from ge.errors import PassRunError
from ge.graph import Graph, load

Write = Callable[[str, str], Path]

X = [("x", [2, 4])]
Y = [("y", [2, 4])]

# A custom operator of a domain the test models do not import; the plugin registers it at
# import, so it lives as long as the compilation (see docs/ops.md).
MUL_CUSTOM = """
import numpy as np
import ge.es.all as es
import ge.es.ml as ml
from ge.es import GraphBuilder
from ge.es.custom import operator
from ge.ops import register_op
from ge.passes import (DecomposePass, FusionBasePass, PatternFusionPass, SubgraphBoundary,
                       SubgraphInput, SubgraphOutput, SubgraphRewriter, pattern,
                       register_decompose_pass, register_fusion_pass)

register_op("MulCustom", domain="other.ops", inputs=["x", "y"], outputs=["z"],
            infer=lambda ctx: [ctx.input_descs[0]],
            kernel=lambda x, y: np.multiply(x, y).astype(x.dtype))
MulCustom = operator("MulCustom", "other.ops")


def negated(name="negated", opset=None):
    b = GraphBuilder(name, opset=opset)
    return b.build_and_reset([MulCustom(b.create_input(0), -1.0)])
"""

DECOMPOSE = MUL_CUSTOM + """
@register_decompose_pass(name="D", stage="BeforeInferShape", op_types=["Neg"])
class D(DecomposePass):
    def replacement(self, node):
        return negated({opset})
"""


def _neg_relu(imports: dict[str, int] | None = None) -> onnx.ModelProto:
    proto = model([helper.make_node("Neg", ["x"], ["n"], name="neg"),
                   helper.make_node("Relu", ["n"], ["y"], name="relu")], X, Y)
    for domain, version in (imports or {}).items():
        proto.opset_import.append(helper.make_opsetid(domain, version))
    return proto


def _imports(proto: onnx.ModelProto) -> dict[str, int]:
    return {op.domain: op.version for op in proto.opset_import}


def _x() -> dict[str, np.ndarray]:
    return {"x": np.array([[0.5, -1.0, 2.0, -3.0]] * 2, np.float32)}


# -- a copied-in replacement brings its domains ------------------------------------------------
def test_a_decomposition_built_with_graph_builder_imports_its_custom_domain(
        write: Write, tmp_path: Path) -> None:
    """Neg -> other.ops::MulCustom(x, -1) from a GraphBuilder graph: the compiled model
    imports other.ops at the version the replacement declares, passes onnx.checker and
    computes what the original did (the reference evaluator runs the kernel)."""
    plugin = write("plugin.py", DECOMPOSE.format(opset=""))
    result = ge.compile(_neg_relu(), pass_paths=[plugin], verify=True)
    assert result.verification is not None and result.verification.ok
    saved = result.to_onnx()
    assert [n.op_type for n in saved.graph.node if n.op_type != "Constant"] == [
        "MulCustom", "Relu"]
    assert _imports(saved) == {"": 17, "other.ops": 1}
    onnx.checker.check_model(saved, full_check=True)


def test_a_pattern_fusion_replacement_graph_imports_its_domain(write: Write) -> None:
    """The same through a PatternFusionPass whose replacement is a GraphBuilder graph of an
    ONNX-ML operator (a domain onnxruntime runs; the pass's own semantics: Relu becomes a
    Binarizer): the saved model imports ai.onnx.ml, and onnxruntime computes x > 0.5."""
    plugin = write("plugin.py", MUL_CUSTOM + """
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    def replacement(self, inputs):
        b = GraphBuilder("binarized")
        return b.build_and_reset([ml.Binarizer(b.create_input(0), threshold=0.5)])
""")
    proto = model([helper.make_node("Relu", ["x"], ["y"], name="relu")], X, Y)
    result = ge.compile(proto, pass_paths=[plugin])
    saved = result.to_onnx()
    assert _imports(saved)["ai.onnx.ml"] >= 1
    onnx.checker.check_model(saved, full_check=True)
    feeds = _x()
    np.testing.assert_array_equal(outputs_of(saved, feeds)[0],
                                  (feeds["x"] > 0.5).astype(np.float32))


def test_a_subgraph_rewriter_replacement_imports_its_custom_domain(write: Write) -> None:
    plugin = write("plugin.py", MUL_CUSTOM + """
@register_fusion_pass(name="R", stage="BeforeInferShape")
class R(FusionBasePass):
    def run(self, graph, context):
        neg = graph.find_node_by_name("neg")
        boundary = SubgraphBoundary()
        boundary.add_input(0, SubgraphInput([(neg, 0)]))
        boundary.add_output(0, SubgraphOutput(neg, 0))
        SubgraphRewriter.replace(boundary, negated(), context=context)
        return True
""")
    result = ge.compile(_neg_relu(), pass_paths=[plugin], verify=True)
    assert result.verification is not None and result.verification.ok
    assert _imports(result.to_onnx()) == {"": 17, "other.ops": 1}


def test_a_custom_domain_imported_at_another_version_is_refused_naming_both(
        write: Write) -> None:
    """The model imports other.ops at version 2, the replacement was built at version 1: an
    operator is not known to mean the same at both, so the pass fails (E13028) naming both
    versions, and the graph is as given."""
    plugin = write("plugin.py", DECOMPOSE.format(opset='opset={"": 17, "other.ops": 1}'))
    graph = load(_neg_relu({"other.ops": 2}))
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as info:
        ge.compile(graph, pass_paths=[plugin])
    err = info.value
    assert err.code == "E13028" and err.pass_name == "D"
    assert ("replacement 'negated' imports domain 'other.ops' at version 1 (node 'MulCustom' "
            "is of that domain), the model of graph 'g' imports it at version 2") in err.message
    assert "GraphBuilder(opset={'other.ops': 2, ...})" in err.message
    assert graph.to_onnx().SerializeToString() == before


def test_a_domain_imported_at_the_same_version_is_kept_as_it_is(write: Write) -> None:
    plugin = write("plugin.py", DECOMPOSE.format(opset=""))
    result = ge.compile(_neg_relu({"other.ops": 1}), pass_paths=[plugin], verify=True)
    assert _imports(result.to_onnx()) == {"": 17, "other.ops": 1}


# -- a rolled-back pass leaves the opset imports as they were -----------------------------------
def _compile_in_place_fails(plugin: Path, proto: onnx.ModelProto) -> tuple[Graph, PassRunError]:
    """ge.compile on a ge.graph.Graph (in place) whose pass fails: the graph afterwards is
    the graph before, opset imports included, byte for byte."""
    graph = load(proto)
    imports, before = dict(graph.opset_imports), graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as info:
        ge.compile(graph, pass_paths=[plugin])
    assert info.value.code == "E13028"
    assert graph.opset_imports == imports
    assert graph.to_onnx().SerializeToString() == before
    return graph, info.value


def test_a_failing_pass_that_built_a_new_domain_in_place_leaves_no_import(
        write: Write) -> None:
    plugin = write("plugin.py", MUL_CUSTOM + """
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    @pattern
    def neg(self, inputs):
        return es.Neg(inputs[0])

    def replacement(self, inputs):
        MulCustom(inputs[0], -1.0)  # built in place: the model imports other.ops now
        raise RuntimeError("boom")
""")
    _, err = _compile_in_place_fails(plugin, _neg_relu())
    assert "RuntimeError: boom" in err.message


def test_a_failing_pass_that_copied_a_new_domain_in_leaves_no_import(write: Write) -> None:
    """The first Neg is decomposed (its replacement copied in, other.ops imported), the
    second's replacement fails: the whole pass is undone, the import too."""
    plugin = write("plugin.py", MUL_CUSTOM + """
@register_decompose_pass(name="D", stage="BeforeInferShape", op_types=["Neg"])
class D(DecomposePass):
    def replacement(self, node):
        if node.name == "second":
            raise RuntimeError("boom")
        return negated()
""")
    proto = model([helper.make_node("Neg", ["x"], ["n"], name="first"),
                   helper.make_node("Neg", ["n"], ["y"], name="second")], X, Y)
    _compile_in_place_fails(plugin, proto)


def test_a_skipped_pass_leaves_no_import_behind(write: Write) -> None:
    """on_pass_failure="skip": the pass that built an ONNX-ML operator in place (an import
    the final validation keeps, as one of ONNX's domains) is rolled back, and the compiled
    model imports what the input did."""
    plugin = write("plugin.py", MUL_CUSTOM + """
@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    def replacement(self, inputs):
        ml.Binarizer(inputs[0], threshold=0.5)
        raise RuntimeError("boom")
""")
    proto = _neg_relu()
    with pytest.warns(ge.errors.CompileWarning, match="boom"):
        result = ge.compile(proto, pass_paths=[plugin], on_pass_failure="skip")
    saved = result.to_onnx()
    assert _imports(saved) == {"": 17}
    np.testing.assert_array_equal(outputs_of(saved, _x())[0], outputs_of(proto, _x())[0])


def test_a_failing_pass_that_wrote_the_imports_directly_leaves_them_as_they_were(
        write: Write) -> None:
    """`graph.opset_imports` is the model's own dict: a pass that writes it and then fails
    is undone as completely as one that changed them through ge."""
    plugin = write("plugin.py", MUL_CUSTOM + """
@register_fusion_pass(name="W", stage="BeforeInferShape")
class W(FusionBasePass):
    def run(self, graph, context):
        graph.opset_imports["other.ops"] = 1
        graph.opset_imports[""] = 18
        raise RuntimeError("boom")
""")
    _compile_in_place_fails(plugin, _neg_relu())


def test_a_node_of_a_domain_nobody_imports_is_an_opset_import_problem(write: Write) -> None:
    """A node added by hand in a domain the model does not import: the pass fails naming
    the problem for what it is (kind opset-import, not arity) and how to import it."""
    plugin = write("plugin.py", MUL_CUSTOM + """
@register_fusion_pass(name="H", stage="BeforeInferShape")
class H(FusionBasePass):
    def run(self, graph, context):
        neg = graph.find_node_by_name("neg")
        mul = graph.add_node("MulCustom", domain="other.ops", name="by_hand", num_inputs=2,
                             num_outputs=1)
        x, index = neg.get_input_producer(0)
        graph.add_data_edge(x, index, mul, 0)
        graph.add_data_edge(x, index, mul, 1)
        graph.replace_all_uses(neg, 0, mul, 0)
        graph.remove_node(neg)
        return True
""")
    _, err = _compile_in_place_fails(plugin, _neg_relu())
    assert ("the pass left the graph invalid: opset-import: node 'by_hand' uses domain "
            "'other.ops', which the model does not import (a pass adding a node of a new "
            "domain imports it too: ge.es operators and replacements built with GraphBuilder "
            "do, a node added by hand needs graph.opset_imports[domain] = version)") in (
                err.message)
