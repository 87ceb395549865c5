"""Files made from one run of a session: the segment graph, the HTML or JSON report,
every dump as plain text, and for a run that ended in a CUDA fault its repro script and
the CUDA of the kernels the fault names. The CLI and the TUI both write through here;
each function returns the paths it wrote, so the caller can say where they are.

Names say what was run: `<script>.<definition>.run<N>.<kind>` in the chosen directory.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from fuser_core import FuserError
from workbench.artifacts import Artifacts
from workbench.graph import write_graph
from workbench.render import make_console, render_run
from workbench.report import html_report, json_report
from workbench.session import RunResult, Session

GRAPH_FORMATS = ("dot", "svg", "png")


def export_name(script: str, result: RunResult, kind: str) -> str:
    """`softmax.nvfuser_fusion_id4.run2.dot` for run index 1 (runs count from 1 here)."""
    return f"{Path(script).stem}.{result.settings.definition}.run{result.index + 1}.{kind}"


def _artifacts(result: RunResult, what: str) -> Artifacts:
    if result.artifacts is None:
        why = result.error.message if result.error is not None else "it has not finished"
        raise FuserError(f"no {what} to export: run {result.index + 1} failed ({why})")
    return result.artifacts


def export_graph(result: RunResult, script: str, directory: Path, fmt: str = "dot") -> list[Path]:
    """The segment graph as DOT (SVG/PNG also need Graphviz's `dot`; the DOT file is
    written either way)."""
    if fmt not in GRAPH_FORMATS:
        raise FuserError(f"no graph format {fmt!r}; use one of {', '.join(GRAPH_FORMATS)}")
    a = _artifacts(result, "segment graph")
    title = f"{Path(script).name} :: {result.settings.definition} ({a.runtime})"
    return write_graph(a, directory / export_name(script, result, fmt), title)


def write_report(result: RunResult, script: str, output: Path, as_json: bool = False) -> Path:
    """Every stage of the run in one HTML file, or as JSON data. A failed run is
    reported too: its error is what a bug report needs."""
    name = Path(script).name
    if as_json:
        output.write_text(json.dumps(json_report(name, result), indent=1, default=str), encoding="utf-8")
    else:
        output.write_text(html_report(name, result), encoding="utf-8")
    return output


def export_report(result: RunResult, script: str, directory: Path, as_json: bool = False) -> Path:
    kind = "json" if as_json else "html"
    return write_report(result, script, directory / export_name(script, result, kind), as_json)


def export_dumps(result: RunResult, script: str, directory: Path) -> Path:
    """Every stage of the run as plain text, as `fuser-wb dump --dump ...` prints them."""
    a = _artifacts(result, "dumps")
    out = io.StringIO()
    console = make_console(out, color=False, width=160)
    console.print(f"== {Path(script).name} :: {result.settings.definition}\nsettings: {result.settings.describe()}")
    console.print(render_run(a))
    path = directory / export_name(script, result, "dumps.txt")
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def export_repro(session: Session, directory: Path, output: Path | None = None) -> Path:
    """nvFuser's repro script of the session's definition, with its current shapes,
    scalars and options: `<script>.<definition>.repro.py` unless `output` names a file."""
    text = session.repro_script()
    target = output if output is not None else directory / f"{Path(session.path).stem}.{session.definition}.repro.py"
    target.write_text(text, encoding="utf-8")
    return target


def export_fault(result: RunResult, script: str, directory: Path) -> list[Path]:
    """A CUDA fault's repro script (`...run<N>.repro.py`, with sync_launches on) and the
    CUDA of each kernel it names (`...run<N>.<kernel>.cu`)."""
    fault = result.error.fault if result.error is not None else None
    if fault is None:
        raise FuserError(f"run {result.index + 1} did not end in a CUDA fault: no repro or kernel to export")
    directory.mkdir(parents=True, exist_ok=True)
    repro = directory / export_name(script, result, "repro.py")
    repro.write_text(fault.repro, encoding="utf-8")
    written = [repro]
    for kernel in fault.kernels:
        if kernel.cuda:
            path = directory / export_name(script, result, f"{kernel.name}.cu")
            path.write_text(kernel.cuda, encoding="utf-8")
            written.append(path)
    return written
