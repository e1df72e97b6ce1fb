"""The opset imports a compilation leaves behind: none of a domain it emptied.

A pass that removes the last node of a custom domain (a decomposition of `my.ops.AddCustom`
into ONNX's Add) would otherwise leave `my.ops` imported by a model that has no node of it.
The scheduler notes which non-ONNX imports the input has unused (`unused_opset_imports`),
keeps those (saving loses nothing the input had) and drops every other one no node, body or
model-local function uses any more (`drop_emptied_opset_imports`) before final validation.
ONNX's own domains are always kept.
"""

from __future__ import annotations

from collections.abc import Set
from typing import TYPE_CHECKING

from ge.graph.domains import drop_opset_imports, normalize_domain, used_domains
from ge.ops.schemas import STANDARD_DOMAINS

if TYPE_CHECKING:
    from ge.graph import Graph

__all__ = ["drop_emptied_opset_imports", "unused_opset_imports"]


def unused_opset_imports(graph: Graph) -> set[str]:
    """The non-ONNX domains the model of `graph` imports and nothing of it uses (nodes of
    the root graph and its bodies, model-local functions)."""
    custom = {d for d in graph.root_graph().opset_imports
              if normalize_domain(d) not in STANDARD_DOMAINS}
    return custom - used_domains(graph) if custom else custom


def drop_emptied_opset_imports(graph: Graph, kept: Set[str]) -> None:
    """Drop the non-ONNX opset imports of `graph`'s model that nothing uses, but those in
    `kept` (what the input imported unused); undone with an open transaction."""
    emptied = unused_opset_imports(graph) - kept
    if emptied:
        drop_opset_imports(graph, emptied)
