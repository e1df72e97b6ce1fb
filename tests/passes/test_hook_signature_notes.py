"""GE chooses how a hook is called by its parameters' names (spec §3.2 item 3); where a name
says otherwise (`replacement(self, ins)` in a class of `@pattern` methods,
`replacement(self, inputs, ctx)`), the E13028 of the failing hook says how it was called and
what to rename, at the user's line; the unambiguous case also warns once at class creation.
Correct signatures get neither."""

from __future__ import annotations

import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from matcher_helpers import load, model, op_counts
from onnx import helper

from ge.cli import cli
from ge.compiler import compile_graph
from ge.errors import PassDefinitionWarning, PassRunError
from ge.passes import PatternFusionPass, pattern
from ge.passes.hooks import signature_notes

HEADER = """\
import ge.es.all as es
from ge.es import GraphBuilder
from ge.passes import (PatternFusionPass, create_pattern, pattern, register_fusion_pass)


@register_fusion_pass(name="P", stage="BeforeInferShape")
class P(PatternFusionPass):
"""
EXPRESSION_PATTERN = """\
    @pattern
    def erf(self, inputs):
        return es.Erf(inputs[0])

"""
LEGACY_PATTERNS = """\
    def patterns(self):
        builder = GraphBuilder("erf")
        return [create_pattern(builder.build_and_reset([es.Erf(builder.create_input(0))]))]

"""

Write = Callable[[str, str], Path]


def _erf_graph():
    return load(model([helper.make_node("Erf", ["x"], ["y"], name="erf")],
                      [("x", [2, 4])], [("y", [2, 4])]))


def _source(patterns: str, hooks: str) -> str:
    """The plugin: HEADER, the patterns, then `hooks` (methods written at column 0)."""
    body = textwrap.indent(textwrap.dedent(hooks).strip("\n"), "    ")
    return HEADER + patterns + body + "\n"


def _fails(write: Write, patterns: str, hooks: str) -> PassRunError:
    path = write("plugin.py", _source(patterns, hooks))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PassDefinitionWarning)
        with pytest.raises(PassRunError) as info:
            compile_graph(_erf_graph(), pass_paths=[path])
    err = info.value
    assert err.code == "E13028" and err.pass_name == "P" and err.stage == "BeforeInferShape"
    assert err.location is not None and Path(err.location.file) == path
    return err


def _line(path_or_source: str, text: str) -> int:
    return 1 + path_or_source.splitlines().index(text)


# -- (a) the second parameter is not `inputs`: legacy style -------------------------------------
def test_a_replacement_whose_second_parameter_is_not_inputs_says_it_is_called_legacy(
        write: Write) -> None:
    hooks = """
    def replacement(self, ins):
        return es.Erf(ins[0])
    """
    err = _fails(write, EXPRESSION_PATTERN, hooks)
    assert err.message == (
        "Failed to run custom fusion pass P. Return code: FAILED. Reason: TypeError: "
        "'MatchResult' object is not subscriptable. replacement(self, ins) is called as "
        "legacy replacement(self, match_result) because its second parameter is not named "
        "`inputs`: `ins` receives the MatchResult and it must return a ge.graph.Graph; name "
        "it `inputs` for the expression style (GE chooses the style by this name).")
    source = _source(EXPRESSION_PATTERN, hooks)
    assert err.location.line == _line(source, "        return es.Erf(ins[0])")  # the user's


def test_a_misnamed_legacy_replacement_returning_no_graph_gets_the_note_too(
        write: Write) -> None:
    # What it returned is checked by the engine (not raised in the hook): same note, and
    # the blame goes to the hook's def line.
    hooks = """
    def replacement(self, ins):
        return ins
    """
    err = _fails(write, EXPRESSION_PATTERN, hooks)
    assert ("Reason: TypeError: PatternFusionPass.replacement must return ge.graph.Graph, "
            "got MatchResult. replacement(self, ins) is called as legacy replacement(self, "
            "match_result) because its second parameter is not named `inputs`") in err.message
    source = _source(EXPRESSION_PATTERN, hooks)
    assert err.location.line == _line(source, "    def replacement(self, ins):")


def test_a_legacy_replacement_not_named_match_result_gets_the_note_without_pattern_methods(
        write: Write) -> None:
    err = _fails(write, LEGACY_PATTERNS, """
    def replacement(self, match, context):
        return match[0]
    """)
    assert err.message.endswith(
        "Reason: TypeError: 'MatchResult' object is not subscriptable. replacement(self, "
        "match, context) is called as legacy replacement(self, match_result) because its "
        "second parameter is not named `inputs`: `match` receives the MatchResult and it "
        "must return a ge.graph.Graph; name it `inputs` for the expression style (GE "
        "chooses the style by this name).")


# -- (b) a third parameter not named `context` receives the MatchResult -------------------------
def test_an_expression_replacement_whose_third_parameter_is_not_context_says_so(
        write: Write) -> None:
    hooks = """
    def meet_requirements(self, match_result, ctx):
        return ctx.get_pass_name() == "P"

    def replacement(self, inputs, ctx):
        ctx.get_pass_name()
        return es.Tanh(inputs[0])
    """
    err = _fails(write, EXPRESSION_PATTERN, hooks)
    assert err.message == (
        "Failed to run custom fusion pass P. Return code: FAILED. Reason: AttributeError: "
        "'MatchResult' object has no attribute 'get_pass_name'. replacement(self, inputs, "
        "ctx) is called as replacement(self, inputs, match_result): its third parameter "
        "`ctx` receives the MatchResult, because only a third parameter named `context` "
        "receives the pass context; name it `context` to receive the pass context.")
    source = _source(EXPRESSION_PATTERN, hooks)
    assert err.location.line == _line(source, "        ctx.get_pass_name()")


def test_the_four_parameter_expression_replacement_names_its_third_parameter(
        write: Write) -> None:
    err = _fails(write, EXPRESSION_PATTERN, """
    def replacement(self, inputs, ctx, context):
        return es.Tanh(inputs[ctx.get_pass_name()])
    """)
    assert err.message.endswith(
        "AttributeError: 'MatchResult' object has no attribute 'get_pass_name'. "
        "replacement(self, inputs, ctx, context) is called as replacement(self, inputs, "
        "match_result, context): its third parameter `ctx` receives the MatchResult.")


# -- (c) a legacy replacement in a class of @pattern methods ------------------------------------
def test_a_legacy_replacement_in_a_class_of_pattern_methods_says_it_must_return_a_graph(
        write: Write) -> None:
    err = _fails(write, EXPRESSION_PATTERN, """
    def replacement(self, match_result):
        return es.Erf(match_result.get_captured_tensor(0))
    """)
    assert err.message == (
        "Failed to run custom fusion pass P. Return code: FAILED. Reason: BuilderTypeError: "
        "[GE1404] Erf has no TensorHolder input to take its builder from; pass builder=. "
        "replacement(self, match_result) is GE's legacy style although P has @pattern "
        "methods: it receives the MatchResult and it must return a ge.graph.Graph, built "
        "with a GraphBuilder of its own; write replacement(self, inputs) to build with es.* "
        "on the matched inputs.")


def test_meet_requirements_named_like_an_expression_hook_says_it_gets_the_match(
        write: Write) -> None:
    err = _fails(write, EXPRESSION_PATTERN, """
    def meet_requirements(self, inputs):
        return inputs[0] is not None

    def replacement(self, inputs):
        return es.Tanh(inputs[0])
    """)
    assert err.message.endswith(
        "Reason: TypeError: 'MatchResult' object is not subscriptable. "
        "meet_requirements(self, inputs) receives the MatchResult as `inputs`: "
        "meet_requirements has no expression style (read the matched tensors with "
        "match_result.get_captured_tensor(i)).")


# -- correct signatures: no note, no warning ----------------------------------------------------
CORRECT = [
    (EXPRESSION_PATTERN, "def replacement(self, inputs):\n    raise ValueError('boom')\n"),
    (EXPRESSION_PATTERN,
     "def replacement(self, inputs, context):\n    raise ValueError('boom')\n"),
    (EXPRESSION_PATTERN,
     "def replacement(self, inputs, match_result):\n    raise ValueError('boom')\n"),
    (EXPRESSION_PATTERN,
     "def replacement(self, inputs, match_result, context):\n    raise ValueError('boom')\n"),
    (LEGACY_PATTERNS, "def replacement(self, match_result):\n    raise ValueError('boom')\n"),
    (LEGACY_PATTERNS,
     "def replacement(self, match_result, ctx):\n    raise ValueError('boom')\n"),
    (LEGACY_PATTERNS, "def replacement(self, inputs):\n    raise ValueError('boom')\n"),
    (EXPRESSION_PATTERN, "def meet_requirements(self, match_result, ctx):\n"
                         "    raise ValueError('boom')\n"),
    (EXPRESSION_PATTERN, "def meet_requirements(self, m):\n    raise ValueError('boom')\n"),
]


@pytest.mark.parametrize(("patterns", "hooks"), CORRECT)
def test_a_correct_signature_gets_no_note_and_no_warning(write: Write, patterns: str,
                                                         hooks: str) -> None:
    path = write("plugin.py", _source(patterns, hooks))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(PassRunError) as info:
            compile_graph(_erf_graph(), pass_paths=[path])
    assert not [w for w in caught if issubclass(w.category, PassDefinitionWarning)]
    assert info.value.code == "E13028"
    assert info.value.message == (
        "Failed to run custom fusion pass P. Return code: FAILED. Reason: ValueError: boom.")


def test_a_correct_legacy_replacement_in_a_class_of_pattern_methods_works(write: Write) -> None:
    # GE's contract: @pattern methods with a legacy replacement returning a Graph are fine.
    path = write("plugin.py", _source(EXPRESSION_PATTERN, """
    def replacement(self, match_result):
        builder = GraphBuilder("tanh")
        return builder.build_and_reset([es.Tanh(builder.create_input(0))])
    """))
    graph = _erf_graph()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report = compile_graph(graph, pass_paths=[path])
    assert not [w for w in caught if issubclass(w.category, PassDefinitionWarning)]
    assert report.records[0].rewrites == 1 and op_counts(graph) == {"Tanh": 1}


def test_signature_notes_of_correct_classes_are_empty() -> None:
    class Expression(PatternFusionPass):
        @pattern
        def p(self, inputs):
            return inputs[0]

        def meet_requirements(self, match_result, ctx):
            return True

        def replacement(self, inputs, context):
            return inputs[0]

    class Legacy(PatternFusionPass):
        def replacement(self, match_result, ctx):
            return None

    class Defaults(PatternFusionPass):
        pass

    assert signature_notes(Expression) == signature_notes(Legacy) == {}
    assert signature_notes(Defaults) == {}


# -- the class-creation warning ----------------------------------------------------------------
def test_a_misnamed_legacy_replacement_in_a_class_of_pattern_methods_warns_at_its_def() -> None:
    with pytest.warns(PassDefinitionWarning) as caught:

        class Misnamed(PatternFusionPass):
            @pattern
            def p(self, inputs):
                return inputs[0]

            def replacement(self, ins):  # marker: misnamed
                return ins

    (warning,) = [w for w in caught if issubclass(w.category, PassDefinitionWarning)]
    lines = Path(__file__).read_text(encoding="utf-8").splitlines()
    line = 1 + next(i for i, t in enumerate(lines) if t.endswith("# marker: misnamed"))
    assert (warning.filename, warning.lineno) == (__file__, line)
    assert str(warning.message) == (
        "Misnamed.replacement(self, ins) is called as legacy replacement(self, match_result) "
        "although Misnamed has @pattern methods: its second parameter is not named `inputs`, "
        "so `ins` receives the MatchResult and it must return a ge.graph.Graph; name it "
        f"`inputs` for the expression style, or `match_result` if the legacy style is meant "
        f"(at {__file__}:{line})")
    # A subclass that changes neither hook nor patterns does not warn again.
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")

        class Child(Misnamed):
            pass

    assert not again and signature_notes(Child)["replacement"].startswith(
        "replacement(self, ins) is called as legacy")


def test_the_warning_is_given_once_per_compilation(write: Write) -> None:
    """Each compilation executes the plugin file anew, and its warnings are complete."""
    path = write("plugin.py", _source(EXPRESSION_PATTERN, """
    def replacement(self, match):
        builder = GraphBuilder("tanh")
        return builder.build_and_reset([es.Tanh(builder.create_input(0))])
    """))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(3):
            compile_graph(_erf_graph(), pass_paths=[path])
    given = [w for w in caught if issubclass(w.category, PassDefinitionWarning)]
    assert len(given) == 3
    assert str(given[0].message).startswith("P.replacement(self, match) is called as legacy")


def test_ge_compile_shows_the_warning_once_then_the_error_with_its_note(
        write: Write, tmp_path: Path) -> None:
    import onnx

    path = write("plugin.py", _source(EXPRESSION_PATTERN, """
    def replacement(self, ins):
        return es.Erf(ins[0])
    """))
    model_path = tmp_path / "m.onnx"
    onnx.save(_erf_graph().to_onnx(), model_path)
    result = CliRunner().invoke(cli, ["compile", str(model_path), "-o",
                                      str(tmp_path / "out.onnx"), "--pass-path", str(path),
                                      "--verify"])
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 2, result.stderr
    def_line = _line(path.read_text(), "    def replacement(self, ins):")
    assert lines[0] == (
        "ge: warning: P.replacement(self, ins) is called as legacy replacement(self, "
        "match_result) although P has @pattern methods: its second parameter is not named "
        "`inputs`, so `ins` receives the MatchResult and it must return a ge.graph.Graph; "
        "name it `inputs` for the expression style, or `match_result` if the legacy style "
        f"is meant (at {path}:{def_line})")
    assert lines[1].startswith("ge: [E13028] Failed to run custom fusion pass P.")
    assert "replacement(self, ins) is called as legacy replacement(self, match_result)" in (
        lines[1])
    assert lines[1].endswith(f"at {path}:{def_line + 1})")
