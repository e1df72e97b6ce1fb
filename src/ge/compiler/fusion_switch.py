"""GE's fusion switch file (option `ge.fusionSwitchFile`, atc's `--fusion_switch_file`).

The file turns passes on and off by name, as atc reads it::

    {"Switch": {"GraphFusion": {"ConvBatchNormFusion": "off", "SwishFusion": "on"},
                "UBFusion": {"ALL": "off"}}}

ge's passes are graph fusions: GraphFusion's `"ALL"` applies to them, UBFusion's to UB (unified
buffer) fusions, which ge does not have, so it changes nothing (as in FE, where each section's
"ALL" switches its own kind of pass only). A pass is named in either section (one namespace).
`"off"` leaves a pass out of the compilation, `"on"` runs a built-in one that is off by default;
`"ALL": "off"` leaves every built-in pass out but the ones named on. `"ALL": "on"` leaves the
passes off by default off, as FE does (its built-in configuration switches those off by name,
and a name is looked up before "ALL"): name them to run them. A name no pass of the
compilation has (a file written for Ascend names Ascend's own passes) is ignored, with a
warning naming it. A file that is not JSON is read, as FE reads it, in the old format: a
`PassName:on|off` per line. Either may begin with a UTF-8 BOM; a name given twice (a key of
one JSON object too, which json.loads would keep the last of) is refused.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ge.compiler.options import OPTION_FUSION_SWITCH_FILE
from ge.errors import CompilerOptionError

__all__ = ["OPTION_FUSION_SWITCH_FILE", "FusionSwitch", "read_fusion_switch"]

_GRAPH_FUSION = "GraphFusion"
_SECTIONS = (_GRAPH_FUSION, "UBFusion")
_ALL = "ALL"


@dataclass(frozen=True)
class FusionSwitch:
    """What a fusion switch file says: passes named on and off, and GraphFusion's "ALL" if
    set (UBFusion's switches UB fusions, which ge has none of)."""

    path: str
    on: frozenset[str] = frozenset()
    off: frozenset[str] = frozenset()
    all: bool | None = None  # GraphFusion's ALL: True on, False off, None not set

    def apply(self, builtin: Iterable[str], off_by_default: Iterable[str],
              known: Iterable[str]) -> tuple[frozenset[str], frozenset[str], list[str]]:
        """`(enable, disable, ignored)` for a compilation whose built-in passes are
        `builtin` (`off_by_default` among them) and whose passes are `known`."""
        names, builtins, dormant = set(known), set(builtin), set(off_by_default)
        # "ALL": "on" keeps the defaults (the passes off by default stay off, as in FE)
        disable = builtins if self.all is False else set()
        disable = (disable - self.on) | (self.off & names)
        enable = self.on & dormant
        ignored = sorted((self.on | self.off) - names)
        return frozenset(enable), frozenset(disable), ignored


def _fail(path: str, why: str) -> CompilerOptionError:
    return CompilerOptionError(f"fusion switch file {path} ({OPTION_FUSION_SWITCH_FILE}): {why}")


def read_fusion_switch(path: str) -> FusionSwitch:
    """The switches of the file at `path`; CompilerOptionError (GE1202) naming the file and
    the place for a file that is missing, empty, or of neither form above."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # (a BOM, as editors may write)
    except OSError as exc:
        raise _fail(path, f"cannot be read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise _fail(path, "is not UTF-8 text") from None
    if not text.strip():
        raise _fail(path, "is empty")
    try:
        data = json.loads(text, object_pairs_hook=_Object.of)
    except json.JSONDecodeError as exc:
        if not text.lstrip().startswith(("{", "[")):  # FE falls back to its old format
            return _old_format(path, text)
        raise _fail(path, f"is not JSON: {exc.msg} at line {exc.lineno} column "
                          f"{exc.colno}") from None
    _once_each(path, data, "the file")
    switch = data.get("Switch") if isinstance(data, dict) else None
    if not isinstance(switch, dict):
        raise _fail(path, 'must be an object with a "Switch" object: {"Switch": '
                          '{"GraphFusion": {"PassName": "off"}}}')
    on: set[str] = set()
    off: set[str] = set()
    every: bool | None = None
    _once_each(path, switch, '"Switch"')
    for section, entries in switch.items():
        if section not in _SECTIONS:
            raise _fail(path, f'"Switch" has {section!r}; its sections are GraphFusion and '
                              "UBFusion")
        if not isinstance(entries, dict):
            raise _fail(path, f'"{section}" must be an object of "PassName": "on" | "off"')
        _once_each(path, entries, f'"{section}"')
        for name, value in entries.items():
            if not name.strip():  # (it named no pass: it was a warning of an empty list)
                raise _fail(path, f'"{section}" has an entry of no pass name ({name!r})')
            state = value.strip().lower() if isinstance(value, str) else None
            if state not in ("on", "off"):
                raise _fail(path, f'{section}.{name} is {value!r}: "on" or "off"')
            if name == _ALL:
                if section == _GRAPH_FUSION:  # (UBFusion's: UB fusions, ge has none)
                    every = state == "on"
            else:
                (on if state == "on" else off).add(name)
    both = sorted(on & off)
    if both:
        raise _fail(path, f"turns {', '.join(both)} both on and off")
    return FusionSwitch(path, frozenset(on), frozenset(off), every)


class _Object(dict[str, Any]):
    """A JSON object of the file, with the keys it gives more than once (`repeated`), which
    json.loads would keep the last of silently: refused where the place is known."""

    repeated: list[str]

    @classmethod
    def of(cls, items: list[tuple[str, Any]]) -> _Object:
        made = cls(items)
        keys = [key for key, _ in items]
        made.repeated = sorted({key for key in keys if keys.count(key) > 1})
        return made


def _once_each(path: str, data: object, where: str) -> None:
    """CompilerOptionError for a key the JSON object `data` (at `where`) gives twice, as the
    old format refuses a name given twice."""
    repeated = getattr(data, "repeated", [])
    if repeated:
        raise _fail(path, f"{where} names {', '.join(repeated)} twice")


def _old_format(path: str, text: str) -> FusionSwitch:
    """The switches of a file in FE's old text format, a `PassName:on|off` per line (blank
    lines skipped; `ALL:off` is GraphFusion's "ALL"), which FE reads a file that is not JSON
    as; CompilerOptionError naming the line otherwise."""
    on: set[str] = set()
    off: set[str] = set()
    every: bool | None = None
    seen: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        name, sep, value = (part.strip() for part in line.partition(":"))
        if not sep or not name:
            raise _fail(path, f"is neither JSON ({{\"Switch\": {{\"GraphFusion\": "
                              f"{{\"PassName\": \"off\"}}}}}}) nor the old format of a "
                              f"PassName:on|off per line: line {number} is {line.strip()!r}")
        state = value.lower()
        if state not in ("on", "off"):
            raise _fail(path, f"line {number}: {name} is {value!r}: on or off")
        if name in seen:
            raise _fail(path, f"names {name} twice (lines {seen[name]} and {number})")
        seen[name] = number
        if name == _ALL:
            every = state == "on"
        else:
            (on if state == "on" else off).add(name)
    return FusionSwitch(path, frozenset(on), frozenset(off), every)
