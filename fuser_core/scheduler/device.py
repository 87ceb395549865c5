"""The device model schedulers size their heuristics for.

`select_device()` reads the GPU's own properties through CuPy when there is one, and
falls back to a named default (H100 SXM) where there is none, so heuristics computed on
a laptop match those on the GPU. A name (`select_device("h200")`, the `device_model`
option, `FUSER_DEVICE_MODEL=h200`) picks a named default even where a GPU is present.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from fuser_core.errors import InternalError
from fuser_core.options import DEVICE_MODELS, device_model_key

NAMED_SOURCE = "named default"
GPU_SOURCE = "read from the GPU through CuPy"
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
KIB = 2**10
MIB = 2**20


@dataclass(frozen=True)
class DeviceProperties:
    """What a scheduler may ask of a GPU. Sizes are in bytes; bandwidth in GB/s (1e9 B/s)."""

    name: str
    sm_count: int
    max_threads_per_block: int
    max_threads_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    shared_memory_per_block: int  # the opt-in maximum one block may use
    shared_memory_per_sm: int
    l2_cache_bytes: int
    warp_size: int
    compute_capability: tuple[int, int]
    peak_dram_bandwidth_gbps: float  # 0.0 where it is unknown
    max_grid_dim: tuple[int, int, int] = MAX_GRID_DIM
    source: str = NAMED_SOURCE
    peak_fp32_gflops: float = 0.0  # non-tensor-core FP32 throughput, GFLOP/s; 0.0 where unknown
    max_blocks_per_sm: int = 32  # resident blocks an SM holds at most (sm_80 and sm_90: 32)

    @property
    def arch(self) -> str:
        """`sm_90` for compute capability 9.0, as NVRTC's `--gpu-architecture` spells it."""
        major, minor = self.compute_capability
        return f"sm_{major}{minor}"

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    def describe(self) -> str:
        """A few lines for dumps: where the figures came from and what they are."""
        bandwidth = f"{self.peak_dram_bandwidth_gbps:.0f} GB/s" if self.peak_dram_bandwidth_gbps else "unknown"
        flops = f"{self.peak_fp32_gflops / 1e3:.1f} TFLOP/s" if self.peak_fp32_gflops else "unknown"
        grid = " x ".join(str(d) for d in self.max_grid_dim)
        return "\n".join(
            [
                f"Device: {self.name} ({self.source})",
                f"  {self.arch}, {self.sm_count} SMs, warp size {self.warp_size}",
                f"  threads: {self.max_threads_per_block} per block, {self.max_threads_per_sm} per SM"
                f" ({self.max_warps_per_sm} warps); max grid {grid}",
                f"  registers: {self.registers_per_sm} per SM, {self.max_registers_per_thread} per thread",
                f"  shared memory: {_kib(self.shared_memory_per_block)} per block (opt-in),"
                f" {_kib(self.shared_memory_per_sm)} per SM; L2 {_mib(self.l2_cache_bytes)}",
                f"  peak DRAM bandwidth: {bandwidth}",
                f"  peak FP32 throughput: {flops}",
            ]
        )


def _kib(size: int) -> str:
    return f"{size // KIB} KiB" if size % KIB == 0 else f"{size} B"


def _mib(size: int) -> str:
    return f"{size // MIB} MiB" if size % MIB == 0 else f"{size} B"


# Hopper figures: NVIDIA's Hopper tuning guide (64K registers and at most 2048 threads
# per SM, 255 registers per thread, 228 KiB shared memory per SM of which a block may
# opt in to 227 KiB) and the H100 SXM5 / H200 datasheets (3.35 TB/s HBM3, 4.8 TB/s
# HBM3e). L2: NVIDIA publishes 50 MB for H100 and no figure for H200; an H100 SXM5
# reports l2CacheSize 52428800 (50 MiB) and an H200 62914560 (60 MiB), both read through
# CuPy 14.2 with driver 580.159 / CUDA 13. Every other field matched those readings.
# FP32 throughput (no tensor cores): 67 TFLOP/s on both datasheets (132 SMs x 128 FP32
# lanes x 2 flops per FMA x 1.98 GHz boost); CUDA reports no such figure.
H100_SXM = DeviceProperties(
    name="NVIDIA H100 SXM5",
    sm_count=132,
    max_threads_per_block=1024,
    max_threads_per_sm=2048,
    registers_per_sm=65536,
    max_registers_per_thread=255,
    shared_memory_per_block=227 * KIB,
    shared_memory_per_sm=228 * KIB,
    l2_cache_bytes=50 * MIB,
    warp_size=32,
    compute_capability=(9, 0),
    peak_dram_bandwidth_gbps=3350.0,
    peak_fp32_gflops=67000.0,
)
H200 = replace(H100_SXM, name="NVIDIA H200", l2_cache_bytes=60 * MIB, peak_dram_bandwidth_gbps=4800.0)

NAMED_DEVICES: Mapping[str, DeviceProperties] = {"h100_sxm": H100_SXM, "h200": H200}
if tuple(NAMED_DEVICES) != DEVICE_MODELS:
    raise InternalError(f"named devices {tuple(NAMED_DEVICES)} differ from options.DEVICE_MODELS {DEVICE_MODELS}")

# The named default whose figures stand in for a GPU of this name, most specific first.
_NAMED_BY_GPU_NAME = (("H200", H200), ("H100", H100_SXM))


def select_device(name: str | None = None) -> DeviceProperties:
    """The named default `name` (case-insensitive; `h100` is `h100_sxm`), else the GPU's own
    properties, else H100 SXM. An unknown name is a FuserError listing the valid ones."""
    if name is not None:
        return NAMED_DEVICES[device_model_key(name, "select_device()")]
    return read_gpu_properties() or H100_SXM


def gpu_name(device_id: int = 0) -> str | None:
    """The name of GPU `device_id` as its driver reports it; None where there is none to
    read (no CuPy, no GPU). What a cuda run ran on, whatever device model sized it."""
    props = read_gpu_properties(device_id)
    return props.name if props is not None else None


@functools.cache  # an lru_cache without a bound: one entry per device id
def read_gpu_properties(device_id: int = 0) -> DeviceProperties | None:
    """The properties of GPU `device_id` through CuPy; None without CuPy, without a GPU,
    or on any CUDA error. Read once per device id."""
    try:
        import cupy  # heavy optional dependency: only machines that run kernels have it
    except ImportError:
        return None
    runtime = cupy.cuda.runtime
    try:
        props = runtime.getDeviceProperties(device_id)
        bandwidth, source = _peak_bandwidth(props, runtime, device_id)
    except (RuntimeError, OSError):  # CUDARuntimeError (no device, no driver) is a RuntimeError
        return None
    return _from_cuda_properties(props, bandwidth, source)


def _from_cuda_properties(props: Mapping[str, Any], bandwidth_gbps: float, source: str) -> DeviceProperties:
    """Map cudaDeviceProp's fields (as CuPy's getDeviceProperties names them) onto ours."""
    return DeviceProperties(
        name=_gpu_name(props),
        sm_count=int(props["multiProcessorCount"]),
        max_threads_per_block=int(props["maxThreadsPerBlock"]),
        max_threads_per_sm=int(props["maxThreadsPerMultiProcessor"]),
        registers_per_sm=int(props["regsPerMultiprocessor"]),
        max_registers_per_thread=255,  # every architecture since Kepler (sm_35)
        shared_memory_per_block=int(props.get("sharedMemPerBlockOptin") or props["sharedMemPerBlock"]),
        shared_memory_per_sm=int(props["sharedMemPerMultiprocessor"]),
        l2_cache_bytes=int(props["l2CacheSize"]),
        warp_size=int(props["warpSize"]),
        compute_capability=(int(props["major"]), int(props["minor"])),
        peak_dram_bandwidth_gbps=bandwidth_gbps,
        max_grid_dim=_grid(props.get("maxGridSize", MAX_GRID_DIM)),
        source=source,
        peak_fp32_gflops=_peak_fp32(_gpu_name(props)),
        max_blocks_per_sm=int(props.get("maxBlocksPerMultiProcessor") or 32),
    )


def _peak_fp32(gpu_name: str) -> float:
    """FP32 throughput of the named default of the same GPU; 0.0 (unknown) for any other."""
    named = named_device_for_gpu(gpu_name)
    return named.peak_fp32_gflops if named is not None else 0.0


def _gpu_name(props: Mapping[str, Any]) -> str:
    name = props["name"]
    text = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    return text.rstrip("\x00").strip()


def _grid(dims: Any) -> tuple[int, int, int]:
    x, y, z = (int(d) for d in dims)
    return (x, y, z)


def _peak_bandwidth(props: Mapping[str, Any], runtime: Any, device_id: int) -> tuple[float, str]:
    """Peak DRAM bandwidth and the source line saying where it came from.

    CUDA 13 removed cudaDeviceProp.memoryClockRate: where the dict lacks it, the device
    attribute is asked for; failing both, the named default of the same GPU stands in."""
    clock_khz = props.get("memoryClockRate") or _attribute(runtime, "cudaDevAttrMemoryClockRate", device_id)
    bus_bits = props.get("memoryBusWidth") or _attribute(runtime, "cudaDevAttrGlobalMemoryBusWidth", device_id)
    if clock_khz and bus_bits:
        return dram_bandwidth_gbps(int(clock_khz), int(bus_bits)), GPU_SOURCE
    named = named_device_for_gpu(_gpu_name(props))
    if named is not None:
        return named.peak_dram_bandwidth_gbps, f"{GPU_SOURCE}; peak DRAM bandwidth of the named {named.name}"
    return 0.0, f"{GPU_SOURCE}; peak DRAM bandwidth unknown"


def _attribute(runtime: Any, attribute_name: str, device_id: int) -> int:
    """A device attribute, or 0 where this CuPy does not expose it or CUDA refuses it."""
    attribute = getattr(runtime, attribute_name, None)
    if attribute is None or not hasattr(runtime, "deviceGetAttribute"):
        return 0
    try:
        return int(runtime.deviceGetAttribute(attribute, device_id))
    except RuntimeError:  # CUDARuntimeError: the rest of the reading still stands
        return 0


def dram_bandwidth_gbps(memory_clock_khz: int, bus_width_bits: int) -> float:
    """Double data rate: two transfers per memory clock, `bus_width_bits / 8` bytes each."""
    return 2 * memory_clock_khz * 1000 * bus_width_bits / 8 / 1e9


def named_device_for_gpu(gpu_name: str) -> DeviceProperties | None:
    """The named default standing in for a GPU of this name (`NVIDIA H200` -> H200), if any."""
    upper = gpu_name.upper()
    return next((named for marker, named in _NAMED_BY_GPU_NAME if marker in upper), None)
