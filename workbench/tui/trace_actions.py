"""Where did this element come from: ctrl+t opens the trace prompt on the shown run's
last output (the session interprets the kernel that writes the element)."""

from __future__ import annotations

from workbench.tui.base import WorkbenchBase
from workbench.tui.screens import TraceScreen


class TraceActions(WorkbenchBase):
    def action_trace(self) -> None:
        good = self.good
        if self.session is None or good is None or good.artifacts is None:
            self.notify("nothing to trace: no run has succeeded yet", severity="warning")
            return
        last = good.artifacts.groups[-1].outputs
        self.push_screen(TraceScreen(self.session, f"{last[0] if last else 'T0'} 1,2,3"))
