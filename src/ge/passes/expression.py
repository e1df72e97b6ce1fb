"""Expression-style passes: `@pattern` methods and `replacement(self, inputs)` built with ES.

The ES builder (`ge.es`) and `PatternInputs` are imported when a pattern or replacement is
built, never at import time, so pass modules load without them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

__all__ = ["build_expression_graph", "synthesize_patterns"]

PATTERN_MARK = "__ge_expression_pattern_method__"


def _es_api(what: str) -> SimpleNamespace:
    """The ES builder pieces expression-style passes need, or a clear ImportError."""
    try:
        from ge.es import GraphBuilder, TensorHolder
        from ge.passes.pattern import Pattern, PatternInputs, create_pattern
    except ImportError as err:
        raise ImportError(
            f"{what} need the ES graph builder (ge.es.GraphBuilder, ge.es.TensorHolder) and "
            f"ge.passes.pattern (Pattern, PatternInputs, create_pattern), which are not "
            f"available: {err}"
        ) from err
    from ge.graph import Graph

    return SimpleNamespace(
        GraphBuilder=GraphBuilder,
        TensorHolder=TensorHolder,
        Pattern=Pattern,
        PatternInputs=PatternInputs,
        create_pattern=create_pattern,
        Graph=Graph,
    )


def _normalize_outputs(result: object, es: SimpleNamespace, role: str) -> list[Any]:
    outputs = [result] if isinstance(result, es.TensorHolder) else result
    if isinstance(outputs, tuple):
        outputs = list(outputs)
    if (
        not isinstance(outputs, list)
        or not outputs
        or not all(isinstance(o, es.TensorHolder) for o in outputs)
    ):
        noun = "patterns" if role == "pattern" else "replacement"
        raise TypeError(
            f"Expression-style {noun} must return a TensorHolder or a non-empty list/tuple "
            "of TensorHolder"
        )
    return outputs


def build_expression_graph(name: str, body: Callable[[Any], object], *, role: str,
                           presize: int = 0) -> Any:
    """Run `body(inputs)` on a fresh builder named `name`; return its Graph.

    A Graph returned by `body` is used as is; otherwise its TensorHolder outputs are built.
    `presize` inputs exist up front: a replacement takes one per boundary input of its
    match, whether or not it reads them all (so `return inputs[1]` works on its own).
    """
    es = _es_api("expression-style replacements")
    builder = es.GraphBuilder(name)
    inputs = es.PatternInputs(builder)
    inputs._presize(presize)
    result = body(inputs)
    if isinstance(result, es.Graph):
        return result
    return builder.build_and_reset(_normalize_outputs(result, es, role))


def synthesize_patterns(cls_name: str, methods: Sequence[tuple[str, Callable[..., Any]]]) -> Any:
    """The `patterns()` of a class with `@pattern` methods: one pattern per method, in order.

    Each pattern captures every input it created (in index order), then its outputs (in
    return order).
    """

    def patterns(self: Any) -> list[Any]:
        es = _es_api("@pattern methods")
        built: list[Any] = []
        for method_name, method in methods:
            builder = es.GraphBuilder(f"{cls_name}_{method_name}_pattern")
            inputs = es.PatternInputs(builder)
            result = method(self, inputs)
            if isinstance(result, (es.Pattern, es.Graph)):
                built.append(result)
                continue
            if (
                isinstance(result, (list, tuple))
                and result
                and all(isinstance(r, (es.Pattern, es.Graph)) for r in result)
            ):
                raise TypeError(
                    "A @pattern method supports a single pattern only. "
                    "Define one @pattern method per pattern."
                )
            outputs = _normalize_outputs(result, es, "pattern")
            pattern = es.create_pattern(builder.build_and_reset(outputs))
            for holder in [*inputs.created(), *outputs]:
                pattern.capture_tensor(holder)
            built.append(pattern)
        return built

    patterns.__qualname__ = f"{cls_name}.patterns"
    patterns.__ge_synthesized_from__ = [name for name, _ in methods]  # type: ignore[attr-defined]
    return patterns
