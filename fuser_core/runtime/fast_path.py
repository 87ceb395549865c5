"""The cache-hit fast path of the cuda backend: a call whose inputs have the sizes,
strides and dtypes of an earlier call replays what that call worked out.

Everything that depends only on those (output shapes and strides, launch dimensions,
the packed size, stride and divisor fields of every kernel argument) is computed once,
when the plan is made; a call reads each input's data pointer, allocates the outputs
with the caller's framework (torch tensors for torch inputs, CuPy arrays otherwise, so
no DLPack exchange), writes the pointers into the packed arguments and launches. The only
per-call decision is the vector alignment of the pointers, which picks the vectorized
kernel or its scalar fallback.

A CUDA error of a replay (a refused launch, or a fault of an earlier kernel that CUDA
reports at a launch or an allocation) is a CudaFaultError naming the kernels the replay
had launched; a replay that succeeds leaves them in the executable's LaunchLog, for a
fault that a later synchronization reports. Neither costs a replay more than an
assignment or two: the replay never synchronizes.

A kernel's workspaces (grid reduction work buffers and semaphores) are allocated when
the plan is made, sized from its launch, and their pointers written into the packed
arguments then (for the fallback, when it is first packed); the plan keeps the buffers
alive, and a replay never writes those pointers. Semaphores start zeroed and every
launch leaves them zeroed, so one buffer serves every replay.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuser_core.ir.dtype import DataType
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.artifacts import LaunchParams
from fuser_core.runtime.launch_errors import FaultKernel, LaunchLog, is_cuda_error
from fuser_core.scheduler.device import DeviceProperties

_TORCH_DTYPES = {
    DataType.Float: "float32",
    DataType.Double: "float64",
    DataType.Half: "float16",
    DataType.BFloat16: "bfloat16",
    DataType.Bool: "bool",
    DataType.Int: "int64",
    DataType.Int32: "int32",
}


def input_key(inputs: Sequence[Any]) -> tuple[Any, ...] | None:
    """Sizes, strides and dtypes of tensor inputs and values of scalars; None for
    inputs the fast path does not take (host arrays, odd types)."""
    key: list[Any] = []
    for x in inputs:
        module = type(x).__module__
        if module.startswith("torch"):
            if not x.is_cuda:
                return None
            # The device too: a plan's pointers and launch belong to one GPU.
            key.append((x.dtype, x.shape, x.stride(), x.get_device()))
        elif module.startswith("cupy"):
            key.append((x.dtype, x.shape, x.strides))
        elif isinstance(x, bool | int | float):
            key.append((type(x), x))
        else:
            return None
    return tuple(key)


@dataclass
class PlannedOutput:
    name: int  # tensor name
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # elements
    dtype: DataType


@dataclass
class PlannedLaunch:
    function: Any  # vectorized kernel (or the only one)
    fallback: Any  # (function, packed) of the scalar fallback, compiled on first need; None if not vectorized
    packed: Any
    params: LaunchParams
    sources: list[tuple[str, int]]  # per tensor parameter: ("input", position) or ("tensor", name)
    checks: list[tuple[int, int]]  # (parameter position, byte alignment) for vectorized tensors
    outputs: list[PlannedOutput]
    # The device buffers the packed workspace pointers point into (by workspace), kept
    # alive here; the fallback adds its own when it is first packed.
    workspaces: dict[Any, Any] = field(default_factory=dict)
    kernel: FaultKernel | None = None  # how a CUDA error names this launch


class FastPlan:
    log: LaunchLog | None = None  # the executable's: the kernels launched and not synchronized

    def __init__(
        self,
        launches: list[PlannedLaunch],
        results: list[int],
        torch_out: bool,
        device: DeviceProperties,
        log: LaunchLog | None = None,
        inputs: Sequence[Any] = (),
        launch_kernel: Any = None,
    ) -> None:
        """`inputs`: the call's arguments the plan is made for (each tensor's framework
        says how a replay reads its pointer); `launch_kernel`: CuPy's cuLaunchKernel
        unless given (tests)."""
        self.launches = launches
        self.log = log
        self._kernels = tuple(launch.kernel for launch in launches if launch.kernel is not None and _launched(launch))
        self.torch_out = torch_out
        self.device = device
        self.fell_back: list[int] = []  # launches of the last call that took the scalar fallback
        if launch_kernel is None:
            from cupy.cuda import driver  # the plan exists only where CuPy runs kernels

            launch_kernel = driver.launchKernel
        self._launch_kernel = launch_kernel
        if torch_out:
            torch = sys.modules["torch"]
            self._torch_empty = torch.empty_strided
            self.torch_device = torch.device("cuda", torch.cuda.current_device())
            self._torch_dtypes = {d: getattr(torch, name) for d, name in _TORCH_DTYPES.items()}
        # The replay works on one list of pointers: the inputs' by position, then each
        # output's as it is allocated; each launch reads its tensor arguments by slot.
        self._torch_inputs = [p for p, x in enumerate(inputs) if hasattr(x, "data_ptr")]
        self._cupy_inputs = [p for p, x in enumerate(inputs) if not hasattr(x, "data_ptr") and hasattr(x, "data")]
        # Outputs the caller can take as they are: torch tensors on the device of the first
        # torch input (where the full path puts them), or CuPy arrays for CuPy inputs; with
        # no tensor input at all (iota) the frontend chooses the outputs' framework.
        if torch_out:
            self.final = inputs[self._torch_inputs[0]].get_device() == self.torch_device.index
        else:
            self.final = bool(self._cupy_inputs)
        slot_of = {("input", p): p for p in range(len(inputs))}
        self._outputs: list[list[tuple[int, Any]]] = []  # per launch: (slot, allocator) of each output
        for launch in launches:
            allocated = []
            for out in launch.outputs:
                slot_of[("tensor", out.name)] = len(slot_of)
                allocated.append((slot_of[("tensor", out.name)], self._allocator(out)))
            self._outputs.append(allocated)
        self._slots = len(slot_of)
        self._sources = [[slot_of[source] for source in launch.sources] for launch in launches]
        self._results = [slot_of[("tensor", name)] for name in results]

    def run(self, inputs: Sequence[Any], stream_ptr: int) -> list[Any]:
        launch_kernel = self._launch_kernel
        if self.fell_back:
            self.fell_back = []
        pointers: list[Any] = [0] * self._slots
        arrays: list[Any] = [None] * self._slots
        for position in self._torch_inputs:
            pointers[position] = inputs[position].data_ptr()
        for position in self._cupy_inputs:
            pointers[position] = inputs[position].data.ptr
        torch_out = self.torch_out
        index, launching = 0, False  # for a CUDA error: the launch under way, its launch call in flight
        try:
            for index, (allocated, launch, sources) in enumerate(
                zip(self._outputs, self.launches, self._sources, strict=True)
            ):
                for slot, make in allocated:
                    array = arrays[slot] = make()
                    pointers[slot] = array.data_ptr() if torch_out else array.data.ptr
                ptrs = [pointers[slot] for slot in sources]
                function, packed = launch.function, launch.packed
                if launch.checks and any(ptrs[p] % align for p, align in launch.checks):
                    function, packed = launch.fallback()
                    self.fell_back.append(index)
                for struct, ptr in zip(packed.structs, ptrs, strict=True):
                    struct.data = ptr
                g, b = launch.params.grid, launch.params.block
                if g[0] and g[1] and g[2]:
                    launching = True
                    launch_kernel(
                        function.ptr,
                        g[0],
                        g[1],
                        g[2],
                        b[0],
                        b[1],
                        b[2],
                        launch.params.dynamic_shared_bytes,  # the static part is the function's own
                        stream_ptr,
                        packed.address,
                        0,
                    )
                    launching = False
        except Exception as err:
            if self.log is None or not is_cuda_error(err):
                raise
            raise self._fault(err, index, launching) from err
        if self.log is not None:
            self.log.replayed(self._launched_kernels(len(self.launches)) if self.fell_back else self._kernels)
        return [arrays[slot] for slot in self._results]

    def _launched_kernels(self, count: int) -> tuple[FaultKernel, ...]:
        """How a CUDA error names the first `count` launches of the last replay (those
        that took the scalar fallback as such)."""
        found = []
        for index, launch in enumerate(self.launches[:count]):
            if launch.kernel is None or not _launched(launch):
                continue
            fell_back = index in self.fell_back
            found.append(dataclasses.replace(launch.kernel, form="scalar fallback") if fell_back else launch.kernel)
        return tuple(found)

    def _fault(self, err: BaseException, index: int, in_launch: bool) -> Exception:
        assert self.log is not None
        kernels = self._launched_kernels(index + 1 if in_launch else index)
        return self.log.replay_failed(err, kernels, in_launch)

    def _allocator(self, out: PlannedOutput) -> Callable[[], Any]:
        """What allocates `out` at each replay, everything but the allocation worked out now."""
        if self.torch_out:
            return functools.partial(
                self._torch_empty,
                out.shape,
                out.strides,
                dtype=self._torch_dtypes[out.dtype],
                device=self.torch_device,
            )
        import cupy

        itemsize = out.dtype.itemsize
        storage = np.dtype(np.uint16 if out.dtype == DataType.BFloat16 else out.dtype.numpy)
        nbytes = max(1, span_elements(out.shape, out.strides)) * itemsize
        byte_strides = tuple(st * itemsize for st in out.strides)
        ndarray, alloc, shape = cupy.ndarray, cupy.cuda.alloc, out.shape
        return lambda: ndarray(shape, storage, alloc(nbytes), byte_strides)


def span_elements(shape: Sequence[int], strides: Sequence[int]) -> int:
    """Elements of memory a strided tensor reaches: one past the offset of its last
    element (every axis contributes its own span), 0 for an empty one."""
    if any(size == 0 for size in shape):
        return 0
    return sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True)) + 1


def _launched(launch: PlannedLaunch) -> bool:
    return all(launch.params.grid)


def torch_dtype_supported(dtype: DataType) -> bool:
    return dtype in _TORCH_DTYPES


def output_strides(shape: Sequence[int], alloc_order: Sequence[int], expanded: Collection[int] = ()) -> tuple[int, ...]:
    """Element strides of a tensor contiguous in its allocation order; an `expanded` axis
    (an expanded broadcast) has stride 0 and takes no memory."""
    strides = [0] * len(shape)
    running = 1
    for axis in reversed(list(alloc_order)):
        if axis in expanded:
            continue
        strides[axis] = running
        running *= max(shape[axis], 1)
    return tuple(strides)


__all__ = ["FastPlan", "TensorView", "input_key", "output_strides", "span_elements", "torch_dtype_supported"]
