"""The repository's static checks run inside the test command: ruff (lint and format),
the import-layer contracts, and the type checker."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True)


def tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: install the dev extras (pip install -e '.[dev]')")
    return found


def test_ruff_lint_is_clean():
    result = run(tool("ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_clean():
    result = run(tool("ruff"), "format", "--check", "fuser_core", "workbench", "tests")
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_contracts_hold():
    result = run(tool("lint-imports"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_type_check_is_clean():
    result = run(tool("mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
