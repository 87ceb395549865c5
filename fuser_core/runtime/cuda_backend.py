"""The CUDA backend: each generated kernel compiled with NVRTC and launched through CuPy.

Groups run in order on the current device; intermediates between kernels are device
arrays. A group with no generated kernel (expr_eval and no_op groups, and any group
codegen refuses) runs as a HostGroup: a library call on the device, or its math on the
host with the reference backend; its launch record says so. That is slow but never wrong.

This module is the executable and the backend: a full run, its CUDA error handling and
launch records, and the cache-hit fast path's entry. The parts live beside it: which
groups get a kernel (`group_lowering`), one kernel's compile and launch
(`generated_group`, `packed_args`, `launch_sizes`), a group without one (`host_group`),
device arrays (`device_arrays`), and the fast path's plan and replay (`fast_plan`,
`fast_path`).
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.ir.rng import bind_run_seed
from fuser_core.ir.tensor_view import TensorView
from fuser_core.options import EnableOption, current_options
from fuser_core.runtime.arguments import TensorArg, bind_args
from fuser_core.runtime.artifacts import LaunchRecord
from fuser_core.runtime.device_arrays import device_array, on_host, to_torch
from fuser_core.runtime.device_library import view_shapes
from fuser_core.runtime.fast_path import FastPlan
from fuser_core.runtime.fast_plan import make_fast_plan
from fuser_core.runtime.generated_group import GeneratedGroup, complete_position, launch_record
from fuser_core.runtime.group_lowering import lowered_groups
from fuser_core.runtime.host_group import HostGroup
from fuser_core.runtime.launch_errors import LaunchLog, is_cuda_error
from fuser_core.runtime.reference import leaf_values
from fuser_core.runtime.signature import InputSignature
from fuser_core.scheduler.device import DeviceProperties
from fuser_core.segmenter.segmented_fusion import SegmentedFusion


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


class CudaExecutable:
    """A segmented fusion compiled for the GPU: one step per group, run in order."""

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
            host = [on_host(o, out) for o, out in zip(outputs, self.complete.outputs, strict=True)]
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
                tensors[val.name] = device_array(cupy, arg)
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
                    p: scalars.get(complete_position(self.complete, v)) for p, v in enumerate(fusion_inputs)
                }
                params, vectorized = step.run(
                    tensors, group_scalars, leaves or {}, cupy, stream, events[-1] if profile else None, log
                )
                if sync:
                    log.synchronizing()
                    stream.synchronize()
                    log.synchronized()
                records.append(launch_record(step, params, tensors, self.device, vectorized))
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
                to_torch(o, out.dtype) if isinstance(out, TensorView) else o
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
        generated = [step for step in self.steps if isinstance(step, GeneratedGroup)]
        if self._needs_leaves:
            return None
        if any(getattr(step, "timing", False) for step in generated):  # a kernel choice still timing
            return None
        # Views (no_op groups) of what the kernels wrote, read by no kernel: returned as
        # reshapes of it (a normalization's result reshaped back).
        views: dict[int, tuple[int, tuple[int, ...]]] = {}
        others = [step for step in self.steps if not isinstance(step, GeneratedGroup)]
        if others:
            if any(step.device_path != "view" for step in others):
                return None
            leaves = self._leaves(args)
            for step in others:
                for view, source, shape in view_shapes(step.fusion, leaves):
                    views[view] = (source, shape)
            read = {tv.name for step in generated for tv in step.inputs}
            if read & views.keys():
                return None
        return make_fast_plan(generated, self.complete, args, self.cupy, self.device, self.log, views)

    def _output(self, out: Any, tensors: dict[int, Any]) -> Any:
        if isinstance(out, TensorView):
            return tensors[out.name]
        raise FuserError("scalar outputs are not supported by the CUDA backend yet", op="execute")


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
