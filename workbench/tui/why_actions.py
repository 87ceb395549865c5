""" "Why not fused?" in the app: w on two legend rows or two expressions of the IR (twice
on one: its group's split), or y to type two groups or expressions; the session asks
the segmenter about the shown run and the answer is shown under the legend."""

from __future__ import annotations

from rich.text import Text

from fuser_core import FuserError
from workbench.tui import content
from workbench.tui.irview import IRView
from workbench.tui.legend import Legend
from workbench.tui.screens import AskWhyScreen
from workbench.tui.tabs import TabViews
from workbench.tui.textview import TextView


class WhyActions(TabViews):
    def on_legend_chosen(self, message: Legend.Chosen) -> None:
        """Escape in the legend: the answer and any mark go with the highlight (Textual
        calls TabViews' handler too, which clears the highlight)."""
        if message.group is None:
            self.query_one("#why-view").display = False
            self.why_mark = None

    def on_legend_why_asked(self, message: Legend.WhyAsked) -> None:
        self._mark_or_ask(f"g{message.group}", message.group)

    def on_irview_chosen(self, message: IRView.Chosen) -> None:
        """Escape on the IR's expression cursor: as escape in the legend."""
        if message.group is None:
            self.query_one("#why-view").display = False
            self.why_mark = None

    def on_irview_why_asked(self, message: IRView.WhyAsked) -> None:
        self._mark_or_ask(message.tensor, message.group)

    def _mark_or_ask(self, name: str, group: int) -> None:
        """The first w marks a group (`g0`) or an expression (`T10`, by the tensor it
        writes); a second on another asks why the two are apart, on the same one how
        its group would be cut without its scheduler."""
        good = self.good
        if good is None:
            return
        mark = self.why_mark
        if mark is None or mark[0] != good.index:
            self.why_mark = (good.index, name)
            self._status(_marked(name, group))
            return
        self.why_mark = None
        self.ask_why(mark[1], None if mark[1] == name else name)

    def ask_why(self, first: str, second: str | None = None) -> None:
        """Ask the segmenter about the shown run and show the answer under the legend."""
        session, good = self.session, self.good
        if session is None or good is None:
            self.notify("no run to ask about yet", severity="warning")
            return
        run = good.index + 1
        try:
            answer = session.why(f"{run}:{first}", f"{run}:{second}" if second else None)
        except FuserError as err:
            self.notify(err.one_line(), title="why not fused?", severity="error", timeout=10)
            return
        view = self.query_one("#why-view", TextView)
        view.display = True
        view.show(content.why_view(run, answer.lines()))
        self.call_after_refresh(self.query_one(IRView).scroll_to_cursor)  # the IR is shorter now
        self._status(f"{answer.lines()[0]} {answer.conclusion()}")
        self._log_line(Text(f"why (run {run}): {answer.lines()[0]} {answer.conclusion()}"))

    def action_ask_why(self) -> None:
        """Prompt for two groups or expressions (`g0 g1`, `T10 T25`), or one group."""

        def asked(text: str | None) -> None:
            names = (text or "").split()
            if not names:
                return
            if len(names) > 2:
                self.notify(f"name one group or two, not {len(names)}", title="why not fused?", severity="error")
                return
            self.ask_why(names[0], names[1] if len(names) == 2 else None)

        self.push_screen(AskWhyScreen(), asked)


def _marked(name: str, group: int) -> str:
    """What the status line says once `name` (`g0`, or `T10` of group `group`) is marked."""
    if name.startswith("g"):
        return (
            f"{name} marked: w on another group asks why they were not fused;"
            f" w on {name} again, how it would be split without its scheduler"
        )
    return (
        f"{name} (g{group}) marked: w on another expression or group asks why they were not fused;"
        f" w on {name} again, how g{group} would be split without its scheduler"
    )
