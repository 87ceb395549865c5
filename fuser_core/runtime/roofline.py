"""Roofline estimates: how long each kernel of a run should take on the device model.

A kernel moves at least its inputs once and its outputs once (broadcast axes, expanded
or not, are read once: the minimal bytes), and does its arithmetic: one flop per
element of each arithmetic op, one per element reduced, three per Welford step, two
per multiply-add of a matmul; casts and data movement (set, broadcast, reshape, pad,
slice, cat) cost none. Its estimate is the larger of bytes over peak DRAM bandwidth and
flops over peak FP32 throughput, and that names the bound. Estimates need only the
sizes, so every backend has them; the cuda backend's measured time is then compared.
"""

from __future__ import annotations

from dataclasses import dataclass

from fuser_core.ir.base import Expr
from fuser_core.ir.elementwise import ElementwiseOp
from fuser_core.ir.tensor_exprs import MatmulOp, ReductionOp, WelfordOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.device import DeviceProperties
from fuser_core.scheduler.group_view import RuntimeInfo
from fuser_core.segmenter.segmented_fusion import SegmentedFusion, SegmentedGroup

WELFORD_FLOPS = 3  # per element: a count, a mean and an M2 update


@dataclass(frozen=True)
class RooflineEstimate:
    """One kernel's (group's) roofline estimate on a device model."""

    group_id: int
    scheduler: str
    bytes_read: int
    bytes_written: int
    flops: int
    bandwidth_gbps: float  # the device model's peak DRAM bandwidth; 0.0: unknown
    peak_gflops: float  # its peak FP32 throughput; 0.0: unknown

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def memory_seconds(self) -> float | None:
        return self.bytes_moved / (self.bandwidth_gbps * 1e9) if self.bandwidth_gbps else None

    @property
    def compute_seconds(self) -> float | None:
        return self.flops / (self.peak_gflops * 1e9) if self.peak_gflops else None

    @property
    def seconds(self) -> float | None:
        """The roofline time: the larger of the two bounds that are known."""
        known = [s for s in (self.memory_seconds, self.compute_seconds) if s is not None]
        return max(known) if known else None

    @property
    def bound(self) -> str:
        """`memory`, `compute`, or `unknown` where the device model has neither peak."""
        memory, compute = self.memory_seconds, self.compute_seconds
        if memory is None and compute is None:
            return "unknown"
        return "compute" if (compute or 0.0) > (memory or 0.0) else "memory"

    def fraction_of(self, measured_seconds: float | None) -> float | None:
        """The estimate over a measured time: 1.0 runs at the roofline, 0.5 takes twice as long."""
        seconds = self.seconds
        if not measured_seconds or seconds is None:
            return None
        return seconds / measured_seconds

    def time_text(self) -> str:
        """The estimated time with three significant digits (`2.52 ns`), or `unknown`."""
        return _us(self.seconds)

    def line(self) -> str:
        """`memory-bound: 1.22 ns (4096 B at 3350 GB/s: 1.22 ns; 1024 flop at 67000 GFLOP/s: 15.3 ps)`"""
        seconds = self.seconds
        if seconds is None:
            return "no estimate: the device model has no peak bandwidth or throughput"
        memory = _us(self.memory_seconds)
        compute = _us(self.compute_seconds)
        return (
            f"{self.bound}-bound: {_us(seconds)} ({self.bytes_moved} B at {self.bandwidth_gbps:.0f} GB/s:"
            f" {memory}; {self.flops} flop at {self.peak_gflops:.0f} GFLOP/s: {compute})"
        )


def _us(seconds: float | None) -> str:
    """A time in the unit that keeps three significant digits: `2.52 ns`, `40.1 us`, `1.2 ms`."""
    if seconds is None:
        return "unknown"
    for below, unit in ((1e-9, "ps"), (1e-6, "ns"), (1e-3, "us"), (1.0, "ms")):
        if seconds < below:
            return f"{seconds / below * 1e3:.3g} {unit}"
    return f"{seconds:.3g} s"


def estimate_groups(segmented: SegmentedFusion, info: RuntimeInfo) -> tuple[RooflineEstimate, ...]:
    """A roofline estimate of every group of a segmented fusion, at these sizes."""
    return tuple(estimate_group(group, info) for group in segmented.groups)


def estimate_group(group: SegmentedGroup, info: RuntimeInfo) -> RooflineEstimate:
    device: DeviceProperties = info.device
    return RooflineEstimate(
        group.id,
        group.scheduler.value,
        sum(minimal_bytes(tv, info) for tv in group.inputs),
        sum(minimal_bytes(tv, info) for tv in group.outputs),
        sum(expr_flops(e, info) for e in group.exprs),
        device.peak_dram_bandwidth_gbps,
        device.peak_fp32_gflops,
    )


def minimal_bytes(tv: TensorView, info: RuntimeInfo) -> int:
    """The bytes of a tensor's distinct elements: a broadcast axis (expanded or not) is one."""
    count = 1
    for dim in tv.logical_no_reductions():
        count *= 1 if dim.is_broadcast else info.extent(dim)
    return count * tv.dtype.itemsize


def expr_flops(expr: Expr, info: RuntimeInfo) -> int:
    out = expr.outputs[0] if expr.outputs else None
    if not isinstance(out, TensorView):
        return 0
    if isinstance(expr, ElementwiseOp):
        return 0 if expr.rule.name == "cast" else info.numel(out)
    if isinstance(expr, (ReductionOp, WelfordOp)):
        source = expr.inputs[0]
        reduced = info.numel(source) if isinstance(source, TensorView) else 0
        return reduced * (WELFORD_FLOPS if isinstance(expr, WelfordOp) else 1)
    if isinstance(expr, MatmulOp):
        first = expr.inputs[0]
        depth = info.extent(first.logical_no_reductions()[-1]) if isinstance(first, TensorView) else 1
        return 2 * info.numel(out) * depth
    return 0
