"""The pass base classes pass authors subclass, and the `@pattern` marker.

`FusionBasePass` runs arbitrary code on a graph (`run`). `PatternFusionPass` and
`DecomposePass` are driven by the engine (match, check, replace); their hooks are checked and
adapted when the subclass is created, so a wrong signature fails at import, with the file and
line of the class, not in the middle of a compilation.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, Union

from ge.errors import PassRegisterTypeError, SourceLocation
from ge.graph import Graph
from ge.passes import hooks
from ge.passes.config import PatternMatcherConfig
from ge.passes.expression import PATTERN_MARK, synthesize_patterns
from ge.passes.pattern import Pattern
from ge.passes.status import StatusLike

if TYPE_CHECKING:
    from ge.graph import Node
    from ge.passes.context import PassContext

__all__ = ["DecomposePass", "FusionBasePass", "PatternFusionPass", "PatternOrGraph",
           "StatusLike", "pattern"]

#: What `patterns()` may yield: a Pattern, or a Graph made into one.
PatternOrGraph = Union[Pattern, Graph]  # noqa: UP007  # GE's alias, a runtime object

_F = TypeVar("_F", bound=Callable[..., Any])


def pattern(method: _F) -> _F:
    """Mark `method(self, inputs)` as one expression-style pattern of a `PatternFusionPass`."""
    if not callable(method):
        raise TypeError("@pattern expects a function method(self, inputs)")
    setattr(method, PATTERN_MARK, True)
    return method


def _class_statement_location() -> SourceLocation:
    """The `class` statement being executed: the first frame above the `__init_subclass__` chain.

    `type.__new__` calls `__init_subclass__` from C, so the frame above the chain (user
    mixins' `__init_subclass__` included) is the one executing the class body's statement.
    """
    frame = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_name == "__init_subclass__":
        frame = frame.f_back
    return SourceLocation(frame.f_code.co_filename, frame.f_lineno)


def _forbid_run(cls: type, kind: type) -> None:
    """Refuse a `run()` of the class, or of a mixin base before the pass kind's class in its
    method order (`class P(Mixin, PatternFusionPass)`: GE looked at the class's own
    `__dict__` only, spec §11.11), which the kind's execution never calls."""
    for klass in cls.__mro__:
        if klass is kind:
            return  # (the kind's own class: its bases' run() is the engine's business)
        if "run" in klass.__dict__:
            mixin = "" if klass is cls else f" (through {klass.__name__})"
            raise PassRegisterTypeError(
                f"{cls.__name__} overrides run(){mixin}, which is never invoked by the "
                f"{kind.__name__} execution path. Implement the pattern/meet_requirements/"
                "replacement hooks instead.",
                location=cls.__dict__["__ge_pass_source__"],
            )


def _written_patterns(cls: type) -> type | None:
    """The class whose hand-written `patterns()` `cls` has (itself or a base), or None when
    its `patterns()` is PatternFusionPass's or one made of `@pattern` methods."""
    for klass in cls.__mro__:
        found = klass.__dict__.get("patterns")
        if found is None:
            continue
        # (`synthesize_patterns` marks what it makes with the methods it was made of)
        if klass is PatternFusionPass or hasattr(found, "__ge_synthesized_from__"):
            return None
        return klass
    return None


def _pattern_methods(cls: type) -> list[tuple[str, Any]]:
    """The `@pattern` methods `cls` has, its bases' included (mixins too), as Python
    resolves them (the nearest definition wins; one overridden by a plain method is no
    pattern), in the order their names first appear from the farthest base down, bases
    before the classes deriving from them and in the method order among siblings (a
    diamond `D(B, C)`: `Parent`'s, then `B`'s, `C`'s, `D`'s). GE's own-`__dict__` rule lost
    a base's patterns (spec §11.11, trials AJ and AL)."""
    names: list[str] = []
    for klass in _bases_first(cls):
        names += [name for name, value in klass.__dict__.items()
                  if getattr(value, PATTERN_MARK, False) is True and name not in names]
    methods = []
    for name in names:
        resolved = next(k.__dict__[name] for k in cls.__mro__ if name in k.__dict__)
        if getattr(resolved, PATTERN_MARK, False) is True:
            methods.append((name, resolved))
    return methods


def _bases_first(cls: type) -> list[type]:
    """The classes of `cls`'s method order, each after all of its bases, siblings in the
    method order (a topological order of the hierarchy that keeps `D(B, C)`'s B before C)."""
    order: list[type] = []
    pending = list(cls.__mro__)
    while pending:
        ready = next(k for k in pending if all(b in order for b in k.__bases__))
        order.append(ready)
        pending.remove(ready)
    return order


class FusionBasePass:
    """A pass that edits the graph itself in `run()`.

    The engine creates one instance per compilation (with no arguments) and calls `run` on
    the root graph, then on every subgraph. See `ge.passes.status` for what `run` may return.
    """

    __ge_pass_source__: ClassVar[SourceLocation]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.__ge_pass_source__ = _class_statement_location()

    def run(self, graph: Graph, context: PassContext) -> StatusLike:
        """Edit `graph` in place; `None`/`True`/`0` = success, `NOT_CHANGED`, else failure."""
        raise NotImplementedError(f"{type(self).__name__}.run() is not implemented")


class PatternFusionPass(FusionBasePass):
    """A pass that replaces every match of its patterns with the graph `replacement` builds.

    Write patterns either as `patterns()` or as `@pattern` methods (not both). The hooks may
    omit the context argument: `meet_requirements(self, match_result[, context])`,
    `replacement(self, match_result[, context])`, or expression style
    `replacement(self, inputs[, context | match_result[, context]])`.
    """

    def __init__(self, matcher_config: PatternMatcherConfig | None = None) -> None:
        if matcher_config is not None and not isinstance(matcher_config, PatternMatcherConfig):
            raise TypeError(
                "matcher_config must be a PatternMatcherConfig or None, "
                f"got {type(matcher_config).__name__}"
            )
        self._matcher_config = matcher_config

    @property
    def matcher_config(self) -> PatternMatcherConfig | None:
        """The `PatternMatcherConfig` given to `__init__`, or None for the defaults.

        An `__init__` of a subclass that never called this class's leaves the config unknown:
        an AttributeError (as GE's), never the defaults in silence (a const-value pattern
        would then match every constant)."""
        try:
            return self._matcher_config
        except AttributeError:
            raise AttributeError(
                f"{type(self).__name__} has no matcher config: its __init__ did not call "
                "PatternFusionPass.__init__ (add super().__init__(matcher_config) to it)"
            ) from None

    def patterns(self) -> Iterable[PatternOrGraph] | None:
        """The patterns to match (`Pattern` or `Graph` objects)."""
        raise NotImplementedError(f"{type(self).__name__}.patterns() is not implemented")

    def meet_requirements(self, match_result: Any, context: PassContext | None = None) -> bool:
        """Whether this match should be replaced (default: every match)."""
        return True

    def replacement(self, match_result: Any, context: PassContext | None = None) -> Graph:
        """The graph that replaces the match."""
        raise NotImplementedError(f"{type(self).__name__}.replacement() is not implemented")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        where = cls.__ge_pass_source__
        own = cls.__dict__
        _forbid_run(cls, PatternFusionPass)
        marked = [(n, f) for n, f in own.items() if getattr(f, PATTERN_MARK, False) is True]
        written = _written_patterns(cls)
        if marked and written is not None:
            inherited = "" if written is cls else f" (inherited from {written.__name__})"
            raise PassRegisterTypeError(
                f"{cls.__name__} cannot combine @pattern methods with patterns(){inherited}. "
                "Use either @pattern methods or a patterns() method.",
                location=where,
            )
        if written is None:
            # (rebuilt whenever the class's patterns differ from what it inherits: its own
            # @pattern, a mixin's, a diamond's two sides, one made a plain method: trial AL)
            methods = _pattern_methods(cls)
            for _, method in methods:  # (its own, and a plain mixin's: checked by no class)
                hooks.check_pattern_method(method, where)
            made_of = getattr(cls.patterns, "__ge_synthesized_methods__", ())
            if marked or tuple(method for _, method in methods) != made_of:
                cls.patterns = synthesize_patterns(  # type: ignore[method-assign]
                    cls.__name__, methods)
        if "meet_requirements" in own:
            cls.meet_requirements = hooks.adapt_legacy_hook(  # type: ignore[method-assign]
                "meet_requirements", own["meet_requirements"], "match_result", where
            )
        if "replacement" in own:
            func = own["replacement"]
            if hooks.is_expression_replacement(func):
                adapted = hooks.adapt_expression_replacement(cls.__name__, func, where)
            else:
                adapted = hooks.adapt_legacy_hook("replacement", func, "match_result", where)
            cls.replacement = adapted  # type: ignore[method-assign]
        # GE calls the hooks by their parameters' names; say how, where a name suggests
        # otherwise (in the E13028 of a failing hook; a warning for the sure mistake).
        hooks.set_signature_notes(cls)
        if marked or "replacement" in own:
            hooks.warn_misnamed_replacement(cls)
        hooks.warn_foreign_hooks(cls, "pattern", PatternFusionPass)


class DecomposePass(FusionBasePass):
    """A pass that replaces single nodes of its `op_types` with the graph `replacement` builds.

    `op_types` is set by `@register_decompose_pass`. Hooks: `meet_requirements(self, node
    [, context])` and `replacement(self, node[, context])`.
    """

    op_types: ClassVar[list[str] | None] = None

    def meet_requirements(self, node: Node, context: PassContext | None = None) -> bool:
        """Whether this node should be decomposed (default: every node of `op_types`)."""
        return True

    def replacement(self, node: Node, context: PassContext | None = None) -> Graph:
        """The graph that replaces `node`."""
        raise NotImplementedError(f"{type(self).__name__}.replacement() is not implemented")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        where = cls.__ge_pass_source__
        own = cls.__dict__
        _forbid_run(cls, DecomposePass)
        for hook_name in ("meet_requirements", "replacement"):
            if hook_name in own:
                adapted = hooks.adapt_legacy_hook(hook_name, own[hook_name], "node", where)
                setattr(cls, hook_name, adapted)
        hooks.set_decompose_notes(cls)
        hooks.warn_foreign_hooks(cls, "decompose", DecomposePass)


#: Names GE's `ge.passes.base` also provides (it imports them there), so that pass code
#: importing them from it runs here; `ge.passes` has them (loaded on first use).
_GE_BASE_NAMES = frozenset({
    "MatchResult", "PassContext", "PassStage", "PatternMatcherConfigBuilder",
    "SubgraphBoundary", "SubgraphInput", "SubgraphOutput", "SubgraphRewriter", "infer_shape",
})


def __getattr__(name: str) -> Any:
    if name not in _GE_BASE_NAMES:
        raise AttributeError(f"module 'ge.passes.base' has no attribute {name!r}")
    import ge.passes

    value = getattr(ge.passes, name)
    globals()[name] = value
    return value
