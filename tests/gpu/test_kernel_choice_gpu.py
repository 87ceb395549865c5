"""The kernel choice (enable option kernel_choice) on the GPU: every candidate of a group
compiles, every run (each trial launches one candidate) agrees with the reference, each
candidate is timed TRIALS times with CUDA events, the fastest is kept, and the later
runs, through the cache-hit fast path, launch only it.

    python -m pytest -m gpu tests/gpu/test_kernel_choice_gpu.py -s   # -s prints each choice
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, load_repro, use_options
from fuser_core.runtime.kernel_choice import TRIALS

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from kernels_check import SAMPLES_DIR, reduction_fusion, shrunk_sample  # noqa: E402
from test_cuda_backend import _compare, _host, _to_device  # noqa: E402

RUNS = 2 * TRIALS + 3  # every trial, then the run that keeps the fastest, then two on the fast path

# (shape, reduced axes, op, dtype, normalize, the labels of the candidates)
CASES = [
    ([64, 1024], [1], "sum", DataType.Float, True, ["persistent", "non-persistent"]),
    ([4096, 4096], [1], "max", DataType.Half, True, ["persistent", "non-persistent"]),
    ([8, 24000], [1], "var_mean", DataType.Float, True, ["persistent", "non-persistent"]),
    ([2, 20000], [1], "sum", DataType.Float, False, ["no grid split", "grid split 8"]),
    ([2, 1 << 20], [1], "sum", DataType.Float, False, ["grid split 64", "no grid split"]),
    ([3, 3000], [1], "var_mean", DataType.Half, False, ["no grid split", "grid split 2"]),
    ([700, 40], [0], "sum", DataType.Float, False, ["grid split 2", "no grid split"]),
    ([1 << 16, 64], [0], "sum", DataType.Half, False, ["grid split 256", "no grid split"]),
    ([1024, 4096], [1], "sum", DataType.Float, False, None),  # 1024 rows fill the GPU: no candidates
]


def _run_with_choice(fd: FusionDefinition, inputs: list[np.ndarray], runs: int = RUNS) -> list[list]:
    """`runs` executions with the choice on, inputs on the device; each run's outputs on the host."""
    device_inputs = [_to_device(x) for x in inputs]
    outputs = []
    with use_options(backend="cuda", enable=["kernel_choice"]):
        for _ in range(runs):
            got = fd.execute(device_inputs)
            outputs.append([_host(g, tv.dtype) for g, tv in zip(got, fd.fusion.outputs, strict=True)])
    return outputs


def _check_outputs(fd: FusionDefinition, inputs: list[np.ndarray], outputs: list[list], rtol_long: bool) -> None:
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    for run, got in enumerate(outputs):
        for g, e, tv in zip(got, expected, fd.fusion.outputs, strict=True):
            what = f"run {run} T{tv.name}"
            if rtol_long and tv.dtype.itemsize >= 4:
                scale = max(1.0, float(np.abs(np.asarray(e)).max(initial=0)))
                np.testing.assert_allclose(g.astype(np.float64), np.asarray(e, np.float64), 2e-4, 2e-4 * scale)
            else:
                _compare(g.astype(np.asarray(e).dtype), e, what, tv.dtype)


def _check_choice(reports: list, labels: list[str] | None) -> None:
    """`reports`: the RUNS reports of the runs with the choice on (taken before the
    reference run that checks the outputs adds its own)."""
    (choice,) = reports[-1].choices
    names = [c.kernel for c in choice.candidates]
    print(f"\n{reports[2 * TRIALS].choices[0].line()}")
    if labels is not None:
        assert [c.label for c in choice.candidates] == labels
    # Both candidates compiled (or came from the kernel cache) when the runtime was built.
    assert [line.split(":")[0] for line in reports[0].compiles] == names
    assert all(not c.refusal for c in choice.candidates)
    # The trials took turns, each timed TRIALS times, then the fastest was kept.
    launched = [r.launches[0].kernel.split(" (")[0] for r in reports]
    assert launched[: 2 * TRIALS] == names * TRIALS
    assert choice.state == "kept" and choice.kept is not None
    assert all(c.launches == TRIALS and c.seconds is not None and c.seconds > 0 for c in choice.candidates)
    best = min(c.seconds for c in choice.candidates if c.seconds is not None)
    assert choice.candidates[choice.kept].seconds == best and choice.speedup is not None and choice.speedup >= 1
    assert launched[2 * TRIALS :] == [names[choice.kept]] * (RUNS - 2 * TRIALS)
    events = [r.event for r in reports]
    assert "kept" in events[2 * TRIALS].line() and events[-1].reasons == ("fast path",)


@pytest.mark.parametrize(("shape", "axes", "op", "dtype", "normalize", "labels"), CASES)
def test_both_candidates_compile_agree_with_the_reference_and_the_fastest_is_kept(
    shape, axes, op, dtype, normalize, labels
):
    fd = reduction_fusion(shape, axes, op, False, dtype, normalize)
    x = (np.random.default_rng(3).standard_normal(shape) + 0.25).astype(dtype.numpy)
    if labels is None:  # a reduction that fills the GPU: one schedule, nothing to choose
        outputs = _run_with_choice(fd, [x], runs=2)
        _check_outputs(fd, [x], outputs, rtol_long=True)
        assert all(r.choices == () for r in fd.executor_cache.reports)
        return
    outputs = _run_with_choice(fd, [x])
    reports = list(fd.executor_cache.reports)[-RUNS:]
    _check_outputs(fd, [x], outputs, rtol_long=True)
    _check_choice(reports, labels)


CHOICE_SAMPLES = ["softmax", "layer_norm_fwd", "rms_norm_fwd", "var_mean", "issue785_reduction_pow", "layer_norm_bwd"]


@pytest.mark.parametrize("name", CHOICE_SAMPLES)
def test_the_samples_with_candidates_choose_and_stay_right_at_the_shrunk_sizes(name):
    (loaded,) = load_repro(shrunk_sample(name)).definitions
    inputs = loaded.materialize_inputs(seed=0)
    fd = loaded.fd
    if any(x.dtype == DataType.BFloat16.numpy for x in inputs if isinstance(x, np.ndarray)):
        pytest.importorskip("torch")
    outputs = _run_with_choice(fd, inputs)
    last = fd.executor_cache.last_report
    _check_outputs(fd, inputs, outputs, rtol_long=False)
    for choice in last.choices:
        print(f"\n{name}: {choice.line()}")
        assert choice.state == "kept" and choice.speedup is not None and choice.speedup >= 1


@pytest.mark.slow
@pytest.mark.parametrize("name", CHOICE_SAMPLES)
def test_the_choice_at_the_bundled_sizes(name):
    """What the choice keeps at the sizes the samples ship with (printed with -s): the
    numbers the decision to turn the option on by default waits for."""
    (loaded,) = load_repro((SAMPLES_DIR / f"{name}.py").read_text()).definitions
    inputs = loaded.materialize_inputs(seed=0)
    if any(x.dtype == DataType.BFloat16.numpy for x in inputs if isinstance(x, np.ndarray)):
        pytest.importorskip("torch")
    outputs = _run_with_choice(loaded.fd, inputs)
    _check_outputs(loaded.fd, inputs, outputs[-1:], rtol_long=True)  # the kept kernel's run
    choices = loaded.fd.executor_cache.last_report.choices
    for choice in choices:
        print(f"\n{name} (bundled): {choice.line()}")
        assert choice.state == "kept"
    if not choices:  # say so rather than pass having checked nothing
        pytest.skip(f"{name}: no group has candidates at its bundled size (its rows fill the GPU)")
