"""The IR tab's legend: a row per group of the run, to highlight a group, jump to its
stages, or ask why two groups were not fused."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable


class Legend(DataTable[Any]):
    """The IR tab's legend: a row per group. Enter highlights the group's expressions;
    t, s, k and c jump to its transforms, scheduled IR, kernel IR and CUDA."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "highlight group"),
        Binding("t", "jump('transforms')", "its transforms"),
        Binding("s", "jump('scheduled')", "its scheduled IR"),
        Binding("k", "jump('kernel')", "its kernel IR"),
        Binding("c", "jump('cuda')", "its CUDA"),
        Binding("w", "why", "why not fused: mark, then w on another group (w twice: its split)"),
        Binding("escape", "clear", "clear highlight"),
    ]

    class Chosen(Message):
        def __init__(self, group: int | None, tab: str | None = None) -> None:
            super().__init__()
            self.group, self.tab = group, tab

    class WhyAsked(Message):
        """The user pressed w on a group's row."""

        def __init__(self, group: int) -> None:
            super().__init__()
            self.group = group

    COLUMNS = ("group", "kernel", "inputs -> outputs", "not merged with")

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.zebra_stripes = True
        self.add_columns(*self.COLUMNS)

    def fill(self, rows: list[tuple[Text, str, str, str]], group_ids: list[int]) -> None:
        # Columns are made again with the rows: a kept header can be drawn with the
        # widths it had before the rows came (seen as a flaky snapshot).
        self.clear(columns=True)
        self.add_columns(*self.COLUMNS)
        for gid, row in zip(group_ids, rows, strict=True):
            self.add_row(*row, key=str(gid))
        self.call_after_refresh(self._redraw)

    def _redraw(self) -> None:
        """Draw again once the column widths have settled (they are computed when the
        table is next idle, after rows were drawn): DataTable keeps rendered lines
        in caches that a plain refresh reuses."""
        self._clear_caches()
        self.refresh()

    def _cursor_group(self) -> int | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key
        return int(key.value) if key.value is not None else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.post_message(self.Chosen(self._cursor_group()))

    def action_jump(self, tab: str) -> None:
        self.post_message(self.Chosen(self._cursor_group(), tab))

    def action_why(self) -> None:
        group = self._cursor_group()
        if group is not None:
            self.post_message(self.WhyAsked(group))

    def action_clear(self) -> None:
        self.post_message(self.Chosen(None))
