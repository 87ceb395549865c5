"""One renderer per dump option, each reading one artifact of a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.text import Text

from workbench.artifacts import Artifacts, launch_text, passes_text, stages
from workbench.render.tables import (
    cache_text,
    choices_table,
    correctness_text,
    edges_table,
    estimates_table,
    launches_table,
    legend_table,
    note,
    params_table,
    passes_table,
    presched_ir,
    segments_table,
    transform_trees,
    whole_fusion_note,
)
from workbench.render.text import code_text, ir_text, rule

Renderer = Callable[[Artifacts], RenderableType]


def _concretized(a: Artifacts) -> RenderableType:
    return ir_text(a.concretization + "\nConcretized Fusion:\n" + a.concretized_ir)


def _args(a: Artifacts) -> RenderableType:
    return ir_text("Arguments:\n" + "".join(f"  {line}\n" for line in a.arguments))


def _preseg(a: Artifacts) -> RenderableType:
    last = passes_text(a.passes).split("Fusion IR after pre-segmentation passes:\n", 1)[1]
    return Group(passes_table(a), Text("Fusion IR after pre-segmentation passes:"), ir_text(last))


def _presched(a: Artifacts) -> RenderableType:
    return Group(presched_ir(a.presched), legend_table(a), whole_fusion_note(a))


def _segmented(a: Artifacts) -> RenderableType:
    return Group(segments_table(a), edges_table(a), ir_text(a.segmented))


def _segmenter_log(a: Artifacts) -> RenderableType:
    return ir_text(a.segmenter_log)


def _params(a: Artifacts) -> RenderableType:
    return Group(*(params_table(g) for g in a.groups))


def _scheduled_math(a: Artifacts) -> RenderableType:
    return ir_text(a.scheduled_math) if a.scheduled_math else note("no group has a scheduled fusion")


def _scheduled(a: Artifacts) -> RenderableType:
    return Group(*(transform_trees(g) for g in a.groups), ir_text(a.scheduled_ir))


def _per_kernel(render: Callable[..., RenderableType]) -> Renderer:
    def renderer(a: Artifacts) -> RenderableType:
        if not a.kernels:
            return note(a.kernels_note)
        parts: list[RenderableType] = []
        for k in a.kernels:
            parts += [Rule(f"g{k.group_id} {k.scheduler}: {k.name}", align="left"), render(k)]
        return Group(*parts)

    return renderer


def _metadata(a: Artifacts) -> RenderableType:
    return Group(launches_table(a), estimates_table(a), correctness_text(a))


RENDERERS: dict[str, Renderer] = {
    "fusion_ir_original": lambda a: ir_text(a.original_ir),
    "fusion_ir_concretized": _concretized,
    "fusion_ir_preseg": _preseg,
    "fusion_ir_presched": _presched,
    "segmented_fusion": _segmented,
    "segmenter_logging": _segmenter_log,
    "scheduler_params": _params,
    "fusion_ir_math": _scheduled_math,
    "fusion_ir": _scheduled,
    "fusion_args": _args,
    "cache_events": cache_text,
    # The codegen stages (issue 8): read from the runtime's kernels and the report's launches.
    "kernel_ir": _per_kernel(lambda k: ir_text(k.kernel_ir)),
    "cuda_kernel": _per_kernel(lambda k: code_text(k.cuda)),
    "launch_param": _per_kernel(lambda k: ir_text(launch_text(k))),
    "kernel_metadata": _metadata,
    "cuda_full": lambda a: _captured("cuda_full", a, lambda text: code_text(text)),
}


def _captured(name: str, a: Artifacts, render: Callable[[str], RenderableType]) -> RenderableType:
    """A dump whose text only fuser_core prints (during the run, when the option is on)."""
    texts = [text for option, text in a.core_dumps if option == name]
    if texts:
        return render("".join(t if t.endswith("\n") else t + "\n" for t in texts))
    if not a.kernels:
        return note(a.kernels_note)
    return note(f"{name}: printed while a runtime is built; run with this dump on (--dump {name}) on a cache miss")


def render_dump(name: str, a: Artifacts) -> RenderableType:
    """The named dump of a run; a dump option with no renderer of ours yet shows the text
    fuser_core emitted for it while running, or says why there is none."""
    renderer = RENDERERS.get(name)
    if renderer is not None:
        return renderer(a)
    return _captured(name, a, ir_text)


PER_KERNEL = frozenset({"kernel_ir", "cuda_kernel", "launch_param"})


def render_run(a: Artifacts) -> RenderableType:
    """Every stage of a run under its heading, then launches and correctness."""
    parts: list[RenderableType] = []
    kernels = {f"g{k.group_id}": replace(a, kernels=(k,)) for k in a.kernels}
    for stage in stages(a):
        # A per-kernel stage ("kernel IR g1") shows that kernel alone under its own heading.
        group = stage.label.rsplit(" ", 1)[-1]
        one = kernels.get(group, a) if stage.key in PER_KERNEL else a
        parts += [rule(stage.label), render_dump(stage.key, one)]
    if not a.kernels:
        parts += [rule("kernels"), note(a.kernels_note)]
    parts += [rule("launches and timing"), launches_table(a), estimates_table(a)]
    if a.choices:
        parts += [rule("kernel choice"), choices_table(a)]
    parts += [rule("correctness"), correctness_text(a)]
    return Group(*parts)
