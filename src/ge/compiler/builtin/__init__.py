"""The compiler's built-in passes, written with the public pass API (`ge.passes`).

`BUILTIN_PASSES` lists them in the order the engine runs them inside their step; each is
marked with `@builtin_pass(name=..., step=...)` and can be disabled by name.

Origin-graph optimisation (run to a fixed point, on the root graph and every body):
constants are folded first, so the passes after it see their results; no-ops are bypassed
and equal constants merged before common subexpressions are looked for (their keys name
producers, so aliases and duplicate constants would hide equal expressions); dead-code
elimination then removes whatever the others left unused.
"""

from __future__ import annotations

from ge.compiler.builtin.const_dedup import ConstantDeduplication
from ge.compiler.builtin.constant_folding import ConstantFolding
from ge.compiler.builtin.cse import CommonSubexpressionElimination
from ge.compiler.builtin.dead_code import DeadCodeElimination
from ge.compiler.builtin.fusion_chains import (
    CastChainSimplification,
    ReshapeChainSimplification,
    SqueezeUnsqueezeCancellation,
    TransposeChainSimplification,
)
from ge.compiler.builtin.fusion_conv_affine import ConvAddMulFusion, ConvBatchNormFusion
from ge.compiler.builtin.fusion_gelu import GeluFusion
from ge.compiler.builtin.fusion_gemm import MatMulAddFusion
from ge.compiler.builtin.fusion_linear_affine import GemmAddMulFusion, GemmBatchNormFusion
from ge.compiler.builtin.fusion_norm import LayerNormFusion, RMSNormFusion
from ge.compiler.builtin.fusion_pad import PadConvFusion
from ge.compiler.builtin.fusion_reciprocal import ReciprocalMulFusion
from ge.compiler.builtin.fusion_split import SliceSplitFusion
from ge.compiler.builtin.fusion_swish import SwishFusion
from ge.compiler.builtin.noop import NoOpElimination
from ge.compiler.builtin.reshape_targets import ReshapeTargetFolding
from ge.compiler.builtin.shape_sharing import SymbolicShapeSharing

__all__ = [
    "BUILTIN_PASSES",
    "CastChainSimplification",
    "CommonSubexpressionElimination",
    "ConstantDeduplication",
    "ConstantFolding",
    "ConvAddMulFusion",
    "ConvBatchNormFusion",
    "DeadCodeElimination",
    "GeluFusion",
    "GemmAddMulFusion",
    "GemmBatchNormFusion",
    "LayerNormFusion",
    "MatMulAddFusion",
    "NoOpElimination",
    "PadConvFusion",
    "RMSNormFusion",
    "ReciprocalMulFusion",
    "ReshapeChainSimplification",
    "ReshapeTargetFolding",
    "SliceSplitFusion",
    "SqueezeUnsqueezeCancellation",
    "SwishFusion",
    "SymbolicShapeSharing",
    "TransposeChainSimplification",
]

BUILTIN_PASSES: tuple[type, ...] = (
    # origin-graph optimisation, to a fixed point; the fusions are built-in fusion passes
    # (run once each there, after shape inference) that also run in every round here,
    # before dead-code elimination: folding, deduplication and CSE expose patterns the
    # fusion step could not see (an epsilon computed from constants, a subtraction twice)
    ConstantFolding,
    CastChainSimplification,
    SqueezeUnsqueezeCancellation,
    TransposeChainSimplification,
    ReshapeChainSimplification,
    NoOpElimination,
    ConstantDeduplication,
    SymbolicShapeSharing,  # before CSE: the arithmetic on the shapes it merges is CSE's
    CommonSubexpressionElimination,
    ReshapeTargetFolding,  # after the two: targets read the shapes they merged
    SliceSplitFusion,
    ConvBatchNormFusion,
    ConvAddMulFusion,
    PadConvFusion,
    GemmAddMulFusion,  # before MatMulAddFusion: a 2-D MatMul + Add left by a fold is a Gemm
    MatMulAddFusion,
    GemmBatchNormFusion,
    LayerNormFusion,
    RMSNormFusion,
    GeluFusion,
    SwishFusion,
    ReciprocalMulFusion,
    DeadCodeElimination,
)
