"""Which nodes a sweep tries: candidates from the op-type index, narrowed by a landmark.

A pattern is matched backwards from the producer of its first output (its root), so the
candidates are the graph's nodes of the root's op type. Many of them cannot match: a
LayerNorm pattern rooted at `Add` is tried at every `Add` of a transformer, but only an
`Add` with a `Sqrt` a few steps upstream can be one. `LandmarkFilter` uses that: it picks a
pattern operator that is rare in the graph and close to the root (the landmark, at distance
*d* upstream of the root in the pattern) and lets through only the root-type nodes at most
*d* steps downstream of a node of that type. A match maps the pattern's path from the root
to the landmark onto a path of the same length in the graph, so no node that could match is
left out.

The filter follows the rewrites of its sweep (D14: nodes made by earlier rewrites can match
later): a node that is added or whose input changes may have brought a landmark closer to
the nodes downstream of it, so those are let through too. It only ever lets more through,
so a sweep with it tries the same matches, in the same order, as one without.
"""

from __future__ import annotations

from collections.abc import Iterable

from ge.graph import CONST, DATA, NET_OUTPUT, Graph, Node
from ge.graph import order as graph_order
from ge.ops.functions import called_function
from ge.ops.schemas import normalize_domain
from ge.passes.matcher import CompiledPattern, PatternNode

__all__ = ["LandmarkFilter", "Operator", "candidates", "is_of", "named_operators"]

#: An operator as a sweep looks for it: op type and domain ("" for ONNX's; None for the
#: op type in every domain).
Operator = tuple[str, str | None]

#: A landmark is tried when its score (its nodes, doubled per step to the root) is below
#: this many times the candidates, and kept when it lets through at most `_KEEP` of them:
#: otherwise following the sweep's changes costs about what it saves.
_WORTHWHILE = 8
_KEEP = 0.5


def candidates(graph: Graph, operators: Iterable[Operator]) -> list[Node]:
    """The direct nodes of `operators` in the graph's topological order. An operator named
    without a domain (None: a custom operator wherever the model puts it) is no call of a
    function the model defines of that name (onnxscript's `this.Scale` is not a plugin's
    `Scale` operator; trial N: a decomposition of `Scale` rewrote the model's calls)."""
    if not graph._order_ok:
        graph.topological_order()  # establishes the maintained order of a loaded graph
    wanted = list(dict.fromkeys(operators))
    if len(wanted) == 1:
        found = graph.nodes_of_type(*wanted[0])  # (in order already)
    else:
        found = sorted({node: None for op in wanted for node in graph.nodes_of_type(*op)},
                       key=graph_order.label)
    if any(domain is None for _, domain in wanted) and graph.root_graph().model.functions:
        named = {(op_type, domain) for op_type, domain in wanted if domain is not None}
        found = [n for n in found if not normalize_domain(n._domain)
                 or (n._type, normalize_domain(n._domain)) in named
                 or called_function(n) is None]
    return found


def named_operators(op_types: Iterable[str]) -> list[Operator]:
    """The operators a decompose pass's op types name. `Type` is ONNX's operator when ONNX
    has one of that name (`Gelu`: not `com.microsoft`'s Gelu, whose attributes and
    versions differ) and otherwise the custom operator of that name in whatever domain
    the model puts it (`AddCustom`, as GE's samples name it); `domain.Type` is that
    domain's operator only (`com.microsoft.Gelu`, as reports and `ge inspect` label it)."""
    import onnx.defs

    found: list[Operator] = []
    for op_type in op_types:
        domain, _, name = op_type.rpartition(".")
        if domain:
            found.append((name, normalize_domain(domain)))
        elif onnx.defs.has(op_type) or op_type in _STRUCTURAL:
            found.append((op_type, ""))
        else:
            found.append((op_type, None))
    return found


def is_of(node: Node, operators: Iterable[Operator]) -> bool:
    """Whether `node` is of one of `operators`."""
    return any(node._type == op_type and (domain is None or normalize_domain(node._domain)
                                          == domain) for op_type, domain in operators)


#: ge's own node types (graph inputs, constants, the graph's outputs), ONNX's domain.
_STRUCTURAL = frozenset({DATA, CONST, NET_OUTPUT})


def _upstream_distances(pattern: CompiledPattern) -> dict[tuple[str, str], int]:
    """For each (op type, domain) of the pattern's operators other than the root's, the
    fewest input edges from the root to a node of it."""
    root = pattern.root
    distances: dict[tuple[str, str], int] = {}
    seen: set[PatternNode] = {root}
    level, depth = [root], 0
    while level:
        depth += 1
        following: list[PatternNode] = []
        for pnode in level:
            for producer, _ in pnode.inputs:
                if producer in seen:
                    continue
                seen.add(producer)
                following.append(producer)
                if producer.kind == root.kind:  # an operator (not a wildcard or a constant)
                    distances.setdefault((producer.type, producer.domain), depth)
        level = following
    distances.pop((root.type, root.domain), None)
    return distances


class LandmarkFilter:
    """The root-type nodes of one sweep that can match (see the module docstring).

    Nodes the sweep touches are remembered and their downstream is walked once, when the
    next candidate is asked about: a rewrite touches the same nodes several times (each
    input it moves), and the walk then sees the graph the candidate is tried in."""

    __slots__ = ("_allowed", "_depth", "_pending", "_root")

    def __init__(self, root: tuple[str, str], depth: int, landmarks: Iterable[Node]) -> None:
        self._root = root
        self._depth = depth
        self._allowed: set[Node] = set()
        self._pending: dict[Node, None] = dict.fromkeys(landmarks)

    @classmethod
    def for_sweep(cls, pattern: CompiledPattern, graph: Graph, num_candidates: int,
                  kept: dict[tuple[object, ...], frozenset[Node] | None] | None = None
                  ) -> LandmarkFilter | None:
        """The filter of a sweep of `pattern` over `graph`, or None when no landmark is rare
        enough to be worth it. `kept` (one pass invocation's) keeps the nodes let through
        per graph state, root and landmark: the patterns of one pass often share them (24
        layer-norm forms), and a sweep that rewrote nothing leaves them as they were."""
        best: tuple[int, int, int, str, str] | None = None
        for (op_type, domain), depth in _upstream_distances(pattern).items():
            count = graph.count_of_type(op_type, None)  # (all domains: an upper bound, O(1))
            # The nodes let through grow with the landmarks and with the steps downstream
            # (about doubling per step in a transformer): the closer of two rare ones wins.
            score = count << depth
            if best is None or (score, count) < best[:2]:
                best = (score, count, depth, op_type, domain)
        if best is None or best[0] >= _WORTHWHILE * num_candidates:
            return None
        _, _, depth, op_type, domain = best
        root = pattern.root
        key = (graph, graph.mutation_count, root.type, root.domain, op_type, domain, depth)
        if kept is not None and key in kept:
            allowed = kept[key]
            if allowed is None:
                return None
            found = cls((root.type, root.domain), depth, ())
            found._allowed = set(allowed)  # (a sweep's rewrites add to its own)
            return found
        found = cls((root.type, root.domain), depth, graph.nodes_of_type(op_type, domain))
        found._spread_pending()
        worth = len(found._allowed) <= _KEEP * num_candidates
        if kept is not None:
            kept[key] = frozenset(found._allowed) if worth else None
        return found if worth else None

    def allows(self, node: Node) -> bool:
        """Whether `node` may match: a landmark is (or may have come) close enough upstream."""
        if self._pending:
            self._spread_pending()
        return node in self._allowed

    def touched(self, node: Node) -> None:
        """`node` is a landmark, or was added or rewired: the root-type nodes at most `depth`
        steps downstream of it may now match (walked before the next `allows`)."""
        self._pending[node] = None

    def _spread_pending(self) -> None:
        pending, self._pending = self._pending, {}
        for node in pending:
            if node._graph is not None:  # a removed node leads nowhere
                self._spread(node)

    def _spread(self, node: Node) -> None:
        """Let through the root-type nodes at most `depth` steps downstream of `node`."""
        root_type, root_domain = self._root
        allowed = self._allowed
        level, seen = [node], {node}
        for step in range(self._depth + 1):
            following: list[Node] = []
            for current in level:
                if current._type == root_type and normalize_domain(current._domain) == root_domain:
                    allowed.add(current)
                if step == self._depth:
                    continue
                for consumers in current._consumers:
                    for consumer, _ in consumers or ():
                        if consumer not in seen:
                            seen.add(consumer)
                            following.append(consumer)
            level = following
