"""Compiler options: GE-style string options, and the three that steer plugin loading.

Options are `str -> str` as in GE; passes read them with `PassContext.get_option_value`.
The values of options the built-in passes read are checked here too, when the options are
parsed: a bad one is a CompilerOptionError (GE1202) before anything runs, not a failure of
the pass that reads it in the middle of the pipeline.

Passes may read any option, so an unknown key is no error; but the `ge.` prefix is reserved
for ge's own options (`GE_OPTIONS`), and a key there that ge does not know is a typo of one
of them (`ge.optimise.max_rounds`) or an option ge does not have: `unknown_ge_options`
names each with the closest known key, for a `CompileWarning` once per compilation (a typo
did nothing, silently).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ge.compiler.arguments import described
from ge.errors import CompilerOptionError, CompilerOptionTypeError
from ge.passes.plugin_names import disabled_names

__all__ = [
    "GE_OPTIONS",
    "GE_OPTION_PREFIX",
    "OPTION_CONSTANT_FOLDING_SIZE_LIMIT",
    "OPTION_CONTINUE_ON_PLUGIN_ERROR",
    "OPTION_DISABLED_PLUGINS",
    "OPTION_DISABLE_PLUGIN_AUTOLOAD",
    "OPTION_FUSION_SWITCH_FILE",
    "OPTION_MAX_ROUNDS",
    "CompilerOptions",
    "parse_options",
    "size_limit_value",
    "unknown_ge_options",
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
#: Rounds the origin-graph optimisation may take to reach its fixed point (`Scheduler`).
OPTION_MAX_ROUNDS = "ge.optimize.max_rounds"
#: GE's fusion switch file turning passes on and off by name (`ge.compiler.fusion_switch`).
OPTION_FUSION_SWITCH_FILE = "ge.fusionSwitchFile"

#: The prefix of ge's own options: reserved for them (a plugin's options take their own).
GE_OPTION_PREFIX = "ge."
#: Every option ge reads: the plugin-loading ones, those of the built-in pipeline and passes.
GE_OPTIONS = frozenset({
    OPTION_CONTINUE_ON_PLUGIN_ERROR, OPTION_DISABLED_PLUGINS, OPTION_DISABLE_PLUGIN_AUTOLOAD,
    OPTION_CONSTANT_FOLDING_SIZE_LIMIT, OPTION_MAX_ROUNDS, OPTION_FUSION_SWITCH_FILE,
})

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
        disabled_plugins=disabled_names(disabled),
        disable_plugin_autoload=_flag(
            OPTION_DISABLE_PLUGIN_AUTOLOAD, values.get(OPTION_DISABLE_PLUGIN_AUTOLOAD, "")
        ),
    )


def unknown_ge_options(values: Mapping[str, str]) -> list[str]:
    """One warning text for each key of `values` under the `ge.` prefix that is not one of
    `GE_OPTIONS` but close to one (difflib): most likely a typo of an option that would have
    changed something. A key close to none is left alone: GE's own options
    (`ge.exec.deviceId`, `ge.graphRunMode`), which code ported from GE passes, mean nothing
    to ge and are not mistakes."""
    texts = []
    for key in sorted(k for k in values if k.startswith(GE_OPTION_PREFIX) and k not in GE_OPTIONS):
        close = difflib.get_close_matches(key, sorted(GE_OPTIONS), n=1, cutoff=0.6)
        if close:
            texts.append(
                f"option {key} is not one of ge's options (did you mean {close[0]}?): ge "
                "ignores it, only passes reading it see it; the prefix "
                f"{GE_OPTION_PREFIX!r} is reserved for ge's and GE's own options (a plugin's "
                "options take a prefix of their own)")
    return texts
