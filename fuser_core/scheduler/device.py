"""The device model schedulers size their heuristics for: read from the GPU through
CuPy when there is one, else a named default, so heuristics on a laptop match the GPU."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from fuser_core.errors import FuserError
from fuser_core.options import DEVICE_MODELS


@dataclass(frozen=True)
class DeviceProperties:
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
    peak_dram_bandwidth_gbps: float
    source: str = "named default"

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def describe(self) -> str:
        return (
            f"{self.name} ({self.source}): {self.arch}, {self.sm_count} SMs, "
            f"{self.peak_dram_bandwidth_gbps:.0f} GB/s, {self.shared_memory_per_block // 1024} KiB shared memory per block"
        )


H100_SXM = DeviceProperties(
    "NVIDIA H100 SXM", 132, 1024, 2048, 65536, 255, 232448, 233472, 50 * 2**20, 32, (9, 0), 3350.0
)
H200 = replace(H100_SXM, name="NVIDIA H200", peak_dram_bandwidth_gbps=4800.0)
NAMED_DEVICES = {"h100_sxm": H100_SXM, "h200": H200}
assert tuple(NAMED_DEVICES) == DEVICE_MODELS


@functools.lru_cache(maxsize=8)
def read_gpu_properties(device_id: int = 0) -> DeviceProperties | None:
    try:
        import cupy  # heavy, optional: only where a GPU backend may run
    except ImportError:
        return None
    try:
        props = cupy.cuda.runtime.getDeviceProperties(device_id)
    except Exception:  # no device, no driver: there is no GPU to read
        return None
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    known = H200 if "H200" in name else H100_SXM
    return DeviceProperties(
        name,
        props["multiProcessorCount"],
        props["maxThreadsPerBlock"],
        props["maxThreadsPerMultiProcessor"],
        props["regsPerMultiprocessor"],
        255,
        props.get("sharedMemPerBlockOptin", known.shared_memory_per_block),
        props["sharedMemPerMultiprocessor"],
        props["l2CacheSize"],
        props["warpSize"],
        (props["major"], props["minor"]),
        known.peak_dram_bandwidth_gbps,
        "read from the GPU through CuPy (bandwidth from the named model)",
    )


def select_device(name: str | None = None) -> DeviceProperties:
    if name is not None:
        key = name.lower()
        key = "h100_sxm" if key == "h100" else key
        if key not in NAMED_DEVICES:
            raise FuserError(f"unknown device model {name!r}; valid: {', '.join(NAMED_DEVICES)}")
        return NAMED_DEVICES[key]
    return read_gpu_properties() or H100_SXM
