"""Workspaces on the GPU: a hand-written grid reduction with the parameter layout the CUDA
printer gives kernels with workspaces (tensors, scalars, then one `T*` per workspace),
launched through the cuda backend's packing, workspace buffers and launch call."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from fuser_core.codegen import kernel_ir as k
from fuser_core.ir.dtype import DataType
from fuser_core.runtime import nvrtc
from fuser_core.runtime.generated_group import GeneratedGroup
from fuser_core.runtime.kernel_cache import KernelCache, compile_kernel
from fuser_core.runtime.launch_sizes import launch_params
from fuser_core.runtime.packed_args import PackedArgs, launch

pytestmark = pytest.mark.gpu

# 40 KiB of static shared memory: requested again as dynamic shared memory at launch, the
# block would ask for 80 KiB, past what a launch gets without opting in.
TILE = 10240

GRID_SUM = textwrap.dedent(
    f"""\
    struct Tensor1 {{ float* data; long long logical_size[1]; long long alloc_stride[1]; }};
    extern "C" __global__ void grid_sum(Tensor1 T0, Tensor1 T1, double s2, float* work_0, int* sem_r0) {{
      __shared__ float tile[{TILE}];
      int block = blockIdx.x + gridDim.x * blockIdx.y;
      int blocks = gridDim.x * gridDim.y;
      float acc = 0.f;
      for (long long i = (long long)block * blockDim.x + threadIdx.x; i < T0.logical_size[0];
           i += (long long)blocks * blockDim.x) {{
        acc += T0.data[i * T0.alloc_stride[0]];
      }}
      tile[threadIdx.x] = acc;
      __syncthreads();
      if (threadIdx.x != 0) return;
      float partial = 0.f;
      for (int j = 0; j < blockDim.x; ++j) partial += tile[j];
      work_0[block] = partial;
      __threadfence();
      if (atomicAdd(sem_r0, 1) == blocks - 1) {{  // the last block to arrive
        __threadfence();
        float total = 0.f;
        for (int b = 0; b < blocks; ++b) total += ((volatile float*)work_0)[b];
        T1.data[0] = total * (float)s2;
        sem_r0[0] = 0;  // left zeroed for the next launch
      }}
    }}
    """
)


def grid_sum_kernel() -> k.Kernel:
    index = DataType.Index
    return k.Kernel(
        name="grid_sum",
        tensors=[
            k.TensorArg("T0", DataType.Float, 1, 1, False, 0),
            k.TensorArg("T1", DataType.Float, 1, 1, True, 0),
        ],
        scalars=[k.ScalarArg("s2", DataType.Double, 1)],
        body=[],
        launch=[
            k.LaunchDim("blockIdx.x", k.Const(index, 8)),
            k.LaunchDim("blockIdx.y", k.Const(index, 3)),
            k.LaunchDim("threadIdx.x", k.Const(index, 256)),
        ],
        index_type=DataType.Int,
        shared_bytes=TILE * 4,
        workspaces=[
            k.Workspace("work_0", DataType.Float, per_block=1),
            k.Workspace("sem_r0", DataType.Int32, per_block=1, zeroed=True),
        ],
    )


def test_a_grid_reduction_reuses_its_workspaces_across_launches(tmp_path):
    import cupy

    major, minor = divmod(int(cupy.cuda.Device().compute_capability), 10)
    module = compile_kernel(GRID_SUM, "grid_sum", arch=nvrtc.arch_for((major, minor)), cache=KernelCache(tmp_path))
    function = nvrtc.load_module(module)["grid_sum"]
    assert function.shared_size_bytes >= TILE * 4  # the static tile, reserved by the function

    kernel = grid_sum_kernel()
    group = GeneratedGroup.__new__(GeneratedGroup)  # only its workspace buffers are used
    group._workspaces = {}
    packed = PackedArgs(kernel)
    stream = cupy.cuda.get_current_stream()
    kept = None
    for n in (1000, 77777, 5):
        x = cupy.arange(n, dtype=cupy.float32) % 7
        y = cupy.full(1, -1.0, dtype=cupy.float32)
        sizes, strides = {"T0": (n,), "T1": (1,)}, {"T0": (1,), "T1": (1,)}
        params = launch_params(kernel, sizes, strides, {})
        assert params.grid == (8, 3, 1) and params.shared_bytes == TILE * 4  # reported for the dumps
        packed.set_tensor(0, x.data.ptr, sizes["T0"], strides["T0"])
        packed.set_tensor(1, y.data.ptr, sizes["T1"], strides["T1"])
        packed.set_scalar(0, 0.5)
        arrays = group.workspaces(kernel, params, cupy)
        for position, array in enumerate(arrays):
            packed.set_workspace(position, array.data.ptr)
        launch(function.function, params, packed, stream)
        stream.synchronize()
        assert float(y.get()[0]) == pytest.approx(float((np.arange(n) % 7).sum()) * 0.5, rel=1e-5)
        assert int(arrays[1].get()[0]) == 0  # the kernel left the semaphore zeroed
        ptrs = [a.data.ptr for a in arrays]
        assert kept is None or ptrs == kept  # the same buffers every launch
        kept = ptrs
