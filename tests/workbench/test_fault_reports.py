"""A run that ends in a CUDA fault, in the workbench: the session keeps the error with
the kernels it names (launch and CUDA) and the run's repro script; the CLI prints the
error and writes the repro and the CUDA; the TUI shows the error in place, offers both
on `f`, writes them on `e`, and keeps running with the user's settings. The GPU is
tests/unit/runtime/fake_cuda.py's stand-in, so this runs on any machine."""

from __future__ import annotations

import asyncio
import io
import json
import sys
from pathlib import Path

import pytest
from textual.widgets import Input
from tui_helpers import NO_GPU, SIZE, banner, make_app, settle, show, type_into

from fuser_core import load_repro
from workbench import cli
from workbench import session as session_module
from workbench.session import RunOptions, Session
from workbench.tui import pipeline
from workbench.tui.screens import FaultScreen
from workbench.tui.textview import TextView

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "runtime"))
from fake_cuda import FakeCudaBackend, FakeDevice, install

SAMPLE = "issue785_reduction_pow"
SMALL = [(4, 8, 64), (4, 8, 64)]
SAMPLE_PATH = Path(session_module.resolve_script(SAMPLE))
LINES = SAMPLE_PATH.read_text().splitlines()
DEFINITION_LINE = next(i for i, line in enumerate(LINES, 1) if line.startswith("with FusionDefinition()"))
SUM_LINE = next(i for i, line in enumerate(LINES, 1) if "fd.ops.sum(" in line)  # g0, the reduction


@pytest.fixture
def device(monkeypatch) -> FakeDevice:
    fake = FakeDevice()
    install(monkeypatch, fake)
    monkeypatch.setitem(session_module.BACKENDS, "cuda", lambda model: FakeCudaBackend())
    monkeypatch.setattr(pipeline, "backend_problem", lambda name, model=None: NO_GPU)
    return fake


def cuda_session() -> Session:
    session = Session.open(SAMPLE)
    session.set_shapes(SMALL)
    session.options = RunOptions(backend="cuda")
    return session


def test_the_session_keeps_the_faults_kernels_with_their_cuda_and_the_runs_repro(device, tmp_path):
    session = cuda_session()
    first = session.run()
    assert first.ok, first.error
    names = [k.name for k in first.artifacts.kernels]
    assert len(names) == 2
    device.fault(names[1])
    result = session.run()
    error = result.error
    assert error is not None and result.artifacts is None and error.fault is not None
    assert session.shapes == SMALL and session.options.backend == "cuda"  # nothing the user set is lost
    assert error.location == f"{SAMPLE_PATH.name}:{DEFINITION_LINE}"  # two kernels: the definition's line
    assert "reported when copying the outputs to the host" in error.message
    assert f"g0 {names[0]}, " in error.message and f"g1 {names[1]}, " in error.message
    assert "grid (" in error.message and "block (" in error.message and "sync_launches" in error.message
    fault = error.fault
    assert fault.sticky and not fault.pinned and [k.name for k in fault.kernels] == names
    assert all(k.cuda.startswith('extern "C" __global__ void ') and f" {k.name}(" in k.cuda for k in fault.kernels)
    assert fault.kernels[1].launch.startswith("grid (") and fault.kernels[1].scheduler
    assert "fd.execute(inputs, _enable_options=['sync_launches'])" in fault.repro
    assert "(4, 8, 64)" in fault.repro
    (tmp_path / "repro.py").write_text(fault.repro)
    (again,) = load_repro(tmp_path / "repro.py").definitions
    assert again.fd.fusion_ir() == session.loaded.fd.fusion_ir()


def test_with_sync_launches_the_error_points_at_the_kernels_first_op(device):
    session = cuda_session()
    session.options = RunOptions(backend="cuda", enable=frozenset({"sync_launches"}))
    device.fault("*")
    result = session.run()
    error = result.error
    assert error is not None and error.fault is not None and error.fault.pinned
    (kernel,) = error.fault.kernels
    assert kernel.label.startswith("g0 nvfuser_")
    assert f"The kernel that faulted: {kernel.label}" in error.message
    assert error.location == f"{SAMPLE_PATH.name}:{SUM_LINE}" and error.line == LINES[SUM_LINE - 1]


def test_the_cli_prints_the_fault_and_writes_the_repro_and_the_kernels_cuda(device, tmp_path, capsys):
    device.fault("*")
    argv = ["dump", SAMPLE, "--dump", "cuda_kernel", "--backend", "cuda", "--shapes", "4x8x64", "4x8x64"]
    code = cli.main([*argv, "--export-dir", str(tmp_path)], out=io.StringIO())
    err = capsys.readouterr().err
    # g0 faults; the launch of g1 reports it, so g0 is the one kernel it may come from
    assert code == 1 and err.startswith(f"fuser-wb: {SAMPLE_PATH.name}:{SUM_LINE}: CUDA error ")
    assert "reported when launching g1 nvfuser_" in err and "may come from the one kernel this run launched" in err
    assert (
        "g0 nvfuser_reduction_" in err and "grid (" in err and "run again with the enable option sync_launches" in err
    )
    repro = next(tmp_path.glob("*.repro.py"))
    assert f"the run's repro script (sync_launches on, to name the kernel that faults): {repro}" in err
    assert "_enable_options=['sync_launches']" in repro.read_text()
    cuda = sorted(tmp_path.glob("*.cu"))
    assert cuda and all(f"the CUDA of g{i} " in err for i in range(len(cuda)))
    assert all(path.read_text().startswith('extern "C" __global__ void ') for path in cuda)


def test_a_report_of_a_faulted_run_holds_the_kernels_cuda_and_the_repro(device, tmp_path):
    device.fault("*")
    argv = ["report", SAMPLE, "--backend", "cuda", "--shapes", "4x8x64", "4x8x64"]
    assert cli.main([*argv, "-o", str(tmp_path / "run.json"), "--json"], out=io.StringIO()) == 0
    fault = json.loads((tmp_path / "run.json").read_text())["error"]["fault"]
    assert fault["sticky"] is True and fault["kernels"][0]["label"].startswith("g0 nvfuser_reduction_")
    assert fault["kernels"][0]["cuda"].startswith('extern "C" __global__ void ')
    assert "_enable_options=['sync_launches']" in fault["repro"]
    device.restart()
    device.fault("*")
    assert cli.main([*argv, "-o", str(tmp_path / "run.html")], out=io.StringIO()) == 0
    page = (tmp_path / "run.html").read_text()
    assert "CUDA of g0 nvfuser_reduction_" in page and "repro script of the run" in page


def test_the_tui_shows_the_fault_offers_the_cuda_and_the_repro_and_keeps_running(device, tmp_path):
    app = make_app(SAMPLE, shapes=tuple(SMALL), export_dir=tmp_path, options=RunOptions(backend="cuda"))

    async def steps(pilot):
        await settle(pilot)
        assert app.last.ok, app.last.error
        await type_into(pilot, "shape-0", "4x8x32")
        await type_into(pilot, "shape-1", "4x8x32")
        device.fault("*")
        app.query_one("#ir-view").focus()
        await pilot.press("r")
        await settle(pilot)
        text = banner(pilot)
        assert "run 2 failed with a CUDA fault: press f for the kernel's CUDA and the repro" in text
        assert "g0 nvfuser_" in text and "CUDA error" in text
        assert [app.query_one(f"#shape-{i}", Input).value for i in (0, 1)] == ["4x8x32", "4x8x32"]
        assert app.good.index == 0  # the tabs still show run 1
        assert "fault: g0 nvfuser_" in await show(pilot, "log")

        await pilot.press("f")
        await pilot.pause()
        assert isinstance(app.screen, FaultScreen)
        shown = app.screen.query_one("#fault-view", TextView).plain
        assert 'extern "C" __global__ void ' in shown and "_enable_options=['sync_launches']" in shown
        await pilot.press("e")
        await pilot.pause()
        assert not isinstance(app.screen, FaultScreen)
        written = sorted(p.name for p in tmp_path.iterdir())
        assert any(name.endswith(".run2.repro.py") for name in written)
        assert any(name.endswith(".cu") for name in written)
        assert "export fault: wrote" in await show(pilot, "log")
        assert app.is_running

    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await steps(pilot)

    asyncio.run(main())
