"""docs/ops.md is what docs/gen_ops_table.py writes today, and every op it calls
supported is one `fd.ops` offers."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from fuser_core import FusionDefinition

DOCS = Path(__file__).resolve().parents[3] / "docs"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_ops_table", DOCS / "gen_ops_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_ops_md_is_current() -> None:
    assert (DOCS / "ops.md").read_text() == _generator().table(), "run python docs/gen_ops_table.py"


def test_supported_ops_exist_and_refused_ones_say_so() -> None:
    gen = _generator()
    with FusionDefinition() as fd:
        for name in gen.NVFUSER_OPS:
            method = getattr(fd.ops, name)
            assert callable(method)
            if not gen._supported(name):
                with pytest.raises(Exception, match="not supported"):
                    method()
