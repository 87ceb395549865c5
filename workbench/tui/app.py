"""The Textual app: a sidebar of what the user can change, a tab per stage of the run,
and a run in a worker thread that fills the tabs in when it finishes.

Attributes go down (the app tells the sidebar and the views what to show) and messages
go up (the sidebar says it was edited, the worker says how far it got and what it
made). The session (workbench.session) does every bit of compiling and running; the
views draw what workbench.tui.content builds from its artifacts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.screen import Screen
from textual.widget import MountError
from textual.widgets import Button, DataTable, Footer, Header, Input, Select, Static, TabbedContent, TabPane

from fuser_core import DEVICE_MODELS, FuserError
from workbench.bundle import BUNDLE_SUFFIX, Bundle, load_bundle, save_bundle
from workbench.diff import diff_artifacts
from workbench.exports import export_dumps, export_fault, export_graph, export_report, export_repro
from workbench.render.tables import presched_groups
from workbench.samples import sample_paths
from workbench.session import (
    BACKENDS,
    DEFAULT_MAX_INPUT_BYTES,
    CudaFault,
    RunOptions,
    RunResult,
    Session,
    backend_problem,
    parse_scalar,
    parse_shape,
)
from workbench.tui import content
from workbench.tui.content import ALL, DiffState
from workbench.tui.screens import AskWhyScreen, FaultScreen, HelpScreen, OpenScreen, TraceScreen
from workbench.tui.sidebar import DEFAULT_DEVICE, Edits, Sidebar, option_switches, shape_text
from workbench.tui.textview import TextView

TABS = (
    ("ir", "IR"),
    ("concretization", "Concretization"),
    ("segments", "Segments"),
    ("transforms", "Transforms"),
    ("scheduled", "Scheduled IR"),
    ("kernel", "Kernel IR"),
    ("cuda", "CUDA"),
    ("run", "Run"),
    ("diff", "Diff"),
    ("log", "Log"),
)
TAB_TITLES = dict(TABS)
GROUP_FILTERED = ("transforms", "scheduled", "kernel", "cuda")


@dataclass
class Launch:
    """How the app starts: the script, and settings from the command line."""

    script: str
    definition: str | None = None
    shapes: tuple[tuple[int, ...], ...] | None = None
    scalars: tuple[Any, ...] | None = None
    options: RunOptions = field(default_factory=RunOptions)
    seed: int = 0
    max_input_bytes: int = DEFAULT_MAX_INPUT_BYTES
    export_dir: Path = field(default_factory=Path.cwd)
    bundle: Bundle | None = None  # a saved bundle to show (its runs, not a new one)


# -- messages from the worker -------------------------------------------------------------


class Opened(Message):
    def __init__(
        self, session: Session, notes: list[str], cuda_problem: str | None, bundle: Bundle | None = None
    ) -> None:
        super().__init__()
        self.session, self.notes, self.cuda_problem = session, notes, cuda_problem
        self.bundle = bundle


class OpenFailed(Message):
    def __init__(self, script: str, message: str, location: str = "", line: str = "") -> None:
        super().__init__()
        self.script, self.message, self.location, self.line = script, message, location, line


class RunProgress(Message):
    def __init__(self, index: int, step: str) -> None:
        super().__init__()
        self.index, self.step = index, step


class RunDone(Message):
    def __init__(self, result: RunResult, diff: DiffState | None) -> None:
        super().__init__()
        self.result, self.diff = result, diff


# -- the legend ---------------------------------------------------------------------------


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


# -- the app ------------------------------------------------------------------------------


class WorkbenchApp(App[None]):
    TITLE = "fuser-wb"
    CSS_PATH = Path(__file__).with_name("app.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "run", "re-run"),
        Binding("slash", "search", "search", key_display="/"),
        Binding("f1", "help", "help"),
        Binding("i", "edit_inputs", "edit inputs"),
        Binding("y", "ask_why", "why not fused? (two groups or expressions)", show=False),
        Binding("f", "fault", "the CUDA fault's kernels and repro", show=False),
        Binding("ctrl+o", "open", "open"),
        Binding("ctrl+g", "export('graph')", "export graph", show=False),
        Binding("ctrl+e", "export('report')", "export report", show=False),
        Binding("ctrl+t", "trace", "trace an element", show=False),
        Binding("ctrl+s", "export('bundle')", "save a bundle", show=False),
        Binding("q", "quit", "quit"),
        *(
            Binding(str((i + 1) % 10), f"tab('{tab}')", f"{title} tab", show=False)
            for i, (tab, title) in enumerate(TABS)
        ),
    ]

    def __init__(self, launch: Launch) -> None:
        super().__init__()
        self.launch = launch
        self.export_dir = launch.export_dir
        self.session: Session | None = None
        self.last: RunResult | None = None  # the latest run, failed or not
        self.good: RunResult | None = None  # the latest that succeeded: the tabs show it
        self.diff_state: DiffState | None = None
        self.group: int | None = None  # highlighted in the IR tab
        self.why_mark: tuple[int, int] | None = None  # (run index, group) marked for "why not fused?"
        self.cuda_problem: str | None = None
        self.busy: str | None = "opening"  # what the worker is doing; None when idle
        self.step = "opening the script"
        self._shown: dict[str, Any] = {}
        self._runs_started = 0
        self._log_lines: list[str] = []  # the log's text, for a saved bundle

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="body"):
            yield Sidebar(id="sidebar")
            with Vertical(id="main"):
                yield Static("", id="bundle-banner")
                yield Static("", id="error")
                with TabbedContent(initial="ir", id="tabs"):
                    for tab, title in TABS:
                        with TabPane(title, id=tab):
                            yield from self._pane(tab)
                with Horizontal(id="searchbar"):
                    yield Input(placeholder="search this view (enter: next, escape: close)", id="search")
                    yield Static("", id="search-status")
        yield Static("", id="status")
        yield Footer()

    def _pane(self, tab: str) -> ComposeResult:
        if tab in GROUP_FILTERED:
            with Horizontal(classes="filters"):
                yield Select([("all groups", ALL)], id=f"{tab}-group", allow_blank=False, value=ALL)
                if tab == "transforms":
                    yield Input(placeholder="tensor name, e.g. T3", id="transforms-tensor")
        yield TextView(id=f"{tab}-view")
        if tab == "ir":
            yield Legend(id="legend")
            yield TextView(id="why-view")

    def on_mount(self) -> None:
        self.query_one("#error").display = False
        self.query_one("#bundle-banner").display = False
        self.query_one("#searchbar").display = False
        self.query_one("#why-view").display = False
        self.query_one("#ir-view").focus()
        self._status("opening " + self.launch.script)
        self._open(self.launch.script, self.launch)

    # -- opening ----------------------------------------------------------------------------
    def _open(self, script: str, launch: Launch | None = None) -> None:
        self.busy, self.step = "opening", f"opening {script}"
        self.run_worker(lambda: self._open_worker(script, launch), thread=True, group="pipeline")

    def _open_worker(self, script: str, launch: Launch | None) -> None:
        try:
            if script.endswith(BUNDLE_SUFFIX) or (launch is not None and launch.bundle is not None):
                bundle = (
                    launch.bundle if launch is not None and launch.bundle is not None else load_bundle(Path(script))
                )
                self.post_message(Opened(bundle.session, [], backend_problem("cuda"), bundle))
                return
            session = Session.open(script, launch.definition if launch else None)
        except FuserError as err:
            self.post_message(OpenFailed(script, *_where(err)))
            return
        notes = _apply_launch(session, launch) if launch else []
        self.post_message(Opened(session, notes, backend_problem("cuda")))

    async def on_opened(self, message: Opened) -> None:
        session = self.session = message.session
        self.last = self.good = self.diff_state = None
        self.group = None
        self.cuda_problem = message.cuda_problem
        sidebar = self.query_one(Sidebar)
        try:
            await sidebar.load(session)
        except MountError:
            return  # the user quit while the script was opening
        note = "cuda: available" if message.cuda_problem is None else f"cuda unavailable here: {message.cuda_problem}"
        sidebar.show_backend_note(note)
        self._log_line(Text(f"opened {session.path} :: {session.definition}", style="bold"))
        for problem in session.script.problems:
            self._log_line(Text(f"warning: skipped {problem.one_line()}", style="yellow"))
        for line in message.notes:
            self._error("the command line's settings were not all applied", line)
            self._log_line(Text(f"error: {line}", style="bold red"))
        self.busy = None
        self.query_one("#bundle-banner").display = message.bundle is not None
        if message.bundle is not None:
            self._show_bundle(message.bundle)
            return
        self._refresh_all()
        self._start_run()

    def _show_bundle(self, bundle: Bundle) -> None:
        """A bundle's runs in the tabs as they were recorded; r re-runs from its script."""
        self.query_one("#bundle-banner", Static).update(Text(bundle.banner(), style="bold"))
        for line in bundle.log:
            self._log_line(Text(f"recorded: {line}"))
        runs = bundle.runs
        self._runs_started = len(runs)
        good = [r for r in runs if r.ok]
        self.last, self.good = runs[-1], (good[-1] if good else None)
        if len(good) == 2 and good[0].artifacts is not None and good[1].artifacts is not None:
            self.diff_state = DiffState(good[0], good[1], diff_artifacts(good[0].artifacts, good[1].artifacts))
        if self.good is not None:
            self._run_succeeded(self.good)
        if not self.last.ok:
            self._run_failed(self.last)
        self._status(bundle.banner())
        self._update_title()
        self._refresh_all()

    def on_open_failed(self, message: OpenFailed) -> None:
        self.busy = None
        self._error(f"cannot open {message.script}", message.message, message.location, message.line)
        self._log_line(Text(f"error: cannot open {message.script}: {message.message}", style="bold red"))
        self._status(f"cannot open {message.script}: press ctrl+o to open another, r to try again")
        self._refresh_all()

    # -- running ----------------------------------------------------------------------------
    async def action_run(self) -> None:
        if self.busy:
            self.notify(f"wait: {self.step}", severity="warning")
            return
        if self.session is None:
            self._open(self.launch.script, self.launch)
            return
        if not await self._reload_if_edited():
            return
        if not self._apply(self.query_one(Sidebar).edits()):
            return
        self._start_run()

    async def _reload_if_edited(self) -> bool:
        session = self.session
        assert session is not None
        if not session.changed_on_disk():
            return True
        before = _slot_shape(session)
        try:
            notes = session.reload()
        except FuserError as err:
            self._error("the script no longer loads (your settings are kept; fix it and press r)", *_where(err))
            self._log_line(Text(f"error: reloading {session.path}: {err.one_line()}", style="bold red"))
            return False
        self._log_line(Text(f"reloaded {session.path}: it changed on disk", style="bold"))
        for line in notes:
            self._log_line(Text(f"warning: {line}", style="yellow"))
        if _slot_shape(session) != before:
            options = self.query_one(Sidebar).options()
            await self.query_one(Sidebar).load(session)
            self.query_one(Sidebar).set_options(options)
            self._log_line(Text("the definition's inputs changed: the sidebar shows the script's", style="yellow"))
        return True

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

    def _start_run(self) -> None:
        session = self.session
        assert session is not None
        self._runs_started += 1
        index = self._runs_started
        self.busy, self.step = "running", f"run {index}: starting"
        self._status(self.step)
        self._log_line(Text(f"run {index}: {session.settings().describe()}"))
        before = self.good

        def progress(step: str) -> None:
            self.post_message(RunProgress(index, step))

        def work() -> None:
            result = session.run(progress=progress)
            diff = None
            if result.artifacts is not None and before is not None and before.artifacts is not None:
                diff = DiffState(before, result, diff_artifacts(before.artifacts, result.artifacts))
            self.post_message(RunDone(result, diff))

        self.run_worker(work, thread=True, group="pipeline")

    def on_run_progress(self, message: RunProgress) -> None:
        self.step = f"run {message.index}: {message.step}"
        self._status(self.step + " …")
        if self.good is None:
            self._refresh("ir", force=True)

    def on_run_done(self, message: RunDone) -> None:
        result = self.last = message.result
        self.busy = None
        if result.error is not None:
            self._run_failed(result)
        else:
            self.good = result
            if message.diff is not None:
                self.diff_state = message.diff
            self._run_succeeded(result)
        self._update_title()
        self._refresh_all()

    def _run_succeeded(self, result: RunResult) -> None:
        a = result.artifacts
        assert a is not None
        self._hide_error()
        groups = len(a.groups)
        self._status(f"run {result.index + 1}: {groups} segment{'s' if groups != 1 else ''}, {a.cache_line}")
        self._log_line(Text(f"run {result.index + 1}: {a.cache_line}"))
        for g in a.groups:
            for drop in g.dropped_hints:
                self._log_line(Text(f"warning: g{g.id} dropped an allocation hint: {drop}", style="yellow"))
        if a.correctness.checks and not a.correctness.ok:
            self._log_line(Text(f"warning: {a.correctness.note}", style="bold yellow"))
        for line in a.compiles:
            self._log_line(Text(f"compile: {line}"))
        if self.diff_state is not None and self.diff_state.after is result:
            changed = ", ".join(s.label for s in self.diff_state.diff.changed) or "nothing"
            self._log_line(Text(f"diff with run {self.diff_state.before.index + 1}: changed {changed}"))
        self._fill_groups(a)
        self.why_mark = None
        self.query_one("#why-view").display = False  # an answer is about the run it asked
        self.query_one(Sidebar).show_index_type(f"{a.index_type}: chosen from the inputs' sizes")

    def _run_failed(self, result: RunResult) -> None:
        err = result.error
        assert err is not None
        shown = f"; the tabs show run {self.good.index + 1}, the last that succeeded" if self.good else ""
        title = f"run {result.index + 1} failed{shown}"
        if err.fault is not None:
            title = (
                f"run {result.index + 1} failed with a CUDA fault: press f for the kernel's CUDA and the repro{shown}"
            )
        self._error(title, err.message, err.location, err.line)
        self._status(f"run {result.index + 1} failed: fix the script, a shape or an option and press r")
        self._log_line(Text(f"error: run {result.index + 1}: {err.text()}", style="bold red"))
        if err.fault is not None:
            self._fault_failed(result, err.fault)

    def _fault_failed(self, result: RunResult, fault: CudaFault) -> None:
        for kernel in fault.kernels:
            self._log_line(Text(f"fault: {kernel.label} ({kernel.scheduler}): {kernel.launch}", style="red"))
        self._log_line(Text("fault: f shows the kernels' CUDA and the repro; e there writes them to files"))
        if fault.sticky:
            self._status(
                f"run {result.index + 1}: CUDA fault; the GPU is unusable in this process: restart fuser-wb to run"
                " on cuda again (the reference backend still runs)"
            )

    def action_fault(self) -> None:
        last = self.last
        if last is None or last.error is None or last.error.fault is None:
            self.notify("no CUDA fault: the last run did not end in one", severity="warning")
            return

        def closed(export: bool | None) -> None:
            if export:
                self.action_export("fault")

        title = f"run {last.index + 1}: a CUDA fault ({last.error.fault.error})"
        self.push_screen(FaultScreen(last.error, title), closed)

    def _fill_groups(self, a: Any) -> None:
        ids = [g.id for g in a.groups]
        self.query_one(Legend).fill(content.legend_rows(a), ids)
        if self.group not in ids:
            self.group = None
        options = [("all groups", ALL)] + [(f"g{g.id} {g.scheduler}", g.id) for g in a.groups]
        for tab in GROUP_FILTERED:
            select = self.query_one(f"#{tab}-group", Select)
            keep = select.value if select.value in ids else ALL
            with self.prevent(Select.Changed):
                select.set_options(options)
                select.value = keep

    # -- what the tabs show ---------------------------------------------------------------
    @property
    def active_tab(self) -> str:
        return str(self.query_one(TabbedContent).active)

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
        keep = self.query_one("#search", Input).value if self.query_one("#searchbar").display else ""
        view.show(self._content(tab))
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

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        tab = event.pane.id or ""
        try:
            self._refresh(tab)
        except NoMatches:
            return  # the app is closing: its panes are being removed
        if self.query_one("#searchbar").display:
            self._search(self.query_one("#search", Input).value)

    def on_select_changed(self, event: Select.Changed) -> None:
        tab = (event.select.id or "").removesuffix("-group")
        if tab in GROUP_FILTERED:
            self._refresh(tab)

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "transforms-tensor":
            self._refresh("transforms")
        elif event.input.id == "search":
            self._search(event.value)

    async def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "search":
            self._view().action_next_match()
        elif event.input.id and event.input.id.startswith(("shape-", "scalar-")):
            await self.action_run()

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run":
            await self.action_run()

    # -- the legend --------------------------------------------------------------------------
    def on_legend_chosen(self, message: Legend.Chosen) -> None:
        self.group = message.group
        if message.group is None:  # escape: the highlight and any answer go
            self.query_one("#why-view").display = False
            self.why_mark = None
        if message.group is not None:
            for tab in GROUP_FILTERED:
                self.query_one(f"#{tab}-group", Select).value = message.group
        self._refresh("ir")
        if message.group is not None and self.good is not None and self.good.artifacts is not None:
            owners = presched_groups(self.good.artifacts.presched)
            if message.group in owners:
                self.query_one("#ir-view", TextView).scroll_to_line(owners.index(message.group))
        if message.tab is not None:
            self.action_tab(message.tab)

    def on_legend_why_asked(self, message: Legend.WhyAsked) -> None:
        """The first w marks a group; a second on another asks why the two are apart, on
        the same group how it would be cut without its scheduler."""
        good = self.good
        if good is None:
            return
        mark = self.why_mark
        if mark is None or mark[0] != good.index:
            self.why_mark = (good.index, message.group)
            self._status(
                f"g{message.group} marked: w on another group asks why they were not fused;"
                f" w on g{message.group} again, how it would be split without its scheduler"
            )
            return
        self.why_mark = None
        second = None if mark[1] == message.group else f"g{message.group}"
        self.ask_why(f"g{mark[1]}", second)

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
        self._status(f"{answer.lines()[0]} {answer.conclusion()}")
        self._log_line(Text(f"why (run {run}): {answer.lines()[0]} {answer.conclusion()}"))

    # -- sidebar ---------------------------------------------------------------------------
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

    async def on_sidebar_definition_chosen(self, message: Sidebar.DefinitionChosen) -> None:
        session = self.session
        if session is None or message.name == session.definition:
            return
        if self.busy:
            self.notify(f"wait: {self.step}", severity="warning")
            self.query_one(Sidebar).choose("definition", session.definition)
            return
        options = self.query_one(Sidebar).options()
        try:
            session.select(message.name)
        except FuserError as err:
            self._error(f"cannot run {message.name}", err.one_line())
            self.query_one(Sidebar).choose("definition", session.definition)
            return
        sidebar = self.query_one(Sidebar)
        await sidebar.load(session)
        sidebar.set_options(options)
        self._log_line(Text(f"switched to {message.name}", style="bold"))
        session.options = options
        self._start_run()

    # -- actions ---------------------------------------------------------------------------
    def action_tab(self, tab: str) -> None:
        """Show a tab and focus its view, so that its keys (search, scrolling) apply."""
        self.query_one(TabbedContent).active = tab
        self.query_one(f"#{tab}-view", TextView).focus()

    def action_help(self) -> None:
        sections: list[tuple[str, list[BindingType]]] = [
            (
                "Everywhere",
                [*_untabbed(self.BINDINGS), Binding("ctrl+p", "command_palette", "command palette: every action")],
            ),
            ("Tabs", [Binding(str((i + 1) % 10), "", f"{title} tab") for i, (_, title) in enumerate(TABS)]),
            ("Any view (IR, CUDA, ...)", list(TextView.BINDINGS)),
            ("The IR tab's legend", list(Legend.BINDINGS)),
            ("Search bar", [Binding("enter", "", "next match"), Binding("escape", "", "close the search")]),
        ]
        self.push_screen(HelpScreen(sections))

    def action_edit_inputs(self) -> None:
        boxes = self.query("#inputs Input").results(Input)
        first = next(iter(boxes), None)
        if first is None:
            self.notify("no inputs to edit: the script has not opened", severity="warning")
            return
        first.focus()

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

    def action_open(self) -> None:
        def opened(path: str | None) -> None:
            if path:
                self.open_script(path)

        self.push_screen(OpenScreen(), opened)

    def open_script(self, path: str) -> None:
        if self.busy:
            self.notify(f"wait: {self.step}", severity="warning")
            return
        self._log_line(Text(f"opening {path}", style="bold"))
        keep = Launch(path, options=self.query_one(Sidebar).options(), export_dir=self.export_dir)
        self._open(path, keep)

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

    def action_export(self, kind: str) -> None:
        script = self.session.path if self.session is not None else self.launch.script
        try:
            written = self._export(kind, script)
        except (FuserError, OSError) as err:
            text = err.one_line() if isinstance(err, FuserError) else str(err)
            self.notify(f"export failed: {text}", severity="error", timeout=10)
            self._log_line(Text(f"error: export {kind}: {text}", style="bold red"))
            return
        where = ", ".join(str(p) for p in written)
        self.notify(f"wrote {where}", title="export", timeout=10)
        self._log_line(Text(f"export {kind}: wrote {where}", style="green"))

    def _export(self, kind: str, script: str) -> list[Path]:
        self.export_dir.mkdir(parents=True, exist_ok=True)
        if kind == "repro":
            if self.session is None:
                raise FuserError("nothing to export: no script is open")
            return [export_repro(self.session, self.export_dir)]
        if kind == "bundle":
            if self.session is None:
                raise FuserError("nothing to save: no script is open")
            name = f"{Path(self.session.path).stem}.{self.session.definition}{BUNDLE_SUFFIX}"
            return [save_bundle(self.session, self.export_dir / name, self._log_lines)]
        if kind == "fault":
            if self.last is None:
                raise FuserError("nothing to export: no run has finished")
            return export_fault(self.last, script, self.export_dir)
        if kind == "report" or kind == "json":
            if self.last is None:
                raise FuserError("nothing to report: no run has finished")
            return [export_report(self.last, script, self.export_dir, as_json=kind == "json")]
        if self.good is None:
            raise FuserError("nothing to export: no run has succeeded yet")
        if kind == "dumps":
            return [export_dumps(self.good, script, self.export_dir)]
        fmt = kind.split(":")[1] if ":" in kind else "dot"
        return export_graph(self.good, script, self.export_dir, fmt)

    # -- the command palette ---------------------------------------------------------------
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

    # -- status, errors and the log --------------------------------------------------------
    def _status(self, text: str) -> None:
        self.query_one("#status", Static).update(text)

    def _update_title(self, edited: bool = False) -> None:
        session = self.session
        if session is None:
            return
        self.title = f"fuser-wb  {Path(session.path).name} :: {session.definition}"
        run = ""
        if self.last is not None:
            run = f"run {self.last.index + 1} " + ("ok" if self.last.ok else "failed")
        self.sub_title = run + ("  (edited: press r)" if edited else "")

    def _error(self, title: str, message: str, location: str = "", line: str = "") -> None:
        banner = self.query_one("#error", Static)
        banner.update(content.error_text(title, message, location, line))
        banner.display = True

    def _hide_error(self) -> None:
        self.query_one("#error").display = False

    def _log_line(self, line: Text) -> None:
        self._log_lines.append(line.plain)
        self.query_one("#log-view", TextView).append(line)

    def action_trace(self) -> None:
        good = self.good
        if self.session is None or good is None or good.artifacts is None:
            self.notify("nothing to trace: no run has succeeded yet", severity="warning")
            return
        last = good.artifacts.groups[-1].outputs
        self.push_screen(TraceScreen(self.session, f"{last[0] if last else 'T0'} 1,2,3"))


def _where(err: FuserError) -> tuple[str, str, str]:
    """An error's message, and where in the script it arose with that line's text."""
    location = err.location
    if location is None:
        return err.one_line(), "", ""
    return err.one_line(), str(location), location.line


def _untabbed(bindings: Iterable[BindingType]) -> list[BindingType]:
    """The bindings but the digits that pick a tab (the help lists those apart)."""
    return [b for b in bindings if not (isinstance(b, Binding) and b.action.startswith("tab("))]


def _bind(method: Callable[..., Any], *args: Any) -> Callable[[], Any]:
    return lambda: method(*args)


def _slot_shape(session: Session) -> list[tuple[str, int | None]]:
    return [(s.label, s.rank) for s in session.slots]


def _apply_launch(session: Session, launch: Launch) -> list[str]:
    """The command line's settings on a fresh session; what could not be applied."""
    session.seed = launch.seed
    session.max_input_bytes = launch.max_input_bytes
    session.options = launch.options
    notes = []
    for values, setter in ((launch.shapes, session.set_shapes), (launch.scalars, session.set_scalars)):
        if values is None:
            continue
        try:
            setter(list(values))
        except FuserError as err:
            notes.append(err.message)
    return notes
