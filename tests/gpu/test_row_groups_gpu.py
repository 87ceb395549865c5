"""Rows of an inner-outer kernel grouped in twos (row_groups.py) on the GPU, against the
reference backend on random data: the block reduction of a group's rows in one call at a
power-of-two number of warps fixed by the launch (4, 16 and 32: 1024, 4096 and RMS norm
backward's 8192 wide), at 3, 6 and 10 warps (the general path), with an odd share of rows
per block, and with one row sum (RMS norm backward) as well as two (layer norm backward)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import load_repro, use_options

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from test_cuda_backend import _compare, _host, _to_device  # noqa: E402
from test_row_groups import RMS_NORM_BACKWARD, _layer_norm_backward  # noqa: E402

CASES = {
    "layer_norm_bwd_2001x1024": lambda: _layer_norm_backward(2001, 1024),
    "layer_norm_bwd_8192x1536": lambda: _layer_norm_backward(8192, 1536),
    "layer_norm_bwd_4001x768": lambda: _layer_norm_backward(4001, 768),
    "layer_norm_bwd_3000x2560": lambda: _layer_norm_backward(3000, 2560),
    "layer_norm_bwd_16384x4096": lambda: _layer_norm_backward(16384, 4096),
    "rms_norm_bwd_2048x8192": lambda: RMS_NORM_BACKWARD.format(
        rows=2048, hidden=8192, dtype="BFloat16", torch_dtype="bfloat16"
    ),
    "rms_norm_bwd_1999x1024": lambda: RMS_NORM_BACKWARD.format(
        rows=1999, hidden=1024, dtype="BFloat16", torch_dtype="bfloat16"
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_rows_on_the_gpu_match_the_reference(name):
    (loaded,) = load_repro(CASES[name]()).definitions
    inputs = loaded.materialize_inputs(seed=5)
    fd = loaded.fd
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    for _ in range(2):  # the column sums' grid reduction leaves its semaphores zeroed
        with use_options(backend="cuda"):
            got = fd.execute([_to_device(x) if isinstance(x, np.ndarray) else x for x in inputs])
        runtime = fd.executor_cache.last_runtime
        assert runtime.backend_name == "cuda"
        (group,) = runtime.segmented.groups
        assert group.params.row_group == 2, name
        for g, e, tv in zip(got, expected, fd.fusion.outputs, strict=True):
            _compare(_host(g, tv.dtype), e, f"{name} T{tv.name}", tv.dtype)


def test_rms_norm_backward_with_its_rows_in_shared_memory_matches_the_reference():
    # 16384 wide: one row a block iteration (two would not fit), x * rstd and dy * w in
    # shared memory, rstd read again where used (it was a shared buffer written to one
    # slot a thread and read from all: all-NaN input gradients)
    script = RMS_NORM_BACKWARD.format(rows=1056, hidden=16384, dtype="BFloat16", torch_dtype="bfloat16")
    (loaded,) = load_repro(script).definitions
    inputs = loaded.materialize_inputs(seed=5)
    fd = loaded.fd
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    with use_options(backend="cuda"):
        got = fd.execute([_to_device(x) if isinstance(x, np.ndarray) else x for x in inputs])
    (group,) = fd.executor_cache.last_runtime.segmented.groups
    assert group.params.buffer_in_shared_memory and group.params.row_group == 1
    for g, e, tv in zip(got, expected, fd.fusion.outputs, strict=True):
        _compare(_host(g, tv.dtype), e, f"T{tv.name}", tv.dtype)
