"""The pattern matcher: where a pattern occurs in a graph, with GE's semantics (spec §6.1-6.4).

A pattern is compiled once per run (`CompiledPattern`: validity checks of §6.1, per node the
inputs, the consumer counts and which outputs leave the pattern). `Matcher.match_at(node)`
then tries one candidate for the pattern's first output: it matches backwards from there,
binding pattern `Data` nodes to any producer output (one Data used twice binds one
producer), pattern constants to constants (two of them may bind one constant: it is a
value), other nodes by op type (and attributes or
constant values when the config asks), inputs positionally with equal counts. Commutative
operators, when enabled, try their input orders by backtracking. Further pattern outputs are
found among the consumers of values already bound. A binding is accepted only when the
region is closed: a matched node's output that is not a pattern output has no consumer
outside the match (constants excepted: a shared constant stays for its other users).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ge.errors import GeError, MatchResultError, PatternError
from ge.graph import CONST, DATA, NET_OUTPUT, Graph, Node
from ge.graph import order as graph_order
from ge.graph.attributes import GRAPH_KINDS, decode_attr
from ge.graph.keys import hashable_value
from ge.graph.node import is_const
from ge.graph.tensor import Tensor
from ge.ops.schemas import normalize_domain
from ge.passes.config import COMMUTATIVE_OPS, PatternMatcherConfig
from ge.passes.match_plan import PLAN_AFTER, Plan, plan_for
from ge.passes.pattern import NodeIo, Pattern
from ge.passes.rewrite import Region, is_constant

__all__ = ["CompiledPattern", "Match", "MatchResult", "Matcher", "compile_pattern", "is_constant",
           "match_identity"]

Producer = tuple[Node, int]
CONST_TYPES = frozenset({CONST, "Constant"})  # (and of the standard domain: `is_constant`)
_DATA, _CONST, _OP = 0, 1, 2
#: Commutative operators with more inputs than this match in the given order only.
_MAX_PERMUTED_INPUTS = 4


class PatternNode:
    """One node of a compiled pattern."""

    __slots__ = ("commutative", "domain", "gapped", "index", "inputs", "kind", "layout", "node",
                 "out_anchors", "out_counts", "type", "value")

    def __init__(self, node: Node, kind: int) -> None:
        self.node = node
        self.kind = kind
        self.type = node.type
        self.domain = normalize_domain(node.domain)
        self.inputs: list[tuple[PatternNode, int]] = []  # the connected inputs, in order
        # Which inputs are connected, up to the last connected one; `gapped`: an absent
        # optional input before it (Clip(x, None, max)).
        self.layout: tuple[bool, ...] = ()
        self.gapped = False
        self.out_counts: tuple[int, ...] = ()
        self.out_anchors: frozenset[int] = frozenset()
        self.commutative = False
        self.value: Tensor | None = None
        self.index = -1


class CompiledPattern:
    """A validated pattern ready to match: its nodes, outputs, inputs and captures."""

    def __init__(self, pattern: Pattern, config: PatternMatcherConfig) -> None:
        graph = pattern.get_graph()
        self.pattern = pattern
        self.name = graph.name
        self.config = config
        self.nodes: dict[Node, PatternNode] = {}
        self.outputs: list[tuple[PatternNode, int]] = []
        self.inputs: list[PatternNode] = []
        self._compile(graph)
        self.captures = [(self.nodes[c.node], c.index) for c in pattern.get_captured_tensors()]
        self.root = self.outputs[0][0]
        self._plan: Plan | None = None
        self._planned = False  # whether `_plan` was written (it stays None for some patterns)
        self._tries = 0  # candidates tried with the search so far

    def plan(self) -> Plan | None:
        """The match plan (`ge.passes.match_plan`), written once this pattern has been
        tried on `PLAN_AFTER` candidates per pattern node; None before, or when the pattern
        has several outputs (left to the search)."""
        if not self._planned:
            if self._tries < PLAN_AFTER * len(self.nodes):
                self._tries += 1
                return None
            self._planned = True
            self._plan = plan_for(self)
        return self._plan

    def _fail(self, what: str, nodes: Sequence[str] = ()) -> PatternError:
        return PatternError(f"pattern {self.name!r} cannot be matched: {what}", nodes=nodes)

    def _compile(self, graph: Graph) -> None:
        try:
            ordered = graph.topological_order()
        except GeError as err:
            raise self._fail(f"its graph is not acyclic ({err.message})") from err
        outputs = [n for n in ordered if n.type == NET_OUTPUT]
        if len(outputs) != 1:
            raise self._fail(f"it needs exactly one NetOutput node, it has {len(outputs)}")
        net_output = outputs[0]
        for node in ordered:
            if node.get_subgraphs():
                raise self._fail(f"node {node.name!r} ({node.type}) owns a subgraph",
                                 [node.name])
            if node.type not in (DATA, NET_OUTPUT) and (
                    node.get_in_control_nodes() or node.get_out_control_nodes()):
                raise self._fail(f"node {node.name!r} ({node.type}) has a control edge",
                                 [node.name])
            if node is net_output:
                continue
            kind = _DATA if node.type == DATA else _CONST if is_constant(node) else _OP
            self.nodes[node] = PatternNode(node, kind)
        if net_output.get_inputs_size() == 0:
            raise self._fail("it has no output")
        for j in range(net_output.get_inputs_size()):
            producer = net_output.get_input_producer(j)
            if producer is None:
                raise self._fail(f"output {j} is not connected")
            pnode = self.nodes[producer[0]]
            if pnode.kind == _DATA:
                raise self._fail(f"output {j} is the pattern input {producer[0].name!r} itself; "
                                 "a pattern output must be computed by a node")
            self.outputs.append((pnode, producer[1]))
        reached = self._backwards_from_outputs()
        for node, pnode in self.nodes.items():
            if pnode not in reached:
                what = "input" if pnode.kind == _DATA else "node"
                raise self._fail(f"{what} {node.name!r} ({node.type}) does not lead to an "
                                 "output", [node.name])
            self._describe(pnode)
        self._number_inputs()

    def _backwards_from_outputs(self) -> set[PatternNode]:
        reached: set[PatternNode] = set()
        stack = [p for p, _ in self.outputs]
        while stack:
            pnode = stack.pop()
            if pnode in reached:
                continue
            reached.add(pnode)
            stack.extend(self.nodes[p] for p in pnode.node.get_in_data_nodes())
        return reached

    def _describe(self, pnode: PatternNode) -> None:
        node = pnode.node
        for i in range(node.get_inputs_size()):
            producer = node.get_input_producer(i)
            if producer is not None:
                pnode.inputs.append((self.nodes[producer[0]], producer[1]))
        pnode.layout = input_layout(node._inputs)
        pnode.gapped = False in pnode.layout
        counts = []
        for i in range(node.get_outputs_size()):
            consumers = node.get_out_data_nodes_and_port_indexes(i)
            counts.append(sum(1 for c, _ in consumers if c.type != NET_OUTPUT))
        pnode.out_counts = tuple(counts)
        pnode.out_anchors = frozenset(i for p, i in self.outputs if p is pnode)
        config = self.config
        pnode.commutative = (config.is_enable_commutative_match() and pnode.kind == _OP
                             and pnode.type in COMMUTATIVE_OPS and not pnode.domain
                             and not pnode.gapped
                             and 2 <= len(pnode.inputs) <= _MAX_PERMUTED_INPUTS)
        if pnode.kind == _CONST and node.has_attr("value"):
            value = node.get_attr("value")
            pnode.value = value if isinstance(value, Tensor) else None

    def _number_inputs(self) -> None:
        data = [p for p in self.nodes.values() if p.kind == _DATA]
        indexes = []
        for pnode in data:
            index = pnode.node.get_attr("index") if pnode.node.has_attr("index") else None
            if not isinstance(index, int) or isinstance(index, bool):
                raise self._fail(f"input {pnode.node.name!r} has no int 'index' attribute",
                                 [pnode.node.name])
            pnode.index = index
            indexes.append(index)
        if sorted(indexes) != list(range(len(indexes))):
            raise self._fail(f"its input indexes must be 0..{len(indexes) - 1}, got "
                             f"{sorted(indexes)}")
        self.inputs = sorted(data, key=lambda p: p.index)


def compile_pattern(pattern: Pattern, config: PatternMatcherConfig) -> CompiledPattern:
    """Check `pattern` against §6.1 and prepare it for matching (`PatternError` if invalid)."""
    return CompiledPattern(pattern, config)


@dataclass
class Match:
    """One occurrence of a pattern: what each pattern node is bound to, and its boundary."""

    pattern: CompiledPattern
    graph: Graph
    bindings: dict[PatternNode, Node]
    inputs: list[Producer]  # boundary input i: the producer bound to pattern input i
    outputs: list[Producer]  # boundary output j: the matched anchor of pattern output j

    @property
    def nodes(self) -> list[Node]:
        """The matched target nodes (pattern inputs excluded), each once (a constant may
        stand for two pattern constants), in the graph's order."""
        return sorted(set(self.bindings.values()), key=graph_order.label)

    def region(self) -> Region:
        """What a rewrite of this match replaces."""
        return Region(self.graph, self.nodes, self.inputs, self.outputs)

    def captured(self, index: int) -> NodeIo:
        pnode, out = self.pattern.captures[index]
        if pnode.kind == _DATA:
            node, at = self.inputs[pnode.index]
            return NodeIo(node, at)
        return NodeIo(self.bindings[pnode], out)


class _Search:
    """The bindings of one match attempt, grown and undone by backtracking."""

    __slots__ = ("bound", "data", "used")

    def __init__(self) -> None:
        self.bound: dict[PatternNode, Node] = {}
        self.data: dict[PatternNode, Producer] = {}
        self.used: set[Node] = set()


class Matcher:
    """Finds the occurrences of one compiled pattern in one graph."""

    #: Whether `matches_at` may use the pattern's straight-line plan (a subclass that
    #: observes the search step by step, as `TracingMatcher`, turns it off).
    uses_plans = True

    #: Whether `_pairs` refuses a producer of another operator before calling `_node` (a
    #: subclass recording every check `_node` makes turns it off).
    _operator_first = True

    def __init__(self, pattern: CompiledPattern, graph: Graph) -> None:
        self.pattern = pattern
        self.graph = graph
        config = pattern.config
        self._const_value = config.is_enable_const_value_match()
        self._ir_attr = config.is_enable_ir_attr_match()
        self._attr_defaults: dict[tuple[str, str, int], dict[str, Any]] = {}

    @property
    def root_type(self) -> tuple[str, str]:
        """(op type, domain) of the candidates: the producer of the pattern's first output."""
        root = self.pattern.root
        return root.type, root.domain

    def match_at(self, candidate: Node) -> Match | None:
        """The first valid occurrence whose first output is produced by `candidate`."""
        return next(self.matches_at(candidate), None)

    def matches_at(self, candidate: Node) -> Iterator[Match]:
        """Every valid occurrence whose first output is produced by `candidate`, in search
        order (commutative inputs give one per order): a caller refusing the first (its
        `meet_requirements`, a cycle) may take the next. The graph must not change while
        the iterator is used."""
        pattern = self.pattern
        plan = pattern.plan() if self.uses_plans else None
        if plan is not None:  # the same matches, without the search's bookkeeping
            yield from plan(self, candidate)
            return
        search = _Search()
        for _ in self._node(search, pattern.root, candidate):
            for _ in self._outputs(search, 1):
                match = self._finish(search)
                if match is not None:
                    yield match

    # -- nodes --------------------------------------------------------------------------
    def _node(self, s: _Search, pnode: PatternNode, target: Node) -> Iterator[None]:
        bound = s.bound.get(pnode)
        if bound is not None:
            if bound is target:
                yield
            return
        if pnode.kind == _CONST:
            # A constant is a value, not a computation: two pattern constants may bind one
            # constant (one 1.0 read twice, as after ConstantDeduplication), and it is not
            # a node of the match a pattern input must stay out of.
            if self._accepts(pnode, target):
                s.bound[pnode] = target
                try:
                    yield
                finally:
                    del s.bound[pnode]
            return
        if target in s.used or not self._accepts(pnode, target):
            return
        s.bound[pnode] = target
        s.used.add(target)
        try:
            if pnode.inputs:
                yield from self._inputs(s, pnode, target)
            else:
                yield
        finally:
            del s.bound[pnode]
            s.used.discard(target)

    def _accepts(self, pnode: PatternNode, target: Node) -> bool:
        """Whether `target` can stand for `pnode`, looking at the node alone."""
        if pnode.kind == _CONST:
            if not is_constant(target):
                return False
            if self._const_value and pnode.value is not None:
                return _same_value(pnode.value, target)
            return True
        domain = target._domain
        if target._type != pnode.type or (domain != pnode.domain
                                          and normalize_domain(domain) != pnode.domain):
            return False
        if target._graph is not self.graph:
            return False  # an enclosing graph's node, read by a body: not the body's to rewrite
        inputs = target._inputs
        if (len(inputs) != len(pnode.layout) or pnode.gapped or None in inputs) and (
                input_layout(inputs) != pnode.layout):
            return False  # inputs connected at other positions (or more, or fewer)
        if not _outputs_ok(target._consumers, pnode.out_counts, pnode.out_anchors):
            return False  # an output used outside the match, or not used as the pattern uses it
        if target.get_subgraphs():
            return False
        return not self._ir_attr or self._same_attrs(pnode.node, target)

    def _inputs(self, s: _Search, pnode: PatternNode, target: Node) -> Iterator[None]:
        connected = [p for p in target._inputs if p is not None]
        if not pnode.commutative:
            yield from self._pairs(s, pnode.inputs, connected, 0)
            return
        for arranged in _arrangements(connected):
            yield from self._pairs(s, pnode.inputs, arranged, 0)

    def _pairs(self, s: _Search, wanted: list[tuple[PatternNode, int]],
               given: list[Producer], k: int) -> Iterator[None]:
        if k == len(wanted):
            yield
            return
        pnode, out = wanted[k]
        producer = given[k]
        if pnode.kind == _DATA:
            bound = s.data.get(pnode)
            if bound is None:
                s.data[pnode] = producer
                try:
                    yield from self._pairs(s, wanted, given, k + 1)
                finally:
                    del s.data[pnode]
            elif bound == producer:
                yield from self._pairs(s, wanted, given, k + 1)
            return
        if producer[1] != out:
            return
        target = producer[0]
        # the operator check of `_accepts`, before a generator is made for `_node`: most
        # failing candidates fail here (a node already bound has the right operator too)
        if self._operator_first and (target._type != pnode.type if pnode.kind != _CONST
                                     else target._type not in CONST_TYPES):
            return
        for _ in self._node(s, pnode, target):
            yield from self._pairs(s, wanted, given, k + 1)

    # -- further outputs ------------------------------------------------------------------
    def _outputs(self, s: _Search, k: int) -> Iterator[None]:
        outputs = self.pattern.outputs
        if k == len(outputs):
            yield
            return
        pnode, _ = outputs[k]
        if pnode in s.bound:
            yield from self._outputs(s, k + 1)
            return
        for candidate in self._output_candidates(s, pnode):
            for _ in self._node(s, pnode, candidate):
                yield from self._outputs(s, k + 1)

    def _output_candidates(self, s: _Search, pnode: PatternNode) -> list[Node]:
        """Targets for an unbound pattern output: consumers of a value already bound to one
        of its inputs when there is one, else every node of its type."""
        for source, out in pnode.inputs:
            if source.kind == _DATA:
                producer = s.data.get(source)
            else:
                node = s.bound.get(source)
                producer = (node, out) if node is not None else None
            if producer is not None:
                consumers = producer[0]._consumers[producer[1]] or {}
                return sorted({c for c, _ in consumers if c._type == pnode.type},
                              key=graph_order.label)
        return self.graph.nodes_of_type(pnode.type, pnode.domain)

    # -- acceptance -------------------------------------------------------------------------
    def _finish(self, s: _Search) -> Match | None:
        pattern = self.pattern
        inputs: list[Producer] = []
        for pnode in pattern.inputs:
            producer = s.data.get(pnode)
            if producer is None or producer[0] in s.used:
                return None  # an input bound to a node of the match itself
            inputs.append(producer)
        outputs = [(s.bound[p], i) for p, i in pattern.outputs]
        return Match(pattern, self.graph, dict(s.bound), inputs, outputs)

    def _same_attrs(self, pattern_node: Node, target: Node) -> bool:
        return self._filled_attrs(pattern_node) == self._filled_attrs(target)

    def _filled_attrs(self, node: Node) -> dict[str, Any]:
        """The node's attributes with every unset optional one at its ONNX default."""
        from ge.ops.onnx_node import node_opset

        try:
            opset = node_opset(node)
        except GeError:
            opset = 0
        key = (normalize_domain(node.domain), node.type, opset)
        defaults = self._attr_defaults.get(key)
        if defaults is None:
            defaults = _schema_defaults(node, opset)
            self._attr_defaults[key] = defaults
        filled = dict(defaults)
        for name, stored in node._attrs.items():
            kind, value = decode_attr(stored)
            if kind not in GRAPH_KINDS:
                filled[name] = hashable_value(value)
        return filled


def input_layout(inputs: Sequence[Any]) -> tuple[bool, ...]:
    """Which of a node's inputs are connected, up to its last connected one: inputs are
    compared by position, so an absent optional input in the middle (Clip's min) must be
    absent in the target too, while absent trailing inputs are the same as no input."""
    n = len(inputs)
    while n and inputs[n - 1] is None:
        n -= 1
    return tuple(inputs[i] is not None for i in range(n))


def _outputs_ok(consumers: Sequence[Any], counts: tuple[int, ...],
                anchors: Collection[int]) -> bool:
    """Whether a target's outputs are read as a pattern node's are: every output that is
    not a pattern output (`anchors`) has the pattern's number of consumers (`counts`, 0
    past its end), so nothing outside the match reads an intermediate."""
    for i, readers in enumerate(consumers):
        if i in anchors:
            continue
        expected = counts[i] if i < len(counts) else 0
        if (len(readers) if readers else 0) != expected:
            return False
    return True


def _arrangements(connected: list[Any]) -> list[list[Any]]:
    """The input orders a commutative node is tried in, each once (equal inputs make the
    same arrangement again): every permutation, in `itertools.permutations` order."""
    if len(connected) == 2:  # the binary Add/Mul of nearly every commutative match
        first, second = connected
        return [connected] if first == second else [connected, [second, first]]
    seen: set[tuple[int, ...]] = set()
    found: list[list[Any]] = []
    for order in itertools.permutations(range(len(connected))):
        arranged = [connected[i] for i in order]
        key = tuple(id(p[0]) * 64 + p[1] for p in arranged)
        if key not in seen:
            seen.add(key)
            found.append(arranged)
    return found


def _schema_defaults(node: Node, opset: int) -> dict[str, Any]:
    from ge.ops.schemas import get_op_spec

    try:
        spec = get_op_spec(node.type, opset, node.domain)
    except GeError:
        return {}
    return {name: hashable_value(_plain(attr.default)) for name, attr in spec.attributes.items()
            if attr.default is not None}


def _plain(value: Any) -> Any:
    """An onnx default (an AttributeProto value) as the IR decodes attribute values."""
    if hasattr(value, "type") and hasattr(value, "name"):
        import onnx

        value = onnx.helper.get_attribute_value(value)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list):
        return [v.decode() if isinstance(v, bytes) else v for v in value]
    return value


def _same_value(value: Tensor, target: Node) -> bool:
    """Const-value match: the same dtype, shape and bytes (no tolerance)."""
    if not is_const(target) or "value" not in target._attrs:
        return False
    other = target.get_attr("value")
    if not isinstance(other, Tensor):
        return False
    return (value.data_type == other.data_type and tuple(value.shape) == tuple(other.shape)
            and value.tobytes() == other.tobytes())


def _capture_problem(pattern: CompiledPattern, index: object) -> str:
    """Why `index` names no capture of `pattern`, with what the captures are."""
    count = len(pattern.captures)
    if not isinstance(index, int) or isinstance(index, bool):
        asked = f"a capture index is an int, not {type(index).__name__}"
    elif index < 0:
        asked = f"capture index {index} is negative (indexes count from 0, not from the end)"
    else:
        asked = f"capture index {index} is out of range"
    if count == 0:
        return f"{asked}; pattern {pattern.name!r} captures nothing"
    described = [(f"input {pnode.index}" if pnode.kind == _DATA else
                  f"{pnode.type} {pnode.node.name!r} output {out}")
                 for pnode, out in pattern.captures]
    listing = "; ".join(f"{i}: {what}" for i, what in enumerate(described))
    return (f"{asked}; pattern {pattern.name!r} has {count} capture(s), 0..{count - 1} in "
            f"capture order ({listing})")


class MatchResult:
    """One match as a pass's hooks see it; valid only during the hook call (GE's borrow)."""

    __slots__ = ("_match",)

    def __init__(self, match: Match) -> None:
        self._match: Match | None = match

    def _live(self) -> Match:
        if self._match is None:
            raise MatchResultError("MatchResult handle has expired")
        return self._match

    def get_matched_nodes(self) -> list[Node]:
        """The matched target nodes (constants included, pattern inputs not), in the
        target's topological order (D3)."""
        return self._live().nodes

    def get_captured_tensor(self, capture_index: int) -> NodeIo:
        """Captured tensor `capture_index`: for a pattern input the target producer's output,
        otherwise the matched node's output."""
        match = self._live()
        if (isinstance(capture_index, bool) or not isinstance(capture_index, int)
                or not 0 <= capture_index < len(match.pattern.captures)):
            raise MatchResultError("Failed to get captured tensor from MatchResult: "
                               f"{_capture_problem(match.pattern, capture_index)}")
        return match.captured(capture_index)

    def get_pattern_graph_name(self) -> str:
        return self._live().pattern.name

    def _invalidate(self) -> None:
        self._match = None

    def _input_count(self) -> int:
        """How many boundary inputs a replacement of this match takes."""
        return len(self._live().inputs)

    def __str__(self) -> str:
        match = self._live()
        pattern_of = {node: pnode for pnode, node in match.bindings.items()}
        pairs = "".join(f"{{{pattern_of[n].type}:{n.name}}}" for n in match.nodes)
        return f"[PatternName:{match.pattern.name}][MatchNodesPair]{pairs}"

    def __repr__(self) -> str:
        if self._match is None:
            return "<MatchResult expired>"
        return f"<MatchResult {self._match.pattern.name!r} {len(self._match.bindings)} nodes>"


def match_identity(result: MatchResult) -> Match:
    """The match a live `MatchResult` stands for. `meet_requirements` and `replacement` of
    one match get two handles (each expires with its hook) of the same match: a pass that
    keeps what `meet_requirements` worked out compares this, not the handles."""
    return result._live()
