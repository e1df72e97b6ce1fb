"""Telling why the matcher refused a target: a `Rejection` of the tracing matcher as a `Reason`.

Each check the matcher makes (op type, input count and positions, outside consumers, constant
values, attributes, a pattern input bound twice, ...) has its sentence here, naming the pattern
node and the target node it compared, with the values as plain data for `--json`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ge.errors import GeError
from ge.graph import NET_OUTPUT, Node, Tensor
from ge.graph.domains import qualified_op
from ge.graph.export_names import written_name
from ge.graph.places import graph_label, model_node_label, node_ref
from ge.passes.config import COMMUTATIVE_OPS
from ge.passes.matcher import _DATA, PatternNode
from ge.passes.tracing import _UNSET, Rejection, TracingMatcher

__all__ = ["Reason", "node_label", "op_label", "rejection_reason"]

#: How many values of a constant a message shows.
_SHOWN_VALUES = 4


@dataclass(frozen=True)
class Reason:
    """Why a candidate is not rewritten: the kind of check (`kind`), a sentence saying it
    (`message`), the pattern node and target node it compared, every target node it names
    (`nodes`) and the values it compared (`details`, plain data)."""

    kind: str
    message: str
    pattern_node: str | None = None
    target_node: str | None = None
    nodes: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "pattern_node": self.pattern_node,
                "target_node": self.target_node, "nodes": list(self.nodes),
                "details": self.details}



# -- the sentences -------------------------------------------------------------------------
def op_label(op_type: str, domain: str = "") -> str:
    """An operator as messages name it: `Gelu`; `com.microsoft.Gelu` in another domain."""
    return qualified_op(op_type, domain)


def node_label(node: Node) -> str:
    """A target node as messages name it: its name and operator; a node the model gives no
    name by what it computes (ge's name for it is in no file: `model_node_label`)."""
    if not written_name(node):
        return model_node_label(node)
    return f"{node.name!r} ({op_label(node.type, node.domain)})"


def _target(node: Node | None, what: str = "node") -> str:
    """"target node 'n'" (or "target constant 'c'"); a node the model gives no name as
    `node_label` names it ("target unnamed Add node (computing 'a')")."""
    if node is not None and not written_name(node):
        return f"target {model_node_label(node)}"
    return f"target {what} {None if node is None else node.name!r}"


def _ref(node: Node | None, name: str | None) -> str:
    """A node where the message says what it is: `node_ref` (quoted name, or an unnamed
    node's label); `name` quoted where there is no node."""
    return repr(name) if node is None else node_ref(node)


def _p(pnode: PatternNode) -> str:
    if pnode.kind == _DATA:
        return f"pattern input {pnode.node.name!r} (index {pnode.index})"
    return f"pattern node {pnode.node.name!r} ({op_label(pnode.type, pnode.domain)})"


def _producer(producer: tuple[Node, int]) -> str:
    return f"output {producer[1]} of {node_label(producer[0])}"


def rejection_reason(matcher: TracingMatcher, r: Rejection, warnings: list[str]) -> Reason:
    pnode, target, info = r.pnode, r.target, r.info
    pname = pnode.node.name if pnode is not None else None
    tname = target.name if target is not None else None
    named = (tname,) if tname else ()
    kind = r.kind
    if kind == "op_type" and pnode is not None and target is not None:
        want = "a constant" if info["expected"] == "a constant" else op_label(
            info["expected"], info.get("expected_domain", ""))
        got = op_label(info["found"], info.get("found_domain", target.domain))
        details: dict[str, Any] = {"expected": want, "found": got}
        at = ""
        if "output" in info:  # read at another output too: said after the op types
            at = (f"; the target reads its output {info['output']}, the pattern output "
                  f"{info['expected_output']}")
            details.update(output=info["output"], expected_output=info["expected_output"])
        swapped = _other_order(r, info["expected"], info.get("expected_domain", ""))
        if swapped:
            details["other_order"] = True
        return Reason(kind, f"op type: {_p(pnode)} wants {want}, {_target(target)} is "
                      f"{got}{_reached(r)}{at}{swapped}", pname, tname, named, details)
    if kind == "input_count" and pnode is not None:
        return Reason(kind, f"input count: {_p(pnode)} has {info['expected']} input(s), "
                      f"{_target(target)} has {info['found']} connected{_reached(r)}",
                      pname, tname, named, {"expected": info["expected"],
                                            "found": info["found"]})
    if kind == "input_position" and pnode is not None:
        return Reason(kind, f"input positions: {_p(pnode)} has inputs at {info['expected']}, "
                      f"{_target(target)} at {info['found']} (an absent optional input "
                      f"must be absent in both){_reached(r)}", pname, tname, named,
                      {"expected": info["expected"], "found": info["found"]})
    if kind == "consumers" and pnode is not None:
        return _consumers_reason(pnode, target, info)
    if kind == "const_value" and pnode is not None:
        want, got = _value(info["expected"]), _value(info["found"])
        return Reason(kind, f"const value: pattern constant {pname!r} is {want}, "
                      f"{_target(target, 'constant')} is {got} (const-value match wants equal "
                      f"dtype, shape and bytes){_reached(r)}", pname, tname, named,
                      {"expected": want, "found": got})
    if kind == "attribute" and pnode is not None and target is not None:
        return _attribute_reason(matcher, pnode, target, info, warnings)
    if kind == "subgraph" and pnode is not None:
        return Reason(kind, f"{_target(target)} owns a subgraph; {_p(pnode)} cannot "
                      "stand for it", pname, tname, named)
    if kind == "data_twice" and pnode is not None:
        bound, producer = info["bound"], info["producer"]
        consumer = info.get("consumer")
        where = ""
        if consumer is not None and consumer in r.bound:
            where = (f" at an input of {_target(r.bound[consumer])} (pattern node "
                     f"{consumer.node.name!r})")
        return Reason(kind, f"pattern input used twice: {_p(pnode)} is bound to "
                      f"{_producer(bound)}, but {_producer(producer)} is read{where}; one "
                      "pattern input binds one producer", pname, producer[0].name,
                      (bound[0].name, producer[0].name),
                      {"bound": [bound[0].name, bound[1]],
                       "found": [producer[0].name, producer[1]]})
    if kind == "output_index" and pnode is not None:
        got = node_label(target) if target is not None else repr(tname)
        return Reason(kind, f"output index: the pattern reads output {info['expected']} of "
                      f"{_p(pnode)}, the target reads output {info['found']} of "
                      f"{got}", pname, tname, named,
                      {"expected": info["expected"], "found": info["found"]})
    if kind == "bound_elsewhere" and pnode is not None:
        bound = info["bound"]
        here = f", but here the target reads {node_label(target)}" if target is not None else ""
        return Reason(kind, f"{_p(pnode)} is already bound to {node_label(bound)}{here}", pname,
                      tname, (bound.name, *named))
    if kind == "target_used" and pnode is not None:
        other = info.get("by")
        by = f" (to {_p(other)})" if other is not None else ""
        return Reason(kind, f"{_target(target)} is already bound{by}; it cannot also "
                      f"stand for {_p(pnode)}", pname, tname, named)
    if kind == "no_output_candidate" and pnode is not None:
        return Reason(kind, f"no candidate for the pattern output of {_p(pnode)}: no "
                      "consumer of the values already bound is of its op type", pname, None)
    if kind == "input_inside" and pnode is not None:
        return Reason(kind, f"{_p(pnode)} is bound to {_ref(target, tname)}, a node of the match "
                      "itself: a pattern input must come from outside the match", pname,
                      tname, named)
    if kind == "enclosing_graph" and pnode is not None and target is not None:
        outer = info["graph"]
        return Reason(kind, f"{_target(target)} is a node of {graph_label(outer)}, which "
                      f"encloses the graph matched ({graph_label(matcher.graph)}), read by it "
                      f"from there{_reached(r)}: a pattern matches within one graph, so "
                      f"{_p(pnode)} cannot stand for it; such a value can only be an input of "
                      "the pattern", pname, tname, named,
                      {"graph": outer.name, "matched_graph": matcher.graph.name})
    return Reason(kind, f"the matcher refused {_target(target)} for "
                  f"{_p(pnode) if pnode is not None else 'the pattern'} (no check explains "
                  "it)", pname, tname, named)


def _reached(r: Rejection) -> str:
    """Where the failing target was reached: an input of a bound node, and, when that node
    is a commutative operator matched in one order only, that the other order may be what
    was meant (a pattern written `0.5 * x` builds Mul(x, 0.5), as GE's does, and never
    matched a model's Mul(0.5, x): trial EE)."""
    if r.target is None or r.pnode is None:
        return ""
    for pnode, node in r.bound.items():
        if any(source is r.pnode for source, _ in pnode.inputs):
            for k, producer in enumerate(node._inputs):
                if producer is not None and producer[0] is r.target:
                    return f" (input {k} of {node_ref(node)}){_order_hint(pnode, node)}"
    return ""


def _other_order(r: Rejection, op_type: str, domain: str) -> str:
    """When the node that reads the refused target at input k has, at another input, a
    producer of the operator wanted there: that the pattern may hold the operands in the
    other order (trial WW: MatMul(v, probs) for the model's MatMul(probs, v); MatMul is not
    commutative, so no matcher switch tries both). "" otherwise."""
    if r.target is None or r.pnode is None:
        return ""
    for pnode, node in r.bound.items():
        if not any(source is r.pnode for source, _ in pnode.inputs) or (
                pnode.type in COMMUTATIVE_OPS and not pnode.domain):  # (`_order_hint`'s)
            continue
        inputs = node._inputs
        k = next((i for i, p in enumerate(inputs) if p is not None and p[0] is r.target), None)
        if k is None:
            continue
        for j, producer in enumerate(inputs):
            if (j != k and producer is not None and producer[0].type == op_type
                    and producer[0].domain == domain):
                return (f"; input {j} of {node_ref(node)} is {node_label(producer[0])}, the "
                        "operator wanted here: operands in the other order? (write the "
                        "pattern's inputs in the model's order)")
    return ""


def _order_hint(pnode: PatternNode, node: Node) -> str:
    if (pnode.commutative or pnode.type not in COMMUTATIVE_OPS or pnode.domain
            or len(pnode.inputs) != 2):
        return ""
    symbol = {"Add": "+", "Mul": "*"}.get(pnode.type)
    es_note = (f" (ES builds {pnode.type}(x, c) for `c {symbol} x`, as GE does)"
               if symbol else "")
    return (f"; {node_ref(node)} may hold the same inputs in the other order: "
            "PatternMatcherConfigBuilder().enable_commutative_match() tries both, or write "
            f"them in its order{es_note}")


def _consumers_reason(pnode: PatternNode, target: Node | None,
                      info: dict[str, Any]) -> Reason:
    tname = target.name if target is not None else None
    output, expected, count = info["output"], info["expected"], info["found"]
    readers: list[Node] = info["consumers"]
    outside: list[Node] = info["outside"] or readers
    details = {"output": output, "expected": expected, "found": count,
               "consumers": [c.name for c in readers], "outside": [c.name for c in outside]}
    if count > expected:
        listed = ", ".join("the graph output" if c.type == NET_OUTPUT else node_label(c)
                           for c in outside)
        role = "an intermediate" if output not in pnode.out_anchors else "an output"
        return Reason(
            "outside_consumer", f"outside consumer: output {output} of {_target(target)} "
            f"({_p(pnode)}, {role} of the pattern) is also read by {listed}, outside the "
            f"match ({count} consumer(s), the pattern has {expected})", pnode.node.name,
            tname, (*((tname,) if tname else ()), *(c.name for c in outside)), details)
    return Reason(
        "consumer_count", f"consumer count: output {output} of {_target(target)} has "
        f"{count} consumer(s), {_p(pnode)} has {expected} in the pattern", pnode.node.name,
        tname, (tname,) if tname else (), details)


def _attribute_reason(matcher: TracingMatcher, pnode: PatternNode, target: Node,
                      info: dict[str, Any], warnings: list[str]) -> Reason:
    name = info["name"]
    want, got = info["expected"], info["found"]
    if want is _UNSET or got is _UNSET:
        missing = pnode.node if want is _UNSET else target
        schema = _schema_known(missing)
        if not schema:
            warnings.append(
                f"attribute {name!r} of {node_label(target)}: {node_ref(missing)} does not set it "
                f"and the schema of {op_label(missing.type, missing.domain)} is not known, so its "
                "default could not be filled in (the attributes may in fact be equal)")
    return Reason("attribute", f"attribute {name!r}: {_p(pnode)} has {_attr(want)}, "
                  f"{_target(target)} has {_attr(got)} (IR attribute match)",
                  pnode.node.name, target.name, (target.name,),
                  {"name": name, "expected": _plain(want), "found": _plain(got)})


def _schema_known(node: Node) -> bool:
    from ge.ops.onnx_node import node_opset
    from ge.ops.schemas import get_op_spec

    try:
        get_op_spec(node.type, node_opset(node), node.domain)
    except GeError:
        return False
    return True


def _attr(value: Any) -> str:
    if value is _UNSET:
        return "it unset"
    if isinstance(value, Tensor):
        return _value(value)
    return repr(_plain(value))


def _plain(value: Any) -> Any:
    """A value as plain JSON data."""
    if value is _UNSET:
        return None
    if isinstance(value, Tensor):
        return _value(value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    return str(value)


def _float_text(value: Any) -> str:
    """A float as the shortest digits that tell it from its neighbours in its own type
    (0.7978846 and 0.797885 both printed 0.797885 to 6 digits: trial EE), `1` for 1.0."""
    try:
        number = float(value)
        if number == 0 or 1e-4 <= abs(number) < 1e6 or not math.isfinite(number):
            return np.format_float_positional(value, unique=True, trim="-")
        return np.format_float_scientific(value, unique=True, trim="-")
    except (TypeError, ValueError):  # a type numpy formats not (bfloat16): its own text
        return str(value)


def _value(tensor: Tensor | None) -> str:
    """A constant abbreviated: dtype, shape and its first values."""
    if tensor is None:
        return "no constant value"
    try:
        array = tensor.numpy()
    except Exception:
        return f"{tensor.data_type.name} {list(tensor.shape)}"
    shown = ", ".join(_float_text(v) if array.dtype.kind == "f"
                      else str(v.item() if hasattr(v, "item") else v)
                      for v in array.reshape(-1)[:_SHOWN_VALUES])
    more = ", ..." if array.size > _SHOWN_VALUES else ""
    return f"{array.dtype}{list(array.shape)} [{shown}{more}]"
