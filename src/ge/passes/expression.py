"""Expression-style passes: `@pattern` methods and `replacement(self, inputs)` built with ES.

The ES builder (`ge.es`) and `PatternInputs` are imported when a pattern or replacement is
built, never at import time, so pass modules load without them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, NamedTuple

from ge.graph.journal import ChangeKind
from ge.passes.source import blame

if TYPE_CHECKING:
    from ge.graph import Graph, Node

__all__ = ["InPlace", "build_expression_graph", "build_in_place", "synthesize_patterns"]

PATTERN_MARK = "__ge_expression_pattern_method__"


def _es_api(what: str) -> SimpleNamespace:
    """The ES builder pieces expression-style passes need, or a clear ImportError."""
    try:
        return _es_modules()
    except ImportError as err:
        raise ImportError(
            f"{what} need the ES graph builder (ge.es.GraphBuilder, ge.es.TensorHolder) and "
            f"ge.passes.pattern (Pattern, PatternInputs, create_pattern), which are not "
            f"available: {err}"
        ) from err


@functools.cache
def _es_modules() -> SimpleNamespace:
    """Imported on first use (ge.es imports ge.passes), then kept: every rewrite asks."""
    from ge.es import GraphBuilder, TensorHolder
    from ge.graph import Graph
    from ge.passes.pattern import Pattern, PatternInputs, create_pattern

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
        message = (f"Expression-style {noun} must return a TensorHolder or a non-empty "
                   "list/tuple of TensorHolder")
        if role != "pattern":
            message += _replacement_returned(result)
        raise TypeError(message)
    return outputs


def _replacement_returned(result: object) -> str:
    """What an expression-style replacement returned instead of its outputs; for None, the
    way to leave a match alone (GE has no "skip" return: a replacement is only asked once
    meet_requirements accepted the match, and must then replace it)."""
    if result is None:
        return (", got None: a replacement cannot skip its match; to leave a match alone, "
                "return False from meet_requirements(self, match_result), which is asked "
                "first (its MatchResult gives the matched tensors: "
                "match_result.get_captured_tensor(i))")
    return f", got {type(result).__name__}"


def build_expression_graph(name: str, body: Callable[[Any], object], *, role: str,
                           presize: int | None = None) -> Any:
    """Run `body(inputs)` on a fresh builder named `name`; return its Graph.

    A Graph returned by `body` is used as is; otherwise its TensorHolder outputs are built.
    `presize` inputs exist up front and are all there are: a replacement takes one per
    boundary input of its match, whether or not it reads them all (so `return inputs[1]`
    works on its own), and `len(inputs)` is that number. None: created as indexed (a
    replacement called without a match from the engine).
    """
    es = _es_api("expression-style replacements")
    builder = es.GraphBuilder(name)
    inputs = es.PatternInputs(builder)
    if presize is not None:
        inputs._presize(presize)
    result = body(inputs)
    if isinstance(result, es.Graph):
        return result
    return builder.build_and_reset(_normalize_outputs(result, es, role))


class InPlace(NamedTuple):
    """A replacement built where its match is: the nodes it made (in creation order, a
    topological one) and the producer of each replacement output."""

    nodes: list[Node]
    outputs: list[tuple[Node, int]]
    asked_names: dict[Node, str]  # new nodes that could not get the name asked for (yet)


def build_in_place(graph: Graph, name: str, body: Callable[[Any], object],
                   producers: list[tuple[Node, int]], *, name_scope: str = ""
                   ) -> InPlace | Graph:
    """Run an expression-style replacement `body(inputs)` with its operators built directly
    in `graph`, `inputs[i]` being boundary producer `producers[i]` itself.

    This is `build_expression_graph` without the detour through a separate graph (a `Data`
    per input, a `NetOutput`, copying and re-inferring every node): the new nodes read the
    matched tensors and are typed from their real descs as they are built. A `Graph` the
    body returns instead is given back, its stray nodes removed, for the caller to copy in.
    """
    es = _es_api("expression-style replacements")
    builder = es.GraphBuilder._into(graph, name)
    builder._name_scope = name_scope  # unnamed nodes: `<scope><op type>`
    made: dict[Node, None] = {}

    def listen(kind: ChangeKind, node: Any, index: int) -> None:
        if kind is ChangeKind.NODE_ADDED:
            made[node] = None
        elif kind is ChangeKind.NODE_REMOVED:
            made.pop(node, None)

    unsubscribe = graph.subscribe(listen)
    try:
        result = body(es.PatternInputs._of(builder, producers))
    finally:
        unsubscribe()
    if isinstance(result, es.Graph):
        builder._built_in_place()
        for node in reversed(made):
            if node._graph is not None:
                node._graph.remove_node(node)
        return result
    holders = _normalize_outputs(result, es, "replacement")
    outputs = [builder._holder(h, f"outputs[{i}]") for i, h in enumerate(holders)]
    builder._built_in_place()
    asked = builder._asked_names
    return InPlace(list(made), [(h._node, h._index) for h in outputs],
                   {n: asked[n._name] for n in made if n._name in asked} if asked else {})


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
                raise blame(TypeError(
                    "A @pattern method supports a single pattern only. "
                    "Define one @pattern method per pattern."
                ), method)
            try:
                outputs = _normalize_outputs(result, es, "pattern")
            except TypeError as err:
                raise blame(err, method) from None
            pattern = es.create_pattern(builder.build_and_reset(outputs))
            for holder in [*inputs.created(), *outputs]:
                pattern.capture_tensor(holder)
            pattern._source = method
            built.append(pattern)
        return built

    patterns.__qualname__ = f"{cls_name}.patterns"
    patterns.__ge_synthesized_from__ = [name for name, _ in methods]  # type: ignore[attr-defined]
    patterns.__ge_synthesized_methods__ = tuple(m for _, m in methods)  # type: ignore[attr-defined]
    return patterns
