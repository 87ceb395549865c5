"""Roofline estimates: every kernel of a run, on any backend, gets bytes over bandwidth
and flops over peak throughput from the device model, and the bound that applies; the
cuda backend's launch records carry it beside the measured time."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, FusionExecutorCache, LaunchParams, LaunchRecord, use_options
from fuser_core.runtime.executor_cache import _with_estimates
from fuser_core.runtime.roofline import RooflineEstimate
from fuser_core.scheduler.device import H100_SXM, H200, select_device


def norm_and_scale(fd: FusionDefinition) -> None:
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    t1 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
    s = fd.ops.sum(t0, [1])
    fd.add_output(s)
    b = fd.ops.broadcast(t1, [True, False])  # a broadcast input: read once per element of t1
    fd.add_output(fd.ops.cast(fd.ops.exp(fd.ops.mul(t0, b)), DataType.Half))


def _report(device_model: str = "h100_sxm"):
    with FusionDefinition() as fd:
        norm_and_scale(fd)
    cache = FusionExecutorCache(fd.fusion)
    with use_options(backend="reference", device_model=device_model):
        cache.run([np.ones((64, 256), np.float32), np.ones((256,), np.float32)])
    return cache.last_report


def test_every_group_gets_its_minimal_bytes_and_flops_on_the_reference_backend():
    report = _report()
    assert report.launches == ()  # nothing is launched on the reference backend ...
    (estimate,) = report.estimates  # ... and every kernel is estimated: here one reduction kernel
    assert estimate.scheduler == "reduction"
    # t0, and t1 whose broadcast axis is read once, in; the sum and a half output out
    assert (estimate.bytes_read, estimate.bytes_written) == (64 * 256 * 4 + 256 * 4, 64 * 4 + 64 * 256 * 2)
    assert estimate.flops == 64 * 256 * 3  # the sum's elements, mul and exp; the cast costs none
    assert estimate.bound == "memory" and estimate.bandwidth_gbps == 3350.0 and estimate.peak_gflops == 67000.0
    assert estimate.seconds == pytest.approx(estimate.bytes_moved / 3350e9)


def test_the_estimate_follows_the_device_model():
    (h200,) = _report("h200").estimates
    (h100,) = _report("h100_sxm").estimates
    assert h200.seconds == pytest.approx(h100.seconds * 3350 / 4800)


def test_the_larger_of_the_two_bounds_names_the_bound_and_the_line_says_both():
    memory = RooflineEstimate(0, "pointwise", 3350, 3350, 1000, 3350.0, 67000.0)
    assert memory.bound == "memory" and memory.seconds == pytest.approx(2e-9)
    assert memory.line() == ("memory-bound: 2 ns (6700 B at 3350 GB/s: 2 ns; 1000 flop at 67000 GFLOP/s: 14.9 ps)")
    compute = RooflineEstimate(1, "expr_eval", 4096, 4096, 2 * 4096**3, 3350.0, 67000.0)
    assert compute.bound == "compute" and compute.seconds == pytest.approx(2 * 4096**3 / 67e12)
    assert compute.line().startswith("compute-bound: 2.05 ms (8192 B at 3350 GB/s: 2.45 ns; ")
    assert compute.fraction_of(4.1e-3) == pytest.approx(0.5, rel=1e-2)
    assert compute.fraction_of(None) is None


def test_a_device_model_without_peaks_has_no_estimate():
    unknown = RooflineEstimate(0, "pointwise", 100, 100, 10, 0.0, 0.0)
    assert unknown.seconds is None and unknown.bound == "unknown"
    assert unknown.line() == "no estimate: the device model has no peak bandwidth or throughput"
    memory_only = RooflineEstimate(0, "pointwise", 3350, 3350, 10, 3350.0, 0.0)
    assert memory_only.bound == "memory" and memory_only.seconds == pytest.approx(2e-9)


def test_launch_records_carry_the_estimate_beside_the_measured_time():
    estimate = RooflineEstimate(3, "pointwise", 1_000_000, 1_000_000, 0, 3350.0, 67000.0)
    launch = LaunchRecord(3, "k", LaunchParams((1, 1, 1), (128, 1, 1)), 1, 1, 2 * estimate.seconds, 32, 0, 3.35e12, "")
    (record,) = _with_estimates((launch,), (estimate,))
    assert record.estimate == estimate.line() and record.estimate_seconds == estimate.seconds
    assert record.fraction_of_estimate == pytest.approx(0.5)
    untimed = _with_estimates((launch.__class__(**{**launch.__dict__, "seconds": None}),), (estimate,))[0]
    assert untimed.fraction_of_estimate is None


def test_the_named_device_models_have_their_fp32_peak():
    assert H100_SXM.peak_fp32_gflops == 67000.0 and H200.peak_fp32_gflops == 67000.0
    assert "peak FP32 throughput: 67.0 TFLOP/s" in select_device("h100").describe()
