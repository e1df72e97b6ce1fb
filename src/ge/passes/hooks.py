"""Signature adaptation of the hooks pass authors write.

Authors may write `meet_requirements(self, match_result)` or add a context argument; an
expression-style `replacement(self, inputs, ...)` builds its graph with the ES builder. The
engine always calls the adapted hook as `hook(match_result, context)`; these functions
check the author's signature once, at class creation, and return the adapter.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from ge.errors import PassRegisterTypeError, SourceLocation

__all__ = [
    "adapt_expression_replacement",
    "adapt_legacy_hook",
    "check_pattern_method",
    "expression_body",
    "is_expression_replacement",
    "replacement_name",
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
            return func(self, value)
    else:

        def adapter(self: Any, value: Any, context: Any = None) -> Any:
            return func(self, value, context)

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
            if count == 2:
                return func(self, inputs)
            if count == 3:
                return func(self, inputs, context if third_is_context else match_result)
            return func(self, inputs, match_result, context)

        return call

    def adapter(self: Any, match_result: Any, context: Any = None) -> Any:
        input_count = getattr(match_result, "_input_count", None)
        return build_expression_graph(replacement_name(cls_name),
                                      body(self, match_result, context), role="replacement",
                                      presize=input_count() if callable(input_count) else 0)

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
