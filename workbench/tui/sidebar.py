"""The sidebar: the file and its definitions, the inputs' shapes and scalar values, the
option switches, the backend and the device model. It holds what the user edits until
the next run (the app applies it to the session then), and posts a message up for
each edit; it never runs anything itself."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Button, Input, Label, Select, Static, Switch

from fuser_core import DEVICE_MODELS, DisableOption, EnableOption
from workbench.session import BACKENDS, RunOptions, Session

DEFAULT_DEVICE = "default"


def shape_text(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape)) if shape else "scalar"


def option_switches() -> list[tuple[str, str, str]]:
    """(kind, name, description) of every option fuser_core offers: a disable option's
    switch is on while the feature is on."""
    found = [("disable", o.name, o.value) for o in DisableOption]
    found += [("enable", o.name, o.value) for o in EnableOption]
    return found


@dataclass(frozen=True)
class Edits:
    """What the sidebar holds: the texts of the inputs as typed, and the options."""

    shapes: tuple[str, ...]
    scalars: tuple[str, ...]
    options: RunOptions


class Sidebar(VerticalScroll):
    class Edited(Message):
        """The user changed an input, a switch or a choice (nothing has run yet)."""

    class DefinitionChosen(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    def compose(self) -> ComposeResult:
        yield Label("File", classes="heading")
        yield Static("opening…", id="file-name")
        yield Label("Definition", classes="heading")
        yield Select[str]([], id="definition", allow_blank=True, prompt="(loading)")
        yield Label("Options", classes="heading")
        with Vertical(id="options"):
            for kind, name, description in option_switches():
                with Horizontal(classes="switch-row"):
                    switch = Switch(value=kind == "disable", id=f"opt-{name}")
                    switch.tooltip = f"{kind} option: {description}"
                    yield switch
                    yield Label(name, classes="switch-label")
        yield Label("Backend", classes="heading")
        yield Select([(name, name) for name in BACKENDS], id="backend", allow_blank=False, value="reference")
        yield Static("", id="backend-note", classes="note")
        yield Label("Device model", classes="heading")
        models = [(DEFAULT_DEVICE, DEFAULT_DEVICE)] + [(m, m) for m in DEVICE_MODELS]
        device = Select(models, id="device-model", allow_blank=False, value=DEFAULT_DEVICE)
        device.tooltip = "the device the heuristics are sized for; default: the GPU's own, else H100 SXM"
        yield device
        yield Label("Index type", classes="heading")
        yield Static("after the first run", id="index-type", classes="note")
        yield Label("Inputs  (shapes as 8x1024)", classes="heading")
        yield Vertical(id="inputs")
        yield Button("Run  (r)", id="run", variant="primary")

    # -- attributes down ---------------------------------------------------------------------
    async def load(self, session: Session) -> None:
        """Show the session's file, definition, inputs and options (after it opens, or
        when the definition changes)."""
        path = Path(session.path)
        name = self.query_one("#file-name", Static)
        name.update(path.name)
        name.tooltip = str(path.resolve())
        name.remove_class("-failed")
        definition = self.query_one("#definition", Select)
        with self.prevent(Select.Changed):
            definition.set_options([(d, d) for d in session.definitions])
            definition.value = session.definition
        await self._load_inputs(session)
        self.set_options(session.options)

    async def _load_inputs(self, session: Session) -> None:
        inputs = self.query_one("#inputs", Vertical)
        await inputs.remove_children()  # the new inputs reuse the ids: the old ones must be gone
        widgets = []
        for position, slot in enumerate(session.tensor_slots):
            dtype = getattr(slot.spec.dtype, "name", str(slot.spec.dtype))
            fixed = ", ".join(f"axis {a} = {n}" for a, n in sorted(slot.fixed.items()))
            label = Label(f"{slot.label} {dtype}" + (f"  ({fixed})" if fixed else ""), classes="input-label")
            box = Input(shape_text(session.shapes[position]), id=f"shape-{position}", classes="shape")
            box.tooltip = f"input {slot.index}: {slot.spec.describe()}"
            widgets += [label, box, Static("", id=f"shape-{position}-error", classes="input-error")]
        for position, slot in enumerate(session.scalar_slots):
            label = Label(f"{slot.label} scalar", classes="input-label")
            box = Input(repr(session.scalars[position]), id=f"scalar-{position}", classes="scalar")
            box.tooltip = f"input {slot.index}: {slot.spec.describe()}"
            widgets += [label, box, Static("", id=f"scalar-{position}-error", classes="input-error")]
        await inputs.mount(*widgets)

    def set_options(self, options: RunOptions) -> None:
        with self.prevent(Switch.Changed, Select.Changed):
            for kind, name, _ in option_switches():
                names = options.disable if kind == "disable" else options.enable
                self.query_one(f"#opt-{name}", Switch).value = (name not in names) == (kind == "disable")
            self.query_one("#backend", Select).value = options.backend
            self.query_one("#device-model", Select).value = options.device_model or DEFAULT_DEVICE

    def show_open_failed(self, script: str, message: str) -> None:
        """No file is open: say so instead of `opening…` (the error banner has the details)."""
        name = self.query_one("#file-name", Static)
        name.update(f"cannot open {Path(script).name}")
        name.tooltip = message
        name.add_class("-failed")
        self.query_one("#definition", Select).prompt = "(no file open)"

    def show_backend_note(self, text: str) -> None:
        self.query_one("#backend-note", Static).update(text)

    def show_index_type(self, text: str) -> None:
        self.query_one("#index-type", Static).update(text)

    def mark_input(self, box_id: str, message: str | None) -> None:
        """Show (or clear) the error under an input; the text the user typed stays."""
        box = self.query_one(f"#{box_id}", Input)
        box.set_class(message is not None, "-invalid")
        self.query_one(f"#{box_id}-error", Static).update(message or "")

    def clear_marks(self) -> None:
        for box in self.query("#inputs Input"):
            if box.id:
                self.mark_input(box.id, None)

    # -- reading the edits -------------------------------------------------------------------
    def edits(self) -> Edits:
        shapes = tuple(box.value for box in self.query("#inputs Input.shape").results(Input))
        scalars = tuple(box.value for box in self.query("#inputs Input.scalar").results(Input))
        return Edits(shapes, scalars, self.options())

    def options(self) -> RunOptions:
        disable, enable = set(), set()
        for kind, name, _ in option_switches():
            on = self.query_one(f"#opt-{name}", Switch).value
            if kind == "disable" and not on:
                disable.add(name)
            if kind == "enable" and on:
                enable.add(name)
        model = self.query_one("#device-model", Select).value
        return RunOptions(
            enable=frozenset(enable),
            disable=frozenset(disable),
            backend=str(self.query_one("#backend", Select).value),
            device_model=None if model == DEFAULT_DEVICE else str(model),
        )

    def toggle(self, name: str) -> bool:
        """Flip an option's switch; whether it is now on."""
        switch = self.query_one(f"#opt-{name}", Switch)
        switch.toggle()
        return switch.value

    def choose(self, select_id: str, value: str) -> None:
        self.query_one(f"#{select_id}", Select).value = value

    # -- messages up -------------------------------------------------------------------------
    def on_switch_changed(self, event: Switch.Changed) -> None:
        event.stop()
        self.post_message(self.Edited())

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.post_message(self.Edited())

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.select.id == "definition":
            if isinstance(event.value, str):
                self.post_message(self.DefinitionChosen(event.value))
            return
        self.post_message(self.Edited())
