"""Compiler options: GE-style string options, and the three that steer plugin loading.

Options are `str -> str` as in GE; passes read them with `PassContext.get_option_value`.
The values of options the built-in passes read are checked here too, when the options are
parsed: a bad one is a CompilerOptionError (GE1202) before anything runs, not a failure of
the pass that reads it in the middle of the pipeline.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ge.compiler.arguments import described
from ge.errors import CompilerOptionError, CompilerOptionTypeError

__all__ = [
    "OPTION_CONSTANT_FOLDING_SIZE_LIMIT",
    "OPTION_CONTINUE_ON_PLUGIN_ERROR",
    "OPTION_DISABLED_PLUGINS",
    "OPTION_DISABLE_PLUGIN_AUTOLOAD",
    "CompilerOptions",
    "parse_options",
    "size_limit_value",
]

#: "true": a plugin that fails to load is skipped with a warning instead of failing (D9).
OPTION_CONTINUE_ON_PLUGIN_ERROR = "ge.passes.continue_on_plugin_error"
#: Comma-separated entry-point names (`name` or `distribution:name`) not to import (D12).
OPTION_DISABLED_PLUGINS = "ge.passes.disabled_plugins"
#: "true": installed plugins (entry points) are not loaded; what
#: `GE_DISABLE_PLUGIN_AUTOLOAD=1` does (D13).
OPTION_DISABLE_PLUGIN_AUTOLOAD = "ge.passes.disable_plugin_autoload"

#: The bytes a folded output of `ConstantFolding` may have (a decimal integer string).
OPTION_CONSTANT_FOLDING_SIZE_LIMIT = "ge.constant_folding.size_limit"

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"", "0", "false", "no", "off"})
_NON_NEGATIVE_INTEGER = re.compile(r"\s*\+?\d+\s*")


def size_limit_value(value: object) -> int:
    """The value of `ge.constant_folding.size_limit` in bytes (CompilerOptionError if it is
    not a non-negative decimal integer)."""
    if not isinstance(value, str) or not _NON_NEGATIVE_INTEGER.fullmatch(value):
        raise CompilerOptionError(f"option {OPTION_CONSTANT_FOLDING_SIZE_LIMIT} must be a "
                                  f"non-negative integer (bytes), got {value!r}")
    return int(value)


#: The options built-in passes read, with the function reading each value: run on every
#: option set when it is parsed, so that a value a pass could not use fails up front.
_BUILTIN_PASS_OPTIONS: Mapping[str, Callable[[str], object]] = {
    OPTION_CONSTANT_FOLDING_SIZE_LIMIT: size_limit_value,
}


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
        key, sep, value = options.partition("=") if isinstance(options, str) else ("", "", "")
        hint = f": write {{{key!r}: {value!r}}}" if sep and key else ""
        raise CompilerOptionTypeError(
            f"options must be a mapping of str to str, got {described(options)}{hint}")
    values: dict[str, str] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise CompilerOptionTypeError(
                f"options must map str to str, got {described(key)} as a key")
        if not isinstance(value, str):
            written = (str(value).lower() if isinstance(value, bool)
                       else str(value) if isinstance(value, (int, float)) else None)
            raise CompilerOptionTypeError(
                f"options must map str to str, got {described(value)} for {key!r}"
                + ("" if written is None else f": write {written!r}"))
        values[key] = value
    for key, read in _BUILTIN_PASS_OPTIONS.items():
        if key in values:
            read(values[key])
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
