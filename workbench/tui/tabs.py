"""What the tabs show: each tab's view filled from the shown run (workbench.tui.content
builds it), once per change of the run or the tab's filters; the group filters of the
per-group tabs and the group highlighted from the legend or an expression of the IR;
and what a tab says before any run succeeded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import RenderableType
from textual import on
from textual.css.query import NoMatches
from textual.widgets import Input, Select, TabbedContent

from workbench.render.tables import presched_exprs, presched_groups
from workbench.tui import content
from workbench.tui.base import GROUP_FILTERED
from workbench.tui.content import ALL
from workbench.tui.irview import IRView
from workbench.tui.legend import Legend
from workbench.tui.search import SearchBar
from workbench.tui.textview import TextView
from workbench.tui.trace_panel import TracePanel


class TabViews(SearchBar):
    def action_tab(self, tab: str) -> None:
        """Show a tab and focus its view, so that its keys (search, scrolling) apply."""
        self.query_one(TabbedContent).active = tab
        self.query_one(f"#{tab}-view", TextView).focus()

    def _refresh_all(self) -> None:
        self._refresh(self.active_tab, force=True)

    def _refresh(self, tab: str, force: bool = False) -> None:
        """Show the tab's content for the current run and filters, if not already shown."""
        if tab == "log":
            return
        token = (
            id(self.good),
            id(self.last),
            self.group,
            self._view_filters(tab),
            self.step if self.good is None else "",
        )
        if not force and self._shown.get(tab) == token:
            return
        self._shown[tab] = token
        view = self.query_one(f"#{tab}-view", TextView)
        keep = self._search_kept()
        view.show(self._content(tab))
        if isinstance(view, IRView):
            a = self.good.artifacts if self.good is not None else None
            view.set_exprs(presched_exprs(a.presched) if a is not None else [])
        if keep:
            view.search(keep)

    def _view_filters(self, tab: str) -> tuple[Any, ...]:
        if tab not in GROUP_FILTERED:
            return ()
        group = self.query_one(f"#{tab}-group", Select).value
        tensor = self.query_one("#transforms-tensor", Input).value if tab == "transforms" else ""
        return (group, tensor)

    def _content(self, tab: str) -> RenderableType:
        good = self.good
        if good is None or good.artifacts is None:
            return self._waiting(tab)
        a = good.artifacts
        filters = self._view_filters(tab)
        group = int(filters[0]) if filters else ALL
        builders: dict[str, Callable[[], RenderableType]] = {
            "ir": lambda: content.ir_view(a, self.group),
            "concretization": lambda: content.concretization_view(a),
            "segments": lambda: content.segments_view(a),
            "transforms": lambda: content.transforms_view(a, group, str(filters[1]) if filters else ""),
            "scheduled": lambda: content.scheduled_view(a, group),
            "kernel": lambda: content.kernel_ir_view(a, group, self.cuda_problem),
            "cuda": lambda: content.cuda_view(a, group, self.cuda_problem),
            "run": lambda: content.run_view(good, self.cuda_problem),
            "diff": lambda: content.diff_view(self.diff_state, self._runs_started),
        }
        return builders[tab]()

    def _waiting(self, tab: str) -> RenderableType:
        """A tab before any run succeeded: what is happening, or why nothing ran."""
        if self.session is not None and tab == "ir" and self.busy:
            return content.definition_view(self.session.loaded.fd.fusion_ir(), self.step)
        if self.busy:
            return content.note(f"{self.step} …: this tab fills in when the run finishes")
        if self.last is not None and self.last.error is not None:
            err = self.last.error
            return content.error_text("no run has succeeded yet", err.message, err.location, err.line)
        return content.note("nothing has run: open a script (ctrl+o) and press r")

    def _fill_groups(self, a: Any) -> None:
        """The legend's rows, the group filters' choices and the Run tab's tensors to
        trace, for a run's groups."""
        ids = [g.id for g in a.groups]
        self.query_one(Legend).fill(content.legend_rows(a), ids)
        self.query_one(TracePanel).fill(content.trace_targets(a))
        if self.group not in ids:
            self.group = None
        options = [("all groups", ALL)] + [(f"g{g.id} {g.scheduler}", g.id) for g in a.groups]
        for tab in GROUP_FILTERED:
            select = self.query_one(f"#{tab}-group", Select)
            keep = select.value if select.value in ids else ALL
            with self.prevent(Select.Changed):
                select.set_options(options)
                select.value = keep

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        try:
            self._refresh(event.pane.id or "")
        except NoMatches:
            return  # the app is closing: its panes are being removed

    def on_select_changed(self, event: Select.Changed) -> None:
        tab = (event.select.id or "").removesuffix("-group")
        if tab in GROUP_FILTERED:
            self._refresh(tab)

    @on(Input.Changed, "#transforms-tensor")
    def _tensor_filter_typed(self) -> None:
        self._refresh("transforms")

    def on_legend_chosen(self, message: Legend.Chosen) -> None:
        """A legend row chosen: its group highlighted, the IR scrolled to the group's
        first expression; with a tab, that tab shown."""
        self._highlight(message.group)
        if message.group is not None and self.good is not None and self.good.artifacts is not None:
            owners = presched_groups(self.good.artifacts.presched)
            if message.group in owners:
                self.query_one("#ir-view", TextView).scroll_to_line(owners.index(message.group))
        if message.tab is not None:
            self.action_tab(message.tab)

    def on_irview_chosen(self, message: IRView.Chosen) -> None:
        """Enter on an expression of the IR: its group highlighted, the expression kept in sight."""
        self._highlight(message.group)
        self.query_one(IRView).scroll_to_cursor()

    def on_irview_picked(self, message: IRView.Picked) -> None:
        self._status(
            f"{message.tensor} (g{message.group}): enter highlights g{message.group};"
            " w marks it to ask why it was not fused with another expression or group"
        )

    def _highlight(self, group: int | None) -> None:
        """A group highlighted in the IR and chosen in the group filters (None: no highlight)."""
        self.group = group
        if group is not None:
            for tab in GROUP_FILTERED:
                self.query_one(f"#{tab}-group", Select).value = group
        self._refresh("ir")
