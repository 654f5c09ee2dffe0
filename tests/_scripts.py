"""Load a repository script (``tools/*.py``, ``validation/*.py``) as a module, as the tests that reuse
a script's functions need it (one helper for every test file)."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative_path: str) -> ModuleType:
    """The script at ``ROOT / relative_path`` as a module named after its file.

    Registered in ``sys.modules`` before it runs, because dataclasses and pickling look a class's
    module up by name; a second load of the same script returns the registered module."""
    path = ROOT / relative_path
    name = path.stem
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod
