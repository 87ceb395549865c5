"""Snapshots of the main tabs at a fixed terminal size (pytest-textual-snapshot). Each
waits for the app's worker before the screen is taken; no sleeps. The screens hold no
times and no machine-specific text (the reason cuda cannot run is fixed here).

Update them after a deliberate change with `pytest tests/workbench/test_tui_snapshots.py
--snapshot-update`, and look at the new SVGs before committing them."""

from __future__ import annotations

import pytest
from tui_helpers import NO_GPU, POW_SMALL, RESIZE, RESIZE_SMALL, SIZE, make_app, settle, type_into

from workbench.tui import pipeline


@pytest.fixture(autouse=True)
def fixed_cuda_reason(monkeypatch):
    monkeypatch.setattr(pipeline, "backend_problem", lambda name, model=None: NO_GPU)


async def still(pilot) -> None:
    """Until the screen stops changing: a view that overflows gets its scrollbar on a
    second layout pass, and a table sizes its columns when the app is next idle, which
    a loaded machine may not have reached after one pause."""
    previous, same = None, 0
    for _ in range(100):
        await pilot.pause(0.02)  # real time, so idle-time work (column widths) happens
        await pilot.wait_for_scheduled_animations()
        shot = pilot.app.export_screenshot()
        same = same + 1 if shot == previous else 0
        if same == 3:
            return
        previous = shot
    raise AssertionError("the screen never stopped changing")


def on_tab(tab: str):
    async def run_before(pilot):
        await settle(pilot)
        pilot.app.action_tab(tab)
        await still(pilot)

    return run_before


@pytest.mark.parametrize("tab", ["ir", "segments", "transforms", "cuda"])
def test_reduction_pow_tabs(snap_compare, tab):
    assert snap_compare(
        make_app("issue785_reduction_pow", shapes=POW_SMALL), terminal_size=SIZE, run_before=on_tab(tab)
    )


def test_resize_concretization_tab(snap_compare):
    app = make_app(RESIZE, shapes=RESIZE_SMALL)
    assert snap_compare(app, terminal_size=SIZE, run_before=on_tab("concretization"))


def test_resize_diff_tab_after_toggling_concretize_resize_extents(snap_compare):
    async def run_before(pilot):
        await settle(pilot)
        await pilot.click("#opt-concretize_resize_extents")
        pilot.app.query_one("#ir-view").focus()
        await pilot.press("r")
        await settle(pilot)
        pilot.app.action_tab("diff")
        await still(pilot)

    assert snap_compare(make_app(RESIZE, shapes=RESIZE_SMALL), terminal_size=SIZE, run_before=run_before)


def test_a_failed_run_shown_in_place(snap_compare):
    async def run_before(pilot):
        await settle(pilot)
        await type_into(pilot, "shape-0", "2x4x8x64")
        await pilot.press("enter")
        await settle(pilot)
        pilot.app.query_one("#ir-view").focus()
        await still(pilot)

    assert snap_compare(make_app("softmax", shapes=((2, 4, 8, 1024),)), terminal_size=SIZE, run_before=run_before)
