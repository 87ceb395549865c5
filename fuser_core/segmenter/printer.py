"""Text of the segmentation: nvFuser's `Segmented_Fusion{ ... }` dump, the merge log,
scheduler parameters, and the pre-scheduled IR with each expression marked by its
group (nvFuser #785), plus a legend of groups and why neighbours stayed apart."""

from __future__ import annotations

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.printer import print_kernel, print_math
from fuser_core.segmenter.segmented_fusion import SegmentedFusion, SegmentedGroup, param_changes


def _io(vals: list) -> str:  # type: ignore[type-arg]
    return "".join(f"  {v} {v.dtype.cuda}\n" for v in sorted(vals, key=lambda v: v.name))


def print_segmented_fusion(segmented: SegmentedFusion) -> str:
    groups = segmented.groups
    text = "Segmented_Fusion Dump: -- fusion segments:\nSegmented_Fusion{ \ngroups: \n"
    text += "".join(f"  {g.label()}\n" for g in groups)
    text += "edges: \n"
    for edge in segmented.edges:
        text += f"  e{{ {groups[edge.producer].label()} -> {groups[edge.consumer].label()}({edge.val}) }}\n"
    text += _recomputed(segmented)
    text += "\ngroup details:\n"
    for group in groups:
        text += f"g{{({group.scheduler.value})\ngroup id: {group.id}\ninputs:\n{_io(group.inputs)}"
        text += f"outputs:\n{_io(group.outputs)}\n\n"
        text += "".join(f"{e.to_string()}({e.name})\n" for e in group.exprs)
        text += "}\n\n"
    return text + "} //Segmented_Fusion\n"


def recompute_lines(segmented: SegmentedFusion) -> list[str]:
    """One line per tensor recomputed in its reader instead of crossing a cut (recompute.py)."""
    lines = []
    for record in segmented.recomputes:
        definition = record.clone.definition if record.clone is not None else None
        group = segmented.group_of(definition) if definition is not None else None
        if group is not None:
            lines.append(record.summary(group.id))
    return lines


def _recomputed(segmented: SegmentedFusion, indent: str = "") -> str:
    lines = recompute_lines(segmented)
    return f"{indent}recomputed at the cut:\n" + "".join(f"{indent}  {line}\n" for line in lines) if lines else ""


def print_segmenter_log(segmented: SegmentedFusion) -> str:
    lines = ["Segmenter log:"]
    if not segmented.attempts:
        lines.append(f"[whole fusion] ***Accepted*** as: {segmented.groups[0].scheduler.value}")
    for attempt in segmented.attempts:
        lines += attempt.lines()
    return "\n".join(lines) + "\n"


def print_presched(segmented: SegmentedFusion) -> str:
    """The complete fusion's math with `// g<N> <scheduler>` after each expression's
    first line, then the legend."""
    fusion = segmented.complete
    text = "Inputs:\n" + "".join(f"  {v}, {v.dtype.cuda}\n" for v in fusion.inputs)
    text += "Outputs:\n" + "".join(f"  {v}, {v.dtype.cuda}\n" for v in fusion.outputs)
    text += "\n%kernel_math {\n"
    for expr in fusion.exprs():
        body = expr.to_string()
        group = segmented.group_of(expr) if expr.is_tensor_op() else None
        if group is not None:
            first, _, rest = body.partition("\n")
            body = f"{first}  // g{group.id} {group.scheduler.value}\n{rest}"
        text += body
    text += "} // %kernel_math\n\n"
    return text + print_legend(segmented)


def print_legend(segmented: SegmentedFusion) -> str:
    text = f"Segments: {len(segmented.groups)} kernel{'s' if len(segmented.groups) != 1 else ''}\n"
    for group in segmented.groups:
        text += f"  g{group.id} {group.scheduler.value}: {_names(group.inputs)} -> {_names(group.outputs)}\n"
        for reason in segmented.reasons_for(group.id):
            other = reason.second if reason.first == group.id else reason.first
            text += f"    not merged with g{other}: {reason.summary}\n"
    if segmented.whole_fusion_rejections:
        text += "  the whole fusion as one kernel:\n"
        text += "".join(f"    {r.line()}\n" for r in segmented.whole_fusion_rejections)
    text += _recomputed(segmented, indent="  ")
    intermediates = segmented.intermediates()
    if intermediates:
        text += "  intermediates in global memory: " + ", ".join(f"T{t.name}" for t in intermediates) + "\n"
    return text


def _names(vals: list) -> str:  # type: ignore[type-arg]
    return "[" + ", ".join(f"T{v.name}" for v in vals) + "]"


def kernel_name(group: SegmentedGroup, runtime_name: str) -> str:
    """nvFuser's `nvfuser_<scheduler>_f<F>_c<C>_r<R>_g<G>`."""
    return f"nvfuser_{group.scheduler.value}_{runtime_name}_g{group.id}"


def candidate_kernel_name(group: SegmentedGroup, position: int, runtime_name: str) -> str:
    """The kernel of a kernel choice candidate: the group's own for the heuristic's schedule
    (position 0), `..._g<G>_alt<i>` for alternative i."""
    name = f"nvfuser_{group.candidates[position].scheduler.value}_{runtime_name}_g{group.id}"
    return name if position == 0 else f"{name}_alt{position}"


def _header(group: SegmentedGroup, runtime_name: str) -> str:
    return f"===== g{group.id} {group.scheduler.value}: {kernel_name(group, runtime_name)} =====\n"


def print_scheduler_params(segmented: SegmentedFusion, runtime_name: str) -> str:
    text = ""
    for group in segmented.groups:
        text += _header(group, runtime_name) + group.params.describe()
        record = group.record
        if record is not None and record.dropped_hints:
            text += "".join(f"  dropped allocation hint of {d.tensor}: {d.reason}\n" for d in record.dropped_hints)
        text += _candidates_text(group, runtime_name)
    return text


def _candidates_text(group: SegmentedGroup, runtime_name: str) -> str:
    """The kernel choice's candidates (kernel_choice): each alternative's parameters that differ."""
    if not group.candidates:
        return ""
    text = f"  kernel choice: {len(group.candidates)} candidates, timed on the GPU\n"
    for position, candidate in enumerate(group.candidates):
        name = candidate_kernel_name(group, position, runtime_name)
        changes = param_changes(group.params, candidate.params) if position else "the heuristic's own"
        text += f"    {position} {candidate.label}: {name} ({candidate.scheduler.value}): {changes}\n"
    return text


def print_scheduled(segmented: SegmentedFusion, runtime_name: str, transforms: bool) -> str:
    text = ""
    for group in segmented.groups:
        fusion: Fusion | None = group.fusion
        if fusion is None:
            continue
        body = print_kernel(fusion, include_transforms=True) if transforms else print_math(fusion)
        text += _header(group, runtime_name) + body
    return text
