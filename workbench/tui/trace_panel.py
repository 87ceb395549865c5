"""The Run tab's "where did this element come from?": a row per tensor a kernel writes
(the fusion's outputs, then the tensors between kernels), an index to trace (its first
element's to start with), and the trace, shown in place.

Attributes go down (the app fills the rows and shows a trace); a message goes up (the
user asked for a tensor's element): the app traces it in a worker.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.console import RenderableType
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, Label, Static

from workbench.tui.content import TraceTarget
from workbench.tui.textview import TextView

HINT = "Where did an element come from? Pick a tensor (enter), give one index per axis, enter (ctrl+t comes here)"


class TraceTargets(DataTable[Any]):
    """The tensors to trace in; enter goes to the index of the highlighted one."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "trace an element of this tensor: its index next"),
    ]
    COLUMNS = ("tensor", "shape", "dtype", "written by", "")

    def on_mount(self) -> None:
        self.cursor_type = "row"
        self.add_columns(*self.COLUMNS)


class TracePanel(Vertical):
    class Asked(Message):
        """Trace `tensor` at the index typed (`3,0,7`)."""

        def __init__(self, tensor: str, index: str) -> None:
            super().__init__()
            self.tensor, self.index = tensor, index

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.targets: list[TraceTarget] = []

    def compose(self) -> ComposeResult:
        yield Static(HINT, classes="note")
        yield TraceTargets(id="trace-targets")
        with Horizontal(id="trace-ask"):
            yield Label("", id="trace-tensor")
            yield Input(placeholder="0,0,0", id="trace-index")
        yield TextView(id="run-trace-view")

    def on_mount(self) -> None:
        self.query_one("#run-trace-view").display = False

    # -- attributes down ---------------------------------------------------------------------
    def fill(self, targets: list[TraceTarget]) -> None:
        """A run's tensors; a trace of the run before goes."""
        self.targets = targets
        table = self.query_one(TraceTargets)
        table.clear()
        for i, target in enumerate(targets):
            table.add_row(*target.row(), key=str(i))
        self.query_one("#run-trace-view").display = False
        self._aim(self.target)

    def show_trace(self, renderable: RenderableType) -> None:
        view = self.query_one("#run-trace-view", TextView)
        view.display = True
        view.show(renderable)

    def focus_targets(self) -> None:
        self.query_one(TraceTargets).focus()

    @property
    def target(self) -> TraceTarget | None:
        """The highlighted tensor."""
        table = self.query_one(TraceTargets)
        if not self.targets or not table.row_count:
            return None
        return self.targets[min(table.cursor_row, len(self.targets) - 1)]

    # -- the user ------------------------------------------------------------------------------
    def _aim(self, target: TraceTarget | None) -> None:
        """The index box for `target`: its name beside, its first element's index in it."""
        self.query_one("#trace-tensor", Label).update(f"{target.tensor} index:" if target else "index:")
        box = self.query_one("#trace-index", Input)
        box.value = target.first_index if target else ""
        box.placeholder = (target.first_index or "a 0-D tensor: empty") if target else "0,0,0"

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        self._aim(self.target)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter (or a click) on a tensor: its index, ready to type over."""
        event.stop()
        box = self.query_one("#trace-index", Input)
        box.focus()
        box.select_all()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "trace-index":
            return
        event.stop()
        target = self.target
        if target is not None:
            self.post_message(self.Asked(target.tensor, event.value))
