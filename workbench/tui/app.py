"""The Textual app: a sidebar of what the user can change, a tab per stage of the run,
and a run in a worker thread that fills the tabs in when it finishes.

Attributes go down (the app tells the sidebar and the views what to show) and messages
go up (the sidebar says it was edited, the worker says how far it got and what it
made). The session (workbench.session) does every bit of compiling and running; the
views draw what workbench.tui.content builds from its artifacts.

The app is one class per concern, joined here: workbench.tui.base (state, status, log),
tabs and search (what the tabs show), inputs and pipeline (the sidebar's settings,
opening and running), why_actions, trace_actions and export_actions (the questions and
the files), palette (every action, and F1). This module adds the keys and the layout.
Textual calls a message's handler in every class of the app's MRO that defines it, so
two concerns may each handle the same message (each takes its own part).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Input, Select, Static, TabbedContent, TabPane

from workbench.tui.base import GROUP_FILTERED, TABS, Launch
from workbench.tui.content import ALL
from workbench.tui.irview import IRView
from workbench.tui.legend import Legend
from workbench.tui.palette import Palette
from workbench.tui.sidebar import Sidebar
from workbench.tui.textview import TextView
from workbench.tui.trace_panel import TracePanel

__all__ = ["TABS", "Launch", "Legend", "WorkbenchApp"]


class WorkbenchApp(Palette):
    TITLE = "fuser-wb"
    CSS_PATH = Path(__file__).with_name("app.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "run", "re-run"),
        Binding("slash", "search", "search", key_display="/"),
        Binding("f1", "help", "help"),
        Binding("i", "edit_inputs", "edit inputs"),
        Binding("y", "ask_why", "why not fused? (two groups or expressions)", show=False),
        Binding("f", "fault", "the CUDA fault's kernels and repro", show=False),
        Binding("ctrl+o", "open", "open"),
        Binding("ctrl+g", "export('graph')", "export graph", show=False),
        Binding("ctrl+e", "export('report')", "export report", show=False),
        Binding("ctrl+t", "trace", "trace an element (on the Run tab: its trace panel)", show=False),
        Binding("ctrl+s", "export('bundle')", "save a bundle", show=False),
        Binding("q", "quit", "quit"),
        *(
            Binding(str((i + 1) % 10), f"tab('{tab}')", f"{title} tab", show=False)
            for i, (tab, title) in enumerate(TABS)
        ),
    ]

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            yield Sidebar(id="sidebar")
            with Vertical(id="main"):
                yield Static("", id="bundle-banner")
                yield Static("", id="error")
                with TabbedContent(initial="ir", id="tabs"):
                    for tab, title in TABS:
                        with TabPane(title, id=tab):
                            yield from self._pane(tab)
                with Horizontal(id="searchbar"):
                    yield Input(placeholder="search this view (enter: next, escape: close)", id="search")
                    yield Static("", id="search-status")
        yield Static("", id="status")
        yield Footer()

    def _pane(self, tab: str) -> ComposeResult:
        if tab in GROUP_FILTERED:
            with Horizontal(classes="filters"):
                yield Select([("all groups", ALL)], id=f"{tab}-group", allow_blank=False, value=ALL)
                if tab == "transforms":
                    yield Input(placeholder="tensor name, e.g. T3", id="transforms-tensor")
        yield IRView(id="ir-view") if tab == "ir" else TextView(id=f"{tab}-view")
        if tab == "ir":
            yield Legend(id="legend")
            yield TextView(id="why-view")
        if tab == "run":
            yield TracePanel(id="trace-panel")

    def on_mount(self) -> None:
        self.query_one("#error").display = False
        self.query_one("#bundle-banner").display = False
        self.query_one("#searchbar").display = False
        self.query_one("#why-view").display = False
        self.query_one("#ir-view").focus()
        self._status("opening " + self.launch.script)
        self._open(self.launch.script, self.launch)
