"""A pass that computes with a symbolic dim (a str) as if it were a size: its E13028 says a
dim may be a symbol, in the words `ge passes explain` uses (`ge.passes.dim_hints`), and only
when the exception clearly is about a symbol."""

from __future__ import annotations

import pytest
from matcher_helpers import load, model
from onnx import helper

from ge.compiler import compile_graph
from ge.compiler.options import parse_options
from ge.compiler.plugin_loader import PluginLoader
from ge.errors import BuilderTypeError, PassRunError
from ge.graph import Shape
from ge.passes.dim_hints import SYMBOLIC_DIM_HINT, shape_symbols, symbolic_dim_hint
from ge.passes.explain import explain, infer_shapes_for_explain

EIGHT_WIDE = """\
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="EightWide", stage=PassStage.AFTER_INFER_SHAPE)
class EightWide(PatternFusionPass):
    @pattern
    def relu_neg(self, inputs):
        return es.Relu(es.Neg(inputs[0]))

    def meet_requirements(self, match_result):
        tensor = match_result.get_captured_tensor(0)
        dims = list(tensor.node.get_output_desc(tensor.index).get_shape())
        return dims[0] > 0 and dims[-1] % 8 == 0

    def replacement(self, inputs):
        return es.Relu(inputs[0])
"""

FLATTEN_TO_RESHAPE = """\
from ge.es import GraphBuilder
from ge.es.all import Reshape
from ge.passes import DecomposePass, PassStage, register_decompose_pass

UNKNOWN_DIM = -1


@register_decompose_pass(name="FlattenToReshape", stage=PassStage.AFTER_INFER_SHAPE,
                         op_types=["Flatten"])
class FlattenToReshape(DecomposePass):
    def meet_requirements(self, node):
        return UNKNOWN_DIM not in list(node.get_input_desc(0).get_shape())

    def replacement(self, node):
        dims = list(node.get_input_desc(0).get_shape())
        b = GraphBuilder("replacement")
        (x,) = b.create_inputs(1)
        target = b.create_const_int64([dims[0], dims[1] * dims[2]])
        return b.build_and_reset([Reshape(x, target)])
"""

NEG_RELU = [helper.make_node("Neg", ["x"], ["n"], name="neg"),
            helper.make_node("Relu", ["n"], ["y"], name="relu")]


def _compile_fails(path, graph) -> PassRunError:
    before = graph.to_onnx().SerializeToString()
    with pytest.raises(PassRunError) as info:
        compile_graph(graph, pass_paths=[path])
    assert info.value.code == "E13028" and info.value.stage == "AfterInferShape"
    assert graph.to_onnx().SerializeToString() == before  # rolled back, nothing changed
    return info.value


def test_a_comparison_with_a_symbol_fails_with_the_hint(write) -> None:
    """`dims[0] > 0` with dims ['batch', 'hidden']: the TypeError, then the hint."""
    path = write("eight_wide.py", EIGHT_WIDE)
    graph = load(model(NEG_RELU, [("x", ["batch", "hidden"])], [("y", ["batch", "hidden"])]))
    err = _compile_fails(path, graph)
    assert err.message == (
        "Failed to run custom fusion pass EightWide. Return code: FAILED. Reason: TypeError: "
        "'>' not supported between instances of 'str' and 'int' (a dim may be a symbol, a "
        "str such as 'batch', where the hook expects an int: see docs/graph.md on dims).")
    assert (err.location.file, err.location.line) == (str(path), 14)


def test_explain_gives_the_same_hint(write) -> None:
    """One sentence, one place: what `ge passes explain` says of the same hook."""
    path = write("eight_wide.py", EIGHT_WIDE)
    report = PluginLoader().load_paths([path], parse_options({}))
    (cls,) = [d.cls for p in report.plugins for d in p.descriptors]
    graph = load(model(NEG_RELU, [("x", ["batch", "hidden"])], [("y", ["batch", "hidden"])]))
    assert infer_shapes_for_explain(graph) is None
    (pattern,) = explain(cls, graph)
    (candidate,) = pattern.candidates
    assert candidate.reason is not None
    assert candidate.reason.message.endswith(f" ({SYMBOLIC_DIM_HINT})")


def test_a_constant_built_from_a_symbol_fails_with_the_hint(write) -> None:
    """GE's guard `UNKNOWN_DIM not in dims` lets a symbol through to a constant's values:
    the builder's GE1404 quotes the symbol, and the hint follows."""
    path = write("flatten.py", FLATTEN_TO_RESHAPE)
    graph = load(model([helper.make_node("Flatten", ["x"], ["y"], name="flatten", axis=1)],
                       [("x", ["N", 2, 3])], [("y", ["N", 6])]))
    err = _compile_fails(path, graph)
    assert err.message == (
        "Failed to run custom fusion pass FlattenToReshape. Return code: FAILED. Reason: "
        "BuilderTypeError: [GE1404] create_const_int64: 'N' is not a int (a dim may be a "
        "symbol, a str such as 'batch', where the hook expects an int: see docs/graph.md on "
        "dims).")
    assert isinstance(err.__cause__, BuilderTypeError)
    assert (err.location.file, err.location.line) == (str(path), 18)


def test_the_same_passes_on_sizes_work(write) -> None:
    """The hint is about symbols: with sizes, both passes run (and rewrite)."""
    graph = load(model(NEG_RELU, [("x", [2, 16])], [("y", [2, 16])]))
    report = compile_graph(graph, pass_paths=[write("eight_wide.py", EIGHT_WIDE)])
    assert [r.rewrites for r in report.records if r.pass_name == "EightWide"] == [1]
    graph = load(model([helper.make_node("Flatten", ["x"], ["y"], name="flatten", axis=1)],
                       [("x", [4, 2, 3])], [("y", [4, 6])]))
    report = compile_graph(graph, pass_paths=[write("flatten.py", FLATTEN_TO_RESHAPE)])
    assert [r.rewrites for r in report.records if r.pass_name == "FlattenToReshape"] == [1]


def test_an_error_not_about_a_symbol_has_no_hint(write) -> None:
    """A TypeError of the pass's own on a model with symbolic dims is left as it is."""
    path = write("own.py", """\
from ge.passes import FusionBasePass, register_fusion_pass


@register_fusion_pass(name="Own", stage="AfterInferShape")
class Own(FusionBasePass):
    def run(self, graph, context):
        return len(graph.nodes_of_type("Relu")) + None
""")
    graph = load(model(NEG_RELU, [("x", ["batch", 4])], [("y", ["batch", 4])]))
    err = _compile_fails(path, graph)
    assert err.message == (
        "Failed to run custom fusion pass Own. Return code: FAILED. Reason: TypeError: "
        "unsupported operand type(s) for +: 'int' and 'NoneType'.")


@pytest.mark.parametrize(("exc", "symbols", "hinted"), [
    (TypeError("'>' not supported between instances of 'str' and 'int'"), {"N"}, True),
    (TypeError("unsupported operand type(s) for %: 'str' and 'int'"), {"N"}, True),
    (TypeError('can only concatenate str (not "int") to str'), {"N"}, True),
    (TypeError("must be real number, not str"), {"N"}, True),
    # `'hidden' % 8` formats a string: the docs' own example of arithmetic on a symbol
    (TypeError("not all arguments converted during string formatting"), {"hidden"}, True),
    (TypeError("create_const_int64: 'batch' is not a int"), {"batch"}, True),
    (ValueError("invalid literal for int() with base 10: 'batch'"), {"batch"}, True),
    # no symbol in the graph: a str operand is the pass's own business
    (TypeError("'>' not supported between instances of 'str' and 'int'"), set(), False),
    # not about a str, or not an exception a dim makes
    (TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'"), {"N"}, False),
    (ValueError("invalid literal for int() with base 10: 'x'"), {"N"}, False),
    (KeyError("'N'"), {"N"}, False),
])
def test_when_the_hint_applies(exc: BaseException, symbols: set[str], hinted: bool) -> None:
    assert symbolic_dim_hint(exc, symbols) == (SYMBOLIC_DIM_HINT if hinted else None)


def test_shape_symbols_are_the_named_dims() -> None:
    assert shape_symbols([Shape(["batch", 4]), Shape([2, "seq", -1]), Shape([3])]) == {
        "batch", "seq"}
