"""Graphviz export of the segment graph: one cluster per segment coloured by its
scheduler, tensors and ops as nodes, the tensors that cross segments labelled with
their bytes, and each rejected merge's reason on a dashed edge between the groups.

DOT is always written (the `graphviz` Python package only builds text); SVG and PNG
need Graphviz's `dot` program.
"""

from __future__ import annotations

from pathlib import Path

import graphviz

from fuser_core import FuserError
from workbench.artifacts import Artifacts
from workbench.render.text import SCHEDULER_COLORS

IMAGE_FORMATS = ("svg", "png")
INSTALL_DOT = (
    "install Graphviz for it: `apt-get install graphviz` (Debian/Ubuntu), `dnf install graphviz` (Fedora), "
    "`brew install graphviz` (macOS) or `conda install graphviz`"
)


def _bytes(count: int | None) -> str:
    if count is None:
        return "? B"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024  # type: ignore[assignment]
    return f"{count} B"


def segment_graph(a: Artifacts, title: str = "") -> graphviz.Digraph:
    dot = graphviz.Digraph("segments", graph_attr={"compound": "true", "rankdir": "TB", "label": title})
    producer = {t: e.group for e in a.exprs for t in e.outputs}
    crossing = {(e.tensor, e.consumer): e for e in a.edges}
    for g in a.groups:
        with dot.subgraph(name=f"cluster_g{g.id}") as sub:
            sub.attr(
                label=f"g{g.id} {g.scheduler}", style="filled", fillcolor=SCHEDULER_COLORS.get(g.scheduler, "white")
            )
            sub.node(f"g{g.id}_anchor", label="", shape="point", style="invis")
            for e in a.exprs:
                if e.group == g.id:
                    sub.node(f"e{e.name}", label=e.op, shape="box")
                    for t in e.outputs:
                        sub.node(t, label=t, shape="ellipse")
    for t in sorted({t for e in a.exprs for t in e.inputs} - set(producer), key=lambda t: int(t[1:])):
        dot.node(t, label=t, shape="ellipse", style="bold")
    for e in a.exprs:
        for t in e.inputs:
            edge = crossing.get((t, e.group)) if e.group is not None else None
            if edge is not None:
                dot.edge(t, f"e{e.name}", label=f"{t} ({_bytes(edge.nbytes)})", color="red", penwidth="2")
            else:
                dot.edge(t, f"e{e.name}")
        for t in e.outputs:
            dot.edge(f"e{e.name}", t)
    for r in a.reasons:
        if r.first < r.second:
            dot.edge(
                f"g{r.first}_anchor",
                f"g{r.second}_anchor",
                label=r.summary,
                style="dashed",
                ltail=f"cluster_g{r.first}",
                lhead=f"cluster_g{r.second}",
                constraint="false",
                dir="none",
            )
    return dot


def write_graph(a: Artifacts, out: Path, title: str = "") -> list[Path]:
    """Write `out` (.dot, .gv, .svg or .png); an image also leaves its .dot beside it.
    Returns the files written."""
    dot = segment_graph(a, title)
    fmt = out.suffix.lstrip(".").lower()
    if fmt in ("dot", "gv"):
        out.write_text(dot.source, encoding="utf-8")
        return [out]
    if fmt not in IMAGE_FORMATS:
        raise FuserError(f"cannot write a graph as {out.name}: use .dot, .svg or .png")
    source = out.with_suffix(".dot")
    source.write_text(dot.source, encoding="utf-8")
    try:
        out.write_bytes(dot.pipe(format=fmt))
    except graphviz.ExecutableNotFound:
        raise FuserError(
            f"writing {out.name} needs Graphviz's `dot` program, which is not on PATH; {INSTALL_DOT}. "
            f"The DOT source was written to {source}"
        ) from None
    return [source, out]
