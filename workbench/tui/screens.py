"""The modal screens: F1 help (every binding, read from the widgets that define them),
the open-file prompt, the "why not fused?" prompt, a run's CUDA fault (its kernels' CUDA and
the repro), and the trace of one element."""

from __future__ import annotations

from collections.abc import Iterable

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from fuser_core import FuserError
from workbench.render.fault import render_fault
from workbench.render.trace import render_trace
from workbench.samples import sample_paths
from workbench.session import RunError, Session, parse_index
from workbench.tui.textview import TextView

GUIDE = (
    "Edit shapes, scalars and options in the sidebar, then press r: the run happens in the background and every "
    "tab fills in. The Diff tab compares each stage with the previous run. ctrl+p holds every action (toggle an "
    "option, export the graph, a report or the dumps, open a file or a sample). Select a group in the IR tab's "
    "legend to highlight its expressions and jump to its transforms, scheduled IR, kernel IR or CUDA; up and down "
    "in the IR pick an expression, and w on two groups or expressions asks why they were not fused. The Run tab "
    "traces an element of an output: pick the tensor, give its index."
)


def _key(binding: BindingType) -> tuple[str, str]:
    if isinstance(binding, Binding):
        return binding.key_display or binding.key, binding.description or binding.action
    key, action = binding[0], binding[1]
    return key, binding[2] if len(binding) > 2 else action  # type: ignore[misc]


def bindings_table(sections: Iterable[tuple[str, Iterable[BindingType]]]) -> Table:
    table = Table(box=None, padding=(0, 2), show_header=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for title, bindings in sections:
        table.add_row(Text(title, style="bold underline"), "")
        for binding in bindings:
            key, description = _key(binding)
            table.add_row(key.replace("comma", ",").replace("slash", "/"), description)
        table.add_row("", "")
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [  # noqa: RUF012 (Textual's own API)
        Binding("escape,f1,q", "dismiss", "close help"),
    ]

    def __init__(self, sections: list[tuple[str, list[BindingType]]]) -> None:
        super().__init__()
        self.sections = sections

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(Text("Fuser Workbench: keys", style="bold"))
            yield Static(GUIDE, classes="note")
            yield Static(bindings_table(self.sections), id="help-keys")
            yield Static("escape closes this help", classes="note")


class OpenScreen(ModalScreen[str | None]):
    """A path to open, or one of the bundled samples."""

    BINDINGS = [Binding("escape", "dismiss_none", "cancel")]  # noqa: RUF012

    def compose(self) -> ComposeResult:
        with Vertical(id="open"):
            yield Label("Open a repro script: type a path and press enter, or pick a bundled sample")
            yield Input(placeholder="path/to/repro.py", id="open-path")
            yield OptionList(*(Option(p.stem, id=p.stem) for p in sample_paths()), id="open-samples")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class AskWhyScreen(ModalScreen[str | None]):
    """Two groups or expressions (by the tensors they write, as the IR tab prints them)
    to ask "why not fused?" about; one for its split."""

    BINDINGS = [Binding("escape", "dismiss_none", "cancel")]  # noqa: RUF012

    def compose(self) -> ComposeResult:
        with Vertical(id="ask-why"):
            yield Label("Why not fused? Two groups (g0 g1) or two expressions by the tensor each writes (T10 T25);")
            yield Label("one group alone (g1): how it would be split without its scheduler. Enter asks.")
            yield Input(placeholder="g0 g1", id="ask-why-names")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class FaultScreen(ModalScreen[bool]):
    """A run's CUDA fault: the error, the CUDA of each kernel it names with its launch,
    and the run's repro script; `e` writes them to files (the app does, on dismissal)."""

    BINDINGS = [  # noqa: RUF012
        Binding("escape,q,f", "dismiss(False)", "close"),
        Binding("e", "dismiss(True)", "export the repro and the kernels' CUDA"),
    ]

    def __init__(self, error: RunError, title: str) -> None:
        super().__init__()
        self.error = error
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(id="fault"):
            yield Static(Text(self.title_text, style="bold"))
            yield TextView(id="fault-view")
            yield Static("e: write the repro script and the kernels' CUDA to files    escape: close", classes="note")

    def on_mount(self) -> None:
        view = self.query_one("#fault-view", TextView)
        view.show(render_fault(self.error))
        view.focus()


class TraceScreen(ModalScreen[None]):
    """Where did this element come from: a tensor and an index typed in, traced in a
    worker by the session (the kernel interpreted for one block), shown here."""

    BINDINGS = [Binding("escape", "dismiss", "close")]  # noqa: RUF012

    def __init__(self, session: Session, hint: str) -> None:
        super().__init__()
        self.session = session
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical(id="trace"):
            yield Label(f"Trace an element: a tensor and one index per axis (e.g. {self.hint}), then enter")
            yield Input(placeholder=self.hint, id="trace-query")
            yield TextView(id="trace-view")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        words = event.value.split(maxsplit=1)
        view = self.query_one("#trace-view", TextView)
        if len(words) != 2:
            view.show(Text(f"type a tensor and an index, e.g. {self.hint}", style="yellow"))
            return
        view.show(Text(f"tracing {words[0]}[{words[1]}] …"))
        self.run_worker(lambda: self._trace(*words), thread=True, group="trace")

    def _trace(self, tensor: str, index: str) -> None:
        try:
            shown: Text = render_trace(self.session.trace(tensor, parse_index(index)))
        except FuserError as err:
            shown = Text(f"error: {err.one_line()}", style="bold red")
        self.app.call_from_thread(self.query_one("#trace-view", TextView).show, shown)
