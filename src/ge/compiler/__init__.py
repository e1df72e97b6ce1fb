"""`ge.compiler`: the engine side. Plugin loading (environment read once), the
`PassRegistry` of built-in and plugin passes, the stage scheduler, compile reports.

Entry points: `initialize(options=None)`, `finalize()`, `compile_graph(graph, *, options=None,
pass_paths=None) -> CompileReport`. `initialize`'s options are the defaults of every
compilation; a compilation's own options (the plugin options included) apply to it alone,
and its `pass_paths` plugins are unloaded after it.
"""

from __future__ import annotations

from ge.compiler.engine import (
    compile_graph,
    current_pass_registry,
    finalize,
    initialize,
    is_initialized,
)
from ge.compiler.options import (
    OPTION_CONTINUE_ON_PLUGIN_ERROR,
    OPTION_DISABLE_PLUGIN_AUTOLOAD,
    OPTION_DISABLED_PLUGINS,
)
from ge.compiler.pass_registry import PassOrigin, PassRegistry, RegisteredPass
from ge.compiler.plugin_loader import ENV_DISABLE_PLUGIN_AUTOLOAD
from ge.compiler.report import CompileReport, PassRunRecord

__all__ = [
    "ENV_DISABLE_PLUGIN_AUTOLOAD",
    "OPTION_CONTINUE_ON_PLUGIN_ERROR",
    "OPTION_DISABLED_PLUGINS",
    "OPTION_DISABLE_PLUGIN_AUTOLOAD",
    "CompileReport",
    "PassOrigin",
    "PassRegistry",
    "PassRunRecord",
    "RegisteredPass",
    "compile_graph",
    "current_pass_registry",
    "finalize",
    "initialize",
    "is_initialized",
]
