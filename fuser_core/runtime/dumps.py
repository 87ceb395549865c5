"""The dump options a new runtime prints, each a printer of one artifact it holds."""

from __future__ import annotations

from fuser_core.options import DumpOption, Options, emit_dump
from fuser_core.runtime.artifacts import LaunchRecord
from fuser_core.runtime.kernel_runtime import FusionKernelRuntime
from fuser_core.segmenter.printer import (
    print_presched,
    print_scheduler_params,
    print_segmented_fusion,
    print_segmenter_log,
)
from fuser_core.segmenter.printer import (
    print_scheduled as print_scheduled_groups,
)


def _preseg(runtime: FusionKernelRuntime) -> str:
    passes = runtime.compiled.passes
    text = "".join(
        f"  {r.name}: skipped (disabled)\n"
        if r.skipped
        else f"  {r.name}: {'changed' if r.changed else 'no change'} ({r.seconds * 1e3:.3f} ms)\n"
        for r in passes
    )
    last = passes[-1].ir_after if passes and passes[-1].ir_after else ""
    return "Pre-segmentation passes:\n" + text + "Fusion IR after pre-segmentation passes:\n" + last


def print_scheduled(runtime: FusionKernelRuntime, transforms: bool) -> str:
    return print_scheduled_groups(runtime.segmented, runtime.name, transforms)


def emit_runtime_dumps(opts: Options, runtime: FusionKernelRuntime) -> None:
    segmented = runtime.segmented
    name = runtime.name
    emit_dump(opts, DumpOption.fusion_ir_preseg, lambda: _preseg(runtime))
    emit_dump(opts, DumpOption.fusion_ir_presched, lambda: print_presched(segmented))
    emit_dump(opts, DumpOption.segmented_fusion, lambda: print_segmented_fusion(segmented))
    emit_dump(opts, DumpOption.segmenter_logging, lambda: print_segmenter_log(segmented))
    emit_dump(opts, DumpOption.scheduler_params, lambda: print_scheduler_params(segmented, name))
    emit_dump(opts, DumpOption.fusion_ir_math, lambda: print_scheduled(runtime, transforms=False))
    emit_dump(opts, DumpOption.fusion_ir, lambda: print_scheduled(runtime, transforms=True))
    emit_dump(opts, DumpOption.kernel_ir, lambda: print_kernel_texts(runtime, "kernel_ir"))
    emit_dump(opts, DumpOption.cuda_kernel, lambda: print_kernel_texts(runtime, "cuda"))
    emit_dump(opts, DumpOption.cuda_full, lambda: print_kernel_texts(runtime, "full"))
    emit_dump(opts, DumpOption.launch_param, lambda: print_launch_params(runtime))


def print_kernel_texts(runtime: FusionKernelRuntime, what: str) -> str:
    kernels = runtime.kernels
    if not kernels:
        return f"{runtime.name}: no generated kernels (every group is expr_eval, no_op or not yet generated)\n"
    parts = []
    for kernel in kernels:
        if what == "kernel_ir":
            text = kernel.kernel_ir
        elif what == "cuda":
            text = kernel.cuda
        else:
            text = full_source(runtime, kernel.group_id)
        parts.append(f"===== g{kernel.group_id} {kernel.scheduler}: {kernel.name} =====\n{text}")
    return "\n".join(parts)


def full_source(runtime: FusionKernelRuntime, group_id: int) -> str:
    from fuser_core.codegen.cuda import translation_unit
    from fuser_core.runtime.group_lowering import lower_groups

    return translation_unit(lower_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[group_id])


def print_launch_params(runtime: FusionKernelRuntime) -> str:
    return "".join(f"{k.name}\n  {k.launch.line()}\n" for k in runtime.kernels) or f"{runtime.name}: no kernels\n"


def print_launches(launches: tuple[LaunchRecord, ...], backend: str) -> str:
    if not launches:
        return f"Kernel metadata: nothing launched ({backend} backend)\n"
    lines = ["Kernel metadata:"]
    for r in launches:
        time = (
            f"{r.seconds * 1e6:.1f} us, {r.gbps:.0f} GB/s ({r.fraction_of_peak:.0%} of peak)"
            if r.seconds
            else "not timed (enable kernel_profile)"
        )
        lines.append(
            f"  g{r.group_id} {r.kernel}: {r.launch.line()}; read {r.bytes_read} B, wrote {r.bytes_written} B;"
            f" registers {r.registers}, spills {r.spills} B; {time}; {r.estimate}"
            + (f"; measured at {r.fraction_of_estimate:.0%} of the estimate" if r.fraction_of_estimate else "")
        )
    return "\n".join(lines) + "\n"
