"""The pipeline's side of the app: open a script (or a saved bundle) and run it in a
worker thread, never on the UI thread; the worker's messages say how far it got and what
it made, and the handlers here put that in the tabs, the status line and the log."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.message import Message
from textual.widget import MountError
from textual.widgets import Button, Input, Static

from fuser_core import FuserError
from workbench.bundle import BUNDLE_SUFFIX, Bundle, load_bundle
from workbench.diff import diff_artifacts
from workbench.session import CudaFault, RunResult, Session, backend_problem
from workbench.tui.base import Launch
from workbench.tui.content import DiffState
from workbench.tui.inputs import SidebarInputs
from workbench.tui.screens import OpenScreen
from workbench.tui.sidebar import Sidebar
from workbench.tui.tabs import TabViews

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


# -- the app's side ----------------------------------------------------------------------


class Pipeline(SidebarInputs, TabViews):
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
        if self.session is None:  # else the sidebar still shows the open session, as it should
            self.query_one(Sidebar).show_open_failed(message.script, message.message)
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

    @on(Input.Submitted)
    async def _run_on_enter(self, event: Input.Submitted) -> None:
        """Enter in a shape or a scalar of the sidebar runs again."""
        if event.input.id and event.input.id.startswith(("shape-", "scalar-")):
            await self.action_run()

    async def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "run":
            await self.action_run()


def _where(err: FuserError) -> tuple[str, str, str]:
    """An error's message, and where in the script it arose with that line's text."""
    location = err.location
    if location is None:
        return err.one_line(), "", ""
    return err.one_line(), str(location), location.line


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
