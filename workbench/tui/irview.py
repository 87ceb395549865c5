"""The IR tab's view of the pre-scheduled IR, with a cursor on one expression: up and
down (or a click) pick an expression, enter highlights its group, w asks why it was not
fused with another (as w does on the legend's rows), escape lets go.

The cursor appears once the user moves it, so the view reads as any other until then.
Attributes go down (the app gives the expressions of the IR it shows), messages go up
(an expression was picked, chosen or asked about).
"""

from __future__ import annotations

from typing import ClassVar

from rich.style import Style
from textual.binding import Binding, BindingType
from textual.events import Click
from textual.message import Message
from textual.strip import Strip

from workbench.render.tables import ExprLines
from workbench.tui.textview import TextView, overlay

CURSOR = Style(bgcolor="grey30", bold=True)


class IRView(TextView):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "step(1)", "next expression", show=False),
        Binding("up", "step(-1)", "previous expression", show=False),
        Binding("enter", "choose", "highlight the expression's group", show=False),
        Binding("w", "why", "why not fused: mark an expression, then w on another (twice: its split)", show=False),
        Binding("escape", "let_go", "drop the expression cursor and the highlight", show=False),
    ]

    class Picked(Message):
        """The cursor is on the expression that writes `tensor`, of `group`."""

        def __init__(self, tensor: str, group: int) -> None:
            super().__init__()
            self.tensor, self.group = tensor, group

    class Chosen(Message):
        """Enter on an expression (its group to highlight), or escape (None)."""

        def __init__(self, group: int | None) -> None:
            super().__init__()
            self.group = group

    class WhyAsked(Message):
        """w on the expression that writes `tensor`, of `group`."""

        def __init__(self, tensor: str, group: int) -> None:
            super().__init__()
            self.tensor, self.group = tensor, group

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.exprs: list[ExprLines] = []
        self.cursor: int | None = None  # an index into exprs, once the user moved it

    # -- attributes down ---------------------------------------------------------------------
    def set_exprs(self, exprs: list[ExprLines]) -> None:
        """The expressions of the IR on show; the cursor stays where the IR is the same."""
        if exprs != self.exprs:
            self.exprs, self.cursor = exprs, None
            self.refresh()

    @property
    def picked(self) -> ExprLines | None:
        return self.exprs[self.cursor] if self.cursor is not None else None

    def scroll_to_cursor(self) -> None:
        picked = self.picked
        if picked is not None:
            self.scroll_to_line(picked.start)

    # -- drawing -------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        strip = super().render_line(y)
        picked = self.picked
        if picked is not None and picked.start <= self.scroll_offset.y + y < picked.end:
            strip = overlay(strip, [(0, strip.cell_length, CURSOR)])
        return strip

    # -- the user ------------------------------------------------------------------------------
    def action_step(self, by: int) -> None:
        if not self.exprs:
            self.scroll_relative(y=by, animate=False)
            return
        if self.cursor is None:  # the first move: the first expression in sight
            top = self.scroll_offset.y
            self.cursor = next((i for i, e in enumerate(self.exprs) if e.end > top), len(self.exprs) - 1)
        else:
            self.cursor = max(0, min(len(self.exprs) - 1, self.cursor + by))
        self._picked()

    def on_click(self, event: Click) -> None:
        line = self.scroll_offset.y + event.y
        at = next((i for i, e in enumerate(self.exprs) if e.start <= line < e.end), None)
        if at is not None:
            self.cursor = at
            self._picked()

    def _picked(self) -> None:
        picked = self.picked
        assert picked is not None
        height = self.scrollable_content_region.height
        top = self.scroll_offset.y
        if picked.start < top:
            self.scroll_to(y=picked.start, animate=False, immediate=True)
        elif picked.end > top + height:
            self.scroll_to(y=picked.end - height, animate=False, immediate=True)
        self.refresh()
        self.post_message(self.Picked(picked.tensor, picked.group))

    def action_choose(self) -> None:
        picked = self.picked
        if picked is not None:
            self.post_message(self.Chosen(picked.group))

    def action_why(self) -> None:
        picked = self.picked
        if picked is None:
            self.notify("pick an expression first: up or down, or a click on it", severity="warning")
            return
        self.post_message(self.WhyAsked(picked.tensor, picked.group))

    def action_let_go(self) -> None:
        if self.cursor is None:
            return  # nothing picked: escape leaves the highlight and any answer alone
        self.cursor = None
        self.refresh()
        self.post_message(self.Chosen(None))
