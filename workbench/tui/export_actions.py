"""Exports from the app: the segment graph, a report, the dumps, the repro script, a
saved bundle (ctrl+s) and a CUDA fault's files (f shows the fault, e there writes it),
each into the export directory, said in a notification and the log."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text

from fuser_core import FuserError
from workbench.bundle import BUNDLE_SUFFIX, save_bundle
from workbench.exports import export_dumps, export_fault, export_graph, export_report, export_repro
from workbench.tui.base import WorkbenchBase
from workbench.tui.screens import FaultScreen


class ExportActions(WorkbenchBase):
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
