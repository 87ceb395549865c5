"""Session bundles (saved, reopened: byte-identical tabs; versions; damaged files; the
CLI's save and open; the TUI's palette and a reopened bundle) and element traces from
the session, the CLI and the TUI."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from pathlib import Path

import pytest
from textual.widgets import Input
from tui_helpers import NO_GPU, POW_SMALL, RESIZE, RESIZE_SMALL, drive, make_app, show, view_text

from fuser_core import FuserError
from workbench.artifacts import OutputArtifact
from workbench.bundle import BUNDLE_VERSION, load_bundle, save_bundle
from workbench.cli import main
from workbench.diff import diff_artifacts
from workbench.report import report_console
from workbench.session import RunOptions, Session
from workbench.tui import Launch, WorkbenchApp, content, pipeline
from workbench.tui.screens import TraceScreen
from workbench.tui.textview import TextView

POW = "issue785_reduction_pow"


@pytest.fixture(autouse=True)
def fixed_cuda_reason(monkeypatch):
    monkeypatch.setattr(pipeline, "backend_problem", lambda name, model=None: NO_GPU)


def two_runs() -> Session:
    session = Session.open(RESIZE)
    session.set_shapes(RESIZE_SMALL)
    session.run()
    session.options = session.options.with_disabled("concretize_resize_extents")
    session.run()
    return session


def rendered(renderable) -> str:
    console = report_console()
    console.print(renderable)
    return console.export_text(styles=True)


def tabs(session: Session) -> list[str]:
    """Every tab's content for the session's runs, with styles (as the TUI builds them)."""
    before, after = session.previous, session.current
    assert before is not None and after is not None and after.artifacts is not None
    a = after.artifacts
    state = content.DiffState(before, after, diff_artifacts(before.artifacts, a))
    views = [
        content.ir_view(a),
        content.concretization_view(a),
        content.segments_view(a),
        content.transforms_view(a),
        content.scheduled_view(a),
        content.kernel_ir_view(a, cuda_problem=NO_GPU),
        content.cuda_view(a, cuda_problem=NO_GPU),
        content.run_view(after, NO_GPU),
        content.diff_view(state, 2),
    ]
    return [rendered(v) for v in views]


def test_a_bundle_saved_and_reopened_renders_byte_identical_tabs(tmp_path: Path) -> None:
    session = two_runs()
    path = save_bundle(session, tmp_path / "b.fwb.json", log=["run 1: ok"], now="2026-01-02T03:04:05+00:00")
    bundle = load_bundle(path)
    assert bundle.session.previous == session.previous and bundle.session.current == session.current
    assert tabs(bundle.session) == tabs(session)
    assert bundle.banner().startswith(f"bundle {path}: recorded 2026-01-02T03:04:05+00:00 on ")
    assert "reference backend" in bundle.banner() and bundle.log == ["run 1: ok"]
    reopened = bundle.session
    assert reopened.options.disable == frozenset({"concretize_resize_extents"})
    assert reopened.shapes == list(RESIZE_SMALL) and not reopened.changed_on_disk()
    with pytest.raises(FuserError, match=r"reopened from a bundle.*run it again here to ask why"):
        reopened.why("g0")  # the segmenter's state is not in the bundle
    again = reopened.run()  # from the bundle's script and settings
    assert again.index == 2 and again.artifacts is not None
    assert again.artifacts.concretization == session.current.artifacts.concretization
    assert reopened.why("g0") is not None  # a run made here can be asked


def test_a_bundle_from_a_newer_version_or_not_a_bundle_is_refused_clearly(tmp_path: Path) -> None:
    path = save_bundle(two_runs(), tmp_path / "b.fwb.json")
    data = json.loads(path.read_text())
    data["version"] = BUNDLE_VERSION + 1
    path.write_text(json.dumps(data))
    with pytest.raises(
        FuserError, match=rf"written by a newer fuser-wb \(bundle format version {BUNDLE_VERSION + 1}; "
    ):
        load_bundle(path)
    other = tmp_path / "x.fwb.json"
    other.write_text("{}")
    with pytest.raises(FuserError, match='is not a workbench bundle \\(no "format": "fuser-workbench-bundle"\\)'):
        load_bundle(other)
    other.write_text("garbage")
    with pytest.raises(FuserError, match="is not a workbench bundle \\(not JSON"):
        load_bundle(other)
    del data["runs"]
    data["version"] = BUNDLE_VERSION
    other.write_text(json.dumps(data))
    with pytest.raises(FuserError, match="is a damaged workbench bundle: KeyError"):
        load_bundle(other)
    with pytest.raises(FuserError, match="nothing to save: no run has finished"):
        save_bundle(Session.open(RESIZE), tmp_path / "none.fwb.json")


def test_a_run_records_its_outputs_shapes_and_a_bundle_without_them_still_opens(tmp_path: Path) -> None:
    session = two_runs()
    assert session.current.artifacts.outputs == (OutputArtifact("T3", "float", (8, 4, 4, 3, 5)),)
    path = save_bundle(session, tmp_path / "b.fwb.json")
    data = json.loads(path.read_text())
    for run in data["runs"]:
        del run["artifacts"]["outputs"]  # as a bundle saved before runs recorded them
    path.write_text(json.dumps(data))
    assert load_bundle(path).session.current.artifacts.outputs == ()


def test_session_trace_takes_the_settings_of_a_run_and_keeps_its_own() -> None:
    session = Session.open(POW)
    session.set_shapes(POW_SMALL)
    shown = session.run()
    session.set_shapes([(2, 4, 32), (2, 4, 32)])  # edited, not run
    trace = session.trace("T3", (3, 7, 63), settings=shown.settings)
    assert trace.shape == (4, 8, 64) and trace.value == trace.reference
    assert session.shapes == [(2, 4, 32), (2, 4, 32)]
    assert session.trace("T3", (1, 3, 31)).shape == (4, 8, 64)  # the current run's by default


def run_cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(list(argv), out=out), out.getvalue()


def test_the_banner_of_a_reference_run_names_the_device_model_not_a_gpu(tmp_path: Path) -> None:
    session = Session.open(POW)
    session.set_shapes(POW_SMALL)
    session.options = RunOptions(device_model="h200")
    session.run()
    bundle = load_bundle(save_bundle(session, tmp_path / "b.fwb.json"))
    assert "reference backend, device model: NVIDIA H200 (no GPU; reference backend);" in bundle.banner()
    assert bundle.recorded.device == "NVIDIA H200"  # the file keeps the bare name (docs/bundle-format.md)


def test_cli_save_then_open_prints_the_banner_and_both_runs(tmp_path: Path) -> None:
    path = tmp_path / "r.fwb.json"
    shapes = ["8x3x2x5x6", "8x4x4x3x5"]
    code, text = run_cli(
        "save", RESIZE, "-o", str(path), "--shapes", *shapes, "--then", "--disable concretize_resize_extents"
    )
    assert code == 0 and text == f"wrote {path} (2 runs)\n"
    code, text = run_cli("open", str(path), "--no-color")
    assert code == 0
    assert text.startswith(f"bundle {path}: recorded ")
    scalars = "scalars 0,-1,0,-4,1,1,-1,-1"
    assert f"\n== run 1: shapes 8x3x2x5x6 8x4x4x3x5 {scalars} --backend reference seed 0\n" in text
    assert f"\n== run 2: shapes 8x3x2x5x6 8x4x4x3x5 {scalars} --disable concretize_resize_extents" in text
    assert f"\nrun 2: shapes 8x3x2x5x6 8x4x4x3x5 {scalars} --disable concretize_resize_extents" in text
    assert "ConcretizationInfo (concretize_resize_extents=off)" in text


def test_cli_open_of_a_newer_bundle_fails_in_one_line(tmp_path: Path, capsys) -> None:
    path = tmp_path / "n.fwb.json"
    path.write_text(json.dumps({"format": "fuser-workbench-bundle", "version": 99}))
    assert run_cli("open", str(path))[0] == 1
    assert "written by a newer fuser-wb (bundle format version 99;" in capsys.readouterr().err


def test_cli_trace_prints_the_writer_and_the_reads() -> None:
    code, text = run_cli("trace", POW, "T3", "1,2,3", "--shapes", "4x8x64", "4x8x64", "--no-color")
    assert code == 0, text
    assert text.startswith("T3[1, 2, 3] of T3[4, 8, 64] = ")
    assert "writer: blockIdx (" in text and "input elements read: " in text
    value, reference = text.split("\n")[0].split(" = ")[1].split("   (reference: ")
    assert value == reference.rstrip(")")


def test_cli_trace_errors_name_the_tensor(capsys) -> None:
    assert run_cli("trace", POW, "T99", "0", "--shapes", "4x8x64", "4x8x64")[0] == 1
    assert "unknown tensor 'T99': no segment writes it (outputs: " in capsys.readouterr().err
    assert run_cli("trace", POW, "T3", "a,b", "--shapes", "4x8x64", "4x8x64")[0] == 1
    assert "not an element index: 'a,b' (write it as 3,0,7)" in capsys.readouterr().err


def test_the_palette_saves_a_bundle_and_the_tui_reopens_it_with_its_banner(tmp_path: Path) -> None:
    app = make_app(POW, shapes=POW_SMALL, export_dir=tmp_path)
    saved: dict[str, str] = {}

    async def steps(pilot):
        titles = {c.title: c for c in app.commands()}
        assert "every stage of the last two runs" in titles["Save bundle"].help
        titles["Save bundle"].callback()
        await pilot.pause()
        path = tmp_path / f"{POW}.{app.session.definition}.fwb.json"
        assert f"export bundle: wrote {path}" in await show(pilot, "log")
        saved["path"] = str(path)
        saved["segments"] = await show(pilot, "segments")

    drive(app, steps)
    reopened = WorkbenchApp(Launch(saved["path"], bundle=load_bundle(Path(saved["path"]))))

    async def check(pilot):
        banner = str(pilot.app.query_one("#bundle-banner").render())
        assert banner.startswith(f"bundle {saved['path']}: recorded ") and pilot.app.query_one("#bundle-banner").display
        assert await show(pilot, "segments") == saved["segments"]
        assert "recorded: " in view_text(pilot, "log")
        assert pilot.app.session.current.index == 0  # shown, not run again

    drive(reopened, check)


def test_the_trace_screen_shows_where_an_element_came_from() -> None:
    app = make_app(POW, shapes=POW_SMALL)

    async def steps(pilot):
        await pilot.press("ctrl+t")
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, TraceScreen)
        box = screen.query_one("#trace-query", Input)
        box.value = "T3 1,2,3"
        await box.action_submit()
        for _ in range(200):
            await pilot.app.workers.wait_for_complete()
            await screen.workers.wait_for_complete()
            await pilot.pause()
            text = screen.query_one("#trace-view", TextView).plain
            if text.startswith("T3["):
                break
        assert text.startswith("T3[1, 2, 3] of T3[4, 8, 64] = ")
        assert "writer: blockIdx" in text and "predicates that held" in text
        box.value = "T77 0"
        await box.action_submit()
        for _ in range(200):
            await screen.workers.wait_for_complete()
            await pilot.pause()
            text = screen.query_one("#trace-view", TextView).plain
            if text.startswith("error"):
                break
        assert text.startswith("error: unknown tensor 'T77'")
        await pilot.press("escape")

    drive(app, steps)


def test_the_banner_of_a_cuda_run_sized_for_a_named_model_names_the_gpu_it_ran_on(tmp_path: Path) -> None:
    session = Session.open(POW)
    session.set_shapes(POW_SMALL)
    session.run()
    ran = session.current
    assert ran is not None and ran.artifacts is not None
    on_gpu = replace(ran.artifacts, backend="cuda", device="NVIDIA H200", gpu="NVIDIA H100 80GB HBM3")
    settings = replace(ran.settings, options=replace(ran.settings.options, backend="cuda"))
    session.current = replace(ran, artifacts=on_gpu, settings=settings)
    bundle = load_bundle(save_bundle(session, tmp_path / "b.fwb.json"))
    assert "device: NVIDIA H100 80GB HBM3 (heuristics sized for device model NVIDIA H200);" in bundle.banner()
    assert (bundle.recorded.device, bundle.recorded.gpu) == ("NVIDIA H200", "NVIDIA H100 80GB HBM3")
    reopened = bundle.session.current
    assert reopened is not None and reopened.artifacts is not None and reopened.artifacts.gpu == "NVIDIA H100 80GB HBM3"
