"""A shareable report of one run: every stage in one self-contained HTML file (rich's
HTML export, styles inline in the page), or the same as JSON data."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

from rich.console import Console
from rich.text import Text

from workbench.artifacts import stages
from workbench.render import render_run
from workbench.render.fault import render_fault
from workbench.render.text import THEME, rule
from workbench.session import RunResult


def report_console() -> Console:
    return Console(
        record=True,
        file=io.StringIO(),
        width=140,
        force_terminal=True,
        color_system="truecolor",
        theme=THEME,
        highlight=False,
        soft_wrap=True,
    )


def _header(source: str, result: RunResult) -> Text:
    text = Text(f"Fuser Workbench report: {source} :: {result.settings.definition}\n", style="bold")
    text.append(f"settings: {result.settings.describe()}\n")
    if result.effective:
        text.append(f"options in effect: {', '.join(result.effective)}\n")
    return text


def html_report(source: str, result: RunResult) -> str:
    console = report_console()
    console.print(_header(source, result))
    if result.error is not None:
        console.print(rule("error"))
        console.print(render_fault(result.error))
    else:
        assert result.artifacts is not None
        console.print(render_run(result.artifacts))
    title = f"Fuser Workbench: {result.settings.definition}"
    return console.export_html(inline_styles=True, code_format=_PAGE.replace("{title}", title))


_PAGE = """<!DOCTYPE html>
<html>
<head>
<meta charset="UTF-8">
<title>{title}</title>
<style>
body {{ color: {foreground}; background-color: {background}; }}
</style>
</head>
<body>
<pre style="font-family:Menlo,'DejaVu Sans Mono',consolas,'Courier New',monospace"><code>{code}</code></pre>
</body>
</html>
"""


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, frozenset):
        return sorted(value)
    return value


def json_report(source: str, result: RunResult) -> dict[str, Any]:
    data: dict[str, Any] = {
        "source": source,
        "run": result.index + 1,  # numbered from 1, as the file's name, the TUI and the CSV number it
        "settings": _plain(result.settings),
        "options_in_effect": list(result.effective),
        "error": _plain(result.error),
    }
    a = result.artifacts
    if a is None:
        return data
    data["stages"] = [_plain(s) for s in stages(a)]
    data["artifacts"] = _plain(a)
    data["artifacts"]["launches"] = [
        {
            **_plain(r),
            "bytes_moved": r.bytes_moved,
            "gbps": r.gbps,
            "fraction_of_peak": r.fraction_of_peak,
            "fraction_of_estimate": r.fraction_of_estimate,
        }
        for r in a.launches
    ]
    data["artifacts"]["estimates"] = [
        {**_plain(e), "bytes_moved": e.bytes_moved, "seconds": e.seconds, "bound": e.bound, "line": e.line()}
        for e in a.estimates
    ]
    data["artifacts"]["choices"] = [
        {**_plain(c), "line": c.line(), "speedup": c.speedup, "runner_up": c.runner_up} for c in a.choices
    ]
    data["notes"] = {"kernels": a.kernels_note, "launches": a.launches_note, "correctness": a.correctness.note}
    return data
