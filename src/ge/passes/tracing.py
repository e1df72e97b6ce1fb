"""The tracing matcher: `Matcher`'s search, step for step, recording the check that rejected a
candidate (`Rejection`); what `ge.passes.explain` tells, apart from the matcher the engine runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ge.graph import Graph, Node
from ge.graph import order as graph_order
from ge.graph.tensor import Tensor
from ge.ops.schemas import normalize_domain
from ge.passes.matcher import (
    _CONST,
    _DATA,
    CompiledPattern,
    Match,
    Matcher,
    PatternNode,
    Producer,
    _same_value,
    _Search,
    input_layout,
    is_constant,
)

__all__ = ["Rejection", "TracingMatcher"]


@dataclass
class Rejection:
    """One check that failed during a `TracingMatcher.match_at`: what kind of check, the
    pattern node and the target node it compared, what it found (`info`), and the bindings
    at that moment (`depth` of them: pattern nodes bound plus pattern inputs bound)."""

    kind: str
    depth: int
    pnode: PatternNode | None
    target: Node | None
    info: dict[str, Any]
    bound: dict[PatternNode, Node]
    data: dict[PatternNode, Producer]


class TracingMatcher(Matcher):
    """A `Matcher` that remembers why it failed: after `match_at`, `deepest` is the first
    failed check among those made with the most bindings (None when nothing failed).

    The search is `Matcher`'s own, step for step (each override checks, records a failure,
    and hands over to the base method), so the result of `match_at` is the same; `Matcher`
    itself is untouched and pays nothing for this. The checks of `_accepts` are restated by
    `why_not` to say which one failed; a disagreement is recorded as kind "unexplained".
    """

    uses_plans = False  # it records the search's own steps
    _operator_first = False  # every operator check goes through `_node`

    def __init__(self, pattern: CompiledPattern, graph: Graph) -> None:
        super().__init__(pattern, graph)
        self.deepest: Rejection | None = None
        self._consumer_of = {id(p.inputs): p for p in pattern.nodes.values()}

    def match_at(self, candidate: Node) -> Match | None:
        self.deepest = None
        return super().match_at(candidate)

    def _reject(self, s: _Search, kind: str, pnode: PatternNode | None, target: Node | None,
                **info: Any) -> None:
        depth = len(s.bound) + len(s.data)
        if self.deepest is None or depth > self.deepest.depth:
            self.deepest = Rejection(kind, depth, pnode, target, info, dict(s.bound),
                                     dict(s.data))

    def _node(self, s: _Search, pnode: PatternNode, target: Node) -> Iterator[None]:
        bound = s.bound.get(pnode)
        if bound is not None:
            if bound is not target:
                self._reject(s, "bound_elsewhere", pnode, target, bound=bound)
        elif target in s.used:
            other = next((p for p, n in s.bound.items() if n is target), None)
            self._reject(s, "target_used", pnode, target, by=other)
        elif not self._accepts(pnode, target):
            kind, info = self.why_not(pnode, target, s.used)
            self._reject(s, kind, pnode, target, **info)
        return super()._node(s, pnode, target)

    def _pairs(self, s: _Search, wanted: list[tuple[PatternNode, int]],
               given: list[Producer], k: int) -> Iterator[None]:
        if k < len(wanted):
            pnode, out = wanted[k]
            producer = given[k]
            consumer = self._consumer_of.get(id(wanted))
            if pnode.kind == _DATA:
                bound = s.data.get(pnode)
                if bound is not None and bound != producer:
                    self._reject(s, "data_twice", pnode, producer[0], bound=bound,
                                 producer=producer, consumer=consumer)
            elif producer[1] != out:
                # Another operator read at another output (a Split's output 1 where the
                # pattern wants a Slice): the operator is what differs, and is said first.
                kind, info = (self.why_not(pnode, producer[0])
                              if not self._accepts(pnode, producer[0]) else ("", {}))
                if kind == "op_type":
                    self._reject(s, kind, pnode, producer[0], **info, output=producer[1],
                                 expected_output=out)
                else:
                    self._reject(s, "output_index", pnode, producer[0], expected=out,
                                 found=producer[1], consumer=consumer)
        return super()._pairs(s, wanted, given, k)

    def _output_candidates(self, s: _Search, pnode: PatternNode) -> list[Node]:
        found = super()._output_candidates(s, pnode)
        if not found:
            self._reject(s, "no_output_candidate", pnode, None)
        return found

    def _finish(self, s: _Search) -> Match | None:
        match = super()._finish(s)
        if match is None:
            for pnode in self.pattern.inputs:
                producer = s.data.get(pnode)
                if producer is None or producer[0] in s.used:
                    self._reject(s, "input_inside", pnode, producer[0] if producer else None,
                                 producer=producer)
                    break
        return match

    def why_not(self, pnode: PatternNode, target: Node,
                used: set[Node] | frozenset[Node] = frozenset()) -> tuple[str, dict[str, Any]]:
        """Which check of `_accepts` refuses `target` for `pnode`, in `_accepts`'s order:
        (kind, info); `used` (the bound targets) tells the consumers of the match apart."""
        if pnode.kind == _CONST:
            if not is_constant(target):
                return "op_type", {"expected": "a constant", "found": target.type}
            if self._const_value and pnode.value is not None and not _same_value(pnode.value,
                                                                                   target):
                other = target.get_attr("value") if target.has_attr("value") else None
                return "const_value", {"expected": pnode.value,
                                       "found": other if isinstance(other, Tensor) else None}
            return "unexplained", {}
        if target._type != pnode.type or normalize_domain(target._domain) != pnode.domain:
            return "op_type", {"expected": pnode.type, "expected_domain": pnode.domain,
                               "found": target.type,
                               "found_domain": normalize_domain(target._domain)}
        if target._graph is not self.graph:  # a value the matched body reads from outside
            return "enclosing_graph", {"graph": target._graph}
        connected = sum(1 for p in target._inputs if p is not None)
        if connected != len(pnode.inputs):
            return "input_count", {"expected": len(pnode.inputs), "found": connected}
        layout = input_layout(target._inputs)
        if layout != pnode.layout:
            return "input_position", {
                "expected": [i for i, c in enumerate(pnode.layout) if c],
                "found": [i for i, c in enumerate(layout) if c]}
        counts = pnode.out_counts
        for i, consumers in enumerate(target._consumers):
            if i in pnode.out_anchors:
                continue
            expected = counts[i] if i < len(counts) else 0
            readers = sorted({c for c, _ in consumers or ()}, key=graph_order.label)
            if len(consumers or ()) != expected:
                return "consumers", {"output": i, "expected": expected,
                                     "found": len(consumers or ()), "consumers": readers,
                                     "outside": [c for c in readers if c not in used]}
        if target.get_subgraphs():
            return "subgraph", {}
        if self._ir_attr:
            want, got = self._filled_attrs(pnode.node), self._filled_attrs(target)
            for name in sorted(set(want) | set(got)):
                if want.get(name, _UNSET) != got.get(name, _UNSET):
                    return "attribute", {"name": name, "expected": want.get(name, _UNSET),
                                         "found": got.get(name, _UNSET)}
        return "unexplained", {}


class _Unset:
    """An attribute a node does not have (and whose default is not known)."""

    def __repr__(self) -> str:
        return "unset"


_UNSET: Any = _Unset()
