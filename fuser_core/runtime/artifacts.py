"""What code generation and execution leave behind for dumps, reports and the workbench.

A runtime's `kernels` holds one KernelArtifact per group that has a generated kernel
(expr_eval and no_op groups have none): its name, kernel IR and CUDA text, and the launch
configuration the schedule implies for the run's sizes. A RunReport's `launches` holds one
LaunchRecord per kernel launched by that execution, with what the device said about it;
the reference backend launches nothing, so its reports have none.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LaunchParams:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0  # static and dynamic, for the dumps
    dynamic_shared_bytes: int = 0  # what the launch asks for (the kernel's extern __shared__ arrays)

    def line(self) -> str:
        g, b = self.grid, self.block
        return (
            f"Launch Parameters: BlockDim.x = {b[0]}, BlockDim.y = {b[1]}, BlockDim.z = {b[2]}, "
            f"GridDim.x = {g[0]}, GridDim.y = {g[1]}, GridDim.z = {g[2]}, Smem Size = {self.shared_bytes}"
        )


@dataclass(frozen=True)
class KernelArtifact:
    group_id: int
    name: str  # nvfuser_<scheduler>_f<F>_c<C>_r<R>_g<G>
    scheduler: str
    kernel_ir: str  # the kernel_ir dump of this kernel
    cuda: str  # the kernel's own CUDA text (cuda_kernel dump)
    launch: LaunchParams  # for the sizes the runtime was built with
    index_type: str  # "int" (32-bit) or "int64_t"


@dataclass(frozen=True)
class LaunchRecord:
    """One kernel launch of one execution, measured on the device."""

    group_id: int
    kernel: str
    launch: LaunchParams
    bytes_read: int  # minimal bytes: each input read once
    bytes_written: int  # each output written once
    seconds: float | None  # CUDA-event time; None when the run was not timed
    registers: int | None
    spills: int | None  # local memory bytes per thread
    peak_bytes_per_second: float  # the device model's DRAM bandwidth
    estimate: str  # "memory-bound" or "compute-bound", with the estimated time
    estimate_seconds: float | None = None  # the roofline estimate (runtime.roofline), where known

    @property
    def bytes_moved(self) -> int:
        return self.bytes_read + self.bytes_written

    @property
    def gbps(self) -> float | None:
        return None if not self.seconds else self.bytes_moved / self.seconds / 1e9

    @property
    def fraction_of_peak(self) -> float | None:
        return None if not self.seconds else self.bytes_moved / self.seconds / self.peak_bytes_per_second

    @property
    def fraction_of_estimate(self) -> float | None:
        """The roofline estimate over the measured time: 1.0 runs at the roofline."""
        if not self.seconds or self.estimate_seconds is None:
            return None
        return self.estimate_seconds / self.seconds
