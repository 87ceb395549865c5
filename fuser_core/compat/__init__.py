"""Opt-in: let nvFuser's Python API resolve to fuser_core.

    import fuser_core.compat           # then `import nvfuser` gives fuser_core's
    python -m fuser_core.compat script.py [args...]
    python -m fuser_core.compat -m pytest tests/python/test_python_frontend.py
    pytest -p fuser_core.compat ...

Importing this module puts an `nvfuser` module (and `nvfuser.pytorch_utils`,
`nvfuser.nvfuser_version`) into `sys.modules`, so scripts and tests written for
nvFuser run unchanged against fuser_core. Nothing installs it by default: a real
nvFuser on the same machine is shadowed only in a process that imports this module.
"""

from __future__ import annotations

import sys
import types

from fuser_core.compat.nvfuser_api import build_modules

__all__ = ["install"]


def install() -> types.ModuleType:
    """Make `import nvfuser` resolve to fuser_core in this process; returns the module."""
    modules = build_modules()
    sys.modules.update(modules)
    return modules["nvfuser"]


install()
