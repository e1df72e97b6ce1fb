"""How messages say where a body is: exporters name If/Loop/Scan bodies `sub_graph`,
`sub_graph1`, ... (torch names both branches of every If `body`), so a message names the node
and the attribute holding each one ("then_branch of If node 'cond_if'") beside the graph's
name (explanations of passes, failed checks, errors about the model).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ge.graph.domains import qualified_op
from ge.graph.subgraphs import body_attribute

if TYPE_CHECKING:
    from ge.graph.graph import Graph

__all__ = ["BodyOwner", "body_owner", "graph_place"]


@dataclass(frozen=True)
class BodyOwner:
    """The node owning a body (`node`, of `type` in `domain`, in graph `graph`) and the
    attribute holding it (`attribute`: "then_branch", "branches[1]"); `within`: the owner
    of the body the node is in, when it is in one (bodies share names: named by owners)."""

    node: str
    type: str
    domain: str
    attribute: str
    graph: str
    within: BodyOwner | None = None

    def __str__(self) -> str:
        where = f" in the {self.within}" if self.within is not None else ""
        return (f"{self.attribute} of {qualified_op(self.type, self.domain)} node "
                f"{self.node!r}{where}")

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "type": self.type, "domain": self.domain,
                "attribute": self.attribute, "graph": self.graph,
                "within": None if self.within is None else self.within.as_dict()}


def body_owner(graph: Graph) -> BodyOwner | None:
    """The owner of `graph` and the attribute holding it (and so on outwards); None for the
    root graph (or a graph no node owns)."""
    owner = graph.parent_node
    attribute = body_attribute(graph)
    if owner is None or attribute is None:
        return None
    outer = owner.owner_graph
    assert outer is not None  # (a body's owner is a node of a graph)
    return BodyOwner(owner.name, owner.type, owner.domain, attribute, outer.name,
                     body_owner(outer))


def graph_place(graph: str, owner: BodyOwner | None) -> str:
    """"graph NAME", and for a body the node and attribute holding it ("graph sub_graph,
    then_branch of If node 'cond_if'")."""
    return f"graph {graph}" if owner is None else f"graph {graph}, {owner}"
