"""Every action, where a user finds it: the command palette (ctrl+p) lists each one
(toggle an option, a backend, a device model, an export, why-not-fused for each pair of
groups, a trace, open a file or a sample, switch fusion, show a tab), and F1 lists every
key, read from the widgets that bind them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen

from fuser_core import DEVICE_MODELS
from workbench.samples import sample_paths
from workbench.session import BACKENDS
from workbench.tui.base import TABS
from workbench.tui.export_actions import ExportActions
from workbench.tui.irview import IRView
from workbench.tui.legend import Legend
from workbench.tui.pipeline import Pipeline
from workbench.tui.screens import HelpScreen
from workbench.tui.sidebar import DEFAULT_DEVICE, Sidebar, option_switches
from workbench.tui.textview import TextView
from workbench.tui.trace_actions import TraceActions
from workbench.tui.trace_panel import TraceTargets
from workbench.tui.why_actions import WhyActions


class Palette(Pipeline, WhyActions, TraceActions, ExportActions):
    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from self.commands()
        yield from super().get_system_commands(screen)

    def commands(self) -> Iterable[SystemCommand]:
        """Every action of the workbench, for the command palette."""
        yield SystemCommand("Run again", "re-run the pipeline with the sidebar's settings (r)", self.action_run)
        for kind, name, description in option_switches():
            yield SystemCommand(
                f"Toggle {name}", f"{kind} option: {description}", _bind(self.toggle_option, name, True)
            )
        for name in BACKENDS:
            yield SystemCommand(f"Backend: {name}", "where the run executes", _bind(self.choose, "backend", name))
        for model in (DEFAULT_DEVICE, *DEVICE_MODELS):
            yield SystemCommand(
                f"Device model: {model}", "size the heuristics for it", _bind(self.choose, "device-model", model)
            )
        exports = (
            ("graph", "Export segment graph (.dot)", "the segment graph as DOT"),
            ("graph:svg", "Export segment graph (.svg)", "needs Graphviz's `dot` program"),
            ("report", "Export report (HTML)", "every stage in one HTML file"),
            ("json", "Export report (JSON)", "every stage as JSON data"),
            ("dumps", "Export dumps (text)", "every dump as plain text"),
            ("repro", "Export repro script", "nvFuser's repro of this fusion with the current shapes and options"),
            ("fault", "Export CUDA fault", "a CUDA fault's repro script (sync_launches on) and its kernels' CUDA"),
            ("bundle", "Save bundle", "the script, settings and every stage of the last two runs, to reopen anywhere"),
        )
        for kind, title, help_text in exports:
            yield SystemCommand(title, f"{help_text}, into {self.export_dir}", _bind(self.action_export, kind))
        yield from self._why_commands()
        yield SystemCommand(
            "Trace an element…",
            "where one element of an output came from: its kernel, one block (ctrl+t)",
            self.action_trace,
        )
        yield SystemCommand(
            "Trace an element in the Run tab",
            "pick an output (or a tensor between kernels) and an index; the trace shows in the tab",
            self.trace_in_run_tab,
        )
        yield SystemCommand(
            "Show CUDA fault", "the last run's CUDA fault: its kernels' CUDA and repro (f)", self.action_fault
        )
        yield SystemCommand("Open file…", "open a repro script by path (ctrl+o)", self.action_open)
        for path in sample_paths():
            yield SystemCommand(
                f"Open sample {path.stem}", "a bundled sample fusion", _bind(self.open_script, str(path))
            )
        if self.session is not None:
            for name in self.session.definitions:
                yield SystemCommand(
                    f"Switch fusion: {name}", "another definition of this script", _bind(self._switch, name)
                )
        for tab, title in TABS:
            yield SystemCommand(f"Show {title}", "switch to this tab", _bind(self.action_tab, tab))
        yield SystemCommand("Search", "search the current view (/)", self.action_search)
        yield SystemCommand("Edit inputs", "focus the first input's shape in the sidebar (i)", self.action_edit_inputs)
        yield SystemCommand("Reset inputs", "the shapes and scalars the script gives", self.reset_inputs)
        yield SystemCommand("Help", "every key binding (F1)", self.action_help)

    def _why_commands(self) -> Iterable[SystemCommand]:
        """Why-not-fused questions: any two (the prompt), each pair of the shown run's
        groups, and each group's split."""
        yield SystemCommand(
            "Why not fused…", "two groups or two expressions by tensor: g0 g1, T10 T25 (y)", self.action_ask_why
        )
        a = self.good.artifacts if self.good is not None else None
        ids = [g.id for g in a.groups] if a is not None else []
        for i, first in enumerate(ids):
            for second in ids[i + 1 :]:
                yield SystemCommand(
                    f"Why not fused: g{first} + g{second}",
                    "every scheduler's verdict on their merge, with its figures (w on two legend rows)",
                    _bind(self.ask_why, f"g{first}", f"g{second}"),
                )
        for group in ids:
            yield SystemCommand(
                f"Split without its scheduler: g{group}",
                "how it would be cut without its scheduler (w twice on its legend row)",
                _bind(self.ask_why, f"g{group}"),
            )

    def _switch(self, name: str) -> None:
        self.query_one(Sidebar).choose("definition", name)

    def action_help(self) -> None:
        sections: list[tuple[str, list[BindingType]]] = [
            (
                "Everywhere",
                [*_untabbed(self.BINDINGS), Binding("ctrl+p", "command_palette", "command palette: every action")],
            ),
            ("Tabs", [Binding(str((i + 1) % 10), "", f"{title} tab") for i, (_, title) in enumerate(TABS)]),
            ("Any view (IR, CUDA, ...)", list(TextView.BINDINGS)),
            ("The IR tab's expressions (up and down pick one)", list(IRView.BINDINGS)),
            ("The IR tab's legend", list(Legend.BINDINGS)),
            (
                "The Run tab's trace panel",
                [*TraceTargets.BINDINGS, Binding("enter", "", "in the index box: trace that element")],
            ),
            ("Search bar", [Binding("enter", "", "next match"), Binding("escape", "", "close the search")]),
        ]
        self.push_screen(HelpScreen(sections))


def _untabbed(bindings: Iterable[BindingType]) -> list[BindingType]:
    """The bindings but the digits that pick a tab (the help lists those apart)."""
    return [b for b in bindings if not (isinstance(b, Binding) and b.action.startswith("tab("))]


def _bind(method: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: method(*args)
