"""What one run of the session left, as plain data read from the executor cache's
RunReport and the runtime it names: the texts fuser_core's printers make of each
stage, the segmentation as rows, the kernels and launches codegen leaves (none yet on
the reference backend), and the correctness check. Nothing here recomputes a stage:
every field is read from an artifact the pipeline already produced.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from fuser_core import (
    KernelArtifact,
    KernelChoice,
    LaunchRecord,
    RooflineEstimate,
    RunReport,
    SegmentedFusion,
    bind_args,
    convert_inputs,
    gpu_name,
    kernel_name,
    print_kernel,
    print_math,
    print_presched,
    print_scheduler_params,
    print_segmented_fusion,
    print_segmenter_log,
    recompute_lines,
)

NO_KERNELS = "no kernels generated yet: the {backend} backend runs the scheduled groups without CUDA code"
NOTHING_LAUNCHED = "{backend} backend: nothing launched, so there are no per-kernel times"


@dataclass(frozen=True)
class PassArtifact:
    name: str
    changed: bool
    seconds: float
    ir_after: str


@dataclass(frozen=True)
class TransformBlock:
    """One tensor of a TransformPrinter block: its domains and the transforms between."""

    tensor: str
    lines: tuple[tuple[str, str], ...]  # (kind, text): kind is a domain name, "contiguity" or "transform"


@dataclass(frozen=True)
class GroupArtifact:
    id: int
    scheduler: str
    kernel: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    exprs: int
    params: tuple[tuple[str, str], ...]
    dropped_hints: tuple[str, ...]
    scheduled_math: str  # empty for groups that have no scheduled fusion
    scheduled_ir: str
    tensors: tuple[TransformBlock, ...]


@dataclass(frozen=True)
class EdgeArtifact:
    producer: int
    consumer: int
    tensor: str
    dtype: str
    shape: tuple[int, ...] | None
    itemsize: int

    @property
    def nbytes(self) -> int | None:
        if self.shape is None:
            return None
        count = 1
        for size in self.shape:
            count *= size
        return count * self.itemsize


@dataclass(frozen=True)
class OutputArtifact:
    """One output of the fusion at the run's sizes (what an element trace starts from)."""

    tensor: str
    dtype: str
    shape: tuple[int, ...] | None  # None where a size could not be evaluated


@dataclass(frozen=True)
class MergeReason:
    first: int
    second: int
    category: str
    summary: str
    rejections: tuple[str, ...]


@dataclass(frozen=True)
class ExprArtifact:
    """One expression of the segmented (complete) fusion, for the graph."""

    name: int
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    group: int | None


@dataclass(frozen=True)
class OutputCheck:
    index: int
    max_abs_error: float
    ok: bool


@dataclass(frozen=True)
class Correctness:
    note: str
    checks: tuple[OutputCheck, ...] = ()

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


@dataclass(frozen=True)
class Artifacts:
    """Every stage of one successful run."""

    runtime: str  # f<F>_c<C>_r<R>
    device: str
    original_ir: str
    concretization: str  # the ConcretizationInfo as printed
    concretized_ir: str  # the concretized fusion with its transforms
    signature: str
    cache_hit: bool
    cache_level: str
    cache_reasons: tuple[str, ...]
    cache_line: str
    arguments: tuple[str, ...]
    passes: tuple[PassArtifact, ...]
    presched: str
    segmented: str
    segmenter_log: str
    scheduler_params: str
    groups: tuple[GroupArtifact, ...]
    edges: tuple[EdgeArtifact, ...]
    reasons: tuple[MergeReason, ...]
    whole_fusion_rejections: tuple[str, ...]
    exprs: tuple[ExprArtifact, ...]
    kernels: tuple[KernelArtifact, ...]
    launches: tuple[LaunchRecord, ...]
    wall_seconds: float
    correctness: Correctness
    backend: str
    core_dumps: tuple[tuple[str, str], ...] = field(default=())
    index_type: str = ""  # "int32" or "int64": the signature's, from the inputs' sizes
    compiles: tuple[str, ...] = ()  # on a miss that built a runtime: what each kernel's compile did
    kernel_refusals: tuple[tuple[int, str], ...] = ()  # (group id, why codegen made no kernel for it)
    estimates: tuple[RooflineEstimate, ...] = ()  # each group's roofline estimate at the run's sizes
    choices: tuple[KernelChoice, ...] = ()  # kernel_choice: each group's candidate kernels and the one kept
    outputs: tuple[OutputArtifact, ...] = ()  # the fusion's outputs at the run's sizes
    recomputed: tuple[str, ...] = ()  # tensors recomputed in their readers instead of crossing a cut
    # The GPU a cuda run ran on ("" elsewhere): `device` is what sized the heuristics, the
    # GPU itself unless a device model was named.
    gpu: str = ""

    @property
    def scheduled_math(self) -> str:
        return print_scheduled_texts(self.groups, transforms=False)

    @property
    def scheduled_ir(self) -> str:
        return print_scheduled_texts(self.groups, transforms=True)

    def group(self, group_id: int) -> GroupArtifact:
        return next(g for g in self.groups if g.id == group_id)

    def estimate(self, group_id: int) -> RooflineEstimate | None:
        return next((e for e in self.estimates if e.group_id == group_id), None)

    @property
    def kernels_note(self) -> str:
        """Why there is no kernel to show: each group's reason from codegen."""
        if self.kernels:
            return ""
        if not self.kernel_refusals:
            return NO_KERNELS.format(backend=self.backend)
        reasons = "; ".join(f"g{group} {reason}" for group, reason in self.kernel_refusals)
        return f"no kernels generated yet: {reasons}"

    @property
    def launches_note(self) -> str:
        return NOTHING_LAUNCHED.format(backend=self.backend) if not self.launches else ""


def print_scheduled_texts(groups: Sequence[GroupArtifact], transforms: bool) -> str:
    """The same text as fuser_core's `fusion_ir_math` / `fusion_ir` dumps, from the groups."""
    text = ""
    for g in groups:
        body = g.scheduled_ir if transforms else g.scheduled_math
        if body:
            text += f"===== g{g.id} {g.scheduler}: {g.kernel} =====\n" + body
    return text


def collect(
    report: RunReport,
    original_ir: str,
    inputs: Sequence[Any],
    correctness: Correctness,
    backend: str,
    core_dumps: Sequence[tuple[str, str]] = (),
) -> Artifacts:
    """Read every stage of one execution from its report and runtime."""
    runtime = report.runtime
    segmented = runtime.segmented
    event = report.event
    outputs = [o for o in segmented.complete.outputs if getattr(o, "name_category", "") == "tv"]
    shapes = _shapes_of([e.val for e in segmented.edges] + outputs, segmented, inputs)
    return Artifacts(
        runtime=runtime.name,
        device=runtime.compiled.device.name,
        original_ir=original_ir,
        concretization=runtime.info.describe(),
        concretized_ir=print_kernel(runtime.fusion),
        signature=str(runtime.signature),
        cache_hit=event.hit,
        cache_level=event.level,
        cache_reasons=tuple(event.reasons),
        cache_line=event.line(),
        arguments=tuple(report.arguments),
        passes=tuple(PassArtifact(p.name, p.changed, p.seconds, p.ir_after or "") for p in runtime.compiled.passes),
        presched=print_presched(segmented),
        segmented=print_segmented_fusion(segmented),
        segmenter_log=print_segmenter_log(segmented),
        scheduler_params=print_scheduler_params(segmented, runtime.name),
        groups=tuple(_group(g, runtime.name) for g in segmented.groups),
        edges=_edges(segmented, shapes),
        reasons=tuple(
            MergeReason(r.first, r.second, r.category.value, r.summary, tuple(x.line() for x in r.rejections))
            for r in segmented.reasons
        ),
        whole_fusion_rejections=tuple(r.line() for r in segmented.whole_fusion_rejections),
        exprs=_exprs(segmented),
        kernels=tuple(runtime.kernels),
        kernel_refusals=tuple(sorted(runtime.kernel_refusals.items())),
        launches=tuple(report.launches),
        wall_seconds=report.seconds,
        correctness=correctness,
        backend=backend,
        core_dumps=tuple(core_dumps),
        index_type=runtime.signature.index_type,
        compiles=tuple(report.compiles),
        estimates=tuple(report.estimates),
        choices=tuple(report.choices),
        outputs=tuple(OutputArtifact(f"T{tv.name}", tv.dtype.cuda, shapes.get(id(tv))) for tv in outputs),
        recomputed=tuple(recompute_lines(segmented)),
        gpu=(gpu_name() or "") if backend == "cuda" else "",
    )


def _tensor_names(vals: Sequence[Any]) -> tuple[str, ...]:
    return tuple(f"T{v.name}" for v in vals if getattr(v, "name_category", "") == "tv")


def _group(group: Any, runtime_name: str) -> GroupArtifact:
    fusion = group.fusion
    params = group.params
    rows = tuple((name, str(value)) for name, value in params.shown())
    record = group.record
    drops = tuple(f"{d.tensor}: {d.reason}" for d in (record.dropped_hints or ())) if record is not None else ()
    scheduled_ir = print_kernel(fusion, include_transforms=True) if fusion is not None else ""
    return GroupArtifact(
        id=group.id,
        scheduler=group.scheduler.value,
        kernel=kernel_name(group, runtime_name),
        inputs=_tensor_names(group.inputs),
        outputs=_tensor_names(group.outputs),
        exprs=len(group.exprs),
        params=rows,
        dropped_hints=drops,
        scheduled_math=print_math(fusion) if fusion is not None else "",
        scheduled_ir=scheduled_ir,
        tensors=parse_transform_blocks(scheduled_ir),
    )


def _edges(segmented: SegmentedFusion, shapes: dict[int, tuple[int, ...]]) -> tuple[EdgeArtifact, ...]:
    return tuple(
        EdgeArtifact(
            e.producer, e.consumer, f"T{e.val.name}", e.val.dtype.cuda, shapes.get(id(e.val)), e.val.dtype.itemsize
        )
        for e in segmented.edges
    )


def _shapes_of(tensors: Sequence[Any], segmented: SegmentedFusion, inputs: Sequence[Any]) -> dict[int, tuple[int, ...]]:
    """The run's sizes of `tensors` (those handed between kernels, the fusion's outputs),
    from the bound inputs."""
    if not tensors:
        return {}
    complete = segmented.complete
    ev = bind_args(complete, convert_inputs(complete, inputs))
    shapes: dict[int, tuple[int, ...]] = {}
    for tv in tensors:
        sizes = [ev.evaluate(axis.extent) for axis in tv.logical_no_reductions()]
        if all(isinstance(s, int) for s in sizes):
            shapes[id(tv)] = tuple(sizes)
    return shapes


def _exprs(segmented: SegmentedFusion) -> tuple[ExprArtifact, ...]:
    out = []
    for expr in segmented.complete.exprs():
        if not expr.is_tensor_op():
            continue
        group = segmented.group_of(expr)
        out.append(
            ExprArtifact(
                expr.name,
                expr.op_name,
                _tensor_names(expr.inputs),
                _tensor_names(expr.outputs),
                group.id if group is not None else None,
            )
        )
    return tuple(out)


_DOMAIN = re.compile(r"^ (root|logical|allocation|loop) domain : \((.*)\)$")


def parse_transform_blocks(text: str) -> tuple[TransformBlock, ...]:
    """Split the TransformPrinter part of a `%kernel` print into one block per tensor."""
    _, found, rest = text.partition("\nTransformPrinter : \n")
    if not found:
        return ()
    blocks: list[TransformBlock] = []
    tensor, lines = "", []  # type: ignore[var-annotated]
    for line in rest.splitlines():
        if line.startswith("} // %kernel"):
            break
        if line.startswith("T"):
            if tensor:
                blocks.append(TransformBlock(tensor, tuple(lines)))
            tensor, lines = line, []
        elif match := _DOMAIN.match(line):
            lines.append((f"{match.group(1)} domain", match.group(2)))
        elif line.startswith(" contiguity:"):
            lines.append(("contiguity", line.split(":", 1)[1].strip()))
        elif line.strip():
            lines.append(("transform", line.strip()))
    if tensor:
        blocks.append(TransformBlock(tensor, tuple(lines)))
    return tuple(blocks)


@dataclass(frozen=True)
class Stage:
    """One stage's printed form: the key of its dump option (where one exists), a short
    label for summaries and headings, and its text."""

    key: str
    label: str
    text: str


def passes_text(passes: Sequence[PassArtifact], timed: bool = True) -> str:
    """As fuser_core's `fusion_ir_preseg` dump prints the passes' record (without the
    times when `timed` is off: they differ on every run, and a diff must not see them)."""
    lines = [f"  {p.name}: {'changed' if p.changed else 'no change'}" for p in passes]
    if timed:
        lines = [f"{line} ({p.seconds * 1e3:.3f} ms)" for line, p in zip(lines, passes, strict=True)]
    text = "".join(line + "\n" for line in lines)
    last = passes[-1].ir_after if passes else ""
    return "Pre-segmentation passes:\n" + text + "Fusion IR after pre-segmentation passes:\n" + last


def launch_text(kernel: KernelArtifact) -> str:
    return f"{kernel.name} ({kernel.index_type} indexing)\n{kernel.launch.line()}\n"


def stages(a: Artifacts) -> tuple[Stage, ...]:
    """Every stage of a run in pipeline order; per-kernel stages once codegen fills them."""
    found = [
        Stage("fusion_ir_original", "original IR", a.original_ir),
        Stage(
            "fusion_ir_concretized", "concretization", a.concretization + "\nConcretized Fusion:\n" + a.concretized_ir
        ),
        Stage("cache_events", "cache", a.cache_line + "\n"),
        Stage("fusion_args", "arguments", "Arguments:\n" + "".join(f"  {line}\n" for line in a.arguments)),
        Stage("fusion_ir_preseg", "passes", passes_text(a.passes, timed=False)),
        Stage("fusion_ir_presched", "pre-scheduled IR", a.presched),
        Stage("segmented_fusion", "segments", a.segmented),
        Stage("segmenter_logging", "segmenter log", a.segmenter_log),
        Stage("scheduler_params", "heuristics", a.scheduler_params),
        Stage("fusion_ir_math", "scheduled IR", a.scheduled_math),
        Stage("fusion_ir", "transforms", a.scheduled_ir),
    ]
    for k in a.kernels:
        found.append(Stage("kernel_ir", f"kernel IR g{k.group_id}", k.kernel_ir))
        found.append(Stage("cuda_kernel", f"CUDA g{k.group_id}", k.cuda))
        found.append(Stage("launch_param", f"launch g{k.group_id}", launch_text(k)))
    return tuple(found)
