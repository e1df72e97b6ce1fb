"""Signature adaptation of the hooks pass authors write.

Authors may write `meet_requirements(self, match_result)` or add a context argument; an
expression-style `replacement(self, inputs, ...)` builds its graph with the ES builder. The
engine always calls the adapted hook as `hook(match_result, context)`; these functions
check the author's signature once, at class creation, and return the adapter.

GE decides how a hook is called by its parameters' *names* (a replacement is expression
style iff its second parameter is `inputs`; its third is the context iff named `context`).
That rule stays, but a name that contradicts it (`replacement(self, ins)` in a class of
`@pattern` methods, `replacement(self, inputs, ctx)`) makes the hook receive something its
author did not expect, and the failure then reads "'MatchResult' object is not
subscriptable". `signature_notes` says, per class, how such a hook is called; the note is
attached to what the hook raises (`add_note`) and ends up in the E13028 message. The one
case that is a mistake whatever the hook does, a legacy replacement not named
`match_result` in a class of `@pattern` methods, also warns once at class creation
(`warn_misnamed_replacement`), and so do the hooks of onnxscript's rewriter, which ge
never calls (`warn_foreign_hooks`).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ge.errors import PassDefinitionWarning, PassRegisterTypeError, SourceLocation
from ge.passes.source import warn_user

__all__ = [
    "adapt_expression_replacement",
    "adapt_legacy_hook",
    "add_note",
    "check_pattern_method",
    "expression_body",
    "has_pattern_methods",
    "hook_note",
    "is_expression_replacement",
    "note_of",
    "replacement_name",
    "set_signature_notes",
    "signature_notes",
    "warn_foreign_hooks",
    "warn_misnamed_replacement",
]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
Hook = Callable[..., Any]


def _signature_parts(func: object) -> tuple[list[inspect.Parameter], bool] | None:
    """(positional parameters, has required keyword-only parameters) or None if unreadable."""
    if not inspect.isfunction(func):
        return None
    params = list(inspect.signature(func).parameters.values())
    positional = [p for p in params if p.kind in _POSITIONAL]
    required_kwonly = any(
        p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is inspect.Parameter.empty
        for p in params
    )
    return positional, required_kwonly


def _defined_at(func: object, where: SourceLocation) -> SourceLocation:
    """Where the hook itself is defined (its `def` line, or its first decorator's), else
    `where` (the class statement): the line an author has to change."""
    code = getattr(func, "__code__", None)
    if code is None or not inspect.isfunction(func):
        return where
    return SourceLocation(code.co_filename, code.co_firstlineno)


def _mark_adapted(wrapper: Hook, func: Hook) -> Hook:
    functools.update_wrapper(wrapper, func)
    del wrapper.__wrapped__  # type: ignore[attr-defined]  # the adapter's own signature counts
    wrapper.__ge_original_hook__ = func  # type: ignore[attr-defined]
    return wrapper


# --- notes on how a hook is called --------------------------------------------------------

_NOTE_ATTR = "__ge_hook_note__"
_NOTES_ATTR = "__ge_hook_notes__"


def add_note(exc: BaseException, note: str | None) -> BaseException:
    """Attach `note` (how the failing hook was called) to `exc` unless it has one already;
    `ge.compiler.invocation.run_error` adds it to the E13028 reason. Returns `exc`."""
    if note and getattr(exc, _NOTE_ATTR, None) is None:
        try:
            setattr(exc, _NOTE_ATTR, note)
        except (AttributeError, TypeError):  # an exception type that takes no attributes
            pass
    return exc


def hook_note(exc: BaseException) -> str | None:
    """The note `add_note` attached to `exc`, if any."""
    note = getattr(exc, _NOTE_ATTR, None)
    return note if isinstance(note, str) else None


def note_of(instance: object, hook_name: str) -> str | None:
    """The note of `instance`'s class about how its hook `hook_name` is called, if any."""
    notes = getattr(type(instance), _NOTES_ATTR, None)
    return notes.get(hook_name) if isinstance(notes, dict) else None


def adapt_legacy_hook(hook_name: str, func: object, value_name: str, where: SourceLocation) -> Hook:
    """Adapt `hook(self, value)` / `hook(self, value, context)` to `(self, value, context=None)`."""
    parts = _signature_parts(func)
    if parts is None or len(parts[0]) not in (2, 3) or parts[1]:
        raise PassRegisterTypeError(
            f"{hook_name} only supports {hook_name}(self, {value_name}) or "
            f"{hook_name}(self, {value_name}, context)",
            location=_defined_at(func, where),
        )
    assert inspect.isfunction(func)
    if len(parts[0]) == 2:

        def adapter(self: Any, value: Any, context: Any = None) -> Any:
            try:
                return func(self, value)
            except Exception as exc:
                add_note(exc, note_of(self, hook_name))
                raise
    else:

        def adapter(self: Any, value: Any, context: Any = None) -> Any:
            try:
                return func(self, value, context)
            except Exception as exc:
                add_note(exc, note_of(self, hook_name))
                raise

    return _mark_adapted(adapter, func)


def is_expression_replacement(func: object) -> bool:
    """Expression style iff at least two positional parameters and the second is `inputs`."""
    parts = _signature_parts(func)
    return parts is not None and len(parts[0]) >= 2 and parts[0][1].name == "inputs"


def adapt_expression_replacement(cls_name: str, func: object, where: SourceLocation) -> Hook:
    """Adapt an expression-style `replacement(self, inputs, ...)` to `(self, match, context)`.

    Accepted: `(self, inputs)`, `(self, inputs, context)` (third named exactly `context`),
    `(self, inputs, match_result)` (any other third name) and
    `(self, inputs, match_result, context)`.
    """
    from ge.passes.expression import build_expression_graph

    parts = _signature_parts(func)
    assert parts is not None and inspect.isfunction(func)
    positional, required_kwonly = parts
    count = len(positional)
    if count == 4 and positional[3].name != "context":
        raise PassRegisterTypeError(
            "Expression-style replacement with four arguments must use "
            "replacement(self, inputs, match_result, context)",
            location=_defined_at(func, where),
        )
    if count > 4 or required_kwonly:
        raise PassRegisterTypeError(
            "Expression-style replacement supports replacement(self, inputs), "
            "replacement(self, inputs, context), replacement(self, inputs, match_result) or "
            "replacement(self, inputs, match_result, context)",
            location=_defined_at(func, where),
        )
    third_is_context = count == 3 and positional[2].name == "context"

    def body(self: Any, match_result: Any, context: Any) -> Callable[[Any], Any]:
        """The author's replacement as a function of its `inputs` alone."""

        def call(inputs: Any) -> Any:
            try:
                if count == 2:
                    return func(self, inputs)
                if count == 3:
                    return func(self, inputs, context if third_is_context else match_result)
                return func(self, inputs, match_result, context)
            except Exception as exc:
                add_note(exc, note_of(self, "replacement"))
                raise

        return call

    def adapter(self: Any, match_result: Any, context: Any = None) -> Any:
        input_count = getattr(match_result, "_input_count", None)
        return build_expression_graph(replacement_name(cls_name),
                                      body(self, match_result, context), role="replacement",
                                      presize=input_count() if callable(input_count) else None)

    adapted = _mark_adapted(adapter, func)
    # The engine builds the replacement where its match is instead (`build_in_place`).
    adapted.__ge_expression_body__ = (replacement_name(cls_name), body)  # type: ignore[attr-defined]
    return adapted


def replacement_name(cls_name: str) -> str:
    """The name of the builder of an expression-style replacement (GE's)."""
    return f"{cls_name}_replacement"


ExpressionBody = Callable[[Any, Any, Any], Callable[[Any], Any]]


def expression_body(hook: object) -> tuple[str, ExpressionBody] | None:
    """(builder name, `body(self, match_result, context)`) of an adapted expression-style
    replacement, `body` giving a function of the `inputs` alone; None for other hooks."""
    return getattr(hook, "__ge_expression_body__", None)


def check_pattern_method(func: object, where: SourceLocation) -> None:
    """A `@pattern` method must be `method(self, inputs)`."""
    parts = _signature_parts(func)
    if parts is None or len(parts[0]) != 2 or parts[1]:
        raise PassRegisterTypeError(
            "@pattern methods only support method(self, inputs)",
            location=_defined_at(func, where),
        )


# --- what the names say against how the hooks are called -----------------------------------


def _parameter_names(hook: object) -> list[str] | None:
    """The positional parameter names of the author's function behind an adapted hook;
    None for a hook of ge's own (the base class defaults)."""
    original = getattr(hook, "__ge_original_hook__", None)
    parts = _signature_parts(original)
    return None if parts is None else [p.name for p in parts[0]]


def has_pattern_methods(cls: type) -> bool:
    """Whether `cls`'s patterns are its (or a parent's) `@pattern` methods."""
    return bool(getattr(getattr(cls, "patterns", None), "__ge_synthesized_from__", None))


def _legacy_replacement_note(cls: type, names: list[str]) -> str | None:
    shown = f"replacement({', '.join(names)})"
    value = names[1]
    returns = "it must return a ge.graph.Graph"
    if value != "match_result":
        return (f"{shown} is called as legacy replacement(self, match_result) because its "
                f"second parameter is not named `inputs`: `{value}` receives the MatchResult "
                f"and {returns}; name it `inputs` for the expression style (GE chooses the "
                "style by this name)")
    if has_pattern_methods(cls):
        return (f"{shown} is GE's legacy style although {cls.__name__} has @pattern "
                f"methods: it receives the MatchResult and {returns}, built with a "
                "GraphBuilder of its own; write replacement(self, inputs) to build with es.* "
                "on the matched inputs")
    return None


def _expression_replacement_note(names: list[str]) -> str | None:
    if len(names) < 3 or names[2] in ("context", "match_result"):
        return None
    shown = f"replacement({', '.join(names)})"
    third = names[2]
    if len(names) == 3:
        return (f"{shown} is called as replacement(self, inputs, match_result): its third "
                f"parameter `{third}` receives the MatchResult, because only a third "
                "parameter named `context` receives the pass context; name it `context` to "
                "receive the pass context")
    return (f"{shown} is called as replacement(self, inputs, match_result, context): its "
            f"third parameter `{third}` receives the MatchResult")


def _meet_requirements_note(names: list[str]) -> str | None:
    if names[1] != "inputs":
        return None
    shown = f"meet_requirements({', '.join(names)})"
    return (f"{shown} receives the MatchResult as `inputs`: meet_requirements has no "
            "expression style (read the matched tensors with "
            "match_result.get_captured_tensor(i))")


def signature_notes(cls: type) -> dict[str, str]:
    """How `cls`'s hooks are called where their parameter names suggest otherwise, by hook
    name: the sentence an E13028 from that hook adds (`add_note`). Correct signatures get
    none: `replacement(self, match_result[, context])` outside a class of `@pattern`
    methods, `replacement(self, inputs[, context | match_result[, context]])`,
    `meet_requirements(self, <any>[, <any>])` unless its second parameter is `inputs`."""
    notes: dict[str, str] = {}
    replacement = getattr(cls, "replacement", None)
    names = _parameter_names(replacement)
    if names is not None and len(names) >= 2:
        note = (_expression_replacement_note(names) if expression_body(replacement) is not None
                else _legacy_replacement_note(cls, names))
        if note:
            notes["replacement"] = note
    names = _parameter_names(getattr(cls, "meet_requirements", None))
    if names is not None and len(names) >= 2:
        note = _meet_requirements_note(names)
        if note:
            notes["meet_requirements"] = note
    return notes


def set_decompose_notes(cls: type) -> None:
    """Record on a DecomposePass class how its hooks are called where a parameter named
    `inputs` or `match_result` suggests a pattern pass's: both get the node to replace (a
    GE author writing `replacement(self, inputs)` met a bare "'Node' object is not
    subscriptable")."""
    notes: dict[str, str] = {}
    for hook_name in ("meet_requirements", "replacement"):
        names = _parameter_names(getattr(cls, hook_name, None))
        if names is None or len(names) < 2 or names[1] not in ("inputs", "match_result"):
            continue
        note = (f"DecomposePass.{hook_name}({', '.join(names)}) receives the node it "
                f"decomposes (a ge.graph.Node) as `{names[1]}`, not pattern inputs or a "
                "MatchResult")
        if hook_name == "replacement":
            note += (": it returns a graph it builds (a GraphBuilder, builder.create_inputs(n) "
                     "for the n distinct values the node reads); a DecomposePass has no "
                     "expression style")
        notes[hook_name] = note
    setattr(cls, _NOTES_ATTR, notes)


def set_signature_notes(cls: type) -> None:
    """Record `signature_notes(cls)` on `cls` (every pattern pass class, inherited hooks
    included: a subclass may add `@pattern` methods to its parent's replacement)."""
    setattr(cls, _NOTES_ATTR, signature_notes(cls))


def warn_misnamed_replacement(cls: type) -> None:
    """A `PassDefinitionWarning` for the unambiguous mistake: a class with `@pattern`
    methods whose `replacement`'s second parameter is named neither `inputs` (expression
    style) nor `match_result` (legacy style), e.g. `replacement(self, ins)`. GE accepts it
    (as legacy style), so it is a warning, at the `def` line: once per compilation, when it
    loads the plugin (so each compilation's warnings are complete)."""
    replacement = getattr(cls, "replacement", None)
    names = _parameter_names(replacement)
    if (names is None or len(names) < 2 or names[1] in ("inputs", "match_result")
            or expression_body(replacement) is not None or not has_pattern_methods(cls)):
        return
    original = replacement.__ge_original_hook__  # type: ignore[union-attr]
    code = original.__code__
    location = SourceLocation(code.co_filename, code.co_firstlineno)
    message = (
        f"{cls.__name__}.replacement({', '.join(names)}) is called as legacy "
        f"replacement(self, match_result) although {cls.__name__} has @pattern methods: "
        f"its second parameter is not named `inputs`, so `{names[1]}` receives the "
        "MatchResult and it must return a ge.graph.Graph; name it `inputs` for the "
        f"expression style, or `match_result` if the legacy style is meant (at {location})")
    warn_user(PassDefinitionWarning(message), location)


#: onnxscript's rewriter's hook names (a rule class's `pattern`, `check`, `rewrite`), with
#: the ge hook an author coming from it meant.
_FOREIGN_HOOKS = {"check": "meet_requirements", "rewrite": "replacement"}


def warn_foreign_hooks(cls: type, kind: str, base: type) -> None:
    """A `PassDefinitionWarning` at the `def` line of a method of a pattern or decompose
    pass (`kind`) that onnxscript's rewriter would call and ge never does: `check` in a
    class without its own `meet_requirements`, `rewrite` in one without `replacement`, and
    a plain `pattern` method where no `@pattern` method or `patterns()` is (trial EE: a
    `check` refusing `Pow(d, 3)` was never called, and the fusion fired on it). A helper
    of such a name beside the ge hook, the class's own or inherited (a base class's
    `meet_requirements` calling `self.check()`: trial FF), is left alone; `base` is the
    class whose hooks are the defaults."""
    own = cls.__dict__
    found: list[tuple[str, str]] = []
    for name, meant in _FOREIGN_HOOKS.items():
        if inspect.isfunction(own.get(name)) and getattr(cls, meant) is getattr(base, meant):
            found.append((name, f"ge calls {meant}(), not {name}()"))
    plain = own.get("pattern")
    if (kind == "pattern" and inspect.isfunction(plain) and "patterns" not in own
            and not has_pattern_methods(cls)):
        found.append(("pattern", "ge takes patterns from methods decorated with @pattern "
                                 "(from ge.passes import pattern), or from patterns()"))
    for name, why in found:
        code = own[name].__code__
        location = SourceLocation(code.co_filename, code.co_firstlineno)
        warn_user(PassDefinitionWarning(
            f"{cls.__name__}.{name}() is never called: {why} (onnxscript's rewriter "
            f"calls a rule's {name}(); a ge {kind} pass's hooks are listed in "
            f"docs/passes.md) (at {location})"), location)
