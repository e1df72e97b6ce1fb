"""Which pass last changed each node of a compilation, so that an error about a node names
the pass behind it.

One record serves every such error: shape inference refusing a node (GE1305) and the final
validation's problems (GE1003), raised inside the pipeline about ge's own node names, and,
under verification, onnxruntime refusing the compiled model (GE1601) about the names the
saved model writes, which `LastChanges.blame` maps back to the nodes (`written=True`).
The invocation records each kept run from the change set it tracks for its checks anyway
(`ge.compiler.invocation`): a compilation pays a dict update per node a pass changed,
verifying or not, and nothing else listens to the graph.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ge.errors import GeError, SourceLocation
from ge.graph.export_names import written_name
from ge.graph.graph import DATA, NET_OUTPUT
from ge.graph.node import is_const

if TYPE_CHECKING:
    from ge.graph import Graph, Node

__all__ = ["Blame", "LastChanges", "PassChange"]


@dataclass(frozen=True)
class PassChange:
    """A kept pass run that changed nodes: the pass, the stage it ran at (a built-in pass's
    engine step), its class statement, and whether it is one of ge's own."""

    pass_name: str
    stage: str
    location: SourceLocation | None = None
    builtin: bool = False

    @property
    def described(self) -> str:
        """"pass P (stage, at file:line)", as a sentence about a node names it (a built-in
        pass without its line: ge's file is not the user's)."""
        where = (f", at {self.location}" if self.location is not None and not self.builtin
                 else "")
        return f"pass {self.pass_name} ({self.stage}{where})"


@dataclass(frozen=True)
class Blame:
    """The pass an error about nodes is put down to: `change` last changed node `node` (as
    the error names it) or, when `via` is set, node `via`, which `node` reads (a constant
    a pass rewrote). `maker` is the pass that made (added) `node` when another pass changed
    it last: `cause` says which of the two the error is put down to."""

    node: str
    change: PassChange
    via: str | None = None
    #: how far upstream `via` is: 1, `node` reads it; more, through other nodes
    distance: int = 1
    maker: PassChange | None = None

    @property
    def cause(self) -> PassChange:
        """The pass the error is put down to: the maker, which chose the node's operator,
        attributes and inputs (a later pass rewiring an input, dropping an Identity, keeps
        what it reads), unless ge made it and a plugin changed it last: ge's built-in passes
        are tested against onnxruntime, a plugin under development is not."""
        maker = self.maker
        if maker is None or (maker.builtin and not self.change.builtin):
            return self.change
        return maker

    @property
    def sentence(self) -> str:
        """What the error's message gets: "; node 'n' was last changed by pass P (stage)"."""
        by = f"pass {self.change.pass_name} ({self.change.stage})"
        if self.maker is not None:
            cause = self.cause
            why = ("which made it" if cause is self.maker
                   else "the plugin pass that changed it last")
            return (f"; node {self.node!r} was made by {self.maker.described}, last changed "
                    f"by {self.change.described}: the likely cause is pass {cause.pass_name}, "
                    f"{why}")
        if self.via is None:
            return f"; node {self.node!r} was last changed by {by}"
        if self.distance == 1:
            return f"; node {self.node!r} reads node {self.via!r}, last changed by {by}"
        return (f"; node {self.node!r} depends on node {self.via!r}, {self.distance} nodes "
                f"upstream, last changed by {by}, the nearest change a pass made upstream")

    @property
    def sure(self) -> bool:
        """Whether the pass changed the node or one it reads (else it is the nearest change
        upstream: a guess, which names no pass as the error's own)."""
        return self.distance == 1

    def add_to(self, err: GeError) -> None:
        """Say it in `err`: the sentence after its message, and when `sure`, the pass as its
        `pass_name` (what `--json` reports) and the pass's location as its own where it has
        none. Its stage stays: the step that failed (the sentence names the pass's)."""
        err.unblamed = err.message  # type: ignore[attr-defined]  # (a verdict may take it back)
        err.message += self.sentence
        if not self.sure:  # (the model itself may be what is wrong there)
            name = self.change.pass_name
            err.message += (f" (if it fails with --disable {name}, disable=[{name!r}], too, "
                            "the model does)")
            return
        if err.pass_name is None:
            err.pass_name = self.cause.pass_name
        if err.location is None:
            err.location = self.cause.location


class LastChanges:
    """Per node, the pass run that last changed it (added it, or changed its inputs,
    attributes or output descs) and was kept, and the one that made it: a run rolled back
    (`on_pass_failure="skip"`) and an engine step (shape inference) record nothing.
    Built-in passes count as well as plugins."""

    def __init__(self) -> None:
        self._last: dict[Node, PassChange] = {}
        self._made: dict[Node, PassChange] = {}

    def __len__(self) -> int:
        return len(self._last)

    def record(self, change: PassChange, changed: Iterable[Node],
               removed: Iterable[Node] = (), added: Iterable[Node] = ()) -> None:
        """`changed` nodes were last changed by `change`, which made those `added` (among
        them); `removed` ones are gone (no error names them any more)."""
        last, made = self._last, self._made
        last.update(dict.fromkeys(changed, change))
        made.update(dict.fromkeys(added, change))
        if last:
            for node in removed:
                last.pop(node, None)
                made.pop(node, None)

    def changed_by(self, pass_name: str, stage: str) -> list[Node]:
        """The nodes whose last change is pass `pass_name`'s run at `stage` (in the order
        they were recorded): what a pass left that no later pass changed again."""
        return [node for node, change in self._last.items()
                if change.pass_name == pass_name and change.stage == stage]

    def last_change(self, node: Node) -> PassChange | None:
        """The pass run that last changed `node`, or None when no pass did."""
        return self._last.get(node)

    def maker(self, node: Node) -> PassChange | None:
        """The pass run that made (added) `node`, or None when the model had it."""
        return self._made.get(node)

    def blame(self, graph: Graph, names: Iterable[str], *, written: bool = False
              ) -> Blame | None:
        """The pass behind an error naming nodes `names` of `graph`'s model (its root and
        bodies): the one that last changed the first of them a pass changed (and the one
        that made it, when another), else the one that last changed a node one of them
        reads; None when no pass changed any.

        `written`: the names are those the saved model writes (onnxruntime's), which differ
        from the nodes' own where export kept a name as read (a node named like a graph
        input, one of two nodes of one name: `ge.graph.export_names.written_name`); the
        sentence then names the nodes so too."""
        wanted = [name for name in dict.fromkeys(names) if name]
        if not wanted or not self._last:
            return None
        def name_of(node: Node) -> str:
            return written_name(node) if written else node.name

        named: dict[str, list[Node]] = {name: [] for name in wanted}
        constants: list[Node] = []
        for node in graph.root_graph().get_all_nodes():
            holders = named.get(name_of(node))
            if holders is None:
                continue
            if not written:
                holders.append(node)
            elif is_const(node):  # mostly an initializer, which has no node name
                constants.append(node)
            elif node.type not in (DATA, NET_OUTPUT):  # (graph inputs and outputs)
                holders.append(node)
        for node in constants:  # after the operators writing the name as a node's
            named[name_of(node)].append(node)
        last = self._last
        for name in wanted:
            for node in named[name]:
                change = last.get(node)
                if change is not None:
                    maker = self._made.get(node)
                    if maker is not None and maker.pass_name == change.pass_name:
                        maker = None  # (one pass: nothing to choose between)
                    return Blame(name, change, maker=maker)
        for name in wanted:
            for node in named[name]:
                for producer in node.get_in_data_nodes():
                    change = last.get(producer)
                    if change is not None:
                        return Blame(name, change, via=name_of(producer))
        for name in wanted:  # (a wrong shape a pass made shows where it is read, further on)
            for node in named[name]:
                found = self._nearest_upstream(node)
                if found is not None:
                    producer, distance = found
                    return Blame(name, last[producer], via=name_of(producer),
                                 distance=distance)
        return None

    def _nearest_upstream(self, node: Node) -> tuple[Node, int] | None:
        """The node nearest upstream of `node` (breadth first, at most `_UPSTREAM` nodes
        looked at) that a pass changed, with how many edges away it is."""
        last = self._last
        seen = {node}
        level = [node]
        distance = 0
        while level and len(seen) < _UPSTREAM:
            distance += 1
            following = []
            for reader in level:
                for producer in reader.get_in_data_nodes():
                    if producer in seen:
                        continue
                    if producer in last:
                        return producer, distance
                    seen.add(producer)
                    following.append(producer)
            level = following
        return None


#: How many nodes `LastChanges` looks at upstream of a node an error names.
_UPSTREAM = 10_000
