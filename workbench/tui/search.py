"""Search of the current tab's view: `/` opens the search bar, typing marks every match,
enter steps to the next, escape closes it (and leaves any input for the view)."""

from __future__ import annotations

from typing import Any

from textual import on
from textual.css.query import NoMatches
from textual.widgets import Input, Static, TabbedContent

from workbench.tui.base import WorkbenchBase
from workbench.tui.textview import TextView


class SearchBar(WorkbenchBase):
    def action_search(self) -> None:
        bar = self.query_one("#searchbar")
        bar.display = True
        box = self.query_one("#search", Input)
        box.focus()
        if box.value:
            self._search(box.value)

    def _view(self) -> TextView:
        return self.query_one(f"#{self.active_tab}-view", TextView)

    def _search(self, query: str) -> None:
        count = self._view().search(query)
        if not query:
            self.query_one("#search-status", Static).update("")
        elif not count:
            self.query_one("#search-status", Static).update("no match")

    def _search_kept(self) -> str:
        """The query a freshly shown view is searched for again (while the bar is open)."""
        return self.query_one("#search", Input).value if self.query_one("#searchbar").display else ""

    def on_text_view_search_result(self, message: TextView.SearchResult) -> None:
        if message.view is self._view() and message.total:
            self.query_one("#search-status", Static).update(f"match {message.current} of {message.total}")

    def on_key(self, event: Any) -> None:
        """Escape leaves an input for the current view (and closes the search bar)."""
        if event.key != "escape" or not isinstance(self.focused, Input):
            return
        if self.focused.id == "search":
            self.query_one("#searchbar").display = False
            self._view().search("")
        self._view().focus()
        event.stop()

    @on(Input.Changed, "#search")
    def _search_typed(self, event: Input.Changed) -> None:
        self._search(event.value)

    @on(Input.Submitted, "#search")
    def _search_next(self) -> None:
        self._view().action_next_match()

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        """Another tab: its view is searched for the open bar's query (Textual calls this
        after the handler of TabViews, a subclass, has filled the view in)."""
        try:
            if self.query_one("#searchbar").display:
                self._search(self.query_one("#search", Input).value)
        except NoMatches:
            return  # the app is closing: its panes are being removed
