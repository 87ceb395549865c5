"""A CUDA fault of a run, rendered: the error, then each kernel it names with its launch
and its CUDA, then the run's repro script. The TUI's fault screen and the HTML report
show it."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from workbench.render.text import code_text, rule
from workbench.session import RunError


def render_fault(error: RunError) -> RenderableType:
    fault = error.fault
    parts: list[RenderableType] = [Text(error.text(), style="error")]
    if fault is None:
        return Group(*parts)
    which = "the kernel that faulted" if fault.pinned else "the kernels it may come from"
    for kernel in fault.kernels:
        parts.append(rule(f"CUDA of {kernel.label} ({which})"))
        parts.append(Text(f"{kernel.scheduler} scheduler: {kernel.launch}", style="bold"))
        parts.append(code_text(kernel.cuda) if kernel.cuda else Text("(no CUDA: not a kernel of this runtime)"))
    parts.append(rule("repro script of the run (sync_launches on: running it names the kernel that faults)"))
    parts.append(code_text(fault.repro, "python"))
    return Group(*parts)
