"""The cuda backend on the GPU: generated kernels against the reference backend."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, load_repro, use_options

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from kernels_check import SAMPLES, SAMPLES_DIR, shrunk_sample  # noqa: E402


def _host(value, dtype):
    import cupy

    if type(value).__module__.startswith("torch"):
        return value.float().cpu().numpy().astype(dtype.numpy)
    if isinstance(value, cupy.ndarray):
        value = value.get()
        if dtype == DataType.BFloat16 and value.dtype == np.uint16:
            value = value.view(dtype.numpy)
    return np.asarray(value)


def _compare(got, want, what, dtype=None):
    want = np.asarray(want)
    got = np.asarray(got)
    narrow = (dtype.itemsize if dtype is not None else want.dtype.itemsize) < 4
    assert got.shape == want.shape, what
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    # CUDA's float math functions are within a few ulp of the reference's: compare the
    # whole tensor by relative norm (METHOD: float32 far under 1e-3), and each element
    # loosely enough for a cancellation, never NaN for a number.
    g, w = got.astype(np.float64), want.astype(np.float64)
    assert np.array_equal(np.isnan(g), np.isnan(w)), f"{what}: NaN where the reference has none (or the reverse)"
    finite = np.isfinite(w)
    scale = float(np.abs(w[finite]).max()) if finite.any() else 1.0
    norm_tol, elem_tol = (4e-3, 2**-7) if narrow else (1e-5, 1e-4)
    error = np.linalg.norm((g - w)[finite]) / max(np.linalg.norm(w[finite]), 1e-30)
    assert error < norm_tol, f"{what}: relative error {error:.2e}"
    np.testing.assert_allclose(g[finite], w[finite], rtol=elem_tol, atol=elem_tol * scale, err_msg=what)


def _run_both(fd, inputs):
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    device_inputs = [_to_device(x) if isinstance(x, np.ndarray) else x for x in inputs]
    with use_options(backend="cuda"):
        got = fd.execute(device_inputs)
    report = fd.executor_cache.last_report
    assert report.runtime.backend_name == "cuda"
    outs = [tv for tv in fd.fusion.outputs]
    for g, e, tv in zip(got, expected, outs, strict=True):
        _compare(_host(g, tv.dtype), e, f"T{tv.name}")
    return got, report


def _to_device(x):
    """CuPy arrays; bf16 (which CuPy has no dtype for) as torch CUDA tensors."""
    import cupy

    if x.dtype == DataType.BFloat16.numpy:
        torch = pytest.importorskip("torch")
        return torch.from_numpy(x.view(np.int16)).view(torch.bfloat16).cuda()
    return cupy.asarray(x)


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("scale", ["shrunk", "bundled"])
def test_samples_on_the_gpu_match_the_reference(name, scale):
    script = shrunk_sample(name) if scale == "shrunk" else SAMPLES_DIR / f"{name}.py"
    (loaded,) = load_repro(script).definitions
    inputs = loaded.materialize_inputs(seed=3)
    if scale == "bundled" and sum(x.nbytes for x in inputs if isinstance(x, np.ndarray)) > 300 * 2**20:
        pytest.skip("the host reference of this size takes minutes; the shrunk run covers it")
    torch = pytest.importorskip("torch")
    with use_options(backend="reference"):
        expected = loaded.fd.execute(inputs)
    torch_inputs = []
    for x in inputs:
        if isinstance(x, np.ndarray):
            t = torch.from_numpy(x.view(np.int16) if x.dtype.itemsize == 2 and x.dtype != np.float16 else x)
            if x.dtype.itemsize == 2 and x.dtype != np.float16:
                t = t.view(torch.bfloat16)
            torch_inputs.append(t.cuda())
        else:
            torch_inputs.append(x)
    with use_options(backend="cuda"):
        got = loaded.fd.execute(torch_inputs)
    for g, e, tv in zip(got, expected, loaded.fd.fusion.outputs, strict=True):
        assert isinstance(g, torch.Tensor) and g.is_cuda
        _compare(g.float().cpu().numpy(), np.asarray(e).astype(np.float32), f"{name} T{tv.name}", tv.dtype)
    launches = loaded.fd.executor_cache.last_report.launches
    assert launches, "nothing was launched"


def _pointwise_fd():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[False, False], dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        b = fd.ops.broadcast_in_dim(t1, shape=t0.shape(), broadcast_dims=[1])
        fd.add_output(fd.ops.mul(fd.ops.tanh(t0), b))
    return fd


@pytest.mark.parametrize("size", [1, 3, 1023, 2**20 + 1])
def test_odd_sizes(size):
    rng = np.random.default_rng(size)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.BFloat16)
        t1 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.BFloat16)
        fd.add_output(fd.ops.cast(fd.ops.add(fd.ops.exp(t0), t1), DataType.BFloat16))
    bf16 = DataType.BFloat16.numpy
    inputs = [rng.standard_normal(size).astype(bf16), rng.standard_normal(size).astype(bf16)]
    _run_both(fd, inputs)


def test_non_contiguous_and_broadcast_inputs():
    rng = np.random.default_rng(1)
    fd = _pointwise_fd()
    base = rng.standard_normal((300, 500)).astype(np.float32)
    inputs = [base[::3, 1::2], rng.standard_normal(250).astype(np.float32)]
    _run_both(fd, inputs)


def test_misaligned_inputs_take_the_scalar_fallback():
    import cupy

    rng = np.random.default_rng(2)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.mul(t0, t0))
    x = rng.standard_normal(4097).astype(np.float32)
    aligned = cupy.asarray(x[:4096])
    with use_options(backend="cuda"):
        (out,) = fd.execute([aligned])
    assert "fallback" not in fd.executor_cache.last_report.launches[0].kernel
    shifted = cupy.asarray(x)[1:]  # 4 bytes past a 16-byte boundary
    with use_options(backend="cuda"):
        (out,) = fd.execute([shifted])
    assert "scalar fallback" in fd.executor_cache.last_report.launches[0].kernel
    np.testing.assert_allclose(out.get(), x[1:] * x[1:], rtol=1e-6)


def test_more_than_2_pow_31_elements_index_with_int64():
    import cupy

    n = 2**31 + 37
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Half)
        fd.add_output(fd.ops.cast(fd.ops.add(t0, fd.define_scalar(1.0)), DataType.Half))
    x = cupy.random.standard_normal(n, dtype=cupy.float32).astype(cupy.float16)
    with use_options(backend="cuda"):
        (out,) = fd.execute([x])
    runtime = fd.executor_cache.last_runtime
    assert runtime.signature.index_type == "int64"
    assert "long long" in runtime.kernels[0].index_type or "int64" in runtime.kernels[0].index_type
    want = (x.astype(cupy.float32) + 1).astype(cupy.float16)
    for sl in (slice(0, 1000), slice(n // 2, n // 2 + 1000), slice(n - 1000, n)):
        np.testing.assert_array_equal(out[sl].get(), want[sl].get())
    del x, out, want


def test_a_warm_process_compiles_nothing(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.setenv("FUSER_KERNEL_CACHE", str(tmp_path))
    script = (
        "import cupy, numpy as np\n"
        "from fuser_core import DataType, FusionDefinition, use_options\n"
        "with FusionDefinition() as fd:\n"
        "    t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)\n"
        "    fd.add_output(fd.ops.sin(t0))\n"
        "with use_options(backend='cuda'):\n"
        "    fd.execute([cupy.arange(1000, dtype=cupy.float32)])\n"
        "print(fd.executor_cache.last_runtime.executable.compile_events())\n"
    )
    env = {**__import__("os").environ, "FUSER_KERNEL_CACHE": str(tmp_path), "PYTHONPATH": str(Path.cwd())}
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert "compiled" in first.stdout
    assert "compiled" not in second.stdout and "disk" in second.stdout


@pytest.mark.parametrize("framework", ["cupy", "torch"])
def test_cache_hits_take_the_fast_path_and_agree(framework):
    import cupy

    rng = np.random.default_rng(5)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Float)
        b = fd.ops.broadcast_in_dim(t1, shape=t0.shape(), broadcast_dims=[1])
        fd.add_output(fd.ops.mul(fd.ops.sin(t0), b))
    x, y = rng.standard_normal((97, 1001)).astype(np.float32), rng.standard_normal(1001).astype(np.float32)
    if framework == "torch":
        torch = pytest.importorskip("torch")
        make = lambda a: torch.from_numpy(a).cuda()  # noqa: E731
        host = lambda a: a.cpu().numpy()  # noqa: E731
    else:
        make, host = cupy.asarray, lambda a: a.get()
    with use_options(backend="cuda"):
        first = fd.execute([make(x), make(y)])[0]
        for _ in range(3):
            x2 = rng.standard_normal((97, 1001)).astype(np.float32)
            again = fd.execute([make(x2), make(y)])[0]
            np.testing.assert_allclose(host(again), np.sin(x2) * y, rtol=2e-6, atol=1e-6)
    events = fd.executor_cache.events
    assert not events[0].hit and all(e.hit and "fast path" in e.reasons for e in events[1:])
    np.testing.assert_allclose(host(first), np.sin(x) * y, rtol=2e-6, atol=1e-6)
    report = fd.executor_cache.last_report
    assert report.launches and report.launches[0].kernel.startswith("nvfuser_pointwise")


def test_fast_path_cupy_outputs_each_own_all_their_elements():
    """Two [32, 256] outputs replayed through the fast path with CuPy inputs: each buffer
    spans all of its elements and none overlaps the other (the plan once sized a buffer by
    its largest axis span, so the second output's buffer overlapped the first's tail and
    a mean came back holding variances where the memory pool placed them side by side)."""
    import cupy

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        var, mean = fd.ops.var_mean(t0, dims=[2], correction=1, keepdim=True)
        fd.add_output(var)
        fd.add_output(mean)
    x = np.random.default_rng(2).standard_normal((32, 256, 64)).astype(np.float32)
    with use_options(backend="cuda"):
        for _ in range(4):
            got_var, got_mean = fd.execute([cupy.asarray(x)])
            np.testing.assert_allclose(got_var.get(), x.var(axis=2, ddof=1, keepdims=True), rtol=1e-4, atol=1e-5)
            np.testing.assert_allclose(got_mean.get(), x.mean(axis=2, keepdims=True), rtol=1e-4, atol=1e-5)
            spans = sorted((int(a.data.ptr), int(a.data.ptr) + a.size * a.itemsize) for a in (got_var, got_mean))
            assert spans[0][1] <= spans[1][0], f"output buffers overlap: {spans}"
            assert all(a.data.mem.size >= a.size * a.itemsize for a in (got_var, got_mean))
    assert "fast path" in fd.executor_cache.events[-1].reasons


def test_a_fusion_without_tensor_inputs_returns_torch_tensors_on_every_call_in_compat_mode():
    """nvFuser returns torch tensors from an iota-only fusion; the fast path's replay must
    not hand back its CuPy arrays on the second call (the first went through the frontend's
    conversion)."""
    torch = pytest.importorskip("torch")
    from fuser_core.frontend.execution import return_torch_by_default

    with FusionDefinition() as fd:
        n = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.iota(n, 0, 2, dtype=DataType.Int))
    return_torch_by_default(True)
    try:
        with use_options(backend="cuda"):
            results = [fd.execute([4])[0] for _ in range(3)]
    finally:
        return_torch_by_default(False)
    for out in results:
        assert isinstance(out, torch.Tensor) and out.is_cuda
        assert out.cpu().tolist() == [0, 2, 4, 6]
