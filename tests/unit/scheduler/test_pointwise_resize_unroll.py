"""The pointwise unroll through slices and cats (RoPE): each offset read of an input is its
own register array, so a thread holds one vector of each, also where a plain pointwise
kernel of that size would unroll (a second vector a thread measured slower on the H100 at
issue 2795's sizes); the kernels are right, vectorized and scalar."""

from __future__ import annotations

import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.scheduler.common import unroll_factor
from fuser_core.scheduler.device import select_device
from fuser_core.scheduler.pointwise import THREADS_X

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from kernels_check import check_generated_kernels

RNG = np.random.default_rng(2795)


def rope(half: int) -> FusionDefinition:
    """litGPT's RoPE on the first 2 * half features of each head, the rest cat back."""
    n = 2 * half
    with FusionDefinition() as fd:
        q = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=True, dtype=DataType.BFloat16)
        cos = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        b, h, t, d = (fd.ops.size(q, dim=i) for i in range(4))
        x = fd.ops.slice(q, [0, 0, 0, 0], [b, h, t, n])
        x1 = fd.ops.slice(x, [0, 0, 0, 0], [b, h, t, half])
        x2 = fd.ops.slice(x, [0, 0, 0, half], [b, h, t, n])
        neg = fd.ops.cast(fd.ops.neg(fd.ops.cast(x2, DataType.Float)), DataType.BFloat16)
        rotated = fd.ops.cast(fd.ops.cat([neg, x1], dim=-1), DataType.Float)
        c = fd.ops.cast(fd.ops.broadcast_in_dim(cos, shape=[b, h, t, n], broadcast_dims=[2, 3]), DataType.Float)
        y = fd.ops.cast(fd.ops.add(fd.ops.mul(fd.ops.cast(x, DataType.Float), c), rotated), DataType.BFloat16)
        fd.add_output(fd.ops.cat([y, fd.ops.slice(q, [0, 0, 0, n], [b, h, t, d])], dim=-1))
    return fd


@pytest.mark.parametrize(
    ("half", "rows", "vectorize"),
    [
        (4, 2 * 16 * 1024, 4),  # issue 2795's sizes: 8-byte vectors
        (8, 4 * 16 * 1024, 8),  # 16-byte vectors
    ],
)
def test_a_rope_thread_reads_one_vector_of_each_offset_read(half, rows, vectorize):
    x = RNG.standard_normal((rows // 1024, 1, 1024, 32)).astype(ml_dtypes.bfloat16)
    cos = RNG.standard_normal((1024, 2 * half)).astype(ml_dtypes.bfloat16)
    fd = rope(half)
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for([x, cos])
    (group,) = runtime.segmented.groups
    # the size alone would unroll: enough blocks for a few waves with several vectors a thread
    assert unroll_factor(x.size, THREADS_X * vectorize, select_device("h100_sxm").sm_count) > 1
    assert (group.params.vectorize, group.params.unroll) == (vectorize, 1)
    for vectors in (True, False):
        assert check_generated_kernels(runtime, [x, cos], vectorize=vectors) == ["kernel_g0"]
