"""`PassStage`: the points of the compilation pipeline where Python passes run."""

from __future__ import annotations

from enum import Enum

__all__ = ["PassStage"]


class PassStage(str, Enum):
    """A stage of the compiler pipeline; the values are GE's stage names.

    Stages run in declaration order: shape inference runs after `BEFORE_INFER_SHAPE`, the
    built-in fusion passes before `AFTER_BUILTIN_FUSION_PASS`, the origin-graph
    optimisations before `AFTER_ORIGIN_GRAPH_OPTIMIZE`.
    """

    BEFORE_INFER_SHAPE = "BeforeInferShape"
    AFTER_INFER_SHAPE = "AfterInferShape"
    AFTER_BUILTIN_FUSION_PASS = "AfterBuiltinFusionPass"
    AFTER_ORIGIN_GRAPH_OPTIMIZE = "AfterOriginGraphOptimize"

    def __str__(self) -> str:
        return self.value
