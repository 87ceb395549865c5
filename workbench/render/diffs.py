"""The diff of two runs: a one-line summary per stage, then the unified diff of each
stage that changed, in the new run's names."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from workbench.diff import RunDiff, TextDiff
from workbench.render.text import rule
from workbench.session import RunSettings


def diff_text(found: TextDiff) -> Text:
    text = Text()
    for line in found.unified.splitlines(keepends=True):
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("+"):
            style = "diff.added"
        elif line.startswith("-"):
            style = "diff.removed"
        elif line.startswith("@@"):
            style = "diff.hunk"
        else:
            style = ""
        text.append(line, style=style)
    return text


def summary_text(run_diff: RunDiff) -> Text:
    text = Text()
    for stage in run_diff.stages:
        style = "dim" if stage.status == "same" else "bold yellow"
        text.append(stage.summary() + "\n", style=style)
    for line in run_diff.timing:
        text.append(line + "\n")
    return text


def render_run_diff(run_diff: RunDiff, a: RunSettings | None = None, b: RunSettings | None = None) -> RenderableType:
    parts: list[RenderableType] = []
    if a is not None and b is not None:
        parts.append(Text(f"a: {a.describe()}\nb: {b.describe()}"))
    parts.append(summary_text(run_diff))
    for stage in run_diff.changed:
        assert stage.diff is not None
        parts += [rule(stage.summary()), diff_text(stage.diff)]
    return Group(*parts)
