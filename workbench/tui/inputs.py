"""The sidebar's settings as the app reads them: shapes and scalars checked as typed
(each error marked under its input), options toggled and choices made from the palette,
the inputs reset to the script's, and the title saying when they differ from the run."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Input

from fuser_core import FuserError
from workbench.session import parse_scalar, parse_shape
from workbench.tui.base import WorkbenchBase
from workbench.tui.sidebar import Edits, Sidebar, shape_text


class SidebarInputs(WorkbenchBase):
    def _check(self, edits: Edits) -> tuple[list[tuple[int, ...]], list[Any], list[str]]:
        """The shapes and scalars as typed, each checked against the definition; an error
        is marked under its input (the text stays as the user typed it)."""
        session = self.session
        assert session is not None
        sidebar = self.query_one(Sidebar)
        sidebar.clear_marks()
        shapes: list[tuple[int, ...]] = []
        scalars: list[Any] = []
        errors: list[str] = []
        for position, text in enumerate(edits.shapes):
            try:
                shapes.append(session.check_shape(position, parse_shape(text)))
            except FuserError as err:
                sidebar.mark_input(f"shape-{position}", err.message)
                errors.append(err.message)
        for position, text in enumerate(edits.scalars):
            try:
                scalars.append(parse_scalar(text))
            except FuserError as err:
                sidebar.mark_input(f"scalar-{position}", err.message)
                errors.append(err.message)
        return shapes, scalars, errors

    def _apply(self, edits: Edits) -> bool:
        session = self.session
        assert session is not None
        shapes, scalars, errors = self._check(edits)
        if not errors:
            try:
                session.set_shapes(shapes)
                session.set_scalars(scalars)
            except FuserError as err:
                errors.append(err.message)
        if errors:
            self._error("not run: an input is not valid (fix it in the sidebar and press r)", "\n".join(errors))
            for line in errors:
                self._log_line(Text(f"error: {line}", style="bold red"))
            return False
        session.options = edits.options
        return True

    def on_sidebar_edited(self, message: Sidebar.Edited) -> None:
        if self.session is None:
            return
        edits = self.query_one(Sidebar).edits()
        if len(edits.shapes) == len(self.session.tensor_slots):
            self._check(edits)
        self._update_title(edited=self._edited(edits))

    def _edited(self, edits: Edits) -> bool:
        if self.last is None:
            return False
        s = self.last.settings
        typed = (tuple(edits.shapes), tuple(edits.scalars), edits.options)
        return typed != (tuple(shape_text(x) for x in s.shapes), tuple(repr(x) for x in s.scalars), s.options)

    def action_edit_inputs(self) -> None:
        boxes = self.query("#inputs Input").results(Input)
        first = next(iter(boxes), None)
        if first is None:
            self.notify("no inputs to edit: the script has not opened", severity="warning")
            return
        first.focus()

    def toggle_option(self, name: str, announce: bool = False) -> None:
        on = self.query_one(Sidebar).toggle(name)
        if announce:
            self.notify(f"{name} is {'on' if on else 'off'}: press r to re-run")

    def choose(self, select_id: str, value: str) -> None:
        self.query_one(Sidebar).choose(select_id, value)
        self.notify(f"{select_id.replace('-', ' ')}: {value}; press r to re-run")

    async def reset_inputs(self) -> None:
        session = self.session
        if session is None:
            return
        options = self.query_one(Sidebar).options()
        session.set_shapes(session.bundled_shapes)
        session.set_scalars(session.bundled_scalars)
        await self.query_one(Sidebar).load(session)
        self.query_one(Sidebar).set_options(options)
        self.notify("inputs reset to the script's; press r to re-run")
