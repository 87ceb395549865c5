"""An inner reduction whose consecutive rows read one row of an input (x @ w.T written as a
broadcast multiply and a sum: each run of n rows reads one row of x) takes those rows in
one block, a warp a row, so that all but the first find the row in L1."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from fuser_core import DataType, FusionDefinition, use_options

sys.path.insert(0, str(Path(__file__).parents[1] / "codegen"))
from kernels_check import check_generated_kernels

RNG = np.random.default_rng(5)


def _linear(fd: FusionDefinition, b: int, m: int, n: int, k: int) -> None:
    x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float)
    w = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    xb = fd.ops.broadcast_in_dim(x, shape=[b, m, n, k], broadcast_dims=[0, 1, 3])
    wb = fd.ops.broadcast_in_dim(w, shape=[b, m, n, k], broadcast_dims=[2, 3])
    fd.add_output(fd.ops.sum(fd.ops.mul(xb, wb), dims=[3]))


def _runtime(b: int, m: int, n: int, k: int):
    with FusionDefinition() as fd:
        _linear(fd, b, m, n, k)
    inputs = [RNG.standard_normal((b, m, k)).astype(np.float32), RNG.standard_normal((n, k)).astype(np.float32)]
    with use_options(device_model="h100_sxm", backend="reference"):
        return fd.runtime_for(inputs), inputs


def test_rows_reading_one_input_row_share_a_block():
    runtime, inputs = _runtime(2, 72, 8, 32)  # 1152 rows: enough to fill the SMs 8 rows a block
    (group,) = runtime.segmented.groups
    assert (group.params.threads_iteration, group.params.threads_reduction) == (8, 32)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_a_run_longer_than_a_block_takes_eight_rows():
    runtime, _ = _runtime(2, 72, 12, 32)  # runs of 12 rows: blocks of 8
    (group,) = runtime.segmented.groups
    assert group.params.threads_iteration == 8


def test_too_few_rows_keep_the_usual_block():
    runtime, inputs = _runtime(1, 8, 8, 256)  # 64 rows: not enough to fill the SMs
    (group,) = runtime.segmented.groups
    assert group.params.threads_iteration != 8 or group.params.threads_reduction != 32
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_rows_that_share_no_input_row_keep_the_usual_block():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.sum(fd.ops.exp(x), dims=[1]))
    inputs = [RNG.standard_normal((2048, 1024)).astype(np.float32)]
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    (group,) = runtime.segmented.groups
    assert (group.params.threads_iteration, group.params.threads_reduction) != (8, 32)


def test_a_weight_every_row_reads_asks_for_nothing():
    """w [k] broadcast along all rows: every block reads it anyway, no run of rows shares it."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        w = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Float)
        wb = fd.ops.broadcast_in_dim(w, shape=[8192, 1024], broadcast_dims=[1])
        fd.add_output(fd.ops.sum(fd.ops.mul(x, wb), dims=[1]))
    inputs = [RNG.standard_normal((8192, 1024)).astype(np.float32), RNG.standard_normal(1024).astype(np.float32)]
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    (group,) = runtime.segmented.groups
    assert (group.params.threads_iteration, group.params.threads_reduction) == (2, 64)
