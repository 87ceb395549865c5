"""A FusionKernelRuntime: one concretized fusion made runnable for one input signature.

Building it runs the pipeline's compile half on a copy of the concretized fusion: the
pre-segmentation passes, segmentation with the run's sizes, and the scheduling of
every group. The backend then runs the scheduled groups; the reference backend
evaluates each group's own fusion with NumPy, kernel by kernel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from fuser_core.dynamic.concretization_info import ConcretizationInfo
from fuser_core.ir.fusion import Fusion
from fuser_core.options import DisableOption, EnableOption, Options
from fuser_core.passes import PassRecord, run_presegmentation_passes
from fuser_core.runtime.arguments import bind_args
from fuser_core.runtime.artifacts import KernelArtifact, LaunchRecord
from fuser_core.runtime.reference import evaluate_groups
from fuser_core.runtime.signature import InputSignature
from fuser_core.scheduler.device import DeviceProperties
from fuser_core.scheduler.group_view import RuntimeInfo
from fuser_core.segmenter.finder import segment
from fuser_core.segmenter.scheduling import schedule_candidates, schedule_groups
from fuser_core.segmenter.segmented_fusion import SegmentedFusion


class Executable(Protocol):
    def run(self, args: Sequence[Any]) -> list[Any]: ...


class Backend(Protocol):
    name: str

    def compile(self, segmented: SegmentedFusion, signature: InputSignature, runtime_name: str) -> Executable: ...


class _ReferenceExecutable:
    def __init__(self, segmented: SegmentedFusion) -> None:
        self.complete = segmented.complete
        # Rfactored partial reductions have no NumPy meaning of their own: the reference
        # runs each group's math as segmented, before its transforms.
        self.groups = [g.unscheduled for g in segmented.groups if g.unscheduled is not None]

    def run(self, args: Sequence[Any]) -> list[Any]:
        return evaluate_groups(self.complete, self.groups, bind_args(self.complete, args))


class ReferenceBackend:
    """Runs fusions with NumPy on the host, group by group: every op, every dtype, no GPU."""

    name = "reference"

    def compile(self, segmented: SegmentedFusion, signature: InputSignature, runtime_name: str = "") -> Executable:
        return _ReferenceExecutable(segmented)


@dataclass(frozen=True)
class CompiledFusion:
    """What the compile half of the pipeline left: the passes' record, the segmented
    fusion with each group's parameters, transforms and scheduled fusion."""

    passes: tuple[PassRecord, ...]
    segmented: SegmentedFusion
    device: DeviceProperties
    sizes: dict[int, tuple[int, ...]]  # every tensor's extents at the sizes it was built for, by name


@dataclass(frozen=True)
class CompileFlags:
    """The options that change what the compile half makes (and so the cache key)."""

    infer_allocation_order: bool = True
    vectorize: bool = True
    segment: bool = True
    int64_index: bool = False
    kernel_choice: bool = False  # schedule (and on the GPU compile and time) each group's candidates
    shared_persistence: bool = True  # inner persistent rows in shared memory where registers would spill
    rereading: bool = True  # inner normalizations may re-read their rows (scheduler.rereading)
    cooperative_grid: bool = True  # a one-wave grid's reductions fold in every block (inner_outer)

    @staticmethod
    def of(opts: Options) -> CompileFlags:
        return CompileFlags(
            not opts.is_disabled(DisableOption.allocation_order_inference),
            not opts.is_disabled(DisableOption.vectorization),
            not opts.is_disabled(DisableOption.segmentation),
            opts.is_enabled(EnableOption.int64_index),
            opts.is_enabled(EnableOption.kernel_choice),
            not opts.is_disabled(DisableOption.shared_persistence),
            not opts.is_disabled(DisableOption.rereading),
            not opts.is_disabled(DisableOption.cooperative_grid),
        )


def compile_fusion(
    concretized: Fusion,
    args: Sequence[Any],
    device: DeviceProperties,
    index_type: str,
    flags: CompileFlags = CompileFlags(),  # frozen, so one shared default is safe
) -> CompiledFusion:
    fusion, _ = concretized.clone()
    skip = frozenset() if flags.infer_allocation_order else frozenset({"allocation_order_inference"})
    records = run_presegmentation_passes(fusion, skip=skip)
    info = RuntimeInfo(
        bind_args(fusion, args, values=False),
        device,
        index_type,
        vectorize=flags.vectorize,
        shared_persistence=flags.shared_persistence,
        rereading=flags.rereading,
        cooperative_grid=flags.cooperative_grid,
    )
    segmented = segment(fusion, info, allow_segmentation=flags.segment)
    schedule_groups(segmented)
    if flags.kernel_choice:
        schedule_candidates(segmented, info)
    return CompiledFusion(tuple(records), segmented, device, _tensor_sizes(fusion, info))


def _tensor_sizes(fusion: Fusion, info: RuntimeInfo) -> dict[int, tuple[int, ...]]:
    sizes = {}
    for tv in fusion.tensors():
        try:
            sizes[tv.name] = tuple(info.extent(d) for d in tv.logical_no_reductions())
        except Exception:  # an extent only the run computes (a data-dependent size)
            continue
    return sizes


@dataclass
class FusionKernelRuntime:
    fusion_id: int
    concretization_id: int  # 1-based, per (device, concretization) key
    runtime_id: int  # 0-based, under that key
    info: ConcretizationInfo
    fusion: Fusion  # the concretized fusion this runtime runs
    signature: InputSignature
    compiled: CompiledFusion
    executable: Executable
    backend_name: str = "reference"
    flags: CompileFlags = field(default_factory=CompileFlags)
    _kernels: tuple[KernelArtifact, ...] | None = field(default=None, repr=False, compare=False)
    _refusals: dict[int, str] | None = field(default=None, repr=False, compare=False)

    @property
    def name(self) -> str:
        return f"f{self.fusion_id}_c{self.concretization_id}_r{self.runtime_id}"

    @property
    def segmented(self) -> SegmentedFusion:
        return self.compiled.segmented

    def accepts(self, signature: InputSignature) -> bool:
        return signature == self.signature

    def refusal(self, args: Sequence[Any]) -> str | None:
        """Why this runtime cannot run these inputs (same signature, other sizes): a
        kernel's scheduler rejects them, or would choose other parameters; None if it can."""
        return self.segmented.refusal(self.runtime_info(args))

    def runtime_info(self, args: Sequence[Any]) -> RuntimeInfo:
        """The sizes of these (converted) inputs as this runtime's schedulers see them."""
        complete = self.segmented.complete
        return RuntimeInfo(
            bind_args(complete, args, values=False),
            self.compiled.device,
            self.signature.index_type,
            vectorize=self.flags.vectorize,
            shared_persistence=self.flags.shared_persistence,
            rereading=self.flags.rereading,
            cooperative_grid=self.flags.cooperative_grid,
        )

    @property
    def kernels(self) -> tuple[KernelArtifact, ...]:
        """One artifact per generated kernel, in launch order: its kernel IR, CUDA and the
        launch its schedule gives at the sizes this runtime was built for. Lowered on
        first use on the reference backend (which runs no kernel), so they can be read
        and compiled on a machine with no GPU."""
        if self._kernels is None:
            from fuser_core.runtime.group_lowering import kernel_artifacts

            self._kernels = kernel_artifacts(self.segmented, self.name, self.signature.index_type, self.compiled.sizes)
        return self._kernels

    @property
    def kernel_refusals(self) -> dict[int, str]:
        """Why each group without a generated kernel has none, by group id."""
        from fuser_core.runtime.group_lowering import lowered_groups

        if self._refusals is None:
            self._refusals = lowered_groups(self.segmented, self.name, self.signature.index_type)[1]
        return dict(self._refusals)

    @property
    def launches(self) -> tuple[LaunchRecord, ...]:
        """What the last run launched (the cuda backend), else nothing."""
        return tuple(getattr(self.executable, "last_launches", ()))

    def run(self, args: Sequence[Any]) -> list[Any]:
        return self.executable.run(args)
