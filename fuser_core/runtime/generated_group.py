"""One generated kernel of a segment group: compiled (NVRTC, through the kernel cache)
on first need, and launched by a full run of the cuda backend.

A vectorized kernel reads and writes in vectors, which needs every vectorized tensor's
data pointer and outer strides aligned to the vector; a launch whose arguments are not
takes the kernel's scalar fallback, lowered and compiled on demand. Outputs are allocated
here, with the strides of their allocation order and stride 0 along an expanded axis.

A kernel with workspaces (a grid reduction's work and semaphore buffers) takes one `T*`
per workspace after its scalars. They are allocated with CuPy, sized from the launch
(`workspace_elements`), and kept for the next launch: semaphores are allocated zeroed
and every launch leaves them zeroed, so no memset is needed between launches.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.cuda import translation_unit
from fuser_core.codegen.lower import lower_group
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.artifacts import LaunchParams, LaunchRecord
from fuser_core.runtime.device_arrays import allocate_workspace, empty_array, stored_elements
from fuser_core.runtime.launch_errors import FaultKernel, LaunchLog, op_locations
from fuser_core.runtime.launch_sizes import evaluate, extent_node, launch_params, workspace_elements
from fuser_core.runtime.packed_args import PackedArgs, launch
from fuser_core.runtime.reference import expanded_axes
from fuser_core.scheduler.device import DeviceProperties
from fuser_core.segmenter.segmented_fusion import SegmentedGroup


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
        self.alloc_orders = {f"T{tv.name}": alloc_order(tv) for tv in [*self.inputs, *self.outputs]}
        # An output's expanded broadcast axes: allocated with one element, seen with stride 0.
        self.expanded = {f"T{tv.name}": expanded_axes(tv) for tv in self.outputs}
        self.last_cache_hit = True
        self.lines = op_locations(group.exprs)  # the script lines of its ops, for CUDA errors
        # Workspace buffers kept between launches: by workspace and stream (pointer), its
        # elements and device array. Per stream: launches on two streams may run at once.
        self._workspaces: dict[tuple[k.Workspace, int], tuple[int, Any]] = {}

    def compiled(self, vectorized: bool) -> _Compiled:
        found = self._compiled.get(vectorized)
        if found is None:
            from fuser_core.runtime.kernel_cache import compile_kernel
            from fuser_core.runtime.nvrtc import allow_dynamic_shared_memory, load_module

            kernel = self.kernel
            if not vectorized:
                kernel = lower_group(self.fusion, self.kernel.name, self.kernel.index_type, vectorize=False)  # type: ignore[arg-type]
            module = compile_kernel(translation_unit(kernel), kernel.name, arch=self.device)
            self.last_cache_hit = module.cache_hit
            loaded = load_module(module)[kernel.name]
            allow_dynamic_shared_memory(loaded, kernel.dynamic_shared_bytes)
            found = _Compiled(loaded, module, PackedArgs(kernel))
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
                evaluate(extent_node(self.kernel, tv, axis), sizes, strides, scalar_values) for axis in range(tv.ndim)
            ]
            array = empty_array(cupy, shape, tv.dtype, self.alloc_orders[name], self.expanded[name])
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
        compiled.packed.set_divisors(sizes, strides, scalar_values)
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
        an earlier launch on this stream when it is large enough, else a new one (which is
        then kept)."""
        arrays = []
        stream = cupy.cuda.get_current_stream().ptr if kernel.workspaces else 0
        for workspace in kernel.workspaces:
            elements = workspace_elements(workspace, params)
            kept = self._workspaces.get((workspace, stream))
            if kept is None or kept[0] < elements:
                kept = (elements, allocate_workspace(cupy, workspace, elements))
                self._workspaces[(workspace, stream)] = kept
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


def alloc_order(tv: TensorView) -> list[int]:
    """The logical axis of each allocation axis (outermost first)."""
    logical = tv.logical_no_reductions()
    alloc = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
    return [next(i for i, d in enumerate(logical) if d is a) for a in alloc]


def launch_record(
    step: GeneratedGroup, params: LaunchParams, tensors: dict[int, Any], device: DeviceProperties, vectorized: bool
) -> LaunchRecord:
    """What the run report says of one launch of `step`: bytes moved, registers, spills and
    the memory-bound estimate (its time is filled in by kernel_profile)."""
    read = sum(stored_elements(tensors[tv.name]) * tv.dtype.itemsize for tv in step.inputs)
    written = sum(stored_elements(tensors[tv.name]) * tv.dtype.itemsize for tv in step.outputs)
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


def complete_position(fusion: Fusion, val: Any) -> int:
    """The position of a group fusion's input `val` among the inputs of the complete
    `fusion` (-1 where it is none of them)."""
    for position, v in enumerate(fusion.inputs):
        if v.name == getattr(val, "name", None) and type(v) is type(val):
            return position
    return -1
