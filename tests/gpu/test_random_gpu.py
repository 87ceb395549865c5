"""Random ops in generated kernels on the GPU: a seeded draw equals the reference's bits
(uniform and dropout masks exactly, normals within float rounding of logf/sinf), an
unseeded one follows torch's generator as the reference does, and no group of a random
fusion runs on the host."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")

DTYPES = [DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16]


def _host(x):
    if x.dtype == torch.bfloat16:
        x = x.float()
    return x.cpu().numpy()


def _seeded(kind, dtype):
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        seed, offset = fd.define_scalar(DataType.Int), fd.define_scalar(DataType.Int)
        r = getattr(fd.ops, kind)(
            fd.define_scalar(-0.75), fd.define_scalar(2.5), t0.shape(), rng_seed=seed, rng_offset=offset, dtype=dtype
        )
        fd.add_output(r)
        fd.add_output(fd.ops.lt(r, fd.define_scalar(0.5)))  # a dropout-style mask

    return build


def _kernels_only(fd):
    runtime = fd.executor_cache.last_report.runtime
    assert runtime.backend_name == "cuda"
    assert not runtime.executable.host_reasons, runtime.executable.host_reasons


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("kind", ["uniform", "normal"])
def test_seeded_draws_on_the_gpu_equal_the_reference(kind, dtype):
    with FusionDefinition() as fd:
        _seeded(kind, dtype)(fd)
    x = torch.randn(301, 517, device="cuda")
    inputs = [x, 2**41 + 12345, 7]
    with use_options(backend="reference"):
        want = [_host(o) for o in fd.execute(inputs)]
    with use_options(backend="cuda"):
        got = [_host(o) for o in fd.execute(inputs)]
        again = [_host(o) for o in fd.execute(inputs)]
    _kernels_only(fd)
    for g, a in zip(got, again, strict=True):
        np.testing.assert_array_equal(g, a)  # the same seed gives the same bits
    if kind == "uniform":
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    else:
        rtol = 1e-6 if dtype == DataType.Double else (3e-6 if dtype == DataType.Float else 2**-7)
        np.testing.assert_allclose(got[0], want[0], rtol=rtol, atol=rtol)


def test_unseeded_draws_follow_torchs_generator_like_the_reference():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        u = fd.ops.uniform(fd.define_scalar(0.0), fd.define_scalar(1.0), t0.shape(), dtype=DataType.Float)
        fd.add_output(
            fd.ops.where(
                fd.ops.lt(u, fd.define_scalar(0.9)), fd.ops.mul(t0, fd.define_scalar(1 / 0.9)), fd.define_scalar(0.0)
            )
        )
    x = torch.randn(1024, 1000, device="cuda")
    outs = {}
    for backend in ("cuda", "reference", "cuda"):
        torch.manual_seed(2024)
        with use_options(backend=backend):
            outs.setdefault(backend, []).append(_host(fd.execute([x])[0]))
    np.testing.assert_array_equal(outs["cuda"][0], outs["reference"][0])
    np.testing.assert_array_equal(outs["cuda"][0], outs["cuda"][1])
    with use_options(backend="cuda"):
        first, second = (_host(fd.execute([x])[0]) for _ in range(2))
    _kernels_only(fd)
    assert not np.array_equal(first, second)  # each run advances the generator


@pytest.mark.parametrize("dtype", [DataType.Half, DataType.BFloat16, DataType.Float], ids=lambda d: d.name)
def test_a_large_uniform_range_stays_in_range_with_no_inputs(dtype):
    with FusionDefinition() as fd:
        shape = fd.define_vector([2**24], dtype=DataType.Int)
        fd.add_output(fd.ops.uniform(fd.define_scalar(-1.0), fd.define_scalar(1.0), shape=shape, dtype=dtype))
    with use_options(backend="cuda"):
        out = fd.execute([], device="cuda")[0]  # no inputs: the device asks for torch outputs
    _kernels_only(fd)
    assert isinstance(out, torch.Tensor) and out.is_cuda
    low = torch.tensor(-1.0, dtype=out.dtype)
    assert out.min().item() >= low.item() and out.max().item() < 1.0
    # A narrow draw that rounds to the top is folded to the bottom (as nvFuser does), which
    # moves the mean by about the type's spacing at 1.0.
    assert abs(out.double().mean().item()) < 1e-3 + torch.finfo(out.dtype).eps
