"""`ge.passes`: what pass authors import.

Base classes, the registering decorators, the registry look-ups, stages and the context.
Discovery of pass plugins lives in `ge.passes.bootstrap`. Pattern matching and rewriting
(`Pattern`, `MatchResult`, `SubgraphRewriter`, ...) are added by their own modules.
"""

from __future__ import annotations

from ge.passes.base import DecomposePass, FusionBasePass, PatternFusionPass, pattern
from ge.passes.context import PassContext
from ge.passes.registry import (
    PassDescriptor,
    clear_registered_passes,
    get_registered_pass_by_descriptor_key,
    get_registered_pass_dicts,
    get_registered_passes,
    register_decompose_pass,
    register_fusion_pass,
)
from ge.passes.stage import PassStage
from ge.passes.status import NOT_CHANGED

__all__ = [
    "NOT_CHANGED",
    "DecomposePass",
    "FusionBasePass",
    "PassContext",
    "PassDescriptor",
    "PassStage",
    "PatternFusionPass",
    "clear_registered_passes",
    "get_registered_pass_by_descriptor_key",
    "get_registered_pass_dicts",
    "get_registered_passes",
    "pattern",
    "register_decompose_pass",
    "register_fusion_pass",
]
