"""Plugin modules unloaded while the `ge` command runs, kept for the process's end.

A plugin's modules leave `sys.modules` when its compilation ends (the next load executes
its files again). A module dropped so is freed only by the last collection of the
interpreter's shutdown, when a file it left open is no longer flushed (what it wrote is
lost); the `ge` process (`ge.cli.process_exit`) puts them back first, so that the shutdown
clears them as it clears every module. This module imports nothing heavy: the process
enters `RETIRED.collecting()` before the command imports onnx or numpy, so that a signal
in those first moments meets the command's own handling (trial ZZ).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

__all__ = ["RETIRED", "RetiredModules"]


class RetiredModules:
    """Where the modules dropped from `sys.modules` go while `collecting` runs."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._list: list[ModuleType] | None = None

    @contextmanager
    def collecting(self) -> Iterator[list[ModuleType]]:
        """Inside the block, `retire`d modules are also put in the list it gives (an outer
        block gets them too when this one ends)."""
        with self._lock:
            previous, self._list = self._list, []
            collected = self._list
        try:
            yield collected
        finally:
            with self._lock:
                self._list = previous
                if previous is not None:
                    previous.extend(collected)

    def retire(self, module: ModuleType) -> None:
        """Keep `module`, just dropped from `sys.modules`, if a block is collecting."""
        with self._lock:
            if self._list is not None:
                self._list.append(module)


#: The process's one collection of retired plugin modules.
RETIRED = RetiredModules()
