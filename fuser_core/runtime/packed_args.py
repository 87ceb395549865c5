"""A generated kernel's parameters as ctypes objects, and the cuLaunchKernel call that
passes them.

The structs are laid out like the kernel's `Tensor<T, N, A>` parameters, followed by its
scalars, its `FastDivisor`s (a run-time extent and its magic numbers, for a 32-bit
kernel's index divisions) and one `T*` per workspace, and are made once per kernel: a
launch only writes the data pointers, sizes, strides and divisors into them, so a cache
hit costs a few microseconds. The fast path's plan packs its own
(`fast_plan.planned_launch`), and its replay writes only their data pointers
(`fast_path.FastPlan.run`): divisors depend on sizes only, which its key holds.
"""

from __future__ import annotations

import ctypes
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.magic_division import MagicDivisor
from fuser_core.errors import FuserError
from fuser_core.ir.dtype import DataType
from fuser_core.runtime.artifacts import LaunchParams
from fuser_core.runtime.launch_sizes import evaluate


def _tensor_struct(index: Any, ndim: int, alloc_ndim: int) -> Any:
    """A ctypes struct laid out as the kernel's `Tensor<T, N, A>`."""

    class TensorStruct(ctypes.Structure):
        _fields_ = [  # ctypes reads the class attribute
            ("data", ctypes.c_void_p),
            ("logical_size", index * max(ndim, 1)),
            ("alloc_stride", index * max(alloc_ndim, 1)),
        ]

    return TensorStruct


class FastDivisorStruct(ctypes.Structure):
    """The runtime header's `FastDivisor`."""

    _fields_ = [("divisor", ctypes.c_uint32), ("magic", ctypes.c_uint32), ("shift", ctypes.c_uint32)]


_SCALAR_CTYPES = {
    DataType.Bool: ctypes.c_bool,
    DataType.Float: ctypes.c_float,
    DataType.Double: ctypes.c_double,
    DataType.Int: ctypes.c_int64,
    DataType.Int32: ctypes.c_int32,
    DataType.Index: ctypes.c_int64,
}


@dataclass
class PackedArgs:
    """The kernel's parameters as ctypes objects, and the `void*[]` cuLaunchKernel takes."""

    kernel: k.Kernel
    structs: list[Any] = field(default_factory=list)
    scalars: list[Any] = field(default_factory=list)
    divisors: list[FastDivisorStruct] = field(default_factory=list)  # one per kernel.divisors
    workspaces: list[Any] = field(default_factory=list)  # one c_void_p per kernel.workspaces
    pointers: Any = None

    def __post_init__(self) -> None:
        index = ctypes.c_int32 if self.kernel.index_type == DataType.Int32 else ctypes.c_int64
        for t in self.kernel.tensors:
            self.structs.append(_tensor_struct(index, t.ndim, t.alloc_ndim)())
        for s in self.kernel.scalars:
            self.scalars.append(_SCALAR_CTYPES.get(s.dtype, ctypes.c_int64)())
        for _ in self.kernel.divisors:
            self.divisors.append(FastDivisorStruct())
        for _ in self.kernel.workspaces:
            self.workspaces.append(ctypes.c_void_p())
        params = [*self.structs, *self.scalars, *self.divisors, *self.workspaces]
        self.pointers = (ctypes.c_void_p * max(len(params), 1))(*[ctypes.addressof(p) for p in params])
        self.address = ctypes.addressof(self.pointers)

    def set_tensor(self, position: int, pointer: int, sizes: Sequence[int], strides: Sequence[int]) -> None:
        struct = self.structs[position]
        struct.data = pointer
        for axis, size in enumerate(sizes):
            struct.logical_size[axis] = size
        for axis, stride in enumerate(strides):
            struct.alloc_stride[axis] = stride

    def set_scalar(self, position: int, value: Any) -> None:
        self.scalars[position].value = value

    def set_divisors(
        self, sizes: Mapping[str, Sequence[int]], strides: Mapping[str, Sequence[int]], scalars: Mapping[str, Any]
    ) -> None:
        """Every divisor's magic numbers, from its extent at these sizes (by tensor
        parameter) and scalars (by scalar parameter)."""
        for struct, divisor in zip(self.divisors, self.kernel.divisors, strict=True):
            magic = MagicDivisor.of(evaluate(divisor.extent, sizes, strides, scalars))
            # Only fastMod reads the divisor itself; past 32 bits the quotient is 0 anyway.
            struct.divisor, struct.magic, struct.shift = min(magic.divisor, 0xFFFFFFFF), magic.magic, magic.shift

    def set_workspace(self, position: int, pointer: int) -> None:
        self.workspaces[position].value = pointer


def launch(function: Any, params: LaunchParams, packed: PackedArgs, stream: Any) -> None:
    """Launch `function` (a CuPy Function) with the arguments packed in `packed` on `stream`;
    cooperatively where its blocks wait for each other (`check_resident` first)."""
    from cupy.cuda import driver  # heavy and optional: only where kernels run

    if packed.kernel.cooperative:
        check_resident(function, params, packed.kernel.name)
        driver.launchCooperativeKernel(
            function.ptr,
            *params.grid,
            *params.block,
            params.dynamic_shared_bytes,
            stream.ptr,
            ctypes.addressof(packed.pointers),
        )
        return
    driver.launchKernel(
        function.ptr,
        *params.grid,
        *params.block,
        params.dynamic_shared_bytes,  # the static part of params.shared_bytes is the function's own
        stream.ptr,
        ctypes.addressof(packed.pointers),
        0,
    )


# (device, function, threads, dynamic shared) -> (the function, blocks resident at once). The
# function is kept alive with its answer, so its module's pointer is not reused while cached.
_resident_blocks: dict[tuple[int, int, int, int], tuple[Any, int]] = {}


def check_resident(function: Any, params: LaunchParams, name: str) -> None:
    """A cooperative kernel's blocks wait for each other at a grid barrier, so all of them
    must be resident at once: a FuserError, before anything is launched, where this GPU
    cannot hold them (its heuristics were sized for a larger device model, say). The
    driver's occupancy calculator is asked once per function and block shape."""
    from cupy.cuda import Device, driver  # heavy and optional: only where kernels run

    threads = params.block[0] * params.block[1] * params.block[2]
    device = Device()
    key = (device.id, function.ptr, threads, params.dynamic_shared_bytes)
    if key not in _resident_blocks:
        per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(function.ptr, threads, params.dynamic_shared_bytes)
        _resident_blocks[key] = (function, per_sm * device.attributes["MultiProcessorCount"])
    resident = _resident_blocks[key][1]
    blocks = params.grid[0] * params.grid[1] * params.grid[2]
    if blocks > resident:
        raise FuserError(
            f"its {blocks} blocks meet at a grid barrier, but this GPU holds {resident} of them at "
            "once: its heuristics were sized for a larger device (FUSER_DEVICE_MODEL?); the disable option "
            "cooperative_grid folds its grid reductions without the barrier",
            op="launch",
            tensor=name,
        )
