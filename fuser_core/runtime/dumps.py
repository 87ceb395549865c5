"""The dump options a new runtime prints, each a printer of one artifact it holds."""

from __future__ import annotations

from fuser_core.options import DumpOption, Options, emit_dump
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
        f"  {r.name}: {'changed' if r.changed else 'no change'} ({r.seconds * 1e3:.3f} ms)\n" for r in passes
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
