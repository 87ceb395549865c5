"""The kernel choice at run time (enable option kernel_choice), on the host: fake_cuda
stands in for CuPy and the GPU, and an injected timer says how long each candidate
kernel takes. Which candidate wins, that it is kept (and replayed by the fast path), what
the run reports and the cache events say, and why no choice is made where none can be."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest
from fake_cuda import FakeCudaBackend, FakeDevice, install, on_device

from fuser_core import FuserError, FusionDefinition, FusionExecutorCache, use_options
from fuser_core.runtime import kernel_choice
from fuser_core.runtime.kernel_choice import TRIALS, cuda_event_timer, use_trial_timer

OWN = "nvfuser_inner_persistent_f0_c1_r0_g0"
ALT = "nvfuser_reduction_f0_c1_r0_g0_alt1"
X = np.random.default_rng(0).standard_normal((8, 256)).astype(np.float32)


def softmax() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        m = fd.ops.broadcast_in_dim(fd.ops.max(t0, dims=[1]), shape=t0.shape(), broadcast_dims=[0])
        e = fd.ops.exp(fd.ops.sub(t0, m))
        s = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[1]), shape=t0.shape(), broadcast_dims=[0])
        fd.add_output(fd.ops.div(e, s))
    return fd


@pytest.fixture
def device(monkeypatch) -> FakeDevice:
    fake = FakeDevice()
    install(monkeypatch, fake)
    return fake


def timer(times: dict[str, float]):
    """A timer that launches and says each kernel took `times[name]` seconds."""

    def time(kernel, launch, cupy, events):
        return launch(events), times[kernel]

    return time


def run(device: FakeDevice, times: dict[str, float], count: int, fd: FusionDefinition | None = None):
    cache = FusionExecutorCache((fd or softmax()).fusion, backend=FakeCudaBackend())
    x = on_device(device, X)
    with use_options(enable=["kernel_choice"]), use_trial_timer(timer(times)):
        for _ in range(count):
            cache.run([x])
    return cache


def test_the_candidates_take_turns_until_each_is_timed_then_the_fastest_is_kept(device):
    cache = run(device, {OWN: 3e-6, ALT: 2e-6}, 2 * TRIALS + 3)
    assert device.launched() == [OWN, ALT] * TRIALS + [ALT] * 3
    states = [r.choices[0].state for r in cache.reports]
    assert states == ["timing"] * (2 * TRIALS) + ["kept"] * 3
    choice = cache.reports[2 * TRIALS].choices[0]  # made as the run after the last trial starts
    assert (choice.group_id, choice.kept, choice.ran, choice.runner_up, choice.news) == (0, 1, 1, 0, True)
    assert [(c.kernel, c.label, c.scheduler, c.seconds, c.launches) for c in choice.candidates] == [
        (OWN, "persistent", "inner_persistent", 3e-6, TRIALS),
        (ALT, "non-persistent", "reduction", 2e-6, TRIALS),
    ]
    assert choice.speedup == pytest.approx(1.5)


def test_the_heuristics_own_is_kept_when_it_is_fastest_and_on_a_tie(device):
    cache = run(device, {OWN: 1e-6, ALT: 4e-6}, 2 * TRIALS + 2)
    faster = cache.last_report.choices[0]
    tie = run(device, {OWN: 2e-6, ALT: 2e-6}, 2 * TRIALS + 1).last_report.choices[0]
    # The run that keeps the heuristic's own launches it, and the fast path replays it.
    assert device.launched()[: 2 * TRIALS + 2] == [OWN, ALT] * TRIALS + [OWN, OWN]
    assert cache.events[-1].reasons == ("fast path",) and [r.kernel for r in cache.last_report.launches] == [OWN]
    assert (faster.kept, faster.speedup) == (0, pytest.approx(4.0))
    assert (tie.kept, tie.speedup) == (0, pytest.approx(1.0))


def test_the_best_of_each_candidates_launches_decides(device):
    times = iter([9e-6, 5e-6, 2e-6, 5e-6, 9e-6, 5e-6])  # own: 9, 2, 9; alternative: 5, 5, 5

    def varying(kernel, launch, cupy, events):
        return launch(events), next(times)

    cache = FusionExecutorCache(softmax().fusion, backend=FakeCudaBackend())
    with use_options(enable=["kernel_choice"]), use_trial_timer(varying):
        for _ in range(2 * TRIALS + 1):
            cache.run([on_device(device, X)])
    choice = cache.last_report.choices[0]
    assert [c.seconds for c in choice.candidates] == [2e-6, 5e-6] and choice.kept == 0


def test_a_reduction_keeps_its_grid_split_candidate_when_it_is_faster(device):
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        fd.add_output(fd.ops.sum(t0, dims=[1]))
    own, split = "nvfuser_reduction_f0_c1_r0_g0", "nvfuser_reduction_f0_c1_r0_g0_alt1"
    cache = FusionExecutorCache(fd.fusion, backend=FakeCudaBackend())
    x = on_device(device, np.ones((2, 20000), np.float32))
    with use_options(enable=["kernel_choice"]), use_trial_timer(timer({own: 6e-6, split: 2e-6})):
        for _ in range(2 * TRIALS + 3):
            cache.run([x])
    choice = cache.last_report.choices[0]
    assert [c.label for c in choice.candidates] == ["no grid split", "grid split 8"]
    assert (choice.kept, choice.speedup) == (1, pytest.approx(3.0))
    assert device.launched()[-3:] == [split] * 3 and cache.events[-1].reasons == ("fast path",)
    assert cache.last_report.launches[0].launch.grid == (2, 8, 1)  # 8 blocks along each of the 2 rows
    # The grid reduction's work buffer and zeroed semaphores: allocated once for its trial
    # launches, and once more for the fast path's plan.
    before_split = device.calls.index(f"launch {split}")
    assert device.calls[before_split - 2 : before_split] == ["empty", "zeros"]
    assert device.calls.count("zeros") == 2


def test_the_cache_events_say_what_each_run_timed_and_which_won_by_how_much(device):
    cache = run(device, {OWN: 3e-6, ALT: 2e-6}, 2 * TRIALS + 2)
    lines = [e.line() for e in cache.events]
    assert lines[0] == (
        "cache: miss at concretization: first execution: nothing cached -> new runtime f0_c1_r0; "
        f"kernel choice g0: timing {OWN} (persistent): best 3.0 us of 1 launch (1 of 6 trial launches)"
    )
    assert lines[1] == (
        "cache: hit at input key -> f0_c1_r0; "
        f"kernel choice g0: timing {ALT} (non-persistent): best 2.0 us of 1 launch (2 of 6 trial launches)"
    )
    assert lines[2 * TRIALS - 1] == (
        "cache: hit at input key -> f0_c1_r0; "
        f"kernel choice g0: timing {ALT} (non-persistent): best 2.0 us of 3 launches (6 of 6 trial launches)"
    )
    assert lines[2 * TRIALS] == (
        "cache: hit at input key -> f0_c1_r0; "
        f"kernel choice g0: kept {ALT} (non-persistent) at 2.0 us, 1.50x faster than {OWN} (persistent) at 3.0 us"
    )
    # From then on the fast path replays the kernel kept, and the events say nothing more of it.
    assert lines[2 * TRIALS + 1] == "cache: hit at input key -> f0_c1_r0 (fast path)"
    last = cache.last_report
    assert [r.kernel for r in last.launches] == [ALT]
    assert last.choices[0].state == "kept" and not last.choices[0].news


def test_every_candidate_is_compiled_when_the_runtime_is_built(device):
    cache = run(device, {OWN: 1e-6, ALT: 2e-6}, 1)
    assert cache.reports[0].compiles == (f"{OWN}: fake (0.000 s to compile)", f"{ALT}: fake (0.000 s to compile)")
    assert cache.reports[0].compile_summary() == "warm start: compiled nothing (2 kernels from the kernel cache)"


class FakeEvent:
    def record(self, stream) -> None:
        pass

    def synchronize(self) -> None:
        pass


def test_with_kernel_profile_the_trial_is_timed_by_the_profiles_own_events(device, monkeypatch):
    seen = []

    def recording(kernel, launch, cupy, events):
        seen.append(events)
        return launch(events), 1e-6

    cuda = sys.modules["cupy"].cuda
    monkeypatch.setattr(cuda, "Event", FakeEvent, raising=False)
    monkeypatch.setattr(cuda, "get_elapsed_time", lambda start, end: 0.002, raising=False)  # milliseconds
    cache = FusionExecutorCache(softmax().fusion, backend=FakeCudaBackend())
    with use_options(enable=["kernel_choice", "kernel_profile"]), use_trial_timer(recording):
        cache.run([on_device(device, X)])
    (pair,) = seen
    assert all(isinstance(e, FakeEvent) for e in pair)  # the pair kernel_profile reads too
    assert cache.last_report.launches[0].seconds == pytest.approx(2e-6)


def test_a_candidate_codegen_refuses_is_out_of_the_running(device, monkeypatch):
    lower = kernel_choice.lower_group

    def refusing(fusion, name, index_type):
        if name.endswith("_alt1"):
            raise FuserError("codegen: not generated for this test")
        return lower(fusion, name, index_type)

    monkeypatch.setattr(kernel_choice, "lower_group", refusing)
    cache = run(device, {OWN: 1e-6}, 3)
    assert device.launched() == [OWN] * 3
    first, second = cache.reports[0].choices[0], cache.reports[1].choices[0]
    assert (first.state, first.kept, first.ran, first.news, second.news) == ("none", None, 0, True, False)
    assert first.candidates[1].refusal == "codegen: not generated for this test"
    assert first.line() == (
        "kernel choice g0: no choice made: only the heuristic's own kernel compiled "
        f"({ALT}: codegen: not generated for this test)"
    )
    assert cache.events[0].line().endswith(first.line()) and "kernel choice" not in cache.events[1].line()
    assert cache.events[1].reasons == ("fast path",)  # nothing to time: the fast path from the first call


def test_the_reference_backend_makes_no_choice_and_runs_the_heuristics_own():
    fd = softmax()
    with use_options(enable=["kernel_choice"], backend="reference"):
        (out,) = fd.execute([X])
        fd.execute([X])
    (plain,) = softmax().execute([X])  # the same definition: the same executor cache, the option off
    np.testing.assert_array_equal(out, plain)
    first, second, off = fd.executor_cache.reports
    assert off.choices == () and not off.event.hit  # a runtime of its own
    first, second = first.choices[0], second.choices[0]
    assert (first.state, first.kept, first.ran, [c.seconds for c in first.candidates]) == (
        "none",
        None,
        None,
        [None] * 2,
    )
    assert first.note == f"the reference backend times nothing, so the heuristic's own {OWN} (persistent) stands"
    assert fd.executor_cache.events[0].line().endswith(f"; kernel choice g0: no choice made: {first.note}")
    assert second.note == first.note and "kernel choice" not in fd.executor_cache.events[1].line()


def test_off_by_default_nothing_is_chosen_or_said(device):
    cache = FusionExecutorCache(softmax().fusion, backend=FakeCudaBackend())
    for _ in range(3):
        cache.run([on_device(device, X)])
    assert device.launched() == [OWN] * 3
    assert all(r.choices == () for r in cache.reports)
    assert all(e.choices == () and "kernel choice" not in e.line() for e in cache.events)
    assert cache.reports[0].compiles == (f"{OWN}: fake (0.000 s to compile)",)


def test_turning_the_option_on_is_a_cache_miss_that_names_it():
    fd = softmax()
    with use_options(backend="reference"):
        fd.execute([X])
        with use_options(enable=["kernel_choice"]):
            fd.execute([X])
    event = fd.executor_cache.events[1]
    assert not event.hit and "kernel choice on" in event.reasons


def test_the_default_timer_reads_cuda_events_around_the_launch():
    recorded = []
    start, end = SimpleNamespace(name="start"), SimpleNamespace(name="end", synchronize=lambda: recorded.append("sync"))
    cupy = SimpleNamespace(
        cuda=SimpleNamespace(
            Event=iter([start, end]).__next__,
            get_elapsed_time=lambda a, b: recorded.append((a.name, b.name)) or 0.25,  # milliseconds
        )
    )
    result, seconds = cuda_event_timer("k", lambda pair: recorded.append(pair) or "launched", cupy, None)
    assert (result, seconds) == ("launched", 0.25e-3)
    assert recorded == [(start, end), "sync", ("start", "end")]
