"""Class-level contracts of the pass base classes: run(), hook adaptation, @pattern checks."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

import ge.es.all as es
from ge.passes import DecomposePass, FusionBasePass, PassContext, PatternFusionPass, pattern


def _line_of(text: str) -> int:
    """The line of this file holding `text` (to check recorded locations)."""
    lines = inspect.getsource(sys.modules[__name__]).splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def test_fusion_base_run_is_abstract_and_class_location_is_recorded() -> None:
    class NoRun(FusionBasePass):  # marker: NoRun
        pass

    with pytest.raises(NotImplementedError, match=r"NoRun\.run"):
        NoRun().run(None, PassContext())  # type: ignore[arg-type]
    assert NoRun.__ge_pass_source__.file == __file__
    assert NoRun.__ge_pass_source__.line == _line_of("# marker: NoRun")


@pytest.mark.parametrize(
    ("base", "path"), [(PatternFusionPass, "PatternFusionPass"), (DecomposePass, "DecomposePass")]
)
def test_run_override_is_rejected_at_class_creation(base: type, path: str) -> None:
    with pytest.raises(TypeError) as info:

        class Bad(base):  # type: ignore[valid-type, misc]  # marker: Bad run
            def run(self, graph, context):
                return True

    message = str(info.value.message)
    assert message.startswith(
        f"Bad overrides run(), which is never invoked by the {path} execution path."
    )
    assert info.value.code == "E13030"
    assert info.value.location.line == _line_of("# marker: Bad run")


def test_inherited_run_from_a_pattern_pass_parent_is_not_an_override() -> None:
    class Parent(PatternFusionPass):
        pass

    class Child(Parent):
        pass

    assert "run" not in Child.__dict__


@pytest.mark.parametrize(
    ("base", "path"), [(PatternFusionPass, "PatternFusionPass"), (DecomposePass, "DecomposePass")]
)
def test_a_run_from_a_mixin_is_rejected_too(base: type, path: str) -> None:
    """GE looked at the class's own `__dict__` only (spec §11.11): a run() of a mixin
    listed first was taken for the pass's and never called."""
    class Mixin:
        def run(self, graph, context):
            return True

    with pytest.raises(TypeError) as info:
        class Mixed(Mixin, base):  # type: ignore[valid-type, misc]
            pass

    assert str(info.value.message).startswith(
        f"Mixed overrides run() (through Mixin), which is never invoked by the {path} "
        "execution path.")
    assert info.value.code == "E13030"


class _ReluNeg(PatternFusionPass):
    """A base with two @pattern methods, for the inheritance tests below."""

    @pattern
    def relu(self, inputs):
        return es.Relu(inputs[0])

    @pattern
    def neg(self, inputs):
        return es.Neg(inputs[0])


def _pattern_names(cls: type) -> list[str]:
    return [p.get_graph().name for p in cls().patterns()]


def test_a_subclass_adds_pattern_methods_to_those_it_inherits() -> None:
    """GE's own-`__dict__` rule made a subclass's @pattern replace every inherited one in
    silence (trial AJ, spec §11.11): Python's inheritance holds, an override by name too."""
    class Child(_ReluNeg):
        @pattern
        def neg(self, inputs):
            return es.Neg(es.Neg(inputs[0]))

        @pattern
        def abs_(self, inputs):
            return es.Abs(inputs[0])

    assert _pattern_names(Child) == ["Child_relu_pattern", "Child_neg_pattern",
                                     "Child_abs__pattern"]
    assert [n.type for n in Child().patterns()[1].get_graph().get_direct_nodes()
            if n.type == "Neg"] == ["Neg", "Neg"]
    assert _pattern_names(_ReluNeg) == ["_ReluNeg_relu_pattern", "_ReluNeg_neg_pattern"]


def test_pattern_methods_resolve_as_python_methods_do() -> None:
    """Trial AL: a @pattern made a plain method in a subclass still matched, a diamond
    lost one side's patterns, and a plain mixin's were ignored (patterns() was rebuilt only
    for a class with a @pattern of its own)."""
    class Plain(_ReluNeg):
        def neg(self, inputs):  # a helper now, no pattern
            return None

    class Same(_ReluNeg):
        pass

    class B(_ReluNeg):
        @pattern
        def b(self, inputs):
            return es.Abs(inputs[0])

    class C(_ReluNeg):
        @pattern
        def c(self, inputs):
            return es.Exp(inputs[0])

    class D(B, C):
        pass

    class NegPatterns:
        @pattern
        def mixed(self, inputs):
            return es.Neg(inputs[0])

    class Mixed(NegPatterns, PatternFusionPass):
        pass

    assert _pattern_names(Plain) == ["Plain_relu_pattern"]
    # (inherited as is)
    assert _pattern_names(Same) == ["_ReluNeg_relu_pattern", "_ReluNeg_neg_pattern"]
    assert _pattern_names(D) == ["D_relu_pattern", "D_neg_pattern", "D_b_pattern", "D_c_pattern"]
    assert _pattern_names(Mixed) == ["Mixed_mixed_pattern"]


def test_pattern_methods_below_an_inherited_patterns_method_are_refused() -> None:
    """Trial AJ: a subclass of LayerNormFusion (a patterns() method) adding a @pattern lost
    the built-in's patterns in silence; one class with both was refused already."""
    class Written(PatternFusionPass):
        def patterns(self):
            return []

    with pytest.raises(TypeError) as info:
        class Added(Written):
            @pattern
            def relu(self, inputs):
                return es.Relu(inputs[0])

    assert str(info.value.message) == (
        "Added cannot combine @pattern methods with patterns() (inherited from Written). "
        "Use either @pattern methods or a patterns() method.")
    assert info.value.code == "E13030"


class _Match:
    pass


def test_meet_requirements_with_and_without_context() -> None:
    seen: list[tuple] = []

    class Two(PatternFusionPass):
        def meet_requirements(self, match_result):
            seen.append(("two", match_result))
            return False

    class Three(PatternFusionPass):
        def meet_requirements(self, match_result, whatever):
            seen.append(("three", match_result, whatever))
            return True

    match, context = _Match(), PassContext("p")
    assert Two().meet_requirements(match, context) is False
    assert Three().meet_requirements(match, context) is True
    assert Three().meet_requirements(match) is True
    assert seen == [("two", match), ("three", match, context), ("three", match, None)]


@pytest.mark.parametrize(
    "source",
    [
        "def meet_requirements(self): return True",
        "def meet_requirements(self, a, b, c): return True",
        "def meet_requirements(self, m, *, strict): return True",
        "meet_requirements = staticmethod(lambda m: True)",
    ],
)
def test_meet_requirements_bad_signatures(source: str) -> None:
    namespace: dict = {}
    exec(source, namespace)  # builds the method outside a class body
    body = {k: v for k, v in namespace.items() if k != "__builtins__"}
    with pytest.raises(TypeError) as info:
        type("Bad", (PatternFusionPass,), body)
    assert str(info.value.message) == (
        "meet_requirements only supports meet_requirements(self, match_result) or "
        "meet_requirements(self, match_result, context)"
    )
    assert info.value.code == "E13030"


def test_legacy_replacement_with_and_without_context() -> None:
    class Two(PatternFusionPass):
        def replacement(self, match_result):
            return ("two", match_result)

    class Three(PatternFusionPass):
        def replacement(self, match_result, ctx):
            return ("three", match_result, ctx)

    match, context = _Match(), PassContext()
    assert Two().replacement(match, context) == ("two", match)
    assert Three().replacement(match, context) == ("three", match, context)
    with pytest.raises(TypeError, match=r"replacement only supports replacement\(self, match_res"):

        class Bad(PatternFusionPass):
            def replacement(self, a, b, c):
                return None


def test_expression_replacement_signatures_are_checked_at_class_creation() -> None:
    with pytest.raises(TypeError) as info:

        class FourBad(PatternFusionPass):
            def replacement(self, inputs, match_result, ctx):
                return inputs[0]

    # The location is the hook's own line, the one to change (not the class statement).
    lines = Path(__file__).read_text(encoding="utf-8").splitlines()
    hook = 1 + next(i for i, text in enumerate(lines)
                    if "def replacement(self, inputs, match_result, ctx):" in text)
    assert info.value.location is not None and info.value.location.line == hook

    assert str(info.value.message) == (
        "Expression-style replacement with four arguments must use "
        "replacement(self, inputs, match_result, context)"
    )
    with pytest.raises(TypeError, match="Expression-style replacement supports"):

        class Five(PatternFusionPass):
            def replacement(self, inputs, match_result, context, extra):
                return inputs[0]

    for third in ("context", "match_result", "m"):
        namespace: dict = {}
        exec(f"def replacement(self, inputs, {third}): return inputs[0]", namespace)
        cls = type("Ok", (PatternFusionPass,), {"replacement": namespace["replacement"]})
        assert cls.replacement.__ge_original_hook__ is namespace["replacement"]


@pytest.mark.parametrize("hidden", ["ge.es", "ge.passes.pattern"])
def test_expression_style_without_the_es_builder_fails_clearly(
    monkeypatch: pytest.MonkeyPatch, hidden: str
) -> None:
    # A `None` entry in sys.modules makes `import hidden` raise ImportError, whether or not
    # the module exists in this checkout: the message is checked either way. (The modules
    # are kept once imported: forget them, as in a process where they never loaded; a
    # failed import is not kept, so later tests import them again.)
    from ge.passes import expression

    expression._es_modules.cache_clear()
    monkeypatch.setitem(sys.modules, hidden, None)

    class Expr(PatternFusionPass):
        @pattern
        def add_zero(self, inputs):
            return inputs[0] + 0

        def replacement(self, inputs):
            return inputs[0]

    with pytest.raises(ImportError, match=r"ge\.es\.GraphBuilder"):
        Expr().patterns()
    with pytest.raises(ImportError, match=r"ge\.es\.GraphBuilder"):
        Expr().replacement(_Match(), PassContext())


def test_pattern_methods_and_patterns_cannot_be_combined() -> None:
    with pytest.raises(TypeError) as info:

        class Both(PatternFusionPass):
            @pattern
            def one(self, inputs):
                return inputs[0]

            def patterns(self):
                return []

    assert str(info.value.message) == (
        "Both cannot combine @pattern methods with patterns(). "
        "Use either @pattern methods or a patterns() method."
    )


def test_pattern_methods_take_self_and_inputs_only() -> None:
    one_line = inspect.currentframe().f_lineno + 4  # type: ignore[union-attr]  # @pattern
    with pytest.raises(TypeError) as info:

        class Wrong(PatternFusionPass):
            @pattern
            def one(self, inputs, extra):
                return inputs[0]

    assert info.value.message == "@pattern methods only support method(self, inputs)"
    assert info.value.location is not None  # the decorated method, not the class statement
    assert info.value.location.line == one_line

    with pytest.raises(TypeError, match="@pattern expects a function"):
        pattern(3)  # type: ignore[type-var]


def test_pattern_methods_synthesise_patterns_in_class_body_order() -> None:
    class Many(PatternFusionPass):
        @pattern
        def second_defined_first(self, inputs):
            return inputs[0]

        @pattern
        def first_defined_second(self, inputs):
            return inputs[1]

    assert "patterns" in Many.__dict__
    assert Many.patterns.__ge_synthesized_from__ == ["second_defined_first", "first_defined_second"]

    class Inherits(Many):
        pass

    assert Inherits.patterns is Many.patterns


def test_hooks_of_a_parent_are_not_adapted_twice() -> None:
    class Parent(PatternFusionPass):
        def meet_requirements(self, match_result):
            return match_result == 1

    class Child(Parent):
        pass

    assert Child.meet_requirements is Parent.meet_requirements
    assert Child().meet_requirements(1, PassContext()) is True


def test_decompose_hooks_use_node_in_their_messages() -> None:
    class Ok(DecomposePass):
        def meet_requirements(self, node):
            return node == "n"

        def replacement(self, node, context):
            return (node, context)

    context = PassContext()
    assert Ok().meet_requirements("n", context) is True
    assert Ok().replacement("n", context) == ("n", context)
    assert Ok.op_types is None
    with pytest.raises(TypeError) as info:

        class Bad(DecomposePass):
            def meet_requirements(self):
                return True

    assert str(info.value.message) == (
        "meet_requirements only supports meet_requirements(self, node) or "
        "meet_requirements(self, node, context)"
    )
    with pytest.raises(TypeError, match=r"replacement only supports replacement\(self, node\)"):

        class BadReplacement(DecomposePass):
            def replacement(self, node, context, extra):
                return None


def test_default_hooks() -> None:
    class Defaults(PatternFusionPass):
        pass

    class DefaultDecompose(DecomposePass):
        pass

    assert Defaults().meet_requirements(_Match()) is True
    assert DefaultDecompose().meet_requirements("n") is True
    for call in (Defaults().patterns, lambda: Defaults().replacement(_Match())):
        with pytest.raises(NotImplementedError):
            call()
    with pytest.raises(NotImplementedError):
        DefaultDecompose().replacement("n")


def test_matcher_config_must_be_a_matcher_config_or_none() -> None:
    class P(PatternFusionPass):
        def __init__(self, config=None):
            super().__init__(config)

    assert P().matcher_config is None
    with pytest.raises(TypeError, match="matcher_config must be a PatternMatcherConfig or None"):
        P(config="fast")

    class NoSuper(PatternFusionPass):
        def __init__(self):
            pass

    # Unknown, not the defaults (GE raises AttributeError too): see test_pass_lifecycle.py.
    with pytest.raises(AttributeError, match=r"^NoSuper has no matcher config: its __init__ "
                       r"did not call PatternFusionPass.__init__ \(add super\(\).__init__"):
        NoSuper().matcher_config  # noqa: B018


def test_pass_code_importing_from_ge_modules_as_on_ge_runs() -> None:
    """GE's `ge.passes.base` imports MatchResult, PassContext, PassStage, the config
    builder, the Subgraph* classes and infer_shape, and `ge.passes.pattern` defines
    `pattern`; pass code importing them from there runs here too (trial X)."""
    import importlib

    import ge.passes
    from ge.passes import base

    # (`ge.passes.pattern` the attribute is the decorator, as on GE; the module is imported)
    pattern_module = importlib.import_module("ge.passes.pattern")
    from ge.passes.pattern import pattern as imported

    assert imported is ge.passes.pattern

    for name in ("MatchResult", "PassContext", "PassStage", "PatternMatcherConfigBuilder",
                 "SubgraphBoundary", "SubgraphInput", "SubgraphOutput", "SubgraphRewriter",
                 "infer_shape"):
        assert getattr(base, name) is getattr(ge.passes, name)
    assert pattern_module.pattern is ge.passes.pattern
    with pytest.raises(AttributeError, match=r"module 'ge\.passes\.base' has no attribute 'x'"):
        base.x  # noqa: B018
    with pytest.raises(AttributeError, match=r"module 'ge\.passes\.pattern' has no attribute"):
        pattern_module.x  # noqa: B018


def test_a_released_pattern_hands_over_a_non_zero_handle_once() -> None:
    """GE's `Pattern.release()` returns its native handle (GE's tests check it is not 0)."""
    from ge.es import GraphBuilder
    from ge.passes import create_pattern

    builder = GraphBuilder("p")
    released = create_pattern(builder.build_and_reset([es.Relu(builder.create_input(0))]))
    handle = released.release()
    assert isinstance(handle, int) and handle != 0
    with pytest.raises(RuntimeError, match="Pattern handle has been released"):
        released.release()
