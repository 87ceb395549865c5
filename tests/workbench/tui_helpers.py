"""Driving the TUI in tests: open it on a sample, wait for its worker (never sleep), read
what a tab shows as plain text."""

from __future__ import annotations

import asyncio

from textual.pilot import Pilot
from textual.widgets import Input, Static

from workbench.tui import Launch, WorkbenchApp
from workbench.tui.textview import TextView

RESIZE = "resize_pad_to_broadcast_dynamic"
RESIZE_SMALL = ((8, 3, 2, 5, 6), (8, 4, 4, 3, 5))
POW_SMALL = ((4, 8, 64), (4, 8, 64))
SIZE = (150, 45)
NO_GPU = "CuPy is not installed (a fixed reason, so that screens do not depend on the machine)"


def make_app(script: str, shapes=None, export_dir=None, **options) -> WorkbenchApp:
    launch = Launch(script, shapes=shapes, **options)
    if export_dir is not None:
        launch.export_dir = export_dir
    return WorkbenchApp(launch)


def drive(app: WorkbenchApp, steps, size=SIZE) -> None:
    """Run `steps(pilot)` against the app at a fixed terminal size, once it has settled."""

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            await steps(pilot)
            assert app.is_running

    asyncio.run(main())


async def settle(pilot: Pilot) -> None:
    """Until the app has no work in flight: its workers finished and their messages handled."""
    for _ in range(500):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        if not pilot.app.busy and not any(w.is_running for w in pilot.app.workers):
            return
    raise AssertionError(f"the app never settled: {pilot.app.busy}")


async def rerun(pilot: Pilot) -> None:
    """Press r and wait until that run has finished. The key's action is asynchronous: for
    a moment after the press the app can look idle before the run starts, and `settle`
    alone would return then (the toggle-and-rerun test read the previous run's tab)."""
    before = pilot.app._runs_started
    await pilot.press("r")
    for _ in range(400):
        if pilot.app._runs_started > before:
            break
        await pilot.pause(0.05)
    else:
        raise AssertionError("pressing r started no run")
    await settle(pilot)


PENDING = "this tab fills in when the run finishes"  # workbench/tui/app.py's placeholder


async def show(pilot: Pilot, tab: str) -> str:
    """The tab's text once it has rendered: a loaded machine may need more than one
    pause before a view fills, and a tab shows a placeholder until its run finishes (waits at
    most 20 seconds; an empty view stays empty)."""
    pilot.app.action_tab(tab)
    await pilot.pause()
    for _ in range(200):
        text = view_text(pilot, tab)
        if text.strip() and PENDING not in text:  # not the placeholder of a run still going
            break
        await pilot.pause(0.1)
    return view_text(pilot, tab)


def view_text(pilot: Pilot, tab: str) -> str:
    return pilot.app.query_one(f"#{tab}-view", TextView).plain


def banner(pilot: Pilot) -> str:
    error = pilot.app.query_one("#error", Static)
    return str(error.render()) if error.display else ""


async def type_into(pilot: Pilot, box_id: str, text: str) -> None:
    """Replace an input's text the way a user does: focus it (which selects its text), type."""
    box = pilot.app.query_one(f"#{box_id}", Input)
    box.focus()
    box.select_all()
    await pilot.pause()
    await pilot.press(*text)
