"""The built-in pattern passes' patterns, built once per compiler lifetime and opset.

A pattern pass builds its patterns once per compilation (GE builds them once per pass
instance, and a plugin's pass may keep on its instance what it learned while building
them: which capture plays which role). A built-in pass's patterns depend on nothing but its
class and the model's opsets, and building and compiling them every compilation was a fifth
of the time `ge.compile` takes on a 75-node model. The engine (one compiler lifetime) keeps,
per class and opsets, the instance as it was right after building them and their compiled
patterns; a compilation gets a shallow copy of that instance, whose per-match state
(`meet_requirements` noting what `replacement` builds) is then its own, with the compiled
patterns, which matching only reads. `ge.finalize()` drops them with the engine.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Mapping
from typing import Any

from ge.passes.matcher import CompiledPattern

__all__ = ["BuiltPatterns", "OpsetsKey", "opsets_key"]

OpsetsKey = tuple[tuple[str, int], ...]


def opsets_key(opset_imports: Mapping[str, int]) -> OpsetsKey:
    """The opsets patterns were built at, as a key (domain order does not matter)."""
    return tuple(sorted(opset_imports.items()))


class BuiltPatterns:
    """Built-in pattern pass instances with their patterns built, per class and opsets."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: dict[tuple[type, OpsetsKey], tuple[Any, list[CompiledPattern]]] = {}

    def instance(self, cls: type, opsets: OpsetsKey
                 ) -> tuple[Any, list[CompiledPattern]] | None:
        """A new instance of `cls` with its patterns built at `opsets`, and those compiled
        patterns; None when none were built yet."""
        with self._lock:
            kept = self._kept.get((cls, opsets))
        if kept is None:
            return None
        return copy.copy(kept[0]), kept[1]

    def keep(self, instance: Any, opsets: OpsetsKey, compiled: list[CompiledPattern]) -> None:
        """Keep `instance` as it is now, right after building its patterns at `opsets`
        (a shallow copy: what it later notes per match stays its own)."""
        with self._lock:
            self._kept.setdefault((type(instance), opsets), (copy.copy(instance), compiled))
