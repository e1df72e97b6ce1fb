"""Fusions a newer opset would enable: what `ge compile` suggests after compiling.

Exports are often at opset 13 to 17, where `LayerNormalization` (17), `Gelu` (20) or
`Swish` (24) does not exist yet, so their layer norms, GELUs and SiLUs stay written out in
primitives. The fusion passes themselves count what they would fuse at the newer opset
(their patterns and checks, on the compiled graph with its opset import raised for the
count only: the primitives of these three have the same schemas there), so a hint names a
real number, never a guess. RMSNormalization (23) is not counted: ReduceMean takes its axes
as an input from 18, so the model has to be converted (`opset=`) before its patterns can
match.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ge.graph import Graph

__all__ = ["OpsetHint", "opset_hints"]


@dataclass(frozen=True)
class OpsetHint:
    """`count` written-out `what`s that `pass_name` fuses into `operator` from `opset`."""

    pass_name: str
    what: str
    operator: str
    opset: int
    count: int

    def __str__(self) -> str:
        return (f"{self.count} {self.what}(s) written in primitives would become "
                f"{self.operator} at opset {self.opset} (--opset {self.opset})")


def _targets() -> list[tuple[type, str, str, int]]:
    from ge.compiler.builtin.fusion_gelu import GELU_OPSET, GeluFusion
    from ge.compiler.builtin.fusion_norm import LAYER_NORM_OPSET, LayerNormFusion
    from ge.compiler.builtin.fusion_swish import SWISH_OPSET, SwishFusion

    return [(LayerNormFusion, "layer norm", "LayerNormalization", LAYER_NORM_OPSET),
            (GeluFusion, "GELU", "Gelu", GELU_OPSET),
            (SwishFusion, "SiLU", "Swish", SWISH_OPSET)]


#: Below this the primitives' schemas differ from those at the targets (ReduceMean, Pow,
#: Erf, ... changed at 13): not counted.
_LOWEST = 13


def opset_hints(graph: Graph, disabled: Iterable[str] = ()) -> list[OpsetHint]:
    """The fusions a newer standard opset would enable in `graph` (a compiled root graph),
    for the fusion passes not in `disabled`; nothing is changed."""
    from ge.es.opset import opset_scope
    from ge.passes.execution import find_matches

    imports = graph.root_graph().opset_imports
    current = graph.get_opset_version("") or 0
    key = "" if "" in imports else "ai.onnx"  # the standard domain's entry, as written
    off = set(disabled)
    hints: list[OpsetHint] = []
    for pass_class, what, operator, opset in _targets():
        name = pass_class.__ge_builtin__.name  # type: ignore[attr-defined]
        if not _LOWEST <= current < opset or name in off:
            continue
        imports[key] = opset  # for the count only: restored below
        try:
            with opset_scope(imports):
                count = len(find_matches(pass_class, graph))
        except Exception:  # a hint is never worth a failure
            count = 0
        finally:
            imports[key] = current
        if count:
            hints.append(OpsetHint(name, what, operator, opset, count))
    return hints
