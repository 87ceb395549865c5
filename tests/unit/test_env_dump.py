"""Dumps chosen through the environment reach a user's own script: FUSER_DUMP and the
NVFUSER_ aliases, NVFUSER_DISABLE, and an unknown name failing with the valid ones."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fuser_core import DumpOption

ROOT = Path(__file__).resolve().parents[2]
OPTION_VARIABLES = ("FUSER_DUMP", "FUSER_ENABLE", "FUSER_DISABLE", "NVFUSER_DUMP", "NVFUSER_ENABLE", "NVFUSER_DISABLE")

USER_SCRIPT = """\
import numpy as np
from fuser_core import FusionDefinition, DataType

with FusionDefinition() as fd:
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    low = fd.define_scalar(None, dtype=DataType.Int)
    high = fd.define_scalar(None, dtype=DataType.Int)
    t1 = fd.ops.pad(t0, [low, high])
    t2 = fd.ops.mul(t1, t1)
    fd.add_output(t2)

x = np.arange(12, dtype=np.float32).reshape(3, 4)
for widths in [(1, 1), (1, 1), (2, 0)]:
    (out,) = fd.execute([x, *widths])
    print("result", list(out.shape), out[0].tolist())
"""

RESULTS = [
    "result [3, 6] [0.0, 0.0, 1.0, 4.0, 9.0, 0.0]",
    "result [3, 6] [0.0, 0.0, 1.0, 4.0, 9.0, 0.0]",
    "result [3, 6] [0.0, 0.0, 0.0, 1.0, 4.0, 9.0]",
]


def run_user_script(tmp_path: Path, **variables: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in OPTION_VARIABLES}
    env |= {"PYTHONPATH": str(ROOT), **variables}
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120
    )


def cache_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("cache: ")]


def test_no_dumps_without_the_variables(tmp_path):
    result = run_user_script(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == RESULTS


def test_fuser_dump_cache_events_prints_one_line_per_execution(tmp_path):
    result = run_user_script(tmp_path, FUSER_DUMP="cache_events")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line for line in lines if line.startswith("result")] == RESULTS
    events = cache_lines(result.stdout)
    assert len(events) == 3 and len(lines) == 6
    assert events[0].startswith("cache: miss at concretization: first execution")
    assert events[1].startswith("cache: hit at input key")
    # new pad widths: the resized extent is part of the concretization, so a new runtime
    assert events[2].startswith("cache: miss at concretization: resize T1 axis 1: (4, 1, 1) -> (4, 2, 0)")
    assert lines.index(events[0]) < lines.index(RESULTS[0])  # each event before its result


def test_nvfuser_names_dump_the_concretized_fusion_with_resize_extents_left_symbolic(tmp_path):
    result = run_user_script(
        tmp_path, NVFUSER_DUMP="cache_events,fusion_ir_concretized", NVFUSER_DISABLE="concretize_resize_extents"
    )
    assert result.returncode == 0, result.stderr
    assert "ConcretizationInfo (concretize_resize_extents=off)" in result.stdout
    assert "Concretized Fusion:" in result.stdout
    assert "(nvfuser_index_t)" in result.stdout.split("Concretized Fusion:", 1)[1]
    events = cache_lines(result.stdout)
    assert len(events) == 3
    assert events[0].startswith("cache: miss")
    assert events[1].startswith("cache: hit")
    # with symbolic extents, other pad widths reuse the concretization
    assert events[2].startswith("cache: hit at concretization")
    assert [line for line in result.stdout.splitlines() if line.startswith("result")] == RESULTS


def test_the_concretized_fusion_has_constant_extents_by_default(tmp_path):
    result = run_user_script(tmp_path, NVFUSER_DUMP="fusion_ir_concretized")
    assert result.returncode == 0, result.stderr
    assert "ConcretizationInfo (concretize_resize_extents=on)" in result.stdout
    # concretized on each miss (the first run and the new widths), not on the hit
    first, second = result.stdout.split("Concretized Fusion:")[1:]
    assert re.search(r"Resize: iS\d+\{4\}rf by 1 and 1 -> iS\d+\{6\}rf", first), first
    assert re.search(r"Resize: iS\d+\{4\}rf by 2 and 0 -> iS\d+\{6\}rf", second), second
    assert "(nvfuser_index_t)" not in result.stdout
    assert cache_lines(result.stdout) == []


@pytest.mark.parametrize("variable", ["FUSER_DUMP", "NVFUSER_DUMP"])
def test_an_unknown_dump_name_fails_the_script_listing_the_valid_names(tmp_path, variable):
    result = run_user_script(tmp_path, **{variable: "cache_events,fusion_ir_concretised"})
    assert result.returncode != 0
    assert "result" not in result.stdout
    message = result.stderr.strip().splitlines()[-1]
    assert "FuserError" in message and "fusion_ir_concretised" in message and variable in message
    assert all(name in message for name in DumpOption.__members__)
