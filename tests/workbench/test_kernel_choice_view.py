"""The kernel choice (enable option kernel_choice) in the workbench: the Run tab, the HTML
and JSON reports, the Log's cache line and a reopened bundle say which candidate kernel
was kept and by how much, or why no choice was made; nothing of it shows with the option
off. The GPU is tests/unit/runtime/fake_cuda.py's stand-in, timed by an injected timer."""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

import pytest
from test_bundle_and_trace import rendered
from tui_helpers import NO_GPU, SIZE, make_app, settle, show

from fuser_core.runtime.kernel_choice import TRIALS, use_trial_timer
from workbench import session as session_module
from workbench.bundle import load_bundle, save_bundle
from workbench.report import html_report, json_report
from workbench.session import RunOptions, Session
from workbench.tui import content
from workbench.tui import pipeline as app_module

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "runtime"))
from fake_cuda import FakeCudaBackend, FakeDevice, install

SAMPLE = "var_mean"
SMALL = [(2, 8, 256)]
OWN = "nvfuser_inner_persistent_f0_c1_r0_g0"
ALT = "nvfuser_reduction_f0_c1_r0_g0_alt1"
CHOICE = frozenset({"kernel_choice"})


@pytest.fixture(autouse=True)
def fixed_cuda_reason(monkeypatch):
    monkeypatch.setattr(app_module, "backend_problem", lambda name, model=None: NO_GPU)


@pytest.fixture
def device(monkeypatch) -> FakeDevice:
    fake = FakeDevice()
    install(monkeypatch, fake)
    monkeypatch.setitem(session_module.BACKENDS, "cuda", lambda model: FakeCudaBackend())
    return fake


def session(backend: str = "reference", enable: frozenset[str] = CHOICE) -> Session:
    opened = Session.open(SAMPLE)
    opened.set_shapes(SMALL)
    opened.options = RunOptions(backend=backend, enable=enable)
    return opened


def run_tab(s: Session) -> str:
    assert s.current is not None
    return rendered(content.run_view(s.current, NO_GPU))


def choice_rows(text: str) -> list[list[str]]:
    """The cells of the kernel choice table's rows (a candidate's position leads its label)."""
    rows = [[cell.strip() for cell in line.split("│")[1:7]] for line in text.splitlines() if line.startswith("│ g")]
    return [row for row in rows if re.fullmatch(r"\d+ .+", row[1])]


def plain(text: str) -> str:
    return " ".join(text.split())


def test_on_the_reference_backend_the_run_tab_says_no_choice_was_made_and_why():
    s = session()
    result = s.run()
    assert result.ok, result.error
    text = run_tab(s)
    assert "Kernel choice (kernel_choice)" in text
    cells = choice_rows(text)
    assert cells == [
        ["g0", "0 persistent", OWN, "-", "0", "runs: no choice made"],
        ["g0", "1 non-persistent", ALT, "-", "0", "not timed"],
    ]
    why = f"the reference backend times nothing, so the heuristic's own {OWN} (persistent) stands"
    assert f"kernel choice g0: no choice made: {why}" in plain(text)
    assert result.artifacts.cache_line.endswith(f"; kernel choice g0: no choice made: {why}")


def test_with_the_option_off_nothing_of_it_shows():
    s = session(enable=frozenset())
    s.run()
    assert "Kernel choice" not in run_tab(s)
    assert s.current.artifacts.choices == ()
    assert "kernel choice" not in html_report(SAMPLE, s.current).lower()
    assert json_report(SAMPLE, s.current)["artifacts"]["choices"] == []


def test_on_the_gpu_the_run_tab_and_the_reports_say_which_won_and_by_how_much(device):
    s = session("cuda")

    def timer(kernel, launch, cupy, events):
        return launch(events), {OWN: 3e-6, ALT: 2e-6}[kernel]

    with use_trial_timer(timer):
        results = [s.run() for _ in range(2 * TRIALS + 1)]
    assert all(r.ok for r in results), [r.error for r in results]
    first = results[0].artifacts.choices[0]
    assert (first.state, first.ran) == ("timing", 0)
    text = run_tab(s)
    cells = choice_rows(text)
    assert cells == [
        ["g0", "0 persistent", OWN, "3.0 µs", str(TRIALS), "1.50x the kept time"],
        ["g0", "1 non-persistent", ALT, "2.0 µs", str(TRIALS), "kept, 1.50x faster than the next"],
    ]
    line = f"kernel choice g0: kept {ALT} (non-persistent) at 2.0 us, 1.50x faster than {OWN} (persistent) at 3.0 us"
    assert line in plain(text)
    assert s.current.artifacts.cache_line.endswith(line)
    assert [r.kernel for r in s.current.artifacts.launches] == [ALT]
    cuda = plain(rendered(content.cuda_view(s.current.artifacts, cuda_problem=NO_GPU)))
    assert (
        f"the kernel choice keeps {ALT} (non-persistent) for this group; shown here: the heuristic's own kernel" in cuda
    )
    assert line in plain(html_report(SAMPLE, s.current))
    (data,) = json_report(SAMPLE, s.current)["artifacts"]["choices"]
    assert (data["state"], data["kept"], data["runner_up"], data["line"]) == ("kept", 1, 0, line)
    assert data["speedup"] == pytest.approx(1.5)
    assert [c["seconds"] for c in data["candidates"]] == [3e-6, 2e-6]


def test_a_reopened_bundle_shows_the_same_choice(device, tmp_path):
    s = session("cuda")
    with use_trial_timer(lambda kernel, launch, cupy, events: (launch(events), 1e-6)):
        for _ in range(2):
            s.run()
    bundle = load_bundle(save_bundle(s, tmp_path / "choice.fwb.json"))
    assert bundle.session.current == s.current
    assert run_tab(bundle.session) == run_tab(s)
    assert "on trial now" in run_tab(s)


def test_the_tui_has_a_switch_for_the_option_and_shows_the_choice_in_the_run_tab():
    app = make_app(SAMPLE, shapes=SMALL, options=RunOptions(enable=CHOICE))

    async def main():
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert app.query_one("#opt-kernel_choice").value is True
            text = await show(pilot, "run")
            assert "Kernel choice (kernel_choice)" in text
            assert "kernel choice g0: no choice made: the reference backend times nothing" in plain(text)

    asyncio.run(main())
