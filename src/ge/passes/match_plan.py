"""Match plans: a single-output pattern compiled to one Python generator function.

`Matcher` finds a pattern at a candidate by a backtracking search: generators, a bindings
table per attempt, every check looked up from the pattern's description. For a pattern
with one output the search always makes the same checks in the same order: each pattern
node's inputs are compared with its target's connected inputs in order, so a pattern node
has one possible target, except below a commutative node, whose input orders are the
search's only choice points. `plan_for` writes those checks out as the source of one
function, in the search's order, with a `for` loop over the input orders at each
commutative node (a failed check goes on with the innermost loop's next order, as the
search backtracks), and compiles it: locals instead of tables, no generator per pattern
node, and a failing candidate (the common case in a sweep) costs a few comparisons.

The plan yields the matches the search yields, in the same order, with the same bindings
(`tests/passes/test_match_plan.py` checks that on random graphs). Patterns with several
outputs and the tracing matcher (`ge.passes.tracing`) keep using the search. A plan is
written only once a pattern has been tried on `PLAN_AFTER` candidates per pattern node in a
compilation: writing and compiling one costs about as much as that many attempts, which a
small graph never makes; after that a candidate costs 3-5 times less.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from types import CodeType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ge.graph import Node
    from ge.passes.matcher import CompiledPattern, Match, Matcher, PatternNode

__all__ = ["PLAN_AFTER", "Plan", "plan_for"]

#: A plan: (the matcher, the candidate) -> the matches at the candidate, in search order.
Plan = Callable[["Matcher", "Node"], "Iterator[Match]"]
#: Candidates a pattern is tried on, in one compilation, before its plan is written: this
#: many per pattern node, about where writing one pays for itself (the ski-rental rule:
#: never more than twice the better choice's cost). Measured on the 10k-node encoder's
#: fusion patterns: writing a plan takes about 0.09-0.14 ms per pattern node; a candidate
#: that fails costs the search 2.4-3.6 us and the plan 0.6-1.0 us (break-even at 50-60
#: candidates per pattern node), one that matches costs the search several times more
#: (break-even 7-22). 16 errs towards writing plans early: 16 and 48 compile the encoder
#: in the same time.
PLAN_AFTER = 16


class _Writer:
    """Writes the plan of one pattern: one `if ...: <fail>` per check of the search."""

    def __init__(self, pattern: CompiledPattern) -> None:
        from ge.passes.matcher import _CONST, _DATA

        self._const_kind, self._data_kind = _CONST, _DATA
        self.pattern = pattern
        config = pattern.config
        self.const_value = config.is_enable_const_value_match()
        self.ir_attr = config.is_enable_ir_attr_match()
        self.lines: list[str] = []
        self.env: dict[str, Any] = {}
        self.bound: dict[PatternNode, str] = {}  # pattern node -> the local holding its target
        self.data: dict[PatternNode, str] = {}  # pattern input -> the local of its producer
        self.depth = 1  # indentation: 1 + the loops over commutative input orders so far
        self.fail = "return"  # a failed check: the end, or the innermost loop's next order

    def _emit(self, extra: int, line: str) -> None:
        """One line at the current depth, `extra - 1` levels further in."""
        self.lines.append("    " * (self.depth + extra - 1) + line)

    def _constant(self, value: Any, prefix: str) -> str:
        name = f"{prefix}{len(self.env)}"
        self.env[name] = value
        return name

    def node(self, pnode: PatternNode, var: str) -> None:
        """Checks of the first visit of `pnode` at the target in `var`: accepted alone, not
        bound to another pattern node (only one of the same operator can be that node; a
        constant may stand for several pattern constants), then its inputs."""
        self.accepts(pnode, var)
        const = pnode.kind == self._const_kind
        others = [] if const else [v for p, v in self.bound.items()
                                   if (p.type, p.domain) == (pnode.type, pnode.domain)]
        if others:
            self._emit(1, f"if {' or '.join(f'{var} is {v}' for v in others)}: {self.fail}")
        self.bound[pnode] = var
        if pnode.inputs:
            self.inputs(pnode, var)

    def accepts(self, pnode: PatternNode, var: str) -> None:
        """`Matcher._accepts`, check for check."""
        emit, fail = self._emit, self.fail
        if pnode.kind == self._const_kind:
            emit(1, f"if {var}._type not in CONST_TYPES or {var}._domain not in ('', 'ai.onnx'): "
                    f"{fail}")
            if self.const_value and pnode.value is not None:
                value = self._constant(pnode.value, "value")
                emit(1, f"if not same_value({value}, {var}): {fail}")
            return
        domains = ("", "ai.onnx") if pnode.domain == "" else (pnode.domain,)
        emit(1, f"if {var}._type != {pnode.type!r} or {var}._domain not in {domains!r}: {fail}")
        emit(1, f"if {var}._graph is not matcher.graph: {fail}")
        layout = pnode.layout
        emit(1, f"c_{var} = {var}._inputs")
        if pnode.gapped:  # a target without the same absent inputs fails
            emit(1, f"if input_layout(c_{var}) != {layout!r}: {fail}")
            emit(1, f"c_{var} = [p for p in c_{var} if p is not None]")
        else:
            emit(1, f"if len(c_{var}) != {len(layout)} or None in c_{var}:")
            emit(2, f"if input_layout(c_{var}) != {layout!r}: {fail}")
            emit(2, f"c_{var} = [p for p in c_{var} if p is not None]")
        counts, anchors = pnode.out_counts, pnode.out_anchors
        checked = [i for i in range(len(counts)) if i not in anchors]
        emit(1, f"o_{var} = {var}._consumers")
        emit(1, f"if len(o_{var}) != {len(counts)}:")
        emit(2, f"if not outputs_ok(o_{var}, {counts!r}, {sorted(anchors)!r}): {fail}")
        if checked:
            emit(1, "else:")
            for i in checked:
                if counts[i] == 0:
                    emit(2, f"if o_{var}[{i}]: {fail}")
                else:
                    emit(2, f"if not o_{var}[{i}] or len(o_{var}[{i}]) != {counts[i]}: "
                            f"{fail}")
        emit(1, f"if {var}._attrs and {var}.get_subgraphs(): {fail}")
        if self.ir_attr:
            source = self._constant(pnode.node, "pattern_node")
            emit(1, f"if not matcher._same_attrs({source}, {var}): {fail}")

    def inputs(self, pnode: PatternNode, var: str) -> None:
        """`Matcher._inputs`: the connected inputs in order, or in each order of a
        commutative node (a loop: from here on, a failed check tries the next order)."""
        given = f"c_{var}"
        if pnode.commutative:
            given = f"a_{var}"
            connected = f"c_{var}"
            if len(pnode.inputs) == 2:  # the usual case, without a call: as given, swapped
                orders = (f"(({connected}, ({connected}[1], {connected}[0])) "
                          f"if {connected}[0] != {connected}[1] else ({connected},))")
            else:
                orders = f"arrangements({connected})"
            self._emit(1, f"for {given} in {orders}:")
            self.depth += 1
            self.fail = "continue"
        for k, (source, out) in enumerate(pnode.inputs):
            fail = self.fail
            producer = f"p_{var}_{k}"
            self._emit(1, f"{producer} = {given}[{k}]")
            if source.kind == self._data_kind:
                seen = self.data.get(source)
                if seen is None:
                    self.data[source] = producer
                else:
                    self._emit(1, f"if {producer} != {seen}: {fail}")
                continue
            self._emit(1, f"if {producer}[1] != {out}: {fail}")
            bound = self.bound.get(source)
            if bound is not None:
                self._emit(1, f"if {producer}[0] is not {bound}: {fail}")
                continue
            target = f"n{len(self.bound)}"
            self._emit(1, f"{target} = {producer}[0]")
            self.node(source, target)

    def finish(self) -> bool:
        """`Matcher._finish`: every input bound outside the match, then the Match."""
        pattern, fail = self.pattern, self.fail
        if any(p not in self.data for p in pattern.inputs):
            return False  # an input the walk from the root does not reach: the search's job
        bound = [v for p, v in self.bound.items() if p.kind != self._const_kind]
        for pnode in pattern.inputs:
            producer = self.data[pnode]
            for var in bound:
                self._emit(1, f"if {producer}[0] is {var}: {fail}")
        bindings = ", ".join(f"{self._constant(p, 'pnode')}: {var}"
                             for p, var in self.bound.items())
        inputs = ", ".join(self.data[p] for p in pattern.inputs)
        root, index = pattern.outputs[0]
        self.env["PATTERN"] = pattern
        self._emit(1, f"yield Match(PATTERN, matcher.graph, {{{bindings}}}, [{inputs}], "
                      f"[({self.bound[root]}, {index})])")
        return True


@functools.lru_cache(maxsize=256)
def _compiled(source: str) -> CodeType:
    """The code of a plan's source, compiled once per process (the same pattern is usually
    built again by the next compilation; compiling is most of what a plan costs)."""
    return compile(source, "<match plan>", "exec")


def plan_for(pattern: CompiledPattern) -> Plan | None:
    """The match plan of `pattern`, or None when the pattern has several outputs (its
    further outputs are searched among consumers: left to `Matcher`)."""
    from ge.passes.matcher import (
        CONST_TYPES,
        Match,
        _arrangements,
        _outputs_ok,
        _same_value,
        input_layout,
    )

    if len(pattern.outputs) != 1:
        return None
    writer = _Writer(pattern)
    writer.node(pattern.root, "t")
    if not writer.finish():
        return None
    source = "def plan(matcher, t):\n" + "\n".join(writer.lines) + "\n"
    namespace: dict[str, Any] = {
        **writer.env, "CONST_TYPES": CONST_TYPES, "Match": Match, "same_value": _same_value,
        "outputs_ok": _outputs_ok, "input_layout": input_layout,
        "arrangements": _arrangements,
    }
    exec(_compiled(source), namespace)
    plan: Plan = namespace["plan"]
    plan.__doc__ = source  # what it checks, for debugging
    return plan
