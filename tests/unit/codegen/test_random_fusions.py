"""Random pointwise, broadcast and resize fusions (hypothesis), each generated kernel run
on the kernel-IR interpreter against the reference: shapes from 1 to a few dozen per
axis, inputs broadcast along random axes, slices and pads of the last axis, float32 and
bf16."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuser_core import DataType, FusionDefinition, use_options  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels  # noqa: E402

UNARY = ["exp", "neg", "relu", "tanh", "sigmoid", "abs", "sin"]
BINARY = ["add", "mul", "sub", "maximum"]


@st.composite
def fusions(draw):
    rank = draw(st.integers(1, 3))
    shape = [draw(st.sampled_from([1, 2, 3, 5, 8, 17, 33])) for _ in range(rank)]
    dtype = draw(st.sampled_from([DataType.Float, DataType.BFloat16]))
    kept = sorted(draw(st.sets(st.integers(0, rank - 1), max_size=rank - 1)))  # axes a broadcast input has
    steps = draw(
        st.lists(
            st.tuples(st.sampled_from(["unary", "binary", "bcast", "resize"]), st.integers(0, 6)),
            min_size=1,
            max_size=6,
        )
    )
    return shape, dtype, kept, steps


def _build(shape, dtype, kept, steps):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1] * len(shape), contiguity=True, dtype=dtype)
        b = fd.define_tensor(shape=[-1] * len(kept), contiguity=True, dtype=dtype) if kept else None
        cur = fd.ops.cast(x, DataType.Float)
        width = shape[-1]
        for kind, arg in steps:
            if kind == "unary":
                cur = getattr(fd.ops, UNARY[arg % len(UNARY)])(cur)
            elif kind == "binary":
                cur = (
                    getattr(fd.ops, BINARY[arg % len(BINARY)])(cur, fd.ops.cast(x, DataType.Float))
                    if width == shape[-1]
                    else cur
                )
            elif kind == "bcast" and b is not None and width == shape[-1]:
                full = fd.ops.broadcast_in_dim(fd.ops.cast(b, DataType.Float), shape=x.shape(), broadcast_dims=kept)
                cur = fd.ops.mul(cur, full)
            elif kind == "resize":
                if arg % 2 == 0 and width > 1:  # drop the first element of the last axis
                    starts = [0] * (len(shape) - 1) + [1]
                    ends = [s for s in shape[:-1]] + [width]
                    cur = fd.ops.slice(cur, start_indices=starts, end_indices=ends, strides=[1] * len(shape))
                    width -= 1
                else:  # pad the last axis
                    cur = fd.ops.pad(cur, [arg % 3, 1], fd.define_scalar(0.5))
                    width += arg % 3 + 1
        fd.add_output(fd.ops.cast(cur, dtype))
    return fd


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fusions(), st.integers(0, 2**31 - 1))
def test_random_pointwise_fusions_match_the_reference(case, seed):
    shape, dtype, kept, steps = case
    fd = _build(shape, dtype, kept, steps)
    rng = np.random.default_rng(seed)
    inputs = [(rng.standard_normal(shape) + 0.25).astype(dtype.numpy)]
    if kept:
        inputs.append((rng.standard_normal([shape[a] for a in kept]) + 0.25).astype(dtype.numpy))
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    assert check_generated_kernels(runtime, inputs)
