"""Property: over random shapes (empty ones included) and scalars, the runtime that runs
is always the one a fresh concretization picks (no stale hits: its concretized IR is
the one a fresh definition concretizes to), and results equal NumPy."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuser_core import DataType, FusionDefinition
from fuser_core.dynamic.concretization_info import compute_info
from fuser_core.dynamic.concretize import concretize
from fuser_core.dynamic.initial_info import analyze_fusion
from fuser_core.ir.printer import print_kernel
from fuser_core.runtime.arguments import bind_inputs


def build() -> FusionDefinition:
    """reshape to [S0, -1], pad the last axis by (P0, P1), relu, sum over axis 0."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        s0 = fd.define_scalar(None, dtype=DataType.Int)
        p0 = fd.define_scalar(None, dtype=DataType.Int)
        p1 = fd.define_scalar(None, dtype=DataType.Int)
        t1 = fd.ops.reshape(t0, [s0, -1])
        t2 = fd.ops.pad(t1, [p0, p1], 0.5)
        t3 = fd.ops.relu(t2)
        fd.add_output(t3)
        fd.add_output(fd.ops.sum(t3, dims=[0]))
    return fd


FD = build()  # one cache across all examples, so hits and misses both happen


def numpy_pad(x: np.ndarray, left: int, right: int, value: float) -> np.ndarray:
    x = x[:, max(-left, 0) : x.shape[1] - max(-right, 0)]
    return np.pad(x, [(0, 0), (max(left, 0), max(right, 0))], constant_values=value)


@st.composite
def cases(draw):
    a = draw(st.integers(0, 6))
    b = draw(st.integers(1, 6))
    n = a * b
    s0 = draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0] if n else [1, 2, 3]))
    width = n // s0
    p0 = draw(st.integers(-width, 3))
    p1 = draw(st.integers(-(width + min(p0, 0)), 3))
    extents_on = draw(st.booleans())
    return a, b, s0, p0, p1, extents_on


@settings(max_examples=600, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_runtime_matches_a_fresh_concretization_and_numpy(case):
    a, b, s0, p0, p1, extents_on = case
    x = np.random.default_rng(a * 7 + b).standard_normal((a, b), dtype=np.float32)
    inputs = [x, s0, p0, p1]
    disable = [] if extents_on else ["concretize_resize_extents"]

    out, total = FD.execute(inputs, _disable_options=disable)

    fresh_fd = build()  # same names: the concretized IR must print identically
    _, ev = bind_inputs(fresh_fd.fusion, inputs)
    fresh = compute_info(analyze_fusion(fresh_fd.fusion), ev, extents_on)
    ran = FD.executor_cache.last_runtime
    assert ran.info == fresh
    assert print_kernel(ran.fusion) == print_kernel(concretize(fresh_fd.fusion, fresh))
    expected = np.maximum(numpy_pad(x.reshape(s0, -1), p0, p1, 0.5), 0)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_allclose(total, expected.sum(axis=0), rtol=1e-5, atol=1e-5)


def test_the_property_run_saw_hits_and_misses():
    if FD.executor_cache is None or len(FD.executor_cache.events) < 500:  # run alone: run the property first
        test_runtime_matches_a_fresh_concretization_and_numpy()
    events = FD.executor_cache.events
    assert len(events) >= 500
    assert any(e.hit for e in events) and any(not e.hit for e in events)
    assert any(e.hit and e.level == "concretization" for e in events)
