"""Compiler options: GE-style string options, and the three that steer plugin loading.

Options are `str -> str` as in GE; passes read them with `PassContext.get_option_value`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ge.errors import CompilerOptionError

__all__ = [
    "OPTION_CONTINUE_ON_PLUGIN_ERROR",
    "OPTION_DISABLED_PLUGINS",
    "OPTION_DISABLE_PLUGIN_AUTOLOAD",
    "CompilerOptions",
    "parse_options",
]

#: "true": a plugin that fails to load is skipped with a warning instead of failing (D9).
OPTION_CONTINUE_ON_PLUGIN_ERROR = "ge.passes.continue_on_plugin_error"
#: Comma-separated entry-point names (`name` or `distribution:name`) not to import (D12).
OPTION_DISABLED_PLUGINS = "ge.passes.disabled_plugins"
#: "true": installed plugins (entry points) are not loaded; what
#: `GE_DISABLE_PLUGIN_AUTOLOAD=1` does (D13).
OPTION_DISABLE_PLUGIN_AUTOLOAD = "ge.passes.disable_plugin_autoload"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})


@dataclass(frozen=True)
class CompilerOptions:
    """Validated options: the raw strings, plus the plugin-loading settings read from them."""

    values: Mapping[str, str] = field(default_factory=dict)
    continue_on_plugin_error: bool = False
    disabled_plugins: frozenset[str] = frozenset()
    disable_plugin_autoload: bool = False

    def merged(self, overrides: Mapping[str, str] | None) -> CompilerOptions:
        """These options with `overrides` applied on top (per-compilation options)."""
        if not overrides:
            return self
        return parse_options({**self.values, **overrides})


def _flag(key: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise CompilerOptionError(f"option {key} must be true or false, got {value!r}")


def parse_options(options: Mapping[str, str] | None) -> CompilerOptions:
    """Check that options are strings and read the plugin-loading settings from them."""
    if options is None:
        return CompilerOptions()
    if not isinstance(options, Mapping):
        raise CompilerOptionError(
            f"options must be a mapping of str to str, got {type(options).__name__}"
        )
    values: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise CompilerOptionError(
                f"options must map str to str; got {key!r}: {type(value).__name__}"
            )
        values[key] = value
    disabled = values.get(OPTION_DISABLED_PLUGINS, "")
    return CompilerOptions(
        values=values,
        continue_on_plugin_error=_flag(
            OPTION_CONTINUE_ON_PLUGIN_ERROR, values.get(OPTION_CONTINUE_ON_PLUGIN_ERROR, "")
        ),
        disabled_plugins=frozenset(n.strip() for n in disabled.split(",") if n.strip()),
        disable_plugin_autoload=_flag(
            OPTION_DISABLE_PLUGIN_AUTOLOAD, values.get(OPTION_DISABLE_PLUGIN_AUTOLOAD, "")
        ),
    )
