"""Random reduction and normalization fusions (hypothesis), every generated kernel run on
the kernel-IR interpreter against the reference: rank 1 to 3, any reduced axes, keepdim,
float32/half/bfloat16, sum/max/min/var_mean, with and without the result broadcast back
over its rows. The GPU runs the same fusions at larger sizes (tests/gpu)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fuser_core import DataType, use_options  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import check_generated_kernels, reduction_fusion  # noqa: E402


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(
    shape=st.lists(st.sampled_from([1, 2, 3, 5, 17, 40]), min_size=1, max_size=3),
    data=st.data(),
    op=st.sampled_from(["sum", "max", "min", "var_mean"]),
    keepdim=st.booleans(),
    dtype=st.sampled_from([DataType.Float, DataType.Half, DataType.BFloat16]),
    normalize=st.booleans(),
)
def test_random_reductions_match_the_reference_on_the_interpreter(shape, data, op, keepdim, dtype, normalize):
    axes = sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1)))
    fd = reduction_fusion(shape, axes, op, keepdim, dtype, normalize)
    rng = np.random.default_rng(len(shape) * 100 + sum(shape))
    inputs = [(rng.standard_normal(shape) + 0.25).astype(dtype.numpy)]
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    assert check_generated_kernels(runtime, inputs)
