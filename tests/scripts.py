"""Loading the repository's scripts (`tools/`, `examples/`) in tests: files, not modules of
an installed package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """Import the file `path` as module `name` (registered in `sys.modules`, where
    dataclasses and pickling look their module up)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
