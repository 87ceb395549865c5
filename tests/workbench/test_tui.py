"""The TUI driven through Textual's Pilot: an option toggled and re-run shows in the
Concretization and Diff tabs; broken scripts and bad shapes are shown in place with the
app still up and the user's edits kept; every tab of every sample renders; the palette,
help, search, legend and exports do what they say."""

from __future__ import annotations

import io
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from shrinkable import SHRINKABLE
from textual.widgets import Input, Select, Static, Switch
from tui_helpers import (
    NO_GPU,
    POW_SMALL,
    RESIZE,
    RESIZE_SMALL,
    banner,
    drive,
    make_app,
    rerun,
    settle,
    show,
    type_into,
    view_text,
)

from fuser_core import load_repro
from workbench import cli
from workbench.samples import SAMPLES_DIR, sample_paths
from workbench.session import RunOptions
from workbench.tui import content, pipeline
from workbench.tui.app import TABS, Legend
from workbench.tui.screens import HelpScreen, bindings_table
from workbench.tui.textview import plain_lines

ON_EXTENTS = "T2 axis 1: (3, -1, -1) -> Broadcast"
OFF_EXTENTS = "T2 axis 1: Broadcast"


@pytest.fixture(autouse=True)
def fixed_cuda_reason(monkeypatch):
    monkeypatch.setattr(pipeline, "backend_problem", lambda name, model=None: NO_GPU)


def test_toggling_concretize_resize_extents_turns_the_extents_symbolic_and_back_in_concretization_and_diff():
    app = make_app(RESIZE, shapes=RESIZE_SMALL)

    async def steps(pilot):
        text = await show(pilot, "concretization")
        assert "ConcretizationInfo (concretize_resize_extents=on)" in text and ON_EXTENTS in text
        assert "Resize: iS32{3}rf by -1 and -1 -> bS24{1}rf" in text
        assert "Only one run so far" in await show(pilot, "diff")

        await pilot.click("#opt-concretize_resize_extents")
        assert app.query_one("#opt-concretize_resize_extents", Switch).value is False
        app.query_one("#diff-view").focus()
        await rerun(pilot)
        text = await show(pilot, "concretization")
        assert "concretize_resize_extents=off" in text and OFF_EXTENTS in text and "iS25{4}rf" not in text
        assert "iS25{( ( i2 + ( (nvfuser_index_t)(i15) ) ) + ( (nvfuser_index_t)(i16) ) )}rf" in text
        assert "cache: miss at concretization: concretize_resize_extents turned off" in text
        diff = await show(pilot, "diff")
        assert "b = run 2: shapes 8x3x2x5x6 8x4x4x3x5" in diff and "--disable concretize_resize_extents" in diff
        assert "concretization: 27 lines changed" in diff and "original IR: same" in diff
        assert f"-    {ON_EXTENTS}" in diff and f"+    {OFF_EXTENTS}" in diff

        await pilot.click("#opt-concretize_resize_extents")
        app.query_one("#diff-view").focus()
        await rerun(pilot)
        text = await show(pilot, "concretization")
        assert "concretize_resize_extents=on" in text and "iS25{4}rf" in text
        diff = await show(pilot, "diff")
        assert "a = run 2" in diff and "b = run 3" in diff
        assert f"-    {OFF_EXTENTS}" in diff and f"+    {ON_EXTENTS}" in diff

    drive(app, steps)


def test_the_diff_tabs_cache_line_of_run_1_names_the_runtime_the_log_names():
    # vectorization off builds a second runtime of the same concretization: run 1's cache
    # line read `new runtime f0_c1_r1`, renamed into run 2's names like the other stages
    app = make_app("softmax", shapes=((2, 4, 4, 1024),))

    async def steps(pilot):
        await pilot.click("#opt-vectorization")
        app.query_one("#diff-view").focus()
        await rerun(pilot)
        log = await show(pilot, "log")
        first = "cache: miss at concretization: first execution: nothing cached -> new runtime f0_c1_r0"
        second = "cache: miss at runtime: vectorization off -> new runtime f0_c1_r1"
        assert f"run 1: {first}" in log and f"run 2: {second}" in log
        diff = await show(pilot, "diff")
        assert "cache: 1 line changed" in diff
        assert f"-{first}" in diff and f"+{second}" in diff

    drive(app, steps)


def test_the_run_tab_names_the_device_model_on_the_reference_backend_and_the_gpu_on_cuda():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL, options=RunOptions(device_model="h200"))

    async def steps(pilot):
        text = await show(pilot, "run")
        assert "device model: NVIDIA H200 (no GPU; reference backend)   backend: reference" in text
        assert "device: " not in text  # no GPU was found or used here
        on_gpu = replace(
            app.good, artifacts=replace(app.good.artifacts, backend="cuda", device="NVIDIA H100 80GB HBM3")
        )
        assert "device: NVIDIA H100 80GB HBM3   backend: cuda" in "\n".join(plain_lines(content.run_view(on_gpu, None)))

    drive(app, steps)


@pytest.mark.parametrize(
    "name, error", [("missing.py", "no such file or bundled sample"), ("broken.py", "syntax error")]
)
def test_a_file_that_fails_to_open_says_so_in_the_sidebar_and_r_opens_it_once_fixed(tmp_path, name, error):
    script = tmp_path / name
    if name == "broken.py":
        script.write_text("def broken(:\n    pass\n")
    app = make_app(str(script), shapes=((2, 4, 8, 1024),))

    async def steps(pilot):
        file_name = app.query_one("#file-name", Static)
        assert str(file_name.render()) == f"cannot open {name}"  # it stayed on `opening…`
        assert f"cannot open {script}" in banner(pilot) and error in banner(pilot)
        assert app.session is None and app.is_running

        shutil.copy(SAMPLES_DIR / "softmax.py", script)
        await pilot.press("r")
        await settle(pilot)
        assert str(file_name.render()) == name and banner(pilot) == ""
        assert app.good is not None and app.good.settings.shapes == ((2, 4, 8, 1024),)

    drive(app, steps)


def test_a_file_that_fails_to_open_later_keeps_the_open_session_and_what_the_user_typed(tmp_path):
    app = make_app("softmax", shapes=((2, 4, 8, 1024),))

    async def steps(pilot):
        await type_into(pilot, "shape-0", "2x4x4x1024")
        app.open_script(str(tmp_path / "missing.py"))
        await settle(pilot)
        assert f"cannot open {tmp_path / 'missing.py'}" in banner(pilot)
        assert str(app.query_one("#file-name", Static).render()) == "softmax.py"
        assert app.query_one("#shape-0", Input).value == "2x4x4x1024" and app.session.definition

    drive(app, steps)


def test_a_broken_script_shows_its_error_in_place_and_the_app_keeps_the_users_shapes(tmp_path):
    script = tmp_path / "repro.py"
    shutil.copy(SAMPLES_DIR / f"{RESIZE}.py", script)
    good = script.read_text()
    app = make_app(str(script), shapes=RESIZE_SMALL)

    async def steps(pilot):
        await type_into(pilot, "shape-0", "16x3x2x5x6")
        await type_into(pilot, "shape-1", "16x4x4x3x5")
        app.query_one("#concretization-view").focus()
        bad = good.replace("fd.ops.pad(", "fd.ops.not_an_op(", 1)
        script.write_text(bad)
        await pilot.press("r")
        await settle(pilot)
        text = banner(pilot)
        lineno = next(i for i, line in enumerate(bad.splitlines(), 1) if "not_an_op" in line)
        assert "the script no longer loads" in text and f"repro.py:{lineno}" in text and "not_an_op" in text
        assert app.is_running and app.last.index == 0  # nothing ran
        assert [app.query_one(f"#shape-{i}", Input).value for i in (0, 1)] == ["16x3x2x5x6", "16x4x4x3x5"]
        assert "reloading" in await show(pilot, "log")

        script.write_text(good + "\n# fixed\n")
        await pilot.press("r")
        await settle(pilot)
        assert banner(pilot) == ""
        assert app.good.index == 1 and app.good.settings.shapes == ((16, 3, 2, 5, 6), (16, 4, 4, 3, 5))
        assert "reloaded" in view_text(pilot, "log")

    drive(app, steps)


def test_a_bad_shape_is_marked_under_its_input_nothing_runs_and_a_failing_one_names_the_script_line():
    app = make_app("softmax", shapes=((2, 4, 8, 1024),))

    async def steps(pilot):
        assert app.good is not None and app.good.settings.shapes == ((2, 4, 8, 1024),)
        await type_into(pilot, "shape-0", "2x4x8")
        await pilot.press("enter")
        await settle(pilot)
        box = app.query_one("#shape-0", Input)
        assert box.has_class("-invalid") and box.value == "2x4x8"
        assert "is 4-D in the definition; the shape [2, 4, 8] has 3 sizes" in banner(pilot)
        assert app.last.index == 0

        await type_into(pilot, "shape-0", "2x4x8x64")
        await pilot.press("enter")
        await settle(pilot)
        text = banner(pilot)
        assert "run 2 failed; the tabs show run 1" in text and "softmax.py:22" in text
        assert "T7 = fd.ops.sub(T3, T6)" in text
        assert app.query_one("#shape-0", Input).value == "2x4x8x64"
        assert "error: run 2" in await show(pilot, "log")
        assert "nvfuser_reduction_f" in await show(pilot, "segments")  # run 1 (its rows re-read) still on show

    drive(app, steps)


def _shapes(path: Path):
    if path.stem not in SHRINKABLE:
        return None
    from workbench.session import Session

    return tuple(tuple(max(1, s // 16) if s >= 64 else s for s in shape) for shape in Session.open(str(path)).shapes)


@pytest.mark.parametrize("path", sample_paths(), ids=lambda p: p.stem)
def test_every_tab_renders_for_every_sample(path):
    app = make_app(str(path), shapes=_shapes(path))

    async def steps(pilot):
        assert app.good is not None, banner(pilot)
        a = app.good.artifacts
        texts = {tab: await show(pilot, tab) for tab, _ in TABS}
        assert all(text.strip() for text in texts.values()), [t for t, text in texts.items() if not text.strip()]
        assert all(f"// g{g.id} {g.scheduler}" in texts["ir"] for g in a.groups)
        assert a.runtime in texts["concretization"] and a.cache_line in texts["concretization"]
        assert all(g.kernel in texts["segments"] for g in a.groups)
        kernels = {k.group_id for k in a.kernels}
        for g in a.groups:
            expected = f" {g.kernel}(" if g.id in kernels else f"g{g.id} {g.scheduler}: codegen generates no kernel"
            assert expected in texts["cuda"]
        assert ("%kernel" in texts["kernel"]) == bool(kernels)
        assert "No per-kernel timings: this run used the reference backend" in texts["run"] and NO_GPU in texts["run"]
        assert "Only one run so far" in texts["diff"]
        assert a.cache_line in texts["log"]

    drive(app, steps)


def test_legend_selection_highlights_the_group_and_jumps_to_its_cuda():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)

    async def steps(pilot):
        legend = app.query_one(Legend)
        assert legend.row_count == 2
        legend.focus()
        await pilot.press("down", "enter")
        assert app.group == 1
        assert "selected: g1 pointwise" in await show(pilot, "ir")
        app.action_tab("ir")
        legend.focus()
        await pilot.press("c")
        await pilot.pause()
        assert app.active_tab == "cuda" and app.query_one("#cuda-group", Select).value == 1
        cuda = view_text(pilot, "cuda")
        assert "g1 pointwise" in cuda and "g0 reduction" not in cuda
        assert app.query_one("#transforms-group", Select).value == 1

    drive(app, steps)


def test_search_marks_every_match_and_steps_through_them():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)

    async def steps(pilot):
        await pilot.press("slash")
        await pilot.press(*"T4_g")
        view = app.query_one("#ir-view")
        expected = view.plain.count("T4_g")
        assert expected >= 2 and view.match_count == expected
        assert str(app.query_one("#search-status").render()) == f"match 1 of {expected}"
        first = view.current_match
        await pilot.press("enter")
        assert view.current_match.line >= first.line and view.current_match != first
        await pilot.press("escape")
        assert not app.query_one("#searchbar").display and view.match_count == 0

    drive(app, steps)


def test_f1_lists_the_bindings_of_the_app_the_views_and_the_legend():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)

    async def steps(pilot):
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        text = "\n".join(plain_lines(bindings_table(app.screen.sections)))
        for words in ("re-run", "command palette", "next match", "its CUDA", "Diff tab", "edit inputs"):
            assert words in text, words
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)

    drive(app, steps)


def test_the_palette_holds_every_action_and_its_exports_say_where_they_wrote(tmp_path):
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL, export_dir=tmp_path)

    async def steps(pilot):
        titles = {c.title: c for c in app.commands()}
        for expected in (
            "Run again",
            "Toggle concretize_resize_extents",
            "Toggle kernel_profile",
            "Backend: cuda",
            "Device model: h200",
            "Export segment graph (.dot)",
            "Export report (HTML)",
            "Export report (JSON)",
            "Export dumps (text)",
            "Open file…",
            "Switch fusion: " + app.session.definition,
            *(f"Open sample {p.stem}" for p in sample_paths()),
            *(f"Show {title}" for _, title in TABS),
        ):
            assert expected in titles, expected
        titles["Toggle concretize_resize_extents"].callback()
        assert app.query_one("#opt-concretize_resize_extents", Switch).value is False
        for title in ("Export segment graph (.dot)", "Export report (HTML)", "Export dumps (text)"):
            titles[title].callback()
        await pilot.pause()
        stem = f"issue785_reduction_pow.{app.session.definition}.run1"
        dot, html, dumps = (tmp_path / f"{stem}.{kind}" for kind in ("dot", "html", "dumps.txt"))
        assert "cluster_g0" in dot.read_text() and "<html>" in html.read_text()
        assert "fusion_ir_presched" not in dumps.read_text() and "// g1 pointwise" in dumps.read_text()
        log = await show(pilot, "log")
        assert f"wrote {dot}" in log and f"wrote {html}" in log and f"wrote {dumps}" in log

        titles["Export segment graph (.svg)"].callback()
        await pilot.pause()
        log = view_text(pilot, "log")
        assert ("export graph:svg: wrote" in log) == (shutil.which("dot") is not None)
        if shutil.which("dot") is None:
            assert "error: export graph:svg" in log and "Graphviz" in log

        await pilot.press("ctrl+p")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "CommandPalette"

    drive(app, steps)


def test_switching_the_backend_to_cuda_without_a_gpu_fails_in_place_and_keeps_the_choice():
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL)

    async def steps(pilot):
        app.query_one("#backend", Select).value = "cuda"
        app.query_one("#ir-view").focus()
        await pilot.press("r")
        await settle(pilot)
        if app.last.ok:  # a machine with a GPU: the run succeeded and has launches
            assert app.last.artifacts.launches
            return
        assert "the cuda backend needs an NVIDIA GPU with CuPy" in banner(pilot)
        assert app.query_one("#backend", Select).value == "cuda" and app.session.options.backend == "cuda"

    drive(app, steps)


def test_fuser_wb_file_opens_the_tui_in_a_terminal_and_prints_text_otherwise(monkeypatch):
    launched = []
    monkeypatch.setattr(cli.WorkbenchApp, "run", lambda self: launched.append(self.launch))
    monkeypatch.setattr(cli, "_interactive", lambda out: True)
    assert cli.main(["softmax", "--disable", "concretize_resize_extents", "--shapes", "2x4x8x1024"]) == 0
    assert cli.main([]) == 0
    first, default = launched
    assert first.script == "softmax" and first.shapes == ((2, 4, 8, 1024),)
    assert first.options.disable == frozenset({"concretize_resize_extents"})
    assert default.script == cli.DEFAULT_SAMPLE

    monkeypatch.setattr(cli, "_interactive", lambda out: False)
    out = io.StringIO()
    assert cli.main(["softmax"], out=out) == 0
    assert len(launched) == 2 and out.getvalue().startswith("== nvfuser_fusion_id4 (line ")


def test_the_palettes_export_repro_writes_the_script_with_the_runs_shapes_and_options(tmp_path):
    app = make_app("issue785_reduction_pow", shapes=POW_SMALL, export_dir=tmp_path)

    async def steps(pilot):
        titles = {c.title: c for c in app.commands()}
        assert "nvFuser's repro of this fusion" in titles["Export repro script"].help
        titles["Toggle vectorization"].callback()
        app.query_one("#ir-view").focus()
        await pilot.press("r")  # the sidebar's settings apply when run
        await settle(pilot)
        titles["Export repro script"].callback()
        await pilot.pause()
        written = tmp_path / f"issue785_reduction_pow.{app.session.definition}.repro.py"
        text = written.read_text()
        assert "    torch.testing.make_tensor((4, 8, 64), dtype=torch.float32, device='cuda:0'),\n" in text
        assert text.endswith("fd.execute(inputs, _disable_options=['vectorization'])\n")
        (again,) = load_repro(written).definitions
        assert again.fd.fusion_ir() == app.session.loaded.fd.fusion_ir()
        log = await show(pilot, "log")
        assert f"export repro: wrote {written}" in log

    drive(app, steps)
