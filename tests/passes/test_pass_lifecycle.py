"""What a pattern pass's instance and hooks may rely on, as GE gives it (trial X, GE's own
samples ported): an `__init__` that skips `PatternFusionPass.__init__` leaves the matcher
config unknown and fails the pass at that `__init__` (GE raises AttributeError there; ge used
the defaults in silence, so GE's P4b sample with that slip turned `x + 5` into `x`), and a
`MatchResult` lives for one hook call (one kept by `meet_requirements` for `replacement`
has expired, as GE's bridge invalidates each borrowed handle when the hook returns)."""

from __future__ import annotations

import ast
import textwrap
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

import ge
from ge.cli import cli
from ge.errors import PassDefinitionWarning, PassRunError
from sample_models import relu_model

ADD_ZERO = """
from ge.passes import (PassStage, PatternFusionPass, PatternMatcherConfigBuilder, pattern,
                       register_fusion_pass)


@register_fusion_pass(name="AddZero", stage=PassStage.BEFORE_INFER_SHAPE)
class AddZero(PatternFusionPass):
    def __init__(self):
        {init}

    @pattern
    def add_zero(self, inputs):
        return inputs[0] + 0.0

    def replacement(self, inputs):
        return inputs[0]
"""
SLIP = "self.config = PatternMatcherConfigBuilder().enable_const_value_match().build()"
RIGHT = "super().__init__(PatternMatcherConfigBuilder().enable_const_value_match().build())"


def _add_five(path: Path) -> Path:
    """y = x + 5: a constant that is not zero, which const-value match must refuse."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "c"], ["y"], name="add")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        [numpy_helper.from_array(np.array(5.0, np.float32), "c")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _plugin(tmp_path: Path, init: str) -> Path:
    path = tmp_path / "add_zero.py"
    path.write_text(ADD_ZERO.format(init=init))
    return path


def test_an_init_skipping_the_base_fails_the_pass_at_that_init(tmp_path: Path) -> None:
    model, plugin = _add_five(tmp_path / "m.onnx"), _plugin(tmp_path, SLIP)
    with pytest.raises(PassRunError) as info:
        ge.compile(model, pass_paths=[plugin], builtin_passes=False)
    err = info.value
    assert err.code == "E13028" and err.pass_name == "AddZero"
    assert err.stage == "BeforeInferShape"
    assert "AttributeError: AddZero has no matcher config: its __init__ did not call " \
           "PatternFusionPass.__init__ (add super().__init__(matcher_config) to it)" in str(err)
    assert err.location is not None and Path(err.location.file) == plugin
    assert err.location.line == 1 + ADD_ZERO.format(init=SLIP).splitlines().index(
        "    def __init__(self):")

    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(cli, ["compile", str(model), "-o", str(out), "--no-builtin",
                                      "--pass-path", str(plugin)])
    assert result.exit_code == 1 and "[E13028]" in result.output
    assert "has no matcher config" in result.output and "Traceback" not in result.output
    assert not out.exists()


def test_an_init_calling_the_base_keeps_its_config(tmp_path: Path) -> None:
    model, plugin = _add_five(tmp_path / "m.onnx"), _plugin(tmp_path, RIGHT)
    result = ge.compile(model, pass_paths=[plugin], builtin_passes=False)
    assert [n.type for n in result.graph.get_direct_nodes()].count("Add") == 1  # 5 is not 0


KEEPER = """
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="Keeper", stage=PassStage.BEFORE_INFER_SHAPE)
class Keeper(PatternFusionPass):
    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    def meet_requirements(self, match_result):
        self.kept = match_result
        return True

    def replacement(self, match_result):
        {use}
        builder = GraphBuilder("identity")
        return builder.build_and_reset([es.Identity(builder.create_input(0))])
"""


def _relu_model(path: Path) -> Path:
    onnx.save(relu_model(), path)
    return path


def test_a_match_result_kept_from_meet_requirements_has_expired_in_replacement(
        tmp_path: Path) -> None:
    source = textwrap.dedent(KEEPER).format(use="self.kept.get_matched_nodes()")
    plugin = tmp_path / "keeper.py"
    plugin.write_text(source)
    model = _relu_model(tmp_path / "m.onnx")
    before = model.read_bytes()
    with pytest.raises(PassRunError) as info:
        ge.compile(model, pass_paths=[plugin], builtin_passes=False)
    err = info.value
    assert err.code == "E13028" and err.pass_name == "Keeper"
    # (a MatchResultError, GE1503: a RuntimeError with GE's message, as GE raises)
    assert "MatchResultError: MatchResult handle has expired" in str(err)
    assert isinstance(err.__cause__, RuntimeError)
    assert str(err.__cause__) == "MatchResult handle has expired"
    assert err.location is not None and err.location.line == 1 + source.splitlines().index(
        "        self.kept.get_matched_nodes()")
    assert model.read_bytes() == before


def test_the_match_result_of_each_hook_call_is_live_during_it(tmp_path: Path) -> None:
    """The replacement's own handle works (it is not the one meet_requirements got)."""
    source = textwrap.dedent(KEEPER).format(use="assert match_result is not self.kept")
    plugin = tmp_path / "keeper.py"
    plugin.write_text(source)
    result = ge.compile(_relu_model(tmp_path / "m.onnx"), pass_paths=[plugin],
                        builtin_passes=False)
    assert sorted(n.type for n in result.graph.get_direct_nodes()) == [
        "Data", "Identity", "NetOutput"]


NO_RETURN = """
import ge.es.all as es
from ge.passes import PassStage, PatternFusionPass, pattern, register_fusion_pass


@register_fusion_pass(name="DoubleNeg", stage=PassStage.AFTER_INFER_SHAPE)
class DoubleNeg(PatternFusionPass):
    @pattern
    def neg_neg(self, inputs):
        return es.Neg(es.Neg(inputs[0]))

    def meet_requirements(self, match_result):
        {body}

    def replacement(self, inputs):
        return es.Identity(inputs[0])
"""


def _neg_neg_twice(path: Path) -> Path:
    nodes = [helper.make_node("Neg", [a], [b], name=b)
             for a, b in [("x", "n1"), ("n1", "n2"), ("n2", "n3"), ("n3", "y")]]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _definition_warnings_and_negs(plugin: Path, tmp_path: Path) -> tuple[list[str], int]:
    """Compile the four-Neg chain with `plugin` alone: its PassDefinitionWarnings, and how
    many Neg nodes are left."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ge.compile(_neg_neg_twice(tmp_path / "m.onnx"), pass_paths=[plugin],
                            builtin_passes=False)
    messages = [str(w.message) for w in caught if w.category is PassDefinitionWarning]
    return messages, [n.type for n in result.graph.get_direct_nodes()].count("Neg")


@pytest.mark.parametrize("body, told", [
    ("match_result.get_matched_nodes()", True),            # no return at all
    ("if len(match_result.get_matched_nodes()) == 3:\n            return True", True),
    ("return True", False),
    ("return False", False),                               # an answer, not a slip
])
def test_a_meet_requirements_answering_none_to_every_match_is_told(
        tmp_path: Path, body: str, told: bool) -> None:
    """Trial X: a hook without `return` refused every match in silence (None counts as
    False, as on GE); only `ge passes explain` said so. A pass that rewrote nothing while
    its hook answered None is now told once, at the hook's line."""
    source = NO_RETURN.format(body=body)
    plugin = tmp_path / "double_neg.py"
    plugin.write_text(source)
    messages, negs = _definition_warnings_and_negs(plugin, tmp_path)
    if not told:
        assert messages == [] and negs == (0 if body == "return True" else 4)
        return
    line = 1 + source.splitlines().index("    def meet_requirements(self, match_result):")
    assert negs == 4 and messages == [
        "pass DoubleNeg rewrote nothing in graph 'g': its meet_requirements returned None for "
        f"3 of 3 match(es), and None counts as False (a missing return?) (at {plugin}:{line})"]


@pytest.mark.parametrize("answer, rewritten", [
    ('"no"', True),           # a refusal in words: bool("no") is True
    ('""', False),
    ("0.0", False),
    ("[False]", True),
    ("np.bool_(False)", None),  # numpy's bool is a bool: nothing to say
])
def test_a_meet_requirements_answering_other_than_a_bool_is_told(
        tmp_path: Path, answer: str, rewritten: bool | None) -> None:
    """Trial T: a hook returning "no" had its matches rewritten in silence. GE reads the
    answer as bool(answer), and so does ge; the pass is now told once, at the hook's line,
    what it returned and what that counts as."""
    source = "import numpy as np\n" + NO_RETURN.format(body=f"return {answer}")
    plugin = tmp_path / "double_neg.py"
    plugin.write_text(source)
    messages, negs = _definition_warnings_and_negs(plugin, tmp_path)
    if rewritten is None:
        assert messages == [] and negs == 4
        return
    assert negs == (0 if rewritten else 4)
    value = ast.literal_eval(answer)  # (the literal the hook returns)
    line = 1 + source.splitlines().index("    def meet_requirements(self, match_result):")
    matches = 2 if rewritten else 3  # (a rewrite takes the next match's first Neg)
    assert messages == [
        f"pass DoubleNeg: its meet_requirements returned {type(value).__name__} {value!r} for "
        f"{matches} of {matches} match(es) in graph 'g', which counts as {bool(value)} (GE "
        f"reads the answer as bool(answer)); return True or False (at {plugin}:{line})"]


def test_a_meet_requirements_answer_bool_refuses_is_a_type_error_at_the_hook(
        tmp_path: Path) -> None:
    """Trial V: an array of two answers gave numpy's "truth value ... is ambiguous" as
    E13028 at the pass's class line, not saying it was meet_requirements' answer."""
    source = "import numpy as np\n" + NO_RETURN.format(body="return np.array([True, False])")
    plugin = tmp_path / "double_neg.py"
    plugin.write_text(source)
    with pytest.raises(PassRunError) as info:
        ge.compile(_neg_neg_twice(tmp_path / "m.onnx"), pass_paths=[plugin],
                   builtin_passes=False)
    err = info.value
    assert ("TypeError: meet_requirements must return a bool, got ndarray, which bool() "
            "refuses: The truth value of an array with more than one element is ambiguous"
            ) in err.message
    line = 1 + source.splitlines().index("    def meet_requirements(self, match_result):")
    assert err.location is not None and err.location.line == line


def _unregistered_double_neg(body: str, tmp_path: Path) -> tuple[type, ge.graph.Graph]:
    """NO_RETURN's DoubleNeg with `body`, defined (in a file p.py) but not registered, and
    the four-Neg chain loaded, not inferred: what find_matches is given."""
    source = NO_RETURN.format(body=body).replace(
        '@register_fusion_pass(name="DoubleNeg", stage=PassStage.AFTER_INFER_SHAPE)', "")
    namespace: dict[str, type] = {}
    exec(compile(source, str(tmp_path / "p.py"), "exec"), namespace)
    return namespace["DoubleNeg"], ge.graph.load(_neg_neg_twice(tmp_path / "m.onnx"))


def test_find_matches_tells_of_an_answer_other_than_a_bool(tmp_path: Path) -> None:
    """Trial V: ge.passes.find_matches took "no" as True in silence, where a compilation
    warns of it."""
    from ge.passes import find_matches

    pass_class, graph = _unregistered_double_neg('return "no"', tmp_path)
    with pytest.warns(PassDefinitionWarning, match=(
            r"^find_matches: the meet_requirements of DoubleNeg returned str 'no' for 2 of 2 "
            r"match\(es\), which counts as True .*return True or False \(at .*p\.py:\d+\)$")):
        found = find_matches(pass_class, graph)
    assert len(found) == 2


DECOMPOSE_SAYS_NO = """
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import DecomposePass, PassStage, register_decompose_pass


@register_decompose_pass(name="NegAsMul", stage=PassStage.AFTER_INFER_SHAPE, op_types=["Neg"])
class NegAsMul(DecomposePass):
    def meet_requirements(self, node):
        return "no"

    def replacement(self, node):
        builder = GraphBuilder("neg")
        return builder.build_and_reset([builder.create_input(0) * -1.0])
"""


def test_a_decompose_pass_answering_other_than_a_bool_is_told_of_nodes(tmp_path: Path
                                                                     ) -> None:
    """Trial V: its warning said "4 of 4 match(es)" of a pass asked about nodes."""
    plugin = tmp_path / "neg_as_mul.py"
    plugin.write_text(DECOMPOSE_SAYS_NO)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ge.compile(_neg_neg_twice(tmp_path / "m.onnx"), pass_paths=[plugin],
                   builtin_passes=False)
    (message,) = [str(w.message) for w in caught if w.category is PassDefinitionWarning]
    assert message.startswith("pass NegAsMul: its meet_requirements returned str 'no' for "
                              "4 of 4 node(s) in graph 'g', which counts as True")


def _failure_after(body: str, tmp_path: Path) -> str:
    """The E13028 message of NO_RETURN's DoubleNeg with `body` answering, whose replacement
    raises ValueError('not this one') on the first match accepted."""
    source = NO_RETURN.format(body=body).replace(
        "        return es.Identity(inputs[0])", "        raise ValueError('not this one')")
    plugin = tmp_path / "double_neg.py"
    plugin.write_text(source)
    with pytest.raises(PassRunError) as info:
        ge.compile(_neg_neg_twice(tmp_path / "m.onnx"), pass_paths=[plugin],
                   builtin_passes=False)
    return info.value.message


def test_a_failure_after_an_answer_other_than_a_bool_says_so(tmp_path: Path) -> None:
    """Trial V: a hook answering "no" to refuse, whose replacement then raised on the match
    "no" accepted, failed E13028 without a word about the answer (the warning comes only
    when a run ends)."""
    message = _failure_after('return "no"', tmp_path)
    assert ("ValueError: not this one (before it, meet_requirements returned str 'no', which "
            "counts as True: return True or False)") in message


def test_a_failure_after_a_plain_answer_says_nothing_of_an_earlier_odd_one(
        tmp_path: Path) -> None:
    """Trial X: the note quoted the run's first odd answer ("" for an earlier match, which
    counted as False) on a failure after a True: it is about the answer that let the
    failing match through, and only when it was not a bool."""
    body = ('self.n = getattr(self, "n", 0) + 1\n'
            '        return "" if self.n == 1 else True')
    message = _failure_after(body, tmp_path)
    assert "ValueError: not this one" in message
    assert "before it, meet_requirements returned" not in message


def test_a_decompose_pass_answering_none_is_told_of_nodes(tmp_path: Path) -> None:
    plugin = tmp_path / "neg_as_mul.py"
    plugin.write_text(DECOMPOSE_SAYS_NO.replace('return "no"', "pass"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ge.compile(_neg_neg_twice(tmp_path / "m.onnx"), pass_paths=[plugin],
                   builtin_passes=False)
    (message,) = [str(w.message) for w in caught if w.category is PassDefinitionWarning]
    assert "returned None for 4 of 4 node(s), and None counts as False" in message


def test_find_matches_tells_of_none_answers(tmp_path: Path) -> None:
    """Trial X: find_matches returned [] in silence for a hook without a return."""
    from ge.passes import find_matches

    pass_class, graph = _unregistered_double_neg("match_result.get_matched_nodes()", tmp_path)
    with pytest.warns(PassDefinitionWarning, match=(
            r"^find_matches: the meet_requirements of DoubleNeg returned None for 3 of 3 "
            r"match\(es\), and None counts as False \(a missing return\?\) \(at .*p\.py:\d+\)$")):
        assert find_matches(pass_class, graph) == []
