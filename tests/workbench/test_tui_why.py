""" "Why not fused?" in the TUI: w on two legend rows, or two expressions picked in the IR
(or the palette) shows every scheduler's verdict under the legend; w twice on one row or
expression, its group's split; a new run hides an answer about the old one."""

from __future__ import annotations

import pytest
from tui_helpers import NO_GPU, POW_SMALL, drive, make_app, settle

from workbench.tui import pipeline
from workbench.tui.app import Legend
from workbench.tui.irview import IRView
from workbench.tui.textview import TextView


@pytest.fixture(autouse=True)
def fixed_cuda_reason(monkeypatch):
    monkeypatch.setattr(pipeline, "backend_problem", lambda name, model=None: NO_GPU)


def _why(app) -> str:
    view = app.query_one("#why-view", TextView)
    return view.plain if view.display else ""


def test_w_on_two_legend_rows_shows_why_they_were_not_fused_in_place():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)

    async def steps(pilot):
        legend = app.query_one(Legend)
        legend.focus()
        await pilot.press("w")
        await pilot.pause()
        assert app.why_mark == (0, "g0") and _why(app) == ""
        assert "g0 marked" in str(app.query_one("#status").render())
        await pilot.press("down", "w")
        await pilot.pause()
        text = _why(app)
        assert "Why are g0 and g1 separate kernels?" in text
        assert "category: disjoint iteration domains" in text
        assert "reduction         rejects (disjoint iteration domains): cannot find reference tensor" in text
        assert "iterates: T1_g[" in text
        assert app.why_mark is None

        await pilot.press("w", "w")  # the same row twice: its split
        await pilot.pause()
        text = _why(app)
        assert "What would g1 be without its scheduler (pointwise)?" in text
        assert "inner_persistent  rejects" in text

        await pilot.press("escape")
        await pilot.pause()
        assert _why(app) == ""
        await pilot.press("w", "w")
        await pilot.pause()
        assert "What would g1 be" in _why(app)

        await pilot.press("r")  # a new run: the answer was about the old one
        await settle(pilot)
        assert _why(app) == ""

    drive(app, steps)


def test_the_palette_asks_about_every_pair_and_every_groups_split():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)

    async def steps(pilot):
        titles = {c.title: c for c in app.commands()}
        assert "Split without its scheduler: g0" in titles and "Split without its scheduler: g1" in titles
        titles["Why not fused: g0 + g1"].callback()
        await pilot.pause()
        text = _why(app)
        assert text.startswith("run 1: ask again with w on two legend rows or two IR expressions, or y; escape closes")
        assert "answer: no scheduler takes g0 + g1" in text
        assert "every scheduler on the union, in priority order:" in text

    drive(app, steps)


def test_y_asks_about_two_expressions_by_the_tensors_they_write():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)

    async def steps(pilot):
        await pilot.press("y")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "AskWhyScreen"
        await pilot.press(*"T4 T3", "enter")
        await pilot.pause()
        assert app.screen.__class__.__name__ != "AskWhyScreen"
        assert "Why are g0 and g1 separate kernels?" in _why(app)

        await pilot.press("escape")  # the legend is not focused: the answer stays
        await pilot.press("y")
        await pilot.pause()
        await pilot.press(*"T4 T0", "enter")  # T0 is an input: no expression writes it
        await pilot.pause()
        assert "Why are g0 and g1 separate kernels?" in _why(app)  # the last answer is kept
        assert any("no expression of this run writes T0" in str(n.message) for n in app._notifications)

    drive(app, steps)


def _status(app) -> str:
    return str(app.query_one("#status").render())


def test_w_on_two_expressions_of_the_ir_asks_about_their_groups():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)  # T4 = reduction (g0), T3 = pow (g1)

    async def steps(pilot):
        view = app.query_one(IRView)
        view.focus()
        assert view.picked is None  # no cursor until the user moves it
        await pilot.press("w")
        await pilot.pause()
        assert app.why_mark is None
        assert any("pick an expression first" in str(n.message) for n in app._notifications)

        await pilot.press("down")  # the first expression in sight
        await pilot.pause()
        assert view.picked.tensor == "T4" and view.picked.group == 0
        assert _status(app).startswith("T4 (g0): enter highlights g0;")
        await pilot.press("w")
        await pilot.pause()
        assert app.why_mark == (0, "T4") and _why(app) == ""
        assert _status(app).startswith("T4 (g0) marked: w on another expression or group asks why")
        await pilot.press("down", "w")
        await pilot.pause()
        text = _why(app)
        assert "Why are g0 and g1 separate kernels?" in text
        assert "category: disjoint iteration domains" in text
        assert app.why_mark is None

        await pilot.press("w", "w")  # the same expression twice: its group's split
        await pilot.pause()
        assert "What would g1 be without its scheduler (pointwise)?" in _why(app)

        await pilot.press("enter")  # its group highlighted, as enter on its legend row does
        await pilot.pause()
        assert app.group == 1 and "selected: g1 pointwise" in view.plain

        await pilot.press("escape")  # the cursor, the highlight and the answer go
        await pilot.pause()
        assert view.picked is None and app.group is None and _why(app) == ""

    drive(app, steps)


def test_an_expression_and_a_legend_row_or_two_expressions_of_one_group():
    app = make_app("issue785_gelu_bias_bwd", shapes=((4, 8, 16),) * 3)  # T10 in g0; T3, T12, ... T25 in g1

    async def steps(pilot):
        view = app.query_one(IRView)
        view.focus()
        await pilot.press("down", "down", "w")  # T3, of g1
        await pilot.pause()
        assert app.why_mark == (0, "T3")
        legend = app.query_one(Legend)
        legend.focus()
        await pilot.press("w")  # g0's row
        await pilot.pause()
        assert "Why are g1 and g0 separate kernels?" in _why(app)  # in the order they were marked

        view.focus()
        await pilot.press("w", "down", "w")  # T3 and T12: one kernel already
        await pilot.pause()
        assert any("T3 and T12 are both in g1: one kernel already" in str(n.message) for n in app._notifications)

    drive(app, steps)


def test_a_click_on_an_expression_picks_it():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)

    async def steps(pilot):
        view = app.query_one(IRView)
        t3 = next(e for e in view.exprs if e.tensor == "T3")
        await pilot.click(IRView, offset=(4, t3.start + 1 - view.scroll_offset.y))  # its second line
        await pilot.pause()
        assert view.picked == t3
        assert _status(app).startswith("T3 (g1): enter highlights g1;")

    drive(app, steps)
