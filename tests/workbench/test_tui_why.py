""" "Why not fused?" in the TUI: w on two legend rows (or the palette) shows every
scheduler's verdict under the legend; w twice on one row, its split; a new run hides
an answer about the old one."""

from __future__ import annotations

import asyncio

import pytest
from tui_helpers import NO_GPU, POW_SMALL, SIZE, make_app, settle

from workbench.tui import pipeline
from workbench.tui.app import Legend
from workbench.tui.textview import TextView


@pytest.fixture(autouse=True)
def fixed_cuda_reason(monkeypatch):
    monkeypatch.setattr(pipeline, "backend_problem", lambda name, model=None: NO_GPU)


def drive(app, steps):
    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            await steps(pilot)
            assert app.is_running

    asyncio.run(main())


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
        assert app.why_mark == (0, 0) and _why(app) == ""
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
        assert text.startswith("run 1: ask again with w on two legend rows or y; escape in the legend closes this")
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
