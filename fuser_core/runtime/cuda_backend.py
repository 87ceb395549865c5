"""The CUDA backend: each generated kernel compiled with NVRTC and launched through CuPy.

Groups run in order on the current device; intermediates between kernels are device
arrays. A group with no generated kernel yet (reductions and normalization come in
codegen part 2; expr_eval and no_op groups have none) runs its math on the host with
the reference backend, and its launch record says so; that is slow but never wrong.

Launch arguments are packed once per kernel as ctypes structs laid out like the
kernel's `Tensor<T, N, A>` parameters; a call only writes the data pointers, sizes and
strides into them and calls cuLaunchKernel, so a cache hit costs a few microseconds.

A kernel with workspaces (a grid reduction's work and semaphore buffers) takes one
`T*` per workspace after its scalars. The runtime allocates them with CuPy, sized from
the launch (`workspace_elements`), and keeps them for the next launch: semaphores are
allocated zeroed and every launch leaves them zeroed, so no memset is needed between
launches.
"""

from __future__ import annotations

import ctypes
import dataclasses
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.cuda import translation_unit
from fuser_core.codegen.lower import lower_group
from fuser_core.errors import FuserError
from fuser_core.ir.dtype import DataType
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.rng import bind_run_seed
from fuser_core.ir.tensor_view import TensorView
from fuser_core.options import EnableOption, current_options
from fuser_core.runtime.arguments import TensorArg, bind_args
from fuser_core.runtime.artifacts import KernelArtifact, LaunchParams, LaunchRecord
from fuser_core.runtime.device_library import device_path, run_on_device
from fuser_core.runtime.fast_path import (
    DYNAMIC_SHARED_BYTES,
    FastPlan,
    PlannedLaunch,
    PlannedOutput,
    output_strides,
    torch_dtype_supported,
)
from fuser_core.runtime.launch_errors import FaultKernel, LaunchLog, is_cuda_error, op_locations
from fuser_core.runtime.reference import (
    bind_leaves,
    compact_index,
    evaluate_fusion,
    expanded_axes,
    expanded_view,
    leaf_values,
)
from fuser_core.runtime.signature import InputSignature
from fuser_core.scheduler.base import SchedulerType
from fuser_core.scheduler.device import DeviceProperties
from fuser_core.segmenter.segmented_fusion import SegmentedFusion, SegmentedGroup

GENERATED = {
    SchedulerType.pointwise,
    SchedulerType.transpose,
    SchedulerType.reduction,
    SchedulerType.inner_persistent,
    SchedulerType.outer_persistent,
    SchedulerType.user,
}


def cuda_available() -> str | None:
    """None when a GPU and CuPy are there, else why not."""
    if "cupy" not in sys.modules:
        try:
            import cupy  # heavy and optional
        except Exception as err:  # ImportError, or a CUDA library that fails to load
            return f"CuPy is not installed or does not load ({err})"
    import cupy

    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "CuPy found no CUDA device"
    except Exception as err:
        return f"no usable CUDA device: {err}"
    return None


def kernel_name(scheduler: SchedulerType, runtime_name: str, group_id: int) -> str:
    return f"nvfuser_{scheduler.value}_{runtime_name}_g{group_id}"


def index_dtype(index_type: str) -> DataType:
    return DataType.Int32 if index_type == "int32" else DataType.Int


def generates_kernel(group: SegmentedGroup) -> bool:
    return group.scheduler in GENERATED


def lower_groups(segmented: SegmentedFusion, runtime_name: str, index_type: str) -> dict[int, k.Kernel]:
    """The kernel IR of every group codegen handles, by group id."""
    return lowered_groups(segmented, runtime_name, index_type)[0]


def lowered_groups(
    segmented: SegmentedFusion, runtime_name: str, index_type: str
) -> tuple[dict[int, k.Kernel], dict[int, str]]:
    """The kernel IR of every group codegen handles, and for the others why not (an op
    with no CUDA lowering yet is run on the host, never a failed run)."""
    kernels, refused = {}, {}
    for group in segmented.groups:
        if not generates_kernel(group) or group.fusion is None:
            refused[group.id] = f"no generated kernel for {group.scheduler.value} groups"
            continue
        name = kernel_name(group.scheduler, runtime_name, group.id)
        try:
            kernel = lower_group(group.fusion, name, index_dtype(index_type))
            translation_unit(kernel)  # a type or op with no CUDA form is refused here, not by NVRTC
        except FuserError as err:
            refused[group.id] = str(err)
            continue
        kernels[group.id] = kernel
    return kernels, refused


# -- evaluating index expressions on the host (launch dimensions, output shapes) --------------


def evaluate(
    node: k.Node, sizes: Mapping[str, Sequence[int]], strides: Mapping[str, Sequence[int]], scalars: Mapping[str, Any]
) -> int:
    if isinstance(node, k.Const):
        return int(node.value)
    if isinstance(node, k.TensorField):
        table = sizes if node.field == "logical_size" else strides
        return int(table[node.tensor][node.axis])
    if isinstance(node, k.ScalarParam):
        return int(scalars[node.name])
    if isinstance(node, k.Bin):
        a, b = evaluate(node.a, sizes, strides, scalars), evaluate(node.b, sizes, strides, scalars)
        if node.op == "+":
            return a + b
        if node.op == "-":
            return a - b
        if node.op == "*":
            return a * b
        if node.op == "/":
            return int(a / b) if b else 0
        if node.op == "%":
            return int(np.fmod(a, b)) if b else 0
    if isinstance(node, k.Call) and node.fn == "ceilDiv":
        a, b = (evaluate(x, sizes, strides, scalars) for x in node.args)
        return -(-a // b)
    if isinstance(node, k.Cast):
        return evaluate(node.a, sizes, strides, scalars)
    raise FuserError(f"cannot evaluate {k.expr_text(node)} on the host", op="launch")


def launch_params(
    kernel: k.Kernel,
    sizes: Mapping[str, Sequence[int]],
    strides: Mapping[str, Sequence[int]],
    scalars: Mapping[str, Any],
) -> LaunchParams:
    dims = {"blockIdx.x": 1, "blockIdx.y": 1, "blockIdx.z": 1, "threadIdx.x": 1, "threadIdx.y": 1, "threadIdx.z": 1}
    for dim in kernel.launch:
        dims[dim.hardware] = max(dims[dim.hardware], evaluate(dim.extent, sizes, strides, scalars))
    grid = (dims["blockIdx.x"], dims["blockIdx.y"], dims["blockIdx.z"])
    block = (dims["threadIdx.x"], dims["threadIdx.y"], dims["threadIdx.z"])
    # The kernel's static `__shared__` arrays, for the dumps ("Smem Size"): launches pass
    # no dynamic shared memory (DYNAMIC_SHARED_BYTES), as no kernel declares `extern __shared__`.
    return LaunchParams(grid, block, kernel.shared_bytes)


def workspace_elements(workspace: k.Workspace, params: LaunchParams) -> int:
    """Elements of `workspace` one launch with `params` needs: `per_thread` for every
    launched thread and `per_block` for every block."""
    blocks = math.prod(params.grid)
    return blocks * (math.prod(params.block) * workspace.per_thread + workspace.per_block)


# -- argument packing ---------------------------------------------------------------------------


def _tensor_struct(index: Any, ndim: int, alloc_ndim: int) -> Any:
    """A ctypes struct laid out as the kernel's `Tensor<T, N, A>`."""

    class TensorStruct(ctypes.Structure):
        _fields_ = [  # ctypes reads the class attribute
            ("data", ctypes.c_void_p),
            ("logical_size", index * max(ndim, 1)),
            ("alloc_stride", index * max(alloc_ndim, 1)),
        ]

    return TensorStruct


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
    workspaces: list[Any] = field(default_factory=list)  # one c_void_p per kernel.workspaces
    pointers: Any = None

    def __post_init__(self) -> None:
        index = ctypes.c_int32 if self.kernel.index_type == DataType.Int32 else ctypes.c_int64
        for t in self.kernel.tensors:
            self.structs.append(_tensor_struct(index, t.ndim, t.alloc_ndim)())
        for s in self.kernel.scalars:
            self.scalars.append(_SCALAR_CTYPES.get(s.dtype, ctypes.c_int64)())
        for _ in self.kernel.workspaces:
            self.workspaces.append(ctypes.c_void_p())
        params = [*self.structs, *self.scalars, *self.workspaces]
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

    def set_workspace(self, position: int, pointer: int) -> None:
        self.workspaces[position].value = pointer


# -- running groups -------------------------------------------------------------------------------


@dataclass
class _Compiled:
    function: Any  # nvrtc.LoadedKernel
    compiled: Any  # nvrtc.CompiledModule
    packed: PackedArgs


class GeneratedGroup:
    """One generated kernel, its vectorized form and (compiled on demand) its scalar fallback."""

    def __init__(self, group: SegmentedGroup, kernel: k.Kernel, device: DeviceProperties, index_type: str) -> None:
        self.group = group
        self.kernel = kernel
        self.device = device
        self.index_type = index_type
        self.fusion = group.fusion
        assert self.fusion is not None
        self._compiled: dict[bool, _Compiled] = {}
        self.outputs = [tv for tv in self.fusion.outputs if isinstance(tv, TensorView)]
        self.inputs = [tv for tv in self.fusion.inputs if isinstance(tv, TensorView)]
        self.alloc_orders = {f"T{tv.name}": _alloc_order(tv) for tv in [*self.inputs, *self.outputs]}
        # An output's expanded broadcast axes: allocated with one element, seen with stride 0.
        self.expanded = {f"T{tv.name}": expanded_axes(tv) for tv in self.outputs}
        self.last_cache_hit = True
        self.lines = op_locations(group.exprs)  # the script lines of its ops, for CUDA errors
        # Workspace buffers kept between launches: by workspace, (elements, device array).
        self._workspaces: dict[k.Workspace, tuple[int, Any]] = {}

    def compiled(self, vectorized: bool) -> _Compiled:
        found = self._compiled.get(vectorized)
        if found is None:
            from fuser_core.runtime.kernel_cache import compile_kernel
            from fuser_core.runtime.nvrtc import load_module

            kernel = self.kernel
            if not vectorized:
                kernel = lower_group(self.fusion, self.kernel.name, self.kernel.index_type, vectorize=False)  # type: ignore[arg-type]
            module = compile_kernel(translation_unit(kernel), kernel.name, arch=self.device)
            self.last_cache_hit = module.cache_hit
            found = _Compiled(load_module(module)[kernel.name], module, PackedArgs(kernel))
            self._compiled[vectorized] = found
        return found

    def run(
        self,
        tensors: dict[int, Any],
        scalars: dict[int, Any],
        leaves: dict[int, Any],
        cupy: Any,
        stream: Any,
        events: Any = None,
        log: LaunchLog | None = None,
    ) -> tuple[LaunchParams, bool]:
        sizes: dict[str, Sequence[int]] = {}
        strides: dict[str, Sequence[int]] = {}
        pointers: dict[str, int] = {}
        for tv in self.inputs:
            array = tensors[tv.name]
            name = f"T{tv.name}"
            sizes[name] = array.shape
            element_strides = [s // array.itemsize for s in array.strides]
            strides[name] = [element_strides[axis] for axis in self.alloc_orders[name]]
            pointers[name] = array.data.ptr
        scalar_values = {
            s.name: leaves[s.leaf] if s.leaf is not None else scalars[s.fusion_position] for s in self.kernel.scalars
        }
        for tv in self.outputs:
            name = f"T{tv.name}"
            shape = [
                evaluate(_extent_node(self.kernel, tv, axis), sizes, strides, scalar_values) for axis in range(tv.ndim)
            ]
            array = _empty(cupy, shape, tv.dtype, self.alloc_orders[name], self.expanded[name])
            tensors[tv.name] = array
            sizes[name] = shape
            strides[name] = [[s // max(array.itemsize, 1) for s in array.strides][a] for a in self.alloc_orders[name]]
            pointers[name] = array.data.ptr
        vectorized = self.kernel.vectorized and self._aligned(pointers, strides)
        compiled = self.compiled(vectorized)
        params = launch_params(compiled.packed.kernel, sizes, strides, scalar_values)
        for position, t in enumerate(compiled.packed.kernel.tensors):
            compiled.packed.set_tensor(position, pointers[t.name], sizes[t.name], strides[t.name])
        for position, s in enumerate(compiled.packed.kernel.scalars):
            compiled.packed.set_scalar(position, scalar_values[s.name])
        launched = all(g > 0 for g in params.grid)
        if launched:
            for position, array in enumerate(self.workspaces(compiled.packed.kernel, params, cupy)):
                compiled.packed.set_workspace(position, array.data.ptr)
        if events is not None:  # kernel_profile: the launch alone, not the host work around it
            events[0].record(stream)
        if launched:
            if log is not None:
                log.launching(self.fault_kernel(params, vectorized))
            try:
                launch(compiled.function.function, params, compiled.packed, stream)
            except BaseException:
                self._workspaces.clear()  # never reuse a semaphore buffer in an unknown state
                raise
            if log is not None:
                log.launched()
        if events is not None:
            events[1].record(stream)
        return params, vectorized

    def fault_kernel(self, params: LaunchParams, vectorized: bool) -> FaultKernel:
        """This kernel's launch as a CUDA error names it."""
        form = "" if vectorized or not self.kernel.vectorized else "scalar fallback"
        return FaultKernel(self.group.id, self.kernel.name, self.group.scheduler.value, params, form, self.lines)

    def workspaces(self, kernel: k.Kernel, params: LaunchParams, cupy: Any) -> list[Any]:
        """A device buffer for each of `kernel.workspaces` at this launch: the one kept from
        an earlier launch when it is large enough, else a new one (which is then kept)."""
        arrays = []
        for workspace in kernel.workspaces:
            elements = workspace_elements(workspace, params)
            kept = self._workspaces.get(workspace)
            if kept is None or kept[0] < elements:
                kept = (elements, allocate_workspace(cupy, workspace, elements))
                self._workspaces[workspace] = kept
            arrays.append(kept[1])
        return arrays

    def _aligned(self, pointers: dict[str, int], strides: dict[str, Sequence[int]]) -> bool:
        for t in self.kernel.tensors:
            if t.vectorized <= 1:
                continue
            if pointers[t.name] % (t.vectorized * t.dtype.itemsize):
                return False
            if any(s % t.vectorized for s in list(strides[t.name])[:-1]):
                return False
        return True


def launch(function: Any, params: LaunchParams, packed: PackedArgs, stream: Any) -> None:
    from cupy.cuda import driver

    driver.launchKernel(
        function.ptr,
        *params.grid,
        *params.block,
        DYNAMIC_SHARED_BYTES,  # params.shared_bytes is static: the function reserves it
        stream.ptr,
        ctypes.addressof(packed.pointers),
        0,
    )


def allocate_workspace(cupy: Any, workspace: k.Workspace, elements: int) -> Any:
    """A device buffer of `elements` (at least one) of the workspace's dtype; zero-filled
    for a zeroed workspace (semaphores), on the current stream."""
    make = cupy.zeros if workspace.zeroed else cupy.empty
    return make(max(elements, 1), dtype=_cupy_dtype(workspace.dtype))


def _extent_node(kernel: k.Kernel, tv: TensorView, axis: int) -> k.Node:
    for t in kernel.tensors:
        if t.name == f"T{tv.name}" and t.shape:
            return t.shape[axis]
    raise FuserError(f"kernel {kernel.name} does not know the shape of output T{tv.name}", op="launch")


def _alloc_order(tv: TensorView) -> list[int]:
    """The logical axis of each allocation axis (outermost first)."""
    logical = tv.logical_no_reductions()
    alloc = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
    return [next(i for i, d in enumerate(logical) if d is a) for a in alloc]


def _empty(
    cupy: Any, shape: Sequence[int], dtype: DataType, alloc_order: Sequence[int], expanded: frozenset[int] = frozenset()
) -> Any:
    """A device array with the strides of its allocation order (contiguous in it). Along an
    expanded broadcast axis it holds one element and has stride 0, as nvFuser allocates it:
    the kernel writes only that element."""
    storage = _cupy_dtype(dtype)
    compact = [1 if axis in expanded else size for axis, size in enumerate(shape)]
    permuted = cupy.empty([compact[a] for a in alloc_order], dtype=storage)
    inverse = [alloc_order.index(axis) for axis in range(len(shape))]
    array = permuted.transpose(inverse) if list(alloc_order) != sorted(alloc_order) else permuted
    return cupy.broadcast_to(array, tuple(shape)) if expanded else array


def _stride0_axes(array: Any) -> frozenset[int]:
    """The axes of a device or host array that repeat one element (stride 0, size past 1)."""
    return frozenset(a for a in range(array.ndim) if array.strides[a] == 0 and array.shape[a] > 1)


def _stored_elements(array: Any) -> int:
    """Elements an array's memory holds: an axis of stride 0 holds one."""
    return math.prod(1 if axis in _stride0_axes(array) else n for axis, n in enumerate(array.shape))


def bits_only(dtype: DataType) -> bool:
    """Types CuPy has no dtype for (bf16, fp8): their device arrays hold the bits."""
    return dtype.is_reduced_float and dtype != DataType.Half


def _cupy_dtype(dtype: DataType) -> Any:
    if bits_only(dtype):
        return np.uint16 if dtype.itemsize == 2 else np.uint8
    return dtype.numpy


class HostGroup:
    """A group with no generated kernel: its math on the host, with the reference backend."""

    def __init__(self, group: SegmentedGroup, complete: Fusion) -> None:
        self.group = group
        assert group.unscheduled is not None
        self.fusion = group.unscheduled
        self.complete = complete
        self.device_path = device_path(self.fusion)  # matmul/linear: on the device, not the host

    def run(self, tensors: dict[int, Any], leaves: dict[int, Any], cupy: Any, dtypes: dict[int, DataType]) -> None:
        if self.device_path is not None:
            run_on_device(self.fusion, self.device_path, tensors, cupy, leaves)
            return
        ev = bind_leaves(self.fusion, leaves)
        for val in self.fusion.inputs:
            if isinstance(val, TensorView):
                ev.bind(val, _to_host_array(tensors[val.name], val.dtype))
        results = evaluate_fusion(self.fusion, ev)
        for out, value in zip(self.fusion.outputs, results, strict=True):
            if isinstance(out, TensorView):
                # An expanded axis keeps stride 0 on the device: a kernel reads it so.
                tensors[out.name] = _to_device_array(cupy, np.asarray(value), out.dtype, expanded_axes(out))


def _to_host_array(array: Any, dtype: DataType) -> np.ndarray:
    """A device array on the host; an axis of stride 0 stays stride 0 (one element copied)."""
    expanded = _stride0_axes(array)
    host = (array[compact_index(array.ndim, expanded)] if expanded else array).get()
    host = host.view(dtype.numpy) if bits_only(dtype) else host
    return expanded_view(host, array.shape) if expanded else host


def _to_device_array(cupy: Any, host: np.ndarray, dtype: DataType, expanded: frozenset[int] = frozenset()) -> Any:
    """A host array on the device; along the `expanded` axes only its first element is
    copied, and the device array has stride 0 there."""
    compact = host[compact_index(host.ndim, expanded)] if expanded else host
    if bits_only(dtype):
        # (np.ascontiguousarray would make a 0-dim result, a full reduction, 1-dim)
        compact = np.asarray(compact, order="C").view(np.uint16 if dtype.itemsize == 2 else np.uint8)
    device = cupy.asarray(compact)
    return cupy.broadcast_to(device, host.shape) if expanded else device


class CudaExecutable:
    def __init__(
        self, segmented: SegmentedFusion, signature: InputSignature, runtime_name: str, device: DeviceProperties
    ) -> None:
        import cupy

        self.cupy = cupy
        self.segmented = segmented
        self.complete = segmented.complete
        self.device = device
        kernels, self.host_reasons = lowered_groups(segmented, runtime_name, signature.index_type)
        self.steps: list[GeneratedGroup | HostGroup] = []
        for group in segmented.groups:
            if group.id in kernels:
                self.steps.append(GeneratedGroup(group, kernels[group.id], device, signature.index_type))
            else:
                self.steps.append(HostGroup(group, self.complete))
        self.last_launches: tuple[LaunchRecord, ...] = ()
        self.log = LaunchLog(runtime_name)  # what a CUDA error of a run may come from
        self.input_tvs = list(self.complete.inputs)
        self._complete_exprs = list(self.complete.exprs())
        self._needs_leaves = any(
            isinstance(step, GeneratedGroup) and any(s.leaf is not None for s in step.kernel.scalars)
            for step in self.steps
        )
        for step in self.steps:  # compile now, so a run's time is the run's
            if isinstance(step, GeneratedGroup):
                step.compiled(step.kernel.vectorized)

    def compile_events(self) -> list[str]:
        """Per compiled kernel: NVRTC ran ("compiled"), or the process or disk cache had it."""
        events = []
        for step in self.steps:
            if isinstance(step, GeneratedGroup):
                for kernel in getattr(step, "members", (step,)):  # a kernel choice's: every candidate
                    for vectorized, c in kernel._compiled.items():
                        form = "" if vectorized or not kernel.kernel.vectorized else " (scalar fallback)"
                        module = c.compiled
                        events.append(
                            f"{kernel.kernel.name}{form}: {module.cache} ({module.compile_seconds:.3f} s to compile)"
                        )
            elif step.device_path is not None:
                events.append(
                    f"g{step.group.id} {step.group.scheduler.value}: library call on the device ({step.device_path})"
                )
            else:
                group = step.group
                events.append(
                    f"g{group.id} {group.scheduler.value}: on the host reference ({self.host_reasons[group.id]})"
                )
        return events

    def run(self, args: Sequence[Any]) -> list[Any]:
        """Launch every group; a CUDA error (of a launch, or reported by any later call of
        the run) is a CudaFaultError naming the kernels it may come from. With
        sync_launches, a synchronization after each launch pins the kernel that faulted."""
        sync = current_options().is_enabled(EnableOption.sync_launches)
        self.log.begin(sync)
        try:
            return self._run(args, sync)
        except Exception as err:
            if not is_cuda_error(err):
                raise
            raise self.log.error(err) from err

    def to_host(self, outputs: Sequence[Any]) -> list[Any]:
        """The outputs of the last run as NumPy arrays (bf16 and fp8 as their own dtypes):
        the synchronization that ends a run, where CUDA reports a fault of its kernels."""
        self.log.where = "copying the outputs to the host"
        try:
            host = [_on_host(o, out) for o, out in zip(outputs, self.complete.outputs, strict=True)]
        except Exception as err:
            if not is_cuda_error(err):
                raise
            raise self.log.error(err) from err
        self.log.synchronized()
        return host

    def _run(self, args: Sequence[Any], sync: bool) -> list[Any]:
        cupy = self.cupy
        log = self.log
        stream = cupy.cuda.get_current_stream()
        tensors: dict[int, Any] = {}
        scalars: dict[int, Any] = {}
        wants_torch = False
        for position, (val, arg) in enumerate(zip(self.input_tvs, args, strict=True)):
            if isinstance(arg, TensorArg):
                tensors[val.name] = _device_array(cupy, arg)
                wants_torch = wants_torch or arg.origin == "torch"
            else:
                scalars[position] = arg
        leaves = self._leaves(args) if self._needs_leaves else None
        records = []
        profile = current_options().is_enabled(EnableOption.kernel_profile)
        events = []
        for step in self.steps:
            if isinstance(step, GeneratedGroup):
                if profile:
                    events.append((cupy.cuda.Event(), cupy.cuda.Event()))
                fusion_inputs = step.fusion.inputs if step.fusion is not None else []
                group_scalars = {
                    p: scalars.get(_complete_position(self.complete, v)) for p, v in enumerate(fusion_inputs)
                }
                params, vectorized = step.run(
                    tensors, group_scalars, leaves or {}, cupy, stream, events[-1] if profile else None, log
                )
                if sync:
                    log.synchronizing()
                    stream.synchronize()
                    log.synchronized()
                records.append(_record(step, params, tensors, self.device, vectorized))
            else:
                if leaves is None:
                    leaves = self._leaves(args)
                log.where = f"running g{step.group.id} {step.group.scheduler.value} (its inputs read from the device)"
                step.run(tensors, leaves, cupy, {})
                if step.device_path is None:  # its inputs were copied to the host: a synchronization
                    log.synchronized()
        if profile:
            log.where = "reading the kernel times (kernel_profile)"
            for index, (start, end) in enumerate(events):
                end.synchronize()
                seconds = cupy.cuda.get_elapsed_time(start, end) * 1e-3
                records[index] = dataclasses.replace(records[index], seconds=seconds)
            log.synchronized()
        self.last_launches = tuple(records)
        outputs = [self._output(out, tensors) for out in self.complete.outputs]
        if wants_torch:
            return [
                _to_torch(o, out.dtype) if isinstance(out, TensorView) else o
                for o, out in zip(outputs, self.complete.outputs, strict=True)
            ]
        return outputs

    def _leaves(self, args: Sequence[Any]) -> dict[int, Any]:
        """The run's leaf scalars by name: input extents and scalars, and one fresh Philox
        state for the unseeded random ops of all groups (kernels and host alike)."""
        ev = bind_args(self.complete, args, values=False)
        bind_run_seed(self._complete_exprs, ev)
        return leaf_values(self.complete, ev)

    def fast_plan(self, args: Sequence[Any]) -> FastPlan | None:
        """What a call with these sizes, strides and dtypes launches, worked out once
        (None where a group runs on the host, a kernel draws a fresh Philox state each
        run, or an output is not written by a kernel). Its workspaces are allocated (and
        zeroed) now, which is where CUDA may report a fault of the run just made."""
        self.log.where = "planning the fast path of the next calls (allocating its workspaces)"
        try:
            return self._fast_plan(args)
        except Exception as err:
            if not is_cuda_error(err):
                raise
            raise self.log.error(err) from err

    def _fast_plan(self, args: Sequence[Any]) -> FastPlan | None:
        if any(isinstance(step, HostGroup) for step in self.steps) or self._needs_leaves:
            return None
        if any(getattr(step, "timing", False) for step in self.steps):  # a kernel choice still timing
            return None
        positions = {v.name: p for p, v in enumerate(self.complete.inputs) if isinstance(v, TensorView)}
        torch_out = any(isinstance(a, TensorArg) and a.origin == "torch" for a in args)
        shapes: dict[int, tuple[int, ...]] = {}
        strides: dict[int, tuple[int, ...]] = {}
        scalars: dict[int, Any] = {}
        for position, (val, arg) in enumerate(zip(self.input_tvs, args, strict=True)):
            if isinstance(arg, TensorArg):
                shapes[val.name], strides[val.name] = tuple(arg.shape), tuple(arg.strides)
            else:
                scalars[position] = arg
        launches = []
        for step in self.steps:
            assert isinstance(step, GeneratedGroup) and step.fusion is not None
            sizes: dict[str, Sequence[int]] = {}
            alloc: dict[str, Sequence[int]] = {}
            for tv in step.inputs:
                name = f"T{tv.name}"
                sizes[name] = shapes[tv.name]
                alloc[name] = [strides[tv.name][a] for a in step.alloc_orders[name]]
            values = {
                s.name: scalars.get(_complete_position(self.complete, step.fusion.inputs[s.fusion_position]))
                for s in step.kernel.scalars
            }
            outputs = []
            for tv in step.outputs:
                name = f"T{tv.name}"
                if torch_out and not torch_dtype_supported(tv.dtype):
                    return None
                shape = tuple(evaluate(_extent_node(step.kernel, tv, a), sizes, alloc, values) for a in range(tv.ndim))
                order = step.alloc_orders[name]
                shapes[tv.name], strides[tv.name] = shape, output_strides(shape, order, step.expanded[name])
                sizes[name], alloc[name] = shape, [strides[tv.name][a] for a in order]
                outputs.append(PlannedOutput(tv.name, shape, strides[tv.name], tv.dtype))
            planned = self._fast_launch(step, sizes, alloc, values, positions, outputs)
            planned.kernel = step.fault_kernel(planned.params, bool(planned.checks))
            launches.append(planned)
        results = [out.name for out in self.complete.outputs if isinstance(out, TensorView)]
        if len(results) != len(self.complete.outputs) or any(name in positions for name in results):
            return None
        return FastPlan(launches, results, torch_out, self.device, self.log)

    def _fast_launch(
        self,
        step: GeneratedGroup,
        sizes: dict[str, Sequence[int]],
        alloc: dict[str, Sequence[int]],
        values: dict[str, Any],
        positions: dict[int, int],
        outputs: list[PlannedOutput],
    ) -> PlannedLaunch:
        cupy = self.cupy
        # The plan's own workspace buffers, by workspace, shared by its two packings (they
        # run on one stream, one after the other) and kept alive by the PlannedLaunch.
        # The replay writes only tensor data pointers, so the workspace pointers set here
        # stay as they are.
        workspaces: dict[k.Workspace, Any] = {}

        def packed_for(vectorized: bool) -> tuple[Any, PackedArgs]:
            compiled = step.compiled(vectorized)
            packed = PackedArgs(compiled.packed.kernel)
            for position, t in enumerate(packed.kernel.tensors):
                packed.set_tensor(position, 0, sizes[t.name], alloc[t.name])
            for position, sc in enumerate(packed.kernel.scalars):
                packed.set_scalar(position, values[sc.name])
            zeroed = False
            for position, w in enumerate(packed.kernel.workspaces):
                if w not in workspaces:
                    workspaces[w] = allocate_workspace(cupy, w, workspace_elements(w, params))
                    zeroed = zeroed or w.zeroed
                packed.set_workspace(position, workspaces[w].data.ptr)
            if zeroed:  # zero-filled on this stream; a replay may launch on another one
                cupy.cuda.get_current_stream().synchronize()
            return compiled.function.function, packed

        kernel = step.kernel
        strides_ok = all(
            all(st % t.vectorized == 0 for st in list(alloc[t.name])[:-1]) for t in kernel.tensors if t.vectorized > 1
        )
        vectorized = kernel.vectorized and strides_ok
        # The fallback launches with these parameters too (the replay has one per launch).
        params = launch_params(step.compiled(vectorized).packed.kernel, sizes, alloc, values)
        function, packed = packed_for(vectorized)
        fallback_cache: list[tuple[Any, PackedArgs]] = []

        def fallback() -> tuple[Any, PackedArgs]:
            if not fallback_cache:
                fallback_cache.append(packed_for(False))
            return fallback_cache[0]

        sources = [
            ("input", positions[int(t.name[1:])])
            if not t.is_output and int(t.name[1:]) in positions
            else ("tensor", int(t.name[1:]))
            for t in kernel.tensors
        ]
        checks = (
            [(i, t.vectorized * t.dtype.itemsize) for i, t in enumerate(kernel.tensors) if t.vectorized > 1]
            if kernel.vectorized and strides_ok
            else []
        )
        return PlannedLaunch(function, fallback, packed, params, sources, checks, outputs, workspaces)

    def _output(self, out: Any, tensors: dict[int, Any]) -> Any:
        if isinstance(out, TensorView):
            return tensors[out.name]
        raise FuserError("scalar outputs are not supported by the CUDA backend yet", op="execute")


def _complete_position(fusion: Fusion, val: Any) -> int:
    for position, v in enumerate(fusion.inputs):
        if v.name == getattr(val, "name", None) and type(v) is type(val):
            return position
    return -1


def _on_host(value: Any, out: Any) -> Any:
    """An output on the host: a NumPy array of its dtype (CuPy and torch hold bf16 as bits)."""
    module = type(value).__module__.split(".")[0]
    if not isinstance(out, TensorView) or module not in ("cupy", "torch"):
        return value
    if module == "cupy":
        return _to_host_array(value, out.dtype)
    torch = sys.modules["torch"]
    tensor = value.detach()
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).cpu().numpy().view(out.dtype.numpy)
    return tensor.cpu().numpy()


def _device_array(cupy: Any, arg: TensorArg) -> Any:
    source = arg.device
    if source is None:
        host = arg.array
        if bits_only(arg.dtype):
            host = host.view(np.uint16 if arg.dtype.itemsize == 2 else np.uint8)
        return _upload(cupy, host)
    if arg.origin == "torch":
        torch = sys.modules["torch"]
        if bits_only(arg.dtype):
            source = source.view(torch.int16 if arg.dtype.itemsize == 2 else torch.uint8)
        return cupy.from_dlpack(source.detach())
    return source


def _upload(cupy: Any, host: np.ndarray) -> Any:
    """A host array on the device in the layout it has: an axis of stride 0 (an expanded
    input) stays stride 0, as the kernel indexes it (cupy.asarray would materialize it)."""
    expanded = {a for a in range(host.ndim) if host.strides[a] == 0 and host.shape[a] > 1}
    if not expanded:
        return cupy.asarray(host)
    compact = host[tuple(slice(0, 1) if a in expanded else slice(None) for a in range(host.ndim))]
    return cupy.broadcast_to(cupy.asarray(compact), host.shape)


def _to_torch(array: Any, dtype: DataType) -> Any:
    """A device array as a torch tensor of the same memory; an axis of stride 0 (an
    expanded output) is a torch `expand` of its one element, as nvFuser returns it."""
    torch = sys.modules["torch"]
    expanded = _stride0_axes(array)
    tensor = torch.from_dlpack(array[compact_index(array.ndim, expanded)] if expanded else array)
    if dtype == DataType.BFloat16:
        tensor = tensor.view(torch.bfloat16)
    elif dtype == DataType.Half:
        tensor = tensor.view(torch.float16)
    return tensor.expand(array.shape) if expanded else tensor


def _record(
    step: GeneratedGroup, params: LaunchParams, tensors: dict[int, Any], device: DeviceProperties, vectorized: bool
) -> LaunchRecord:
    read = sum(_stored_elements(tensors[tv.name]) * tv.dtype.itemsize for tv in step.inputs)
    written = sum(_stored_elements(tensors[tv.name]) * tv.dtype.itemsize for tv in step.outputs)
    compiled = step._compiled.get(vectorized)
    function = compiled.function if compiled else None
    seconds_estimate = (read + written) / _peak(device)
    return LaunchRecord(
        step.group.id,
        step.kernel.name if vectorized or not step.kernel.vectorized else step.kernel.name + " (scalar fallback)",
        params,
        read,
        written,
        None,
        function.num_regs if function else None,
        function.local_size_bytes if function else None,
        _peak(device),
        f"memory-bound: {seconds_estimate * 1e6:.1f} us at peak DRAM bandwidth",
    )


def _peak(device: DeviceProperties) -> float:
    return device.peak_dram_bandwidth_gbps * 1e9 or 1e12


class CudaBackend:
    """Generated kernels on the GPU (NVRTC + CuPy); the reference where none is generated yet."""

    name = "cuda"

    def __init__(self, device: DeviceProperties) -> None:
        reason = cuda_available()
        if reason is not None:
            raise FuserError(f"the cuda backend needs an NVIDIA GPU with CuPy: {reason}")
        self.device = device

    def compile(
        self, segmented: SegmentedFusion, signature: InputSignature, runtime_name: str = "f0_c0_r0"
    ) -> CudaExecutable:
        return CudaExecutable(segmented, signature, runtime_name, self.device)


def kernel_artifacts(
    segmented: SegmentedFusion, runtime_name: str, index_type: str, sizes: dict[int, tuple[int, ...]]
) -> tuple[KernelArtifact, ...]:
    """The kernel IR, CUDA and launch of every generated kernel, at `sizes` (by tensor name)."""
    from fuser_core.codegen.cuda import print_kernel

    artifacts = []
    for group_id, kernel in lower_groups(segmented, runtime_name, index_type).items():
        group = segmented.groups[group_id]
        shapes = {t.name: sizes.get(int(t.name[1:]), ()) for t in kernel.tensors}
        strides = {name: _contiguous(shape) for name, shape in shapes.items()}
        try:
            params = launch_params(kernel, shapes, strides, {})
        except (KeyError, IndexError, FuserError):  # a size only a run knows (a scalar input)
            params = LaunchParams((0, 0, 0), (0, 0, 0), kernel.shared_bytes)
        artifacts.append(
            KernelArtifact(
                group_id,
                kernel.name,
                group.scheduler.value,
                k.print_kernel_ir(kernel),
                print_kernel(kernel),
                params,
                kernel.index_type.cuda,
            )
        )
    return tuple(artifacts)


def _contiguous(shape: Sequence[int]) -> list[int]:
    strides, running = [], 1
    for size in reversed(shape):
        strides.append(running)
        running *= max(size, 1)
    return strides[::-1]
