"""`ge.passes`: what pass authors import.

Base classes, the registering decorators, the registry look-ups, stages and the context;
patterns, match results and the matcher's configuration; replacements, boundaries and the
subgraph rewriter; fuse inspection; the statuses `run()` may return (`SUCCESS`,
`NOT_CHANGED`, `FAILED`: GE's C++ names, an extension of GE's Python package). Only
`pattern`, the base classes and the statuses are imported eagerly; the rest resolve on
first use (module `__getattr__`, as GE does), so a pass module that only registers a
FusionBasePass loads nothing else. Discovery of pass plugins lives in `ge.passes.bootstrap`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
from ge.passes.status import FAILED, NOT_CHANGED, SUCCESS

if TYPE_CHECKING:
    from ge.passes.config import PatternMatcherConfig, PatternMatcherConfigBuilder
    from ge.passes.found_matches import FoundMatch, find_matches
    from ge.passes.fuse_inspector import FuseCheckResult, can_fuse, report_fuse
    from ge.passes.matcher import MatchResult
    from ge.passes.pattern import NodeIo, Pattern, PatternInputs, create_pattern
    from ge.passes.replacement import (
        SubgraphBoundary,
        SubgraphInput,
        SubgraphOutput,
        SubgraphRewriter,
        create_replacement,
        infer_shape,
    )

#: Names resolved on first use, and the module each lives in.
_LAZY = {
    "FoundMatch": "ge.passes.found_matches",
    "find_matches": "ge.passes.found_matches",
    "FuseCheckResult": "ge.passes.fuse_inspector",
    "can_fuse": "ge.passes.fuse_inspector",
    "report_fuse": "ge.passes.fuse_inspector",
    "MatchResult": "ge.passes.matcher",
    "NodeIo": "ge.passes.pattern",
    "Pattern": "ge.passes.pattern",
    "PatternInputs": "ge.passes.pattern",
    "create_pattern": "ge.passes.pattern",
    "PatternMatcherConfig": "ge.passes.config",
    "PatternMatcherConfigBuilder": "ge.passes.config",
    "SubgraphBoundary": "ge.passes.replacement",
    "SubgraphInput": "ge.passes.replacement",
    "SubgraphOutput": "ge.passes.replacement",
    "SubgraphRewriter": "ge.passes.replacement",
    "create_replacement": "ge.passes.replacement",
    "infer_shape": "ge.passes.replacement",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ge.passes' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "FAILED",
    "NOT_CHANGED",
    "SUCCESS",
    "DecomposePass",
    "FoundMatch",
    "FuseCheckResult",
    "FusionBasePass",
    "MatchResult",
    "NodeIo",
    "PassContext",
    "PassDescriptor",
    "PassStage",
    "Pattern",
    "PatternFusionPass",
    "PatternInputs",
    "PatternMatcherConfig",
    "PatternMatcherConfigBuilder",
    "SubgraphBoundary",
    "SubgraphInput",
    "SubgraphOutput",
    "SubgraphRewriter",
    "can_fuse",
    "clear_registered_passes",
    "create_pattern",
    "create_replacement",
    "find_matches",
    "get_registered_pass_by_descriptor_key",
    "get_registered_pass_dicts",
    "get_registered_passes",
    "infer_shape",
    "pattern",
    "register_decompose_pass",
    "register_fusion_pass",
    "report_fuse",
]
