"""Naming installed plugins to leave them out: the names `ge.passes.disabled_plugins` takes
(an entry point's `name`, or `distribution:name` in any spelling pip normalises alike), the
option value that leaves given entry points out (given once, so holding every name), and
the E13030 hints of a pass name two or more installed plugins register (each side named,
and for each the one option value that runs it). The loaded plugins themselves are
`ge.passes.plugin_cache`'s.
"""

from __future__ import annotations

import copy
import re
import shlex
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ge.errors import DuplicatePassNameError, GeError

if TYPE_CHECKING:
    from ge.passes.plugin_cache import PluginOrigin

__all__ = [
    "InstalledClash",
    "canonical_distribution",
    "clash_hint",
    "disabled_names",
    "disables",
    "leave_installed_out_hint",
    "leave_out_hint",
    "leave_out_option",
    "merged_clashes",
    "plugin_name",
    "unnameable",
    "unnameable_note",
]


def canonical_distribution(name: str) -> str:
    """A distribution's name as pip and importlib.metadata normalise it (PEP 503): `-`, `_`
    and `.` runs are one `-`, lower case (`teamc_fusions` and `TeamC.Fusions` are
    `teamc-fusions`)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def plugin_name(given: str) -> str:
    """A name of `ge.passes.disabled_plugins` as meant: spaces around it and around the
    `:` of `distribution:name` trimmed (` Team.A-Fusions : matmul_add ` names
    `Team.A-Fusions:matmul_add`). A distribution's name holds no `:`, so the first one
    separates it: `weird-eps:a:b` is entry point `a:b`."""
    dist, sep, entry = given.strip().partition(":")
    return f"{dist.strip()}:{entry.strip()}" if sep else dist


def disabled_names(value: str) -> frozenset[str]:
    """The names the option `ge.passes.disabled_plugins` gives: comma-separated, each
    trimmed (`plugin_name`), empty ones dropped."""
    return frozenset(name for part in value.split(",") if (name := plugin_name(part)))


def disables(disabled: Iterable[str], name: str, distribution: str | None) -> bool:
    """Whether a name of `disabled` (`ge.passes.disabled_plugins`) names the entry point
    `name` of `distribution`: by `name`, or by `distribution:name` in any spelling of the
    distribution that normalises alike (`canonical_distribution`)."""
    qualified = f"{canonical_distribution(distribution or '')}:{name}"
    for given in map(plugin_name, disabled):
        dist, sep, entry = given.partition(":")
        if given == name or (sep and f"{canonical_distribution(dist)}:{entry}" == qualified):
            return True
    return False


def leave_out_option(names: Iterable[str]) -> str:
    """The option `ge.passes.disabled_plugins` giving `names`, as a shell command line takes
    it (quoted when a name holds a space or a shell character) and as `ge.compile` does.
    The option is given once, so it holds every name to leave out."""
    value = ",".join(names)
    return (f"--option {shlex.quote(f'ge.passes.disabled_plugins={value}')} (ge.compile's "
            f"options={{'ge.passes.disabled_plugins': {value!r}}})")


def unnameable(entry_point: str) -> bool:
    """Whether `ge.passes.disabled_plugins` cannot name entry point `entry_point` (its
    name): a comma separates the option's names."""
    return "," in entry_point


def unnameable_note(entry_point: str, distribution: str | None) -> str:
    """Why the entry point `entry_point` of `distribution` cannot be left out by name."""
    return (f"entry point {entry_point!r} of {distribution} cannot be left out: "
            "ge.passes.disabled_plugins separates names by commas, and its name holds one; "
            f"uninstall {distribution} (or set GE_DISABLE_PLUGIN_AUTOLOAD=1 and give the "
            "plugins to run as pass paths)")


def leave_out_hint(entry_points: Sequence[tuple[str | None, str]],
               disabled: Collection[str] = ()) -> str:
    """The option leaving out exactly the entry points `entry_points` (distribution, name:
    by `distribution:name`, which another distribution's entry point of the same name does
    not match) besides those `disabled` (what the option holds already: it is given once),
    or why one cannot be left out (`unnameable`)."""
    blocked = [unnameable_note(name, dist) for dist, name in entry_points if unnameable(name)]
    if blocked:
        return "; ".join(blocked)
    given = sorted(plugin_name(n) for n in disabled)
    names = given + [f"{dist}:{name}" for dist, name in entry_points
                     if not disables(given, name, dist)]
    return leave_out_option(names)


def leave_installed_out_hint(entry_point: str, distribution: str | None,
                             disabled: Collection[str] = ()) -> str:
    """What to add to a pass-name clash with an installed plugin's pass (entry point
    `"name = module:attr"` of `distribution`): the option that leaves that plugin out, so
    the other runs."""
    name = entry_point.partition(" = ")[0]
    return ("; to run the other one, leave the installed plugin out: "
            f"{leave_out_hint([(distribution, name)], disabled)}")


def clash_hint(*sides: tuple[str, PluginOrigin | None], disabled: Collection[str] = ()) -> str:
    """What to add to a clash of pass classes (each with its plugin's origin: `sides`, the
    new one first) when all are installed plugins' passes: each side named (entry point,
    distribution, version), and for each the option value that runs it, leaving out all
    the others besides what `disabled` leaves out already; "" unless all are installed."""
    named = [(cls, origin) for cls, origin in sides
             if origin is not None and origin.entry_point_name]
    if len(named) < 2 or len(named) != len(sides):
        return ""
    parts = ", ".join(f"{cls} is {origin}" for cls, origin in named)
    others = "the other" if len(named) == 2 else "the others"
    ways = [f"to run {cls} ({origin.distribution}), leave {others} out: "
            + leave_out_hint([(o.distribution, o.entry_point_name or "")
                          for k, (_, o) in enumerate(named) if k != i], disabled)
            for i, (cls, origin) in enumerate(named)]
    return f"; {parts}; {'; '.join(ways)}"


@dataclass(frozen=True)
class InstalledClash:
    """A pass name two installed plugins register (`DuplicatePassNameError.clash`): the
    error's message without its hint, and the sides, the new one first; the hint is
    composed when the error is raised, knowing every side and what `disabled_plugins`
    holds (`PluginLoadReport.error`)."""

    message: str
    sides: tuple[tuple[str, PluginOrigin], ...]


def merged_clashes(failures: Sequence[GeError], disabled: Collection[str]) -> list[GeError]:
    """`failures` with the clashes of one pass name between installed plugins as one E13030
    naming every side and, for each, the option value that runs it given `disabled` (three
    distributions registering one name failed twice, each hint leaving out one side and
    dropping what the option held: following them went in a circle); copies, the failures
    are kept as they are (a compiler keeps them for its lifetime)."""
    merged: list[GeError] = []
    groups: dict[str, tuple[DuplicatePassNameError, InstalledClash, list[str]]] = {}
    for err in failures:
        if not (isinstance(err, DuplicatePassNameError) and isinstance(err.clash,
                                                                       InstalledClash)):
            merged.append(err)
            continue
        clash = err.clash
        key = err.pass_name or ""
        if key not in groups:
            first = copy.copy(err)
            groups[key] = (first, clash, [])
            merged.append(first)
            continue
        first, known, also = groups[key]
        cls, origin = clash.sides[0]
        if all(origin != o for _, o in known.sides):
            also.append(f"{cls} at {err.location} reuses it too" if err.location
                        else f"{cls} reuses it too")
            groups[key] = (first, InstalledClash(known.message, (*known.sides, (cls, origin))),
                           also)
    for first, clash, also in groups.values():
        first.message = (clash.message + "".join(f"; {a}" for a in also)
                         + clash_hint(*clash.sides, disabled=disabled))
    return merged
