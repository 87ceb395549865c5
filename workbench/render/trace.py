"""An element's trace (`Session.trace`) as text: who wrote it, under which loops and
predicates, from which input elements, and through which reductions."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from fuser_core import ElementTrace, ReductionTrace

MAX_READS = 24  # input elements listed; the rest are counted
MAX_PARTIALS = 16


def _index(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(map(str, index)) + "]"


def _value(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def trace_text(trace: ElementTrace) -> str:
    """The trace as plain lines (what `render_trace` colours)."""
    head = f"{trace.tensor}{_index(trace.index)} of {trace.tensor}{list(trace.shape)}"
    lines = [f"{head} = {_value(trace.value)}   (reference: {_value(trace.reference)})"]
    lines.append(f"written by group g{trace.group} ({trace.scheduler})")
    k = trace.kernel
    if k is None:
        lines.append(f"no kernel to trace: {trace.host}")
        return "\n".join(lines) + "\n"
    lines.append(f"kernel {k.kernel}: grid {k.grid}, block {k.block}")
    lines.append(f"interpreted {k.blocks_run} of {_blocks(k.grid)} blocks")
    lines.append(f"writer: blockIdx {k.block_idx}, threadIdx {k.thread_idx}")
    lines.append(f"store: {k.statement}")
    lines.append("loop indices: " + (", ".join(f"{n} = {v} ({kind})" for n, kind, v in k.loops) or "none"))
    lines.append("predicates that held:" if k.predicates else "predicates that held: none (unpredicated)")
    lines += [f"  {p}" for p in k.predicates]
    lines.append(f"input elements read: {len(trace.reads)}")
    lines += [f"  {r.tensor}{_index(r.index)} = {_value(r.value)}" for r in trace.reads[:MAX_READS]]
    if len(trace.reads) > MAX_READS:
        lines.append(f"  ... and {len(trace.reads) - MAX_READS} more")
    for red in k.reductions:
        lines += _reduction_lines(red)
    return "\n".join(lines) + "\n"


def _blocks(grid: tuple[int, int, int]) -> int:
    return grid[0] * grid[1] * grid[2]


def _reduction_lines(red: ReductionTrace) -> list[str]:
    values = ", ".join(_value(v) for v in red.result)
    lines = [f"{red.op} reduction of {', '.join(red.buffers)} over {', '.join(red.over)} = {values}"]
    lines.append(f"  partials ({len(red.partials)}, in rank order):")
    for rank, (block, thread, partial) in enumerate(red.partials[:MAX_PARTIALS]):
        shown = ", ".join(_value(v) for v in partial)
        lines.append(f"    rank {rank}: blockIdx {block} threadIdx {thread}: {shown}")
    if len(red.partials) > MAX_PARTIALS:
        lines.append(f"    ... and {len(red.partials) - MAX_PARTIALS} more")
    for number, step in enumerate(red.steps, 1):
        pairs = " ".join(f"{a}<-{b}" for a, b in step[:8])
        more = f" ... ({len(step)} pairs)" if len(step) > 8 else ""
        lines.append(f"  combine step {number}: {pairs}{more}")
    return lines


def render_trace(trace: ElementTrace) -> Text:
    text = Text()
    for number, line in enumerate(trace_text(trace).splitlines(keepends=True)):
        style = "bold" if number == 0 else "yellow" if line.startswith("no kernel") else ""
        text.append(line, style=style)
    return text
