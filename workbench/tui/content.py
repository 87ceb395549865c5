"""What each tab of the TUI shows, as rich renderables built from a run's artifacts by
the renderers the CLI uses (workbench.render). No Textual here: the app puts these in
its views, and tests read them directly.

Every view says why it is empty where its stage did not run (no kernels for a group,
nothing launched on the reference backend, no GPU), never nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from fuser_core import ElementTrace, KernelArtifact, LaunchRecord
from workbench.artifacts import Artifacts, GroupArtifact, TransformBlock
from workbench.diff import RunDiff, format_seconds
from workbench.render import code_text, ir_text
from workbench.render.diffs import diff_text, summary_text
from workbench.render.tables import (
    cache_text,
    choices_table,
    correctness_text,
    edges_table,
    estimates_table,
    group_color,
    launches_table,
    merges_table,
    note,
    params_table,
    presched_ir,
    segments_table,
    transform_tree,
    whole_fusion_note,
)
from workbench.render.text import rule
from workbench.render.trace import render_trace
from workbench.session import REFERENCE, RunResult, RunSettings, device_label

ALL = -1  # the group filter that shows every group


def heading(text: str) -> Rule:
    return rule(text)


def group_label(g: GroupArtifact) -> Text:
    return Text(f"g{g.id} {g.scheduler}", style=f"bold {group_color(g.id)}")


# -- IR ------------------------------------------------------------------------------------


def ir_view(a: Artifacts, highlight: int | None = None) -> RenderableType:
    """The pre-scheduled IR, each expression in its segment's colour (the legend is a
    table of its own in the TUI, so that a group can be selected)."""
    parts: list[RenderableType] = [presched_ir(a.presched, highlight)]
    if highlight is not None and any(g.id == highlight for g in a.groups):
        g = a.group(highlight)
        parts.append(
            Text.assemble(
                "selected: ", group_label(g), f"  {g.kernel}  [{', '.join(g.inputs)}] -> [{', '.join(g.outputs)}]"
            )
        )
    parts.append(whole_fusion_note(a))
    return Group(*parts)


def legend_rows(a: Artifacts) -> list[tuple[Text, str, str, str]]:
    """One row per group: the group, its scheduler, inputs -> outputs, and why it was not
    merged with each neighbour."""
    rows = []
    for g in a.groups:
        reasons = [r for r in a.reasons if g.id in (r.first, r.second)]
        why = "; ".join(f"g{r.second if r.first == g.id else r.first}: {r.summary}" for r in reasons)
        rows.append((group_label(g), g.kernel, f"[{', '.join(g.inputs)}] -> [{', '.join(g.outputs)}]", why or "-"))
    return rows


def definition_view(fusion_ir: str, step: str) -> RenderableType:
    """Before the first run finishes: the definition as the script builds it."""
    return Group(Text(f"running: {step}", style="note"), ir_text(fusion_ir))


# -- concretization and the cache ------------------------------------------------------------


def concretization_view(a: Artifacts) -> RenderableType:
    key = Table.grid(padding=(0, 2))
    key.add_column(style="bold")
    key.add_column()
    key.add_row("runtime", a.runtime)
    key.add_row("input signature", a.signature)
    key.add_row("index type", a.index_type or "-")
    key.add_row("concretization", ir_text(a.concretization))
    event = Group(cache_text(a), *(Text(f"  reason: {r}") for r in a.cache_reasons))
    return Group(
        heading("Cache key: the inputs' signature and the concretization info"),
        key,
        heading("Last cache event"),
        event,
        heading("Concretized fusion"),
        ir_text(a.concretized_ir),
    )


# -- segments ---------------------------------------------------------------------------


def segments_view(a: Artifacts) -> RenderableType:
    return Group(
        segments_table(a),
        merges_table(a),
        whole_fusion_note(a),
        edges_table(a),
        heading("Heuristics"),
        *(params_table(g) for g in a.groups),
    )


# -- per group: transforms and scheduled IR -------------------------------------------------


def _groups(a: Artifacts, group: int) -> list[GroupArtifact]:
    return [g for g in a.groups if group in (ALL, g.id)]


def _group_header(g: GroupArtifact) -> Text:
    return Text(f"===== g{g.id} {g.scheduler}: {g.kernel} =====", style=f"bold {group_color(g.id)}")


def transforms_view(a: Artifacts, group: int = ALL, tensor: str = "") -> RenderableType:
    """Per tensor, its domains and the transforms between them as a tree; only the
    tensors of `group` whose line contains `tensor` (case-insensitive)."""
    wanted = tensor.strip().lower()
    parts: list[RenderableType] = []
    for g in _groups(a, group):
        if not g.tensors:
            parts.append(note(f"g{g.id} {g.scheduler}: no scheduled fusion, so no transforms"))
            continue
        blocks: Sequence[TransformBlock] = [b for b in g.tensors if wanted in b.tensor.lower()]
        parts.append(_group_header(g))
        if not blocks:
            parts.append(note(f"no tensor of g{g.id} matches {tensor!r}"))
        parts += [transform_tree(b) for b in blocks]
    return Group(*parts)


def scheduled_view(a: Artifacts, group: int = ALL) -> RenderableType:
    parts: list[RenderableType] = []
    for g in _groups(a, group):
        parts.append(_group_header(g))
        if not g.scheduled_math:
            parts.append(note(f"g{g.id} {g.scheduler}: this scheduler leaves no scheduled fusion"))
            continue
        parts += [params_table(g), ir_text(g.scheduled_math)]
    return Group(*parts)


# -- kernels --------------------------------------------------------------------------------


def _launch(a: Artifacts, group_id: int) -> LaunchRecord | None:
    return next((r for r in a.launches if r.group_id == group_id), None)


def no_gpu_reason(a: Artifacts, cuda_problem: str | None) -> str:
    if a.backend == REFERENCE:
        why = f"the cuda backend cannot run here: {cuda_problem}" if cuda_problem else "choose the cuda backend for it"
        return f"this run used the reference backend (NumPy), which launches no kernel; {why}"
    return a.launches_note


def kernel_facts(a: Artifacts, k: KernelArtifact, cuda_problem: str | None) -> Text:
    """Launch parameters, index type, registers and spills of one kernel."""
    text = Text()
    text.append(k.launch.line() + "\n", style="ir.keyword")
    text.append(f"index type: {k.index_type}\n")
    record = _launch(a, k.group_id)
    if record is None:
        text.append(
            f"registers and spills: known when the kernel is loaded on a GPU; {no_gpu_reason(a, cuda_problem)}",
            style="note",
        )
        return text
    registers = "-" if record.registers is None else str(record.registers)
    spills = "-" if record.spills is None else f"{record.spills} bytes"
    text.append(f"registers: {registers}   spills: {spills}   time: {format_seconds(record.seconds)}")
    return text


def _kernel_groups(a: Artifacts, group: int) -> list[tuple[GroupArtifact, KernelArtifact | None]]:
    kernels = {k.group_id: k for k in a.kernels}
    return [(g, kernels.get(g.id)) for g in _groups(a, group)]


def _no_kernel(g: GroupArtifact, a: Artifacts) -> Text:
    return note(
        f"g{g.id} {g.scheduler}: codegen generates no kernel for this group; "
        f"the {a.backend} backend runs it on the host (NumPy)"
    )


def _kernel_view(
    a: Artifacts, group: int, cuda_problem: str | None, body: Callable[[KernelArtifact], RenderableType]
) -> RenderableType:
    """Per group: its header, then the kernel's facts and `body`, or why it has none."""
    parts: list[RenderableType] = []
    for g, k in _kernel_groups(a, group):
        parts.append(_group_header(g))
        if k is None:
            parts.append(_no_kernel(g, a))
            continue
        parts += [kernel_facts(a, k, cuda_problem), *_choice_note(a, g.id), body(k)]
    return Group(*parts)


def _choice_note(a: Artifacts, group_id: int) -> list[RenderableType]:
    """Where the kernel choice kept another candidate, which one runs (this view shows the
    heuristic's own kernel)."""
    choice = next((c for c in a.choices if c.group_id == group_id), None)
    if choice is None or not choice.kept:
        return []
    kept = choice.candidates[choice.kept]
    return [note(f"the kernel choice keeps {kept.name()} for this group; shown here: the heuristic's own kernel")]


def kernel_ir_view(a: Artifacts, group: int = ALL, cuda_problem: str | None = None) -> RenderableType:
    return _kernel_view(a, group, cuda_problem, lambda k: ir_text(k.kernel_ir))


def cuda_view(a: Artifacts, group: int = ALL, cuda_problem: str | None = None) -> RenderableType:
    return _kernel_view(a, group, cuda_problem, lambda k: code_text(k.cuda))


# -- the run ---------------------------------------------------------------------------------


def run_view(result: RunResult, cuda_problem: str | None) -> RenderableType:
    a = result.artifacts
    assert a is not None
    parts: list[RenderableType] = [
        Text(f"run {result.index + 1}: {result.settings.describe()}"),
        Text(
            f"{device_label(a.device, a.backend, a.gpu)}   backend: {a.backend}   "
            f"wall time of the run: {format_seconds(a.wall_seconds)}"
        ),
        heading("Kernels: time, bandwidth, fraction of peak, estimate"),
    ]
    if a.launches:
        parts.append(launches_table(a))
    else:
        parts.append(note(f"No per-kernel timings: {no_gpu_reason(a, cuda_problem)}."))
    parts.append(estimates_table(a))
    if a.choices:
        parts += [heading("Kernel choice (kernel_choice)"), choices_table(a)]
    if a.compiles:
        parts += [heading("Compilation"), *(Text(line) for line in a.compiles)]
    parts += [heading("Correctness against the reference"), correctness_text(a)]
    return Group(*parts)


# -- the diff -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DiffState:
    """The two runs the Diff tab compares (the last two that succeeded), and their diff."""

    before: RunResult
    after: RunResult
    diff: RunDiff


def diff_view(state: DiffState | None, runs: int) -> RenderableType:
    if state is None:
        if runs <= 1:
            return note(
                "Only one run so far: change an option or a shape in the sidebar and press r; "
                "every stage is then compared with this run here."
            )
        return note("Nothing to compare: fewer than two runs have succeeded.")
    return Group(
        _settings_lines(state.before.index, state.before.settings, state.after.index, state.after.settings),
        heading("Per stage (names matched by structure: a renumbering alone is no change)"),
        summary_text(_untimed(state.diff)),
        *_stage_diffs(state.diff),
        heading("Timing"),
        *(Text(line) for line in state.diff.timing),
    )


def _untimed(diff: RunDiff) -> RunDiff:
    return RunDiff(diff.stages, ())


def _settings_lines(i: int, a: RunSettings, j: int, b: RunSettings) -> Text:
    return Text.assemble(
        (f"a = run {i + 1}: ", "bold"), a.describe(), "\n", (f"b = run {j + 1}: ", "bold"), b.describe()
    )


def _stage_diffs(diff: RunDiff) -> list[RenderableType]:
    parts: list[RenderableType] = []
    for stage in diff.changed:
        assert stage.diff is not None
        parts += [heading(stage.summary()), diff_text(stage.diff)]
    return parts


# -- errors -----------------------------------------------------------------------------------


def error_text(title: str, message: str, location: str = "", line: str = "") -> Text:
    text = Text(title + "\n", style="bold red")
    text.append(message)
    if line.strip():
        text.append(f"\n    {location}: ", style="bold")
        text.append(line.strip(), style="bold yellow")
    return text


def why_view(run: int, lines: Sequence[str]) -> RenderableType:
    """The segmenter's answer to "why not fused?" (or a group's split), of run `run`."""
    text = Text()
    for i, line in enumerate(lines):
        style = "bold" if i == 0 else ("bold yellow" if line.startswith(("answer:", "category:")) else "")
        if " accepts" in line and line.startswith("  ") and not line.startswith("   "):
            style = "green"
        text.append(line + "\n", style=style)
    hint = f"run {run}: ask again with w on two legend rows or two IR expressions, or y; escape closes this"
    return Group(Text(hint, style="dim"), text)


# -- element traces ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TraceTarget:
    """A tensor whose elements the Run tab traces: an output of the fusion, or a tensor
    handed between kernels, with the group that writes it."""

    tensor: str
    shape: tuple[int, ...] | None
    dtype: str
    group: int | None
    role: str  # "fusion output", or the groups it is handed to

    @property
    def first_index(self) -> str:
        """Its first element's index as typed (`0,0,0`; empty for a 0-D tensor)."""
        return ",".join("0" for _ in self.shape) if self.shape is not None else ""

    def row(self) -> tuple[str, str, str, str, str]:
        shape = "x".join(map(str, self.shape)) if self.shape else ("0-D" if self.shape == () else "?")
        return self.tensor, shape, self.dtype, f"g{self.group}" if self.group is not None else "-", self.role


def trace_targets(a: Artifacts) -> list[TraceTarget]:
    """The fusion's outputs, then the tensors handed between kernels (each once)."""
    writers = {t: g.id for g in a.groups for t in g.outputs}
    targets = [TraceTarget(o.tensor, o.shape, o.dtype, writers.get(o.tensor), "fusion output") for o in a.outputs]
    seen = {t.tensor for t in targets}
    for e in a.edges:
        if e.tensor in seen:
            continue
        seen.add(e.tensor)
        to = ", ".join(f"g{c}" for c in sorted({x.consumer for x in a.edges if x.tensor == e.tensor}))
        targets.append(TraceTarget(e.tensor, e.shape, e.dtype, e.producer, f"between kernels: to {to}"))
    return targets


def trace_view(run: int, trace: ElementTrace) -> RenderableType:
    """Where one element of run `run` came from (workbench.render.trace)."""
    hint = f"run {run}: enter on another tensor or another index traces again"
    return Group(Text(hint, style="dim"), render_trace(trace))
