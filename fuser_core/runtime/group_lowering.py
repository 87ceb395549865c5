"""Which segment groups get a generated kernel, and that kernel: its name, its index
type, its kernel IR, and the artifacts (kernel IR, CUDA, launch) the dumps show.

Nothing here needs a GPU or CuPy: the cuda backend lowers its groups here, and so do
the dumps, the element tracer, the tests and the benchmarks on a machine with none. A
group codegen cannot lower (an op or dtype with no CUDA form yet) is refused with the
reason, and runs on the host; it is never a failed run.
"""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.cuda import print_kernel, translation_unit
from fuser_core.codegen.lower import lower_group
from fuser_core.errors import FuserError
from fuser_core.ir.dtype import DataType
from fuser_core.runtime.artifacts import KernelArtifact, LaunchParams
from fuser_core.runtime.launch_sizes import launch_params
from fuser_core.scheduler.base import SchedulerType
from fuser_core.segmenter.segmented_fusion import SegmentedFusion, SegmentedGroup

GENERATED = {
    SchedulerType.pointwise,
    SchedulerType.transpose,
    SchedulerType.reduction,
    SchedulerType.inner_persistent,
    SchedulerType.outer_persistent,
    SchedulerType.inner_outer_persistent,
    SchedulerType.user,
}


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


def kernel_artifacts(
    segmented: SegmentedFusion, runtime_name: str, index_type: str, sizes: dict[int, tuple[int, ...]]
) -> tuple[KernelArtifact, ...]:
    """The kernel IR, CUDA and launch of every generated kernel, at `sizes` (by tensor name)."""
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
