"""Making the cache-hit fast path's plan: what a call with these sizes, strides and dtypes
launches, worked out once from the executable's generated groups.

Per kernel: its output shapes and strides, its launch, the packed size, stride and
divisor fields of its arguments (for its vectorized form and, packed on first need, its
scalar fallback), where each tensor argument's pointer comes from, and which pointers a
replay must check for vector alignment. Its workspaces are allocated (and zeroed) here
and kept alive by the plan. `fast_path.FastPlan` replays the plan; this module only
makes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fuser_core.codegen import kernel_ir as k
from fuser_core.errors import InternalError
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.arguments import TensorArg
from fuser_core.runtime.device_arrays import allocate_workspace
from fuser_core.runtime.fast_path import FastPlan, PlannedLaunch, PlannedOutput, output_strides, torch_dtype_supported
from fuser_core.runtime.generated_group import GeneratedGroup, complete_position
from fuser_core.runtime.launch_errors import LaunchLog
from fuser_core.runtime.launch_sizes import evaluate, extent_node, launch_params, workspace_elements
from fuser_core.runtime.packed_args import PackedArgs, check_resident
from fuser_core.scheduler.device import DeviceProperties


def make_fast_plan(
    steps: Sequence[GeneratedGroup],
    complete: Fusion,
    args: Sequence[Any],
    cupy: Any,
    device: DeviceProperties,
    log: LaunchLog,
    views: dict[int, tuple[int, tuple[int, ...]]] | None = None,
) -> FastPlan | None:
    """The plan of a call with `args` (None where an output is not written by a kernel, or
    torch cannot hold an output's dtype). `steps` are the groups with a kernel; `views`,
    by tensor name, the outputs of the others: views (no_op groups) of another tensor,
    as (that tensor's name, the view's shape), returned as a reshape of it."""
    positions = {v.name: p for p, v in enumerate(complete.inputs) if isinstance(v, TensorView)}
    torch_out = any(isinstance(a, TensorArg) and a.origin == "torch" for a in args)
    shapes: dict[int, tuple[int, ...]] = {}
    strides: dict[int, tuple[int, ...]] = {}
    scalars: dict[int, Any] = {}
    for position, (val, arg) in enumerate(zip(complete.inputs, args, strict=True)):
        if isinstance(arg, TensorArg):
            shapes[val.name], strides[val.name] = tuple(arg.shape), tuple(arg.strides)
        else:
            scalars[position] = arg
    launches = []
    for step in steps:
        assert isinstance(step, GeneratedGroup) and step.fusion is not None
        sizes: dict[str, Sequence[int]] = {}
        alloc: dict[str, Sequence[int]] = {}
        for tv in step.inputs:
            name = f"T{tv.name}"
            sizes[name] = shapes[tv.name]
            alloc[name] = [strides[tv.name][a] for a in step.alloc_orders[name]]
        values = {
            s.name: scalars.get(complete_position(complete, step.fusion.inputs[s.fusion_position]))
            for s in step.kernel.scalars
        }
        outputs = []
        for tv in step.outputs:
            name = f"T{tv.name}"
            if torch_out and not torch_dtype_supported(tv.dtype):
                return None
            shape = tuple(evaluate(extent_node(step.kernel, tv, a), sizes, alloc, values) for a in range(tv.ndim))
            order = step.alloc_orders[name]
            shapes[tv.name], strides[tv.name] = shape, output_strides(shape, order, step.expanded[name])
            sizes[name], alloc[name] = shape, [strides[tv.name][a] for a in order]
            outputs.append(PlannedOutput(tv.name, shape, strides[tv.name], tv.dtype))
        planned = planned_launch(cupy, step, sizes, alloc, values, positions, outputs)
        planned.kernel = step.fault_kernel(planned.params, bool(planned.checks))
        launches.append(planned)
    views = views or {}
    results: list[int] = []
    result_shapes: list[tuple[int, ...] | None] = []
    for out in complete.outputs:
        if not isinstance(out, TensorView):
            return None
        written = out.name
        while written in views:  # a view of a view: of the tensor a kernel wrote
            written = views[written][0]
        results.append(written)
        result_shapes.append(views[out.name][1] if out.name in views else None)
    if any(written in positions or written not in shapes for written in results):
        return None
    plan = FastPlan(
        launches,
        results,
        torch_out,
        device,
        log,
        [getattr(a, "device", None) for a in args],
        result_shapes=result_shapes,
    )
    if any(launch.workspaces for launch in launches):
        # Its work buffers and semaphores are this stream's: a launch on another stream
        # could run beside one on this stream over the same buffers.
        plan.stream_bound = cupy.cuda.get_current_stream().ptr
    return plan


def planned_launch(
    cupy: Any,
    step: GeneratedGroup,
    sizes: dict[str, Sequence[int]],
    alloc: dict[str, Sequence[int]],
    values: dict[str, Any],
    positions: dict[int, int],
    outputs: list[PlannedOutput],
) -> PlannedLaunch:
    """One kernel's launch in the plan: `sizes` and `alloc` (allocation strides) by tensor
    parameter, `values` by scalar parameter, `positions` of the complete fusion's inputs by
    tensor name."""
    # The plan's own workspace buffers, by workspace, shared by its two packings (they
    # run on one stream, one after the other) and kept alive by the PlannedLaunch.
    # The replay writes only tensor data pointers, so the workspace pointers set here
    # stay as they are.
    workspaces: dict[k.Workspace, Any] = {}

    def packed_for(vectorized: bool) -> tuple[Any, PackedArgs]:
        compiled = step.compiled(vectorized)
        packed = PackedArgs(compiled.packed.kernel)
        # The replay passes pointers in the order of `sources` (the vectorized kernel's).
        if [t.name for t in packed.kernel.tensors] != [t.name for t in kernel.tensors]:
            raise InternalError(f"{kernel.name}: its scalar fallback orders its tensor parameters differently")
        if packed.kernel.cooperative != kernel.cooperative:  # the replay launches both forms alike
            raise InternalError(f"{kernel.name}: it and its scalar fallback differ in their grid barrier")
        for position, t in enumerate(packed.kernel.tensors):
            packed.set_tensor(position, 0, sizes[t.name], alloc[t.name])
        for position, sc in enumerate(packed.kernel.scalars):
            packed.set_scalar(position, values[sc.name])
        packed.set_divisors(sizes, alloc, values)
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
    if kernel.cooperative:
        check_resident(function, params, kernel.name)
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
