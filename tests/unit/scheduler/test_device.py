"""The device model: the named defaults' figures, choosing one by name, falling back to
H100 SXM without a GPU, and reading a GPU through a stand-in `cupy` module."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any

import pytest

from fuser_core import FuserError
from fuser_core.options import DEVICE_MODELS
from fuser_core.scheduler.device import (
    GPU_SOURCE,
    H100_SXM,
    H200,
    NAMED_DEVICES,
    NAMED_SOURCE,
    DeviceProperties,
    dram_bandwidth_gbps,
    gpu_name,
    read_gpu_properties,
    select_device,
)

MIB = 2**20

# cudaDeviceProp as CuPy's getDeviceProperties returns it, with values chosen so that
# every field lands somewhere different (an Ada-like card, not a real one).
GPU_PROPS: dict[str, Any] = {
    "name": b"NVIDIA Test GPU",
    "multiProcessorCount": 142,
    "maxThreadsPerBlock": 1024,
    "maxThreadsPerMultiProcessor": 1536,
    "regsPerMultiprocessor": 65536,
    "sharedMemPerBlock": 49152,
    "sharedMemPerBlockOptin": 101376,
    "sharedMemPerMultiprocessor": 102400,
    "l2CacheSize": 96 * MIB,
    "warpSize": 32,
    "major": 8,
    "minor": 9,
    "maxGridSize": (2147483647, 65535, 65535),
    "memoryClockRate": 9001000,
    "memoryBusWidth": 384,
}


@pytest.fixture(autouse=True)
def fresh_reading():
    """read_gpu_properties caches per device id: each test reads afresh."""
    read_gpu_properties.cache_clear()
    yield
    read_gpu_properties.cache_clear()


class FakeCudaError(RuntimeError):
    """CuPy's CUDARuntimeError is a RuntimeError."""


def install_cupy(monkeypatch, get_properties: Callable[[int], dict[str, Any]], **attributes: int) -> list[int]:
    """Put a stand-in `cupy` in sys.modules; returns the device ids it was asked about."""
    asked: list[int] = []

    def get_device_properties(device_id: int) -> dict[str, Any]:
        asked.append(device_id)
        return get_properties(device_id)

    runtime = types.SimpleNamespace(getDeviceProperties=get_device_properties, **attributes)
    if attributes:
        values = {36: 3201000, 37: 6016}  # cudaDevAttrMemoryClockRate, cudaDevAttrGlobalMemoryBusWidth
        runtime.deviceGetAttribute = lambda attribute, device_id: values[attribute]
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=runtime)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return asked


def without(*keys: str, **changes: Any) -> dict[str, Any]:
    return {k: v for k, v in GPU_PROPS.items() if k not in keys} | changes


# -- named defaults -------------------------------------------------------------------------------


def test_h100_sxm_has_hoppers_published_figures():
    assert H100_SXM.sm_count == 132
    assert (H100_SXM.max_threads_per_block, H100_SXM.max_threads_per_sm) == (1024, 2048)
    assert (H100_SXM.registers_per_sm, H100_SXM.max_registers_per_thread) == (65536, 255)
    assert (H100_SXM.shared_memory_per_block, H100_SXM.shared_memory_per_sm) == (232448, 233472)
    assert H100_SXM.l2_cache_bytes == 50 * MIB
    assert H100_SXM.warp_size == 32
    assert H100_SXM.compute_capability == (9, 0)
    assert H100_SXM.peak_dram_bandwidth_gbps == 3350.0
    assert H100_SXM.max_grid_dim == (2**31 - 1, 65535, 65535)
    assert (H100_SXM.arch, H100_SXM.max_warps_per_sm, H100_SXM.source) == ("sm_90", 64, NAMED_SOURCE)


def test_h200_is_the_same_hopper_with_hbm3e_bandwidth_and_the_l2_it_reports():
    assert H200.name == "NVIDIA H200"
    assert (H200.peak_dram_bandwidth_gbps, H200.l2_cache_bytes) == (4800.0, 60 * MIB)
    different = {f.name for f in fields(DeviceProperties) if getattr(H200, f.name) != getattr(H100_SXM, f.name)}
    assert different == {"name", "peak_dram_bandwidth_gbps", "l2_cache_bytes"}


def test_the_registry_holds_exactly_the_models_options_accept():
    assert tuple(NAMED_DEVICES) == DEVICE_MODELS == ("h100_sxm", "h200")
    assert NAMED_DEVICES["h100_sxm"] is H100_SXM and NAMED_DEVICES["h200"] is H200


def test_describe_names_the_device_its_source_and_its_figures():
    lines = H100_SXM.describe().splitlines()
    assert lines[0] == "Device: NVIDIA H100 SXM5 (named default)"
    text = "\n".join(lines)
    for part in ("sm_90", "132 SMs", "64 warps", "227 KiB per block", "228 KiB per SM", "L2 50 MiB", "3350 GB/s"):
        assert part in text, part
    assert "2147483647 x 65535 x 65535" in text


# -- choosing a device ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [("h100_sxm", H100_SXM), ("H100_SXM", H100_SXM), ("h100", H100_SXM), ("H100", H100_SXM), ("H200", H200)],
)
def test_a_name_picks_a_named_default_in_any_case(name, expected):
    assert select_device(name) is expected


def test_a_name_wins_over_the_gpu(monkeypatch):
    asked = install_cupy(monkeypatch, lambda device_id: GPU_PROPS)
    assert select_device("h200") is H200
    assert asked == []


def test_an_unknown_name_is_an_error_listing_the_valid_ones():
    with pytest.raises(FuserError) as err:
        select_device("b200")
    message = str(err.value)
    assert "unknown device model 'b200'" in message
    assert "h100_sxm" in message and "h200" in message


def test_without_cupy_nothing_is_read_and_h100_sxm_is_chosen(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    assert read_gpu_properties() is None
    assert select_device() is H100_SXM


def test_the_gpu_name_is_the_gpus_whatever_model_sizes_the_heuristics(monkeypatch):
    install_cupy(monkeypatch, lambda device_id: GPU_PROPS)
    assert select_device("h200") is H200
    assert gpu_name() == "NVIDIA Test GPU"


def test_without_a_gpu_there_is_no_gpu_name(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    assert gpu_name() is None


def test_a_cuda_error_reads_as_no_gpu(monkeypatch):
    def no_device(device_id: int) -> dict[str, Any]:
        raise FakeCudaError("cudaErrorNoDevice: no CUDA-capable device is detected")

    install_cupy(monkeypatch, no_device)
    assert read_gpu_properties() is None
    assert select_device() is H100_SXM


# -- reading a GPU --------------------------------------------------------------------------------


def test_the_gpus_properties_map_onto_the_device_model(monkeypatch):
    install_cupy(monkeypatch, lambda device_id: GPU_PROPS)
    device = select_device()
    assert device.peak_dram_bandwidth_gbps == pytest.approx(864.096)  # 2 x 9001 MHz x 384 bits / 8
    assert replace(device, peak_dram_bandwidth_gbps=0.0) == DeviceProperties(
        name="NVIDIA Test GPU",
        sm_count=142,
        max_threads_per_block=1024,
        max_threads_per_sm=1536,
        registers_per_sm=65536,
        max_registers_per_thread=255,
        shared_memory_per_block=101376,
        shared_memory_per_sm=102400,
        l2_cache_bytes=96 * MIB,
        warp_size=32,
        compute_capability=(8, 9),
        peak_dram_bandwidth_gbps=0.0,
        max_grid_dim=(2147483647, 65535, 65535),
        source=GPU_SOURCE,
    )
    assert (device.arch, device.max_warps_per_sm) == ("sm_89", 48)


def test_dram_bandwidth_is_two_transfers_per_memory_clock_over_the_bus():
    assert dram_bandwidth_gbps(2619000, 5120) == pytest.approx(3352.32)  # what an H100 SXM5 reports
    assert dram_bandwidth_gbps(3201000, 6016) == pytest.approx(4814.304)  # what an H200 reports


def test_without_memory_clock_in_the_properties_the_device_attribute_is_asked(monkeypatch):
    # CUDA 13 removed cudaDeviceProp.memoryClockRate; cudaDeviceGetAttribute still has it
    props = without("memoryClockRate", "memoryBusWidth")
    install_cupy(
        monkeypatch, lambda device_id: props, cudaDevAttrMemoryClockRate=36, cudaDevAttrGlobalMemoryBusWidth=37
    )
    device = read_gpu_properties()
    assert device is not None
    assert device.peak_dram_bandwidth_gbps == pytest.approx(4814.304)
    assert device.source == GPU_SOURCE


@pytest.mark.parametrize(
    ("gpu_name", "bandwidth"),
    [(b"NVIDIA H200", 4800.0), (b"NVIDIA H100 80GB HBM3", 3350.0), ("NVIDIA H200 NVL", 4800.0)],
)
def test_without_a_memory_clock_the_named_default_of_the_same_gpu_gives_the_bandwidth(monkeypatch, gpu_name, bandwidth):
    install_cupy(monkeypatch, lambda device_id: without("memoryClockRate", name=gpu_name))
    device = read_gpu_properties()
    assert device is not None
    assert device.peak_dram_bandwidth_gbps == bandwidth
    assert device.source.startswith(GPU_SOURCE) and "named" in device.source
    assert device.sm_count == 142  # the rest is still the GPU's own


def test_an_unknown_gpu_without_a_memory_clock_has_an_unknown_bandwidth(monkeypatch):
    install_cupy(monkeypatch, lambda device_id: without("memoryClockRate"))
    device = read_gpu_properties()
    assert device is not None
    assert device.peak_dram_bandwidth_gbps == 0.0
    assert "bandwidth unknown" in device.source
    assert "peak DRAM bandwidth: unknown" in device.describe()


def test_the_reading_is_cached_per_device_id(monkeypatch):
    asked = install_cupy(monkeypatch, lambda device_id: without(multiProcessorCount=100 + device_id))
    first = read_gpu_properties()
    assert read_gpu_properties() is first
    assert select_device() is first
    other = read_gpu_properties(1)
    assert other is not None and other.sm_count == 101
    assert asked == [0, 1]


def test_without_an_opt_in_figure_the_default_per_block_limit_is_used(monkeypatch):
    install_cupy(monkeypatch, lambda device_id: without("sharedMemPerBlockOptin"))
    device = read_gpu_properties()
    assert device is not None and device.shared_memory_per_block == 49152


def test_a_refused_memory_clock_attribute_falls_back_to_the_named_bandwidth(monkeypatch):
    props = without("memoryClockRate", name=b"NVIDIA H200")
    install_cupy(monkeypatch, lambda device_id: props, cudaDevAttrMemoryClockRate=36)

    def refuse(attribute: int, device_id: int) -> int:
        raise FakeCudaError("cudaErrorInvalidValue")

    sys.modules["cupy"].cuda.runtime.deviceGetAttribute = refuse  # type: ignore[union-attr]
    device = read_gpu_properties()
    assert device is not None and device.peak_dram_bandwidth_gbps == 4800.0
