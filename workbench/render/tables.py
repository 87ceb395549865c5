"""Tables and trees of a run: segments and their legend, heuristics, passes, transforms,
launches and timings, the cache event and the correctness check."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from fuser_core import KernelChoice
from workbench.artifacts import Artifacts, GroupArtifact, TransformBlock
from workbench.diff import format_seconds
from workbench.render.text import GROUP_COLORS, IR_HIGHLIGHTER, ir_text

MARKER = re.compile(r"  // g(\d+) (\w+)$")
_WRITES = re.compile(r"^(T\d+)_")  # the first tensor an expression's line writes


def group_color(group_id: int) -> str:
    return GROUP_COLORS[group_id % len(GROUP_COLORS)]


def note(text: str) -> Text:
    return Text(text, style="note")


def presched_groups(presched: str) -> list[int | None]:
    """The segment of each line of the pre-scheduled IR's math (None where a line names
    none): the marker is on an expression's first line, and its indented continuation
    lines belong to the same group."""
    ir_part = presched.split("} // %kernel_math", 1)[0] + "} // %kernel_math"
    owners: list[int | None] = []
    owner: int | None = None
    for line in ir_part.splitlines():
        match = MARKER.search(line)
        if match:
            owner = int(match.group(1))
        elif not line.startswith((" ", "\t")):
            owner = None
        owners.append(owner)
    return owners


@dataclass(frozen=True)
class ExprLines:
    """One expression of the pre-scheduled IR's math: its lines [start, end), its
    segment, and the first tensor it writes (`T10`)."""

    start: int
    end: int
    group: int
    tensor: str


def presched_exprs(presched: str) -> list[ExprLines]:
    """The expressions of the pre-scheduled IR's math, in the lines `presched_ir` draws
    (each starts at its segment marker, its indented continuation lines follow)."""
    found: list[ExprLines] = []
    owners = presched_groups(presched)
    lines = presched.splitlines()
    for index, owner in enumerate(owners):
        if owner is None:
            continue
        written = _WRITES.match(lines[index])
        if written is not None and MARKER.search(lines[index]):
            found.append(ExprLines(index, index + 1, owner, written.group(1)))
        elif found and found[-1].end == index:
            found[-1] = replace(found[-1], end=index + 1)
    return found


def presched_ir(presched: str, highlight: int | None = None) -> Text:
    """The pre-scheduled IR (without its legend), each expression in its segment's colour;
    with `highlight`, that group's expressions stand out and the others are dimmed."""
    ir_part = presched.split("} // %kernel_math", 1)[0] + "} // %kernel_math\n"
    owners = presched_groups(presched)
    text = Text()
    color: str | None = None
    for index, line in enumerate(ir_part.splitlines(keepends=True)):
        match = MARKER.search(line.rstrip("\n"))
        if match:
            color = group_color(int(match.group(1)))
        elif not line.startswith((" ", "\t")):
            color = None  # a new top-level line that names no group
        piece = Text(line.rstrip("\n"), style=color or "")
        IR_HIGHLIGHTER.highlight(piece)
        if color is not None and match:
            piece.stylize(f"bold reverse {color}", match.start(), match.end())
        owner = owners[index] if index < len(owners) else None
        if highlight is not None and owner is not None:
            piece.stylize("bold" if owner == highlight else "dim")
        text.append_text(piece)
        if line.endswith("\n"):
            text.append("\n")
    text.rstrip()
    return text


def legend_table(a: Artifacts) -> Table:
    count = len(a.groups)
    table = Table(title=f"Segments: {count} kernel{'s' if count != 1 else ''}", title_justify="left")
    for column in ("group", "scheduler", "inputs -> outputs", "not merged with"):
        table.add_column(column)
    for g in a.groups:
        reasons = [r for r in a.reasons if g.id in (r.first, r.second)]
        why = "\n".join(f"g{r.second if r.first == g.id else r.first}: {r.summary}" for r in reasons)
        table.add_row(
            Text(f"g{g.id}", style=f"bold {group_color(g.id)}"),
            g.scheduler,
            f"[{', '.join(g.inputs)}] -> [{', '.join(g.outputs)}]",
            why or "-",
        )
    return table


def whole_fusion_note(a: Artifacts) -> RenderableType:
    parts: list[RenderableType] = []
    if a.whole_fusion_rejections:
        parts.append(Text("the whole fusion as one kernel:", style="bold"))
        parts += [ir_text("  " + line) for line in a.whole_fusion_rejections]
    if a.recomputed:
        parts.append(Text("recomputed at the cut:", style="bold"))
        parts += [Text("  " + line) for line in a.recomputed]
    intermediates = sorted({e.tensor for e in a.edges}, key=lambda t: int(t[1:]))
    if intermediates:
        parts.append(Text("intermediates in global memory: " + ", ".join(intermediates)))
    return Group(*parts)


def merges_table(a: Artifacts) -> RenderableType:
    """Every pair of neighbouring segments the segmenter kept apart: the category of the
    reason, its summary, and each scheduler's rejection of the merged pair."""
    if not a.reasons:
        return note("no rejected merges: no two segments were neighbours")
    table = Table(title="Rejected merges", title_justify="left")
    for column in ("groups", "category", "why", "schedulers' rejections"):
        table.add_column(column)
    seen: set[frozenset[int]] = set()
    for r in a.reasons:
        pair = frozenset((r.first, r.second))
        if pair in seen:
            continue  # a pair recorded from both sides is one row
        seen.add(pair)
        table.add_row(
            Text.assemble(
                (f"g{r.first}", f"bold {group_color(r.first)}"),
                " + ",
                (f"g{r.second}", f"bold {group_color(r.second)}"),
            ),
            Text(r.category, style="bold yellow"),
            r.summary,
            ir_text("\n".join(r.rejections)) if r.rejections else "-",
        )
    return table


def segments_table(a: Artifacts) -> Table:
    table = Table(title="Segmented fusion", title_justify="left")
    for column in ("group", "scheduler", "kernel", "exprs", "inputs", "outputs"):
        table.add_column(column)
    for g in a.groups:
        table.add_row(
            Text(f"g{g.id}", style=f"bold {group_color(g.id)}"),
            g.scheduler,
            g.kernel,
            str(g.exprs),
            ", ".join(g.inputs),
            ", ".join(g.outputs),
        )
    return table


def edges_table(a: Artifacts) -> RenderableType:
    if not a.edges:
        return note("no edges: no tensor passes from one kernel to another")
    table = Table(title="Edges", title_justify="left")
    for column in ("from", "to", "tensor", "shape", "bytes"):
        table.add_column(column)
    for e in a.edges:
        size = str(e.nbytes) if e.nbytes is not None else "?"
        shape = str(list(e.shape)) if e.shape is not None else "?"
        table.add_row(f"g{e.producer}", f"g{e.consumer}", e.tensor, shape, size)
    return table


def params_table(g: GroupArtifact) -> Table:
    table = Table(title=f"g{g.id} {g.scheduler}: {g.kernel}", title_justify="left")
    table.add_column("parameter")
    table.add_column("value", style="blue")
    for name, value in g.params:
        table.add_row(name, value)
    for drop in g.dropped_hints:
        table.add_row("dropped allocation hint", drop)
    return table


def passes_table(a: Artifacts) -> Table:
    table = Table(title="Pre-segmentation passes", title_justify="left")
    for column in ("pass", "result", "time"):
        table.add_column(column)
    for p in a.passes:
        result = Text("changed", style="bold yellow") if p.changed else Text("no change", style="dim")
        table.add_row(p.name, result, format_seconds(p.seconds))
    return table


def transform_tree(block: TransformBlock) -> Tree:
    """One tensor's domains, each with the transforms that lead from it to the next."""
    tree = Tree(ir_text(block.tensor))
    branch = tree
    for kind, text in block.lines:
        if kind == "transform":
            branch.add(ir_text(text))
        elif kind == "contiguity":
            branch.add(Text(f"contiguity: {text}", style="dim"))
        else:
            branch = tree.add(Text.assemble((kind, "bold"), " : (", ir_text(text), ")"))
    return tree


def transform_trees(g: GroupArtifact) -> RenderableType:
    if not g.tensors:
        return note(f"g{g.id} {g.scheduler}: no scheduled fusion, so no transforms")
    title = Text(f"===== g{g.id} {g.scheduler}: {g.kernel} =====", style=f"bold {group_color(g.id)}")
    return Group(title, *(transform_tree(b) for b in g.tensors))


def cache_text(a: Artifacts) -> Text:
    style = "cache.hit" if a.cache_hit else "cache.miss"
    text = Text(a.cache_line)
    text.stylize(style, 0, len("cache: hit" if a.cache_hit else "cache: miss"))
    return text


def launches_table(a: Artifacts) -> RenderableType:
    if not a.launches:
        return note(a.launches_note)
    table = Table(title="Kernel launches", title_justify="left")
    columns = ("group", "kernel", "time", "bytes", "GB/s", "of peak", "registers", "spills", "estimate")
    for column in columns:
        table.add_column(column, justify="left" if column in ("group", "kernel", "estimate") else "right")
    for r in a.launches:
        gbps = f"{r.gbps:.1f}" if r.gbps is not None else "-"
        peak = f"{r.fraction_of_peak:.0%}" if r.fraction_of_peak is not None else "-"
        table.add_row(
            f"g{r.group_id}",
            r.kernel,
            format_seconds(r.seconds),
            str(r.bytes_moved),
            gbps,
            peak,
            str(r.registers) if r.registers is not None else "-",
            str(r.spills) if r.spills is not None else "-",
            r.estimate,
        )
    return table


def estimates_table(a: Artifacts) -> RenderableType:
    """Each kernel's roofline estimate on the device model, with the measured time beside
    it where the run was timed on the GPU."""
    if not a.estimates:
        return note("no roofline estimates: no group's sizes are known before it runs")
    table = Table(title=f"Roofline estimates on {a.device}", title_justify="left")
    columns = ("group", "scheduler", "bytes", "flops", "bound", "estimate", "measured", "of estimate")
    for column in columns:
        table.add_column(column, justify="left" if column in ("group", "scheduler", "bound") else "right")
    measured = {r.group_id: r.seconds for r in a.launches}
    for e in a.estimates:
        seconds = measured.get(e.group_id)
        fraction = e.fraction_of(seconds)
        table.add_row(
            f"g{e.group_id}",
            e.scheduler,
            str(e.bytes_moved),
            str(e.flops),
            e.bound,
            e.time_text(),
            format_seconds(seconds) if seconds else "-",
            f"{fraction:.0%}" if fraction is not None else "-",
        )
    return table


def correctness_text(a: Artifacts) -> RenderableType:
    c = a.correctness
    if not c.checks:
        return note(c.note)
    table = Table(title=c.note, title_justify="left")
    for column in ("output", "max abs error", "matches"):
        table.add_column(column)
    for check in c.checks:
        verdict = Text("yes", style="bold green") if check.ok else Text("NO", style="bold red")
        table.add_row(str(check.index), f"{check.max_abs_error:.3g}", verdict)
    return table


def choices_table(a: Artifacts) -> RenderableType:
    """The kernel choice (kernel_choice): each group's candidate kernels, their best times,
    the one kept and by how much; or why no choice was made."""
    table = Table(title="Kernel choice: candidate schedules timed on the GPU", title_justify="left")
    for column in ("group", "candidate", "kernel", "best time", "timed", "verdict"):
        table.add_column(column, justify="right" if column in ("best time", "timed") else "left")
    for choice in a.choices:
        for position, c in enumerate(choice.candidates):
            table.add_row(
                f"g{choice.group_id}",
                f"{position} {c.label}",
                c.kernel,
                format_seconds(c.seconds) if c.seconds is not None else "-",
                str(c.launches),
                _verdict(choice, position),
            )
    return Group(table, *(Text(choice.line()) for choice in a.choices))


def _verdict(choice: KernelChoice, position: int) -> str:
    candidate = choice.candidates[position]
    if candidate.refusal:
        return f"refused: {candidate.refusal}"
    if choice.state == "kept" and choice.kept is not None:
        if position == choice.kept:
            return "kept" + (f", {choice.speedup:.2f}x faster than the next" if choice.speedup else "")
        best = choice.candidates[choice.kept].seconds
        return f"{candidate.seconds / best:.2f}x the kept time" if best and candidate.seconds else "not kept"
    if choice.state == "timing":
        return "on trial now" if position == choice.ran else "on trial"
    return "runs: no choice made" if position == 0 else "not timed"
