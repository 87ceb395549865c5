"""Where did this element come from, asked in the Run tab: its trace panel lists the
fusion's outputs (and the tensors between kernels) with their shapes, offers the first
element's index, and shows the trace in place; ctrl+t comes to it on the Run tab and
still opens the prompt elsewhere."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from textual.widgets import Input, Label
from tui_helpers import NO_GPU, POW_SMALL, drive, make_app, settle, show

from workbench.artifacts import EdgeArtifact
from workbench.tui import content, pipeline
from workbench.tui.screens import TraceScreen
from workbench.tui.textview import TextView
from workbench.tui.trace_panel import TracePanel, TraceTargets

POW = "issue785_reduction_pow"  # outputs T4 (64,) of g0, a reduction, and T3 (4, 8, 64) of g1


@pytest.fixture(autouse=True)
def fixed_cuda_reason(monkeypatch):
    monkeypatch.setattr(pipeline, "backend_problem", lambda name, model=None: NO_GPU)


def trace_text(app) -> str:
    view = app.query_one("#run-trace-view", TextView)
    return view.plain if view.display else ""


def index_box(app) -> Input:
    return app.query_one("#trace-index", Input)


async def to_trace_panel(pilot) -> None:
    """The Run tab shown, its list of tensors to trace focused (as a click on it does)."""
    await show(pilot, "run")
    pilot.app.query_one(TraceTargets).focus()


async def traced(pilot) -> str:
    """The panel's text once the trace worker's answer is shown."""
    await settle(pilot)
    return trace_text(pilot.app)


def test_the_run_tab_lists_each_output_with_its_shape_and_first_index():
    app = make_app(POW, shapes=POW_SMALL)

    async def steps(pilot):
        assert "Roofline estimates" in await show(pilot, "run")
        table = app.query_one(TraceTargets)
        rows = [[str(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows == [
            ["T4", "64", "float", "g0", "fusion output"],
            ["T3", "4x8x64", "float", "g1", "fusion output"],
        ]
        assert index_box(app).value == "0"
        assert str(app.query_one("#trace-tensor", Label).render()) == "T4 index:"
        assert trace_text(app) == ""  # nothing traced yet

    drive(app, steps)


def test_pick_an_output_and_an_index_in_the_run_tab_and_its_trace_shows_in_place():
    app = make_app(POW, shapes=POW_SMALL)

    async def steps(pilot):
        await show(pilot, "run")
        await pilot.press("ctrl+t")  # on the Run tab: to its trace panel, no prompt
        await pilot.pause()
        assert not isinstance(app.screen, TraceScreen)
        assert isinstance(app.focused, TraceTargets)
        await pilot.press("down")
        await pilot.pause()
        assert index_box(app).value == "0,0,0"
        assert str(app.query_one("#trace-tensor", Label).render()) == "T3 index:"
        await pilot.press("enter")  # the index box, its text selected: typing replaces it
        await pilot.pause()
        assert app.focused is index_box(app)
        await pilot.press(*"1,2,3", "enter")
        text = await traced(pilot)
        assert text.startswith("run 1: enter on another tensor or another index traces again\n")
        value = re.search(r"T3\[1, 2, 3\] of T3\[4, 8, 64\] = (\S+)   \(reference: (\S+)\)", text)
        assert value is not None and value.group(1) == value.group(2), text
        assert "written by group g1 (pointwise)" in text and "writer: blockIdx" in text
        assert "  T1[1, 2, 3] = " in text  # the one input element it read
        assert app.query_one(TracePanel).targets[1].tensor == "T3"

    drive(app, steps)


def test_a_reduction_output_traced_from_its_first_index_shows_the_partials():
    app = make_app(POW, shapes=POW_SMALL)

    async def steps(pilot):
        await to_trace_panel(pilot)
        await pilot.press("enter", "enter")  # T4, then its offered index 0
        text = await traced(pilot)
        assert "T4[0] of T4[64] = " in text and "written by group g0 (reduction)" in text
        assert "add reduction of" in text and "partials (16, in rank order):" in text
        assert "combine step 1:" in text

    drive(app, steps)


def test_a_bad_index_is_an_error_in_the_panel_and_the_app_keeps_running():
    app = make_app(POW, shapes=POW_SMALL)

    async def steps(pilot):
        await to_trace_panel(pilot)
        await pilot.press("down", "enter", *"9,9,9", "enter")
        assert (await traced(pilot)).startswith("error: index 9 out of range for axis 0 of T3 (shape [4, 8, 64])")
        box = index_box(app)
        box.value = "a,b"
        await box.action_submit()
        assert (await traced(pilot)).startswith("error: not an element index: 'a,b'")

    drive(app, steps)


def test_a_new_run_offers_its_own_tensors_and_drops_the_old_trace():
    app = make_app(POW, shapes=POW_SMALL)

    async def steps(pilot):
        await to_trace_panel(pilot)
        await pilot.press("enter", "enter")
        assert "T4[0] of T4[64]" in await traced(pilot)
        app.query_one("#shape-0", Input).value = "2x4x32"
        app.query_one("#shape-1", Input).value = "2x4x32"
        await app.action_run()
        await settle(pilot)
        assert app.good is not None and app.good.index == 1
        assert trace_text(app) == ""
        table = app.query_one(TraceTargets)
        assert [str(table.get_row_at(i)[1]) for i in range(table.row_count)] == ["32", "2x4x32"]

    drive(app, steps)


def test_ctrl_t_elsewhere_opens_the_prompt_offering_the_first_outputs_first_element():
    app = make_app(POW, shapes=POW_SMALL)

    async def steps(pilot):
        await pilot.press("ctrl+t")  # the IR tab
        await pilot.pause()
        assert isinstance(app.screen, TraceScreen)
        assert app.screen.hint == "T4 0"

    drive(app, steps)


def test_trace_targets_are_the_outputs_then_each_tensor_between_kernels_once(pow_run):
    a = pow_run.artifacts
    assert [t.row() for t in content.trace_targets(a)] == [
        ("T4", "64", "float", "g0", "fusion output"),
        ("T3", "4x8x64", "float", "g1", "fusion output"),
    ]
    assert [t.first_index for t in content.trace_targets(a)] == ["0", "0,0,0"]
    between = (
        EdgeArtifact(1, 2, "T9", "float", (4, 8), 4),
        EdgeArtifact(1, 3, "T9", "float", (4, 8), 4),
        EdgeArtifact(0, 2, "T4", "float", (64,), 4),  # an output handed on too: listed once
        EdgeArtifact(2, 3, "T11", "float", None, 4),  # a size that could not be evaluated
    )
    rows = [t.row() for t in content.trace_targets(replace(a, edges=between))]
    assert rows[2:] == [
        ("T9", "4x8", "float", "g1", "between kernels: to g2, g3"),
        ("T11", "?", "float", "g2", "between kernels: to g3"),
    ]
    assert content.TraceTarget("T0", (), "float", 0, "fusion output").first_index == ""
