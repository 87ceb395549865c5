"""Where did this element come from: in the Run tab, a tensor picked in its trace panel
and an index (ctrl+t there goes to the panel); on any other tab, ctrl+t opens the trace
prompt. The session interprets the kernel that writes the element, in a worker, with the
settings of the run the tabs show."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual.message import Message

from fuser_core import FuserError
from workbench.session import RunResult, parse_index
from workbench.tui import content
from workbench.tui.screens import TraceScreen
from workbench.tui.tabs import TabViews
from workbench.tui.trace_panel import TracePanel


class TraceDone(Message):
    """A trace the worker finished (or its error), of the run `run` showed."""

    def __init__(self, run: RunResult, shown: RenderableType) -> None:
        super().__init__()
        self.run, self.shown = run, shown


class TraceActions(TabViews):
    def action_trace(self) -> None:
        good = self.good
        if self.session is None or good is None or good.artifacts is None:
            self.notify("nothing to trace: no run has succeeded yet", severity="warning")
            return
        if self.active_tab == "run":
            self.query_one(TracePanel).focus_targets()
            return
        targets = content.trace_targets(good.artifacts)
        if targets:
            hint = f"{targets[0].tensor} {targets[0].first_index}".strip()
        else:  # a bundle saved before runs recorded their outputs
            last = good.artifacts.groups[-1].outputs
            hint = f"{last[0] if last else 'T0'} 1,2,3"
        self.push_screen(TraceScreen(self.session, hint))

    def trace_in_run_tab(self) -> None:
        self.action_tab("run")
        self.query_one(TracePanel).focus_targets()

    def on_trace_panel_asked(self, message: TracePanel.Asked) -> None:
        """Trace the element in a worker; the panel says so until the answer comes."""
        session, good = self.session, self.good
        if session is None or good is None:
            return
        panel = self.query_one(TracePanel)
        try:
            index = parse_index(message.index)
        except FuserError as err:
            panel.show_trace(Text(f"error: {err.one_line()}", style="bold red"))
            return
        panel.show_trace(Text(f"tracing {message.tensor}[{', '.join(map(str, index))}] of run {good.index + 1} …"))

        def work() -> None:
            try:
                trace = session.trace(message.tensor, index, settings=good.settings)
                shown: RenderableType = content.trace_view(good.index + 1, trace)
            except FuserError as err:
                shown = Text(f"error: {err.one_line()}", style="bold red")
            self.post_message(TraceDone(good, shown))

        self.run_worker(work, thread=True, group="trace")

    def on_trace_done(self, message: TraceDone) -> None:
        if message.run is self.good:  # else the tabs show another run now
            self.query_one(TracePanel).show_trace(message.shown)
