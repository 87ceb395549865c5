"""Loading NVRTC's output on the GPU through CuPy, without recompiling, and launching it."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fuser_core.errors import FuserError
from fuser_core.runtime import nvrtc, nvrtc_library
from fuser_core.runtime.kernel_cache import KernelCache, compile_kernel

pytestmark = pytest.mark.gpu

AFFINE = textwrap.dedent(
    """\
    extern "C" __global__ void affine(const float* x, float* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = 2.0f * x[i] + 1.0f;
    }
    """
)

TEMPLATED = textwrap.dedent(
    """\
    #include <cuda_fp16.h>
    namespace CudaCodeGen {
    template <int N>
    __global__ void scale_half(const __half* x, __half* y, int n) {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = __float2half(__half2float(x[i]) * N);
    }
    }  // namespace CudaCodeGen
    """
)


def device_arch() -> str:
    import cupy

    major, minor = divmod(int(cupy.cuda.Device().compute_capability), 10)
    return nvrtc.arch_for((major, minor))


def launch_affine(kernel: nvrtc.LoadedKernel, n: int) -> None:
    import cupy

    x = cupy.arange(n, dtype=cupy.float32)
    y = cupy.zeros(n, dtype=cupy.float32)
    threads = 128
    kernel(((n + threads - 1) // threads,), (threads,), (x, y, np.int32(n)))
    cupy.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cupy.asnumpy(y), 2 * np.arange(n, dtype=np.float32) + 1)


def test_a_compiled_cubin_loads_launches_and_reports_its_attributes(tmp_path):
    module = compile_kernel(AFFINE, "affine", arch=device_arch(), cache=KernelCache(tmp_path))
    assert module.cubin is not None
    loaded = nvrtc.load_module(module)
    kernel = loaded["affine"]
    assert kernel.loaded_from == "cubin" and kernel.symbol == "affine"
    for value in (
        kernel.num_regs,
        kernel.local_size_bytes,
        kernel.shared_size_bytes,
        kernel.const_size_bytes,
        kernel.max_threads_per_block,
    ):
        assert isinstance(value, int) and value >= 0
    assert kernel.num_regs > 0 and kernel.max_threads_per_block >= 128
    assert kernel.local_size_bytes == 0  # nothing to spill in this kernel
    launch_affine(kernel, 1000)  # odd size: the predicate guards the last block


def test_a_disk_cache_hit_loads_without_nvrtc(tmp_path, monkeypatch):
    arch = device_arch()
    compile_kernel(AFFINE, "affine", arch=arch, cache=KernelCache(tmp_path))

    def no_nvrtc(*args, **kwargs):
        raise AssertionError("NVRTC was called on a cache hit")

    monkeypatch.setattr(nvrtc_library.NvrtcLibrary, "compile", no_nvrtc)
    module = compile_kernel(AFFINE, "affine", arch=arch, cache=KernelCache(tmp_path))
    assert module.cache == "disk"
    launch_affine(nvrtc.load_module(module)["affine"], 4097)


def test_ptx_only_modules_load_through_the_driver_jit(tmp_path):
    major, minor = divmod(int(__import__("cupy").cuda.Device().compute_capability), 10)
    module = compile_kernel(AFFINE, "affine", arch=f"compute_{major}{minor}", cache=KernelCache(tmp_path))
    assert module.cubin is None
    kernel = nvrtc.load_module(module)["affine"]
    assert kernel.loaded_from == "ptx"
    launch_affine(kernel, 257)


def test_a_template_kernel_with_half_loads_by_its_mangled_name(tmp_path):
    import cupy

    names = ["CudaCodeGen::scale_half<3>"]
    module = compile_kernel(TEMPLATED, names, arch=device_arch(), cache=KernelCache(tmp_path))
    loaded = nvrtc.load_module(module)
    kernel = loaded[names[0]]
    assert kernel.symbol.startswith("_ZN11CudaCodeGen10scale_half")
    n = 300
    x = cupy.arange(n, dtype=cupy.float16)
    y = cupy.zeros(n, dtype=cupy.float16)
    kernel((3,), (128,), (x, y, np.int32(n)))
    np.testing.assert_array_equal(cupy.asnumpy(y), (np.arange(n, dtype=np.float16) * 3).astype(np.float16))
    with pytest.raises(FuserError, match="no kernel"):
        loaded["scale_half<4>"]
