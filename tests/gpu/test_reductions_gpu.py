"""Reduction and normalization kernels on the GPU against the reference backend: random
fusions (seeded draws of the space CI covers with hypothesis) over rank, reduced axes,
keepdim, dtype and odd sizes; rows shorter and longer than a block; a grid reduction run
many times; a sum over more than 2^31 elements."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options

pytestmark = pytest.mark.gpu

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "codegen"))
from kernels_check import reduction_fusion  # noqa: E402
from test_cuda_backend import _compare, _host, _to_device  # noqa: E402

DTYPES = {"float32": DataType.Float, "float16": DataType.Half, "bfloat16": DataType.BFloat16}


def _inputs(rng, shape, dtype):
    return (rng.standard_normal(shape) + 0.25).astype(dtype.numpy)


def _check(fd, inputs, length):
    """Both backends; tolerances grow with the reduction length (float sums reassociate)."""
    with use_options(backend="reference"):
        expected = fd.execute(inputs)
    with use_options(backend="cuda"):
        got = fd.execute([_to_device(x) if isinstance(x, np.ndarray) else x for x in inputs])
    report = fd.executor_cache.last_report
    assert report.runtime.backend_name == "cuda"

    for g, e, tv in zip(got, expected, fd.fusion.outputs, strict=True):
        g = _host(g, tv.dtype).astype(np.float64)
        e = np.asarray(e).astype(np.float64)
        if tv.dtype.itemsize >= 4 and length > 4096:
            np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-4 * max(1.0, float(np.abs(e).max(initial=0))))
        else:
            _compare(g.astype(e.dtype), e, f"T{tv.name}", tv.dtype)
    return report


def _random_cases(count: int, seed: int = 2026) -> list[tuple]:
    """Random fusions drawn from a seeded generator (the GPU machine has no hypothesis; CI
    runs the hypothesis version of the same space on the interpreter)."""
    rng = np.random.default_rng(seed)
    cases = []
    while len(cases) < count:
        rank = int(rng.integers(1, 4))
        shape = [int(rng.choice([1, 3, 5, 32, 127, 1023])) for _ in range(rank)]
        if int(np.prod(shape)) == 1:
            continue
        axes = sorted({int(a) for a in rng.choice(rank, size=int(rng.integers(1, rank + 1)), replace=False)})
        op = str(rng.choice(["sum", "max", "min", "var_mean"]))
        cases.append((shape, axes, op, bool(rng.integers(2)), str(rng.choice(sorted(DTYPES))), bool(rng.integers(2))))
    return cases


@pytest.mark.parametrize(("shape", "axes", "op", "keepdim", "dtype", "normalize"), _random_cases(40))
def test_random_reductions_and_normalizations(shape, axes, op, keepdim, dtype, normalize):
    dt = DTYPES[dtype]
    fd = reduction_fusion(shape, axes, op, keepdim, dt, normalize)
    rng = np.random.default_rng(sum(shape) + len(axes))
    length = int(np.prod([shape[a] for a in axes]))
    _check(fd, [_inputs(rng, shape, dt)], length)


@pytest.mark.parametrize("row", [1, 3, 1023, 2**20 + 1])
@pytest.mark.parametrize("rows", [1, 7, 600])
def test_rows_shorter_and_longer_than_a_block(row, rows):
    if row * rows > 2**25:
        rows = 3
    rng = np.random.default_rng(row + rows)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        m = fd.ops.max(t0, [1])
        e = fd.ops.exp(fd.ops.sub(t0, fd.ops.broadcast_in_dim(m, shape=t0.shape(), broadcast_dims=[0])))
        s = fd.ops.sum(e, [1])
        fd.add_output(fd.ops.div(e, fd.ops.broadcast_in_dim(s, shape=t0.shape(), broadcast_dims=[0])))
        fd.add_output(fd.ops.sum(t0, [1]))
    _check(fd, [_inputs(rng, (rows, row), DataType.Float)], row)


def test_a_grid_reduction_gives_the_same_bits_every_time():
    """The work buffer and semaphores are reused: a semaphore left dirty would let a block
    finish early the next time and change the result."""
    import cupy

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.sum(t0, [0]))
    x = cupy.random.standard_normal((65536, 512), dtype=cupy.float32)
    with use_options(backend="cuda"):
        first = fd.execute([x])[0].get()
        steps = fd.executor_cache.last_runtime.executable.steps
        assert any(getattr(step, "kernel", None) and step.kernel.workspaces for step in steps), "no grid reduction"
        for _ in range(50):
            again = fd.execute([x])[0].get()
            np.testing.assert_array_equal(again, first)
    np.testing.assert_allclose(first, cupy.asnumpy(x.astype(cupy.float64).sum(axis=0)), rtol=1e-4, atol=1e-3)


def test_a_sum_of_more_than_2_pow_31_elements():
    import cupy

    n = 2**31 + 37
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Half)
        fd.add_output(fd.ops.sum(fd.ops.cast(t0, DataType.Float), [0]))
    x = cupy.random.random(n, dtype=cupy.float32).astype(cupy.float16)
    with use_options(backend="cuda"):
        (out,) = fd.execute([x])
    assert fd.executor_cache.last_runtime.signature.index_type == "int64"
    want = float(x.astype(cupy.float64).sum())
    assert abs(float(out.get()) - want) <= 1e-4 * abs(want)
    del x


@pytest.mark.parametrize(
    ("rows", "width", "warps", "rows_per_block"),
    [
        (300, 256, 2, 2),
        (600, 1712, 4, 1),
        (600, 2400, 3, 1),
        (600, 2048, 8, 1),
        (600, 16384, 16, 1),
        (600, 32768, 32, 1),
    ],
)
def test_a_block_max_reaches_every_lane_with_the_same_bits(rows, width, warps, rows_per_block):
    """x - max(x) over each row, exactly as the reference: a max is exact, so any lane that
    got another value than the row's max (a wrong warp combined, another row's block group)
    shows. Warps combine by shuffles for 2 to 32 warps, one after the other for 3; two rows
    to a block put the second row's warps at an offset in the scratch."""
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        top = fd.ops.broadcast_in_dim(fd.ops.max(x, dims=[1]), shape=[rows, width], broadcast_dims=[0])
        fd.add_output(fd.ops.sub(x, top))
    inputs = [_inputs(np.random.default_rng(width), (rows, width), DataType.Float)]
    with use_options(backend="reference"):
        (expected,) = fd.execute(inputs)
    with use_options(backend="cuda"):
        (got,) = fd.execute([_to_device(x) for x in inputs])
    (group,) = fd.executor_cache.last_report.runtime.segmented.groups
    assert (group.params.padded_threads, group.params.threads_iteration) == (32 * warps, rows_per_block)
    np.testing.assert_array_equal(_host(got, DataType.Float), np.asarray(expected))


@pytest.mark.parametrize(("width", "warps"), [(2400, 3), (2800, 11), (1500, 12), (2000, 8), (20000, 16)])
def test_block_reductions_over_any_number_of_warps(width, warps):
    """A row's max and sum read back into the row (reduced together, `blockReducePair`),
    whether the warps' results are combined by shuffles (a power-of-two number of warps)
    or one after the other (any other number)."""
    rows = 600
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        top = fd.ops.broadcast_in_dim(fd.ops.max(x, dims=[1]), shape=[rows, width], broadcast_dims=[0])
        total = fd.ops.broadcast_in_dim(fd.ops.sum(x, dims=[1]), shape=[rows, width], broadcast_dims=[0])
        fd.add_output(fd.ops.add(fd.ops.sub(x, top), total))
    report = _check(fd, [_inputs(np.random.default_rng(width), (rows, width), DataType.Float)], width)
    (group,) = report.runtime.segmented.groups
    assert group.params.padded_threads == 32 * warps


@pytest.mark.parametrize("divisor", ["row_max", "scalar_input"])
def test_a_division_by_a_row_value_has_the_bits_of_ieee_division(divisor):
    """x / max(x) per row and x / s (fuser_div_invariant: the divisor's reciprocal once per
    row, then a product and two FMAs) equal NumPy's float32 division bit for bit, with
    operands at zero, subnormal, beyond 2^+-62, infinite and NaN (the division itself),
    and rows whose maximum is subnormal or huge."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((64, 3001)) + 0.25).astype(np.float32)
    x[:, 0] = np.abs(x[:, 0]) + 4.0  # every row's maximum is positive
    x[1, 1:7] = [0.0, -0.0, 1e-40, np.inf, -np.inf, np.nan]
    x[2] *= np.float32(1e-30)
    x[3] *= np.float32(1e25)
    x[4] *= np.float32(1e-38)  # a row of subnormals and tiny normals
    x[5, 1:] = rng.uniform(1.0, 2.0, 3000).astype(np.float32)  # significands of one binade

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        if divisor == "row_max":
            s = fd.ops.broadcast_in_dim(fd.ops.max(t0, dims=[1]), shape=t0.shape(), broadcast_dims=[0])
            fd.add_output(fd.ops.div(t0, s))
            inputs = [x]
            with np.errstate(all="ignore"):
                expected = x / np.nanmax(np.where(np.isnan(x), -np.inf, x), axis=1, keepdims=True)
            expected[1] = np.nan  # the row with a NaN: its max is NaN (propagated)
        else:
            fd.add_output(fd.ops.div(t0, fd.define_scalar(dtype=DataType.Float)))
            inputs = [x, 1.7]
            with np.errstate(all="ignore"):
                expected = x / np.float32(1.7)
    with use_options(backend="cuda"):
        (got,) = fd.execute([_to_device(x), *inputs[1:]])
    assert fd.executor_cache.last_report.runtime.backend_name == "cuda"
    np.testing.assert_array_equal(
        _host(got, DataType.Float).view(np.uint32)[~np.isnan(expected)], expected.view(np.uint32)[~np.isnan(expected)]
    )
    assert np.array_equal(np.isnan(_host(got, DataType.Float)), np.isnan(expected))
