"""What every part of the app shares: how it starts (Launch), its tabs, the state of the
session and its runs, and the status line, title, error banner and log that each part
writes to.

The app is put together from one class per concern (tabs, search, inputs, the pipeline,
why-not-fused, traces, exports, the palette), each a subclass of WorkbenchBase, so
that each reads and writes the same state; workbench.tui.app joins them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.text import Text
from textual.app import App
from textual.widgets import Static, TabbedContent

from workbench.bundle import Bundle
from workbench.session import DEFAULT_MAX_INPUT_BYTES, RunOptions, RunResult, Session
from workbench.tui import content
from workbench.tui.content import DiffState
from workbench.tui.textview import TextView

TABS = (
    ("ir", "IR"),
    ("concretization", "Concretization"),
    ("segments", "Segments"),
    ("transforms", "Transforms"),
    ("scheduled", "Scheduled IR"),
    ("kernel", "Kernel IR"),
    ("cuda", "CUDA"),
    ("run", "Run"),
    ("diff", "Diff"),
    ("log", "Log"),
)
GROUP_FILTERED = ("transforms", "scheduled", "kernel", "cuda")


@dataclass
class Launch:
    """How the app starts: the script, and settings from the command line."""

    script: str
    definition: str | None = None
    shapes: tuple[tuple[int, ...], ...] | None = None
    scalars: tuple[Any, ...] | None = None
    options: RunOptions = field(default_factory=RunOptions)
    seed: int = 0
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    export_dir: Path = field(default_factory=Path.cwd)
    bundle: Bundle | None = None  # a saved bundle to show (its runs, not a new one)


class WorkbenchBase(App[None]):
    """The app's state, and the lines it writes to (status, title, error banner, log)."""

    def __init__(self, launch: Launch) -> None:
        super().__init__()
        self.launch = launch
        self.export_dir = launch.export_dir
        self.session: Session | None = None
        self.last: RunResult | None = None  # the latest run, failed or not
        self.good: RunResult | None = None  # the latest that succeeded: the tabs show it
        self.diff_state: DiffState | None = None
        self.group: int | None = None  # highlighted in the IR tab
        self.why_mark: tuple[int, str] | None = None  # (run index, `g0` or `T10`) marked for "why not fused?"
        self.cuda_problem: str | None = None
        self.busy: str | None = "opening"  # what the worker is doing; None when idle
        self.step = "opening the script"
        self._shown: dict[str, Any] = {}
        self._runs_started = 0
        self._log_lines: list[str] = []  # the log's text, for a saved bundle

    @property
    def active_tab(self) -> str:
        return str(self.query_one(TabbedContent).active)

    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    def _update_title(self, edited: bool = False) -> None:
        session = self.session
        if session is None:
            return
        self.title = f"fuser-wb  {Path(session.path).name} :: {session.definition}"
        run = ""
        if self.last is not None:
            run = f"run {self.last.index + 1} " + ("ok" if self.last.ok else "failed")
        self.sub_title = run + ("  (edited: press r)" if edited else "")

    def _error(self, title: str, message: str, location: str = "", line: str = "") -> None:
        banner = self.query_one("#error", Static)
        banner.update(content.error_text(title, message, location, line))
        banner.display = True

    def _hide_error(self) -> None:
        self.query_one("#error").display = False

    def _log_line(self, line: Text) -> None:
        self._log_lines.append(line.plain)
        self.query_one("#log-view", TextView).append(line)
