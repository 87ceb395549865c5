"""nvFuser's test-file fusions that failed on an H100 (integer header overloads, shifts,
scalar extents, vector alignment of a symbolic cat, a stride-0 input), through the cuda
backend against the reference backend."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from test_nvfuser_regressions import (  # noqa: E402
    SHIFT_VALUES,
    _shift_by_constant,
    _shift_by_scalar,
    cat_symbolic,
    issue_2395,
    remove_empty_2545,
)

RNG = np.random.default_rng(90)


def _on_device(x, kind):
    if not isinstance(x, np.ndarray):
        return x
    if kind == "numpy":
        return x
    torch = pytest.importorskip("torch")
    base = torch.from_numpy(np.ascontiguousarray(x)).cuda()
    if any(s == 0 for s in x.strides):  # keep the caller's stride-0 layout, as nvFuser's test does
        compact = x[tuple(slice(0, 1) if s == 0 else slice(None) for s in x.strides)]
        return torch.from_numpy(np.ascontiguousarray(compact)).cuda().expand(*x.shape)
    return base


def _run_both(build, inputs, kind="torch"):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    with use_options(backend="cuda"):
        got = fd.execute([_on_device(x, kind) for x in inputs])
    report = fd.executor_cache.last_report
    assert report.runtime.backend_name == "cuda"
    hosted = []
    for g in got:
        if type(g).__module__.startswith("torch"):
            g = g.cpu().numpy()
        elif hasattr(g, "get"):
            g = g.get()
        hosted.append(np.asarray(g))
    for g, e in zip(hosted, expected, strict=True):
        e = np.asarray(e)
        assert g.shape == e.shape
        if e.dtype.kind in "biu":
            np.testing.assert_array_equal(g, e)
        else:
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
    return hosted, fd


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_remove_empty_2545_on_the_gpu(kind):
    _run_both(remove_empty_2545, [RNG.integers(-10, 10, (1000,)), RNG.integers(0, 10, (0,))], kind)


@pytest.mark.parametrize("dtype", [DataType.Int32, DataType.Int], ids=lambda d: d.name)
def test_right_shift_logical_on_the_gpu(dtype):
    x = SHIFT_VALUES.astype(dtype.numpy)
    (out,), _ = _run_both(_shift_by_constant(dtype), [x])
    unsigned = np.uint32 if dtype == DataType.Int32 else np.uint64
    np.testing.assert_array_equal(out, (x.view(unsigned) >> unsigned(3)).view(dtype.numpy))


@pytest.mark.parametrize("dtype", [DataType.Int32, DataType.Int], ids=lambda d: d.name)
def test_right_shift_logical_sizeof_dtype_on_the_gpu(dtype):
    x = np.concatenate([SHIFT_VALUES, RNG.integers(-(2**30), 2**30, 1000)]).astype(dtype.numpy)
    (out,), _ = _run_both(_shift_by_scalar(dtype), [x, 8 * dtype.itemsize])
    assert (out == 0).all()


def test_full_and_expand_sized_by_input_shapes_on_the_gpu():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True)
        t1 = fd.define_tensor(shape=[-1, 1, -1], contiguity=[True, None, True])
        t2 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True)
        s = fd.define_scalar(None, dtype=DataType.Int)
        t1_b = fd.ops.broadcast_in_dim(t1, t0.shape(), [0, 1, 2])
        fd.add_output(fd.ops.add(t1_b, t2))
        fd.add_output(fd.ops.full([t0.size(0), s], fd.define_scalar(1.5), dtype=DataType.Float))

    shapes = [(20, 30, 40), (20, 1, 40), (20, 30, 40)]
    _run_both(build, [*(RNG.standard_normal(sh).astype(np.float32) for sh in shapes), 7])


def test_uniform_sized_by_an_input_shape_on_the_gpu():
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(
            fd.ops.uniform(fd.define_scalar(1.8), fd.define_scalar(1223.5), t0.shape(), dtype=DataType.Double)
        )

    with FusionDefinition() as fd:
        build(fd)
    torch = pytest.importorskip("torch")
    with use_options(backend="cuda"):
        (out,) = fd.execute([torch.randn(64, 128, 1024, device="cuda")])
    out = out.cpu().numpy() if type(out).__module__.startswith("torch") else np.asarray(out.get())
    assert out.shape == (64, 128, 1024)
    assert abs(out.mean() - (1223.5 + 1.8) / 2) < 5 and out.min() >= 1.8 and out.max() <= 1223.5


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_cat_symbolic_on_the_gpu(kind):
    f = lambda *s: RNG.standard_normal(s).astype(np.float32)  # noqa: E731
    _run_both(cat_symbolic, [0.3, f(2, 6, 8, 16), f(2, 6, 16, 8), f(2, 8, 96)], kind)


@pytest.mark.parametrize("kind", ["torch", "numpy"])
def test_issue_2395_on_the_gpu(kind):
    mask = np.lib.stride_tricks.as_strided(RNG.integers(0, 2, 256).astype(bool), (16, 16, 32), (16, 1, 0))
    values = RNG.standard_normal((16, 16, 32)).astype(np.float32)
    cond1 = RNG.integers(0, 2, (16, 16)).astype(bool)
    (sliced, masked), _ = _run_both(issue_2395, [mask, values, cond1], kind)
    np.testing.assert_array_equal(sliced, values[:, :, 16:])
    np.testing.assert_array_equal(masked, np.where(mask | cond1[:, :, None], 0, values))
