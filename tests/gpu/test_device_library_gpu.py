"""Library groups in a cuda run with torch CUDA inputs: each runs on the device through
its ATen call (the run's compile events say "library call on the device (torch)"),
with the reference backend's values (exact for the index ops, topk and argsort; close
for cumsum, index_put_accumulate and attention), flash attention where ATen has it,
and an out-of-range index is the reference's FuserError with the CUDA context intact."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition, use_options
from fuser_core.ir.dtype import dtype_from_numpy
from fuser_core.ir.rng import seeds_from
from fuser_core.runtime import device_library_torch

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch", reason="the torch device path needs torch")

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16)
INTS = (DataType.Int, DataType.Int32)
ALL = (*FLOATS, *INTS, DataType.Bool, DataType.ComplexFloat)
TOLERANCES = {
    np.dtype(np.float64): 1e-12,
    np.dtype(np.complex64): 1e-5,
    np.dtype(np.float32): 1e-5,
    np.dtype(np.float16): 2e-3,
    BF16: 2e-2,
}
ON_TORCH = "library call on the device (torch)"


@pytest.fixture(autouse=True)
def _torch_sees_the_gpu():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


def random_array(rng: np.random.Generator, shape: Sequence[int], dtype: DataType, low: float = -3, high: float = 3):
    if dtype.is_boolean:
        return rng.random(shape) < 0.5
    if dtype.is_integral:
        return rng.integers(int(low), int(high), size=shape, endpoint=True).astype(dtype.numpy)
    if dtype.is_complex:
        return (rng.uniform(low, high, shape) + 1j * rng.uniform(low, high, shape)).astype(dtype.numpy)
    return rng.uniform(low, high, shape).astype(dtype.numpy)


def distinct_array(rng: np.random.Generator, shape: Sequence[int], dtype: DataType) -> np.ndarray:
    values = rng.permutation(int(np.prod(shape, dtype=np.int64))) - 20
    return values.reshape(shape).astype(dtype.numpy)


def cuda(value: Any) -> Any:
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype == BF16:
        return torch.from_numpy(np.array(value.view(np.int16))).view(torch.bfloat16).cuda()
    return torch.from_numpy(np.array(value)).cuda()


def host(tensor: Any) -> np.ndarray:
    tensor = tensor.cpu()
    return tensor.view(torch.int16).numpy().view(BF16) if tensor.dtype == torch.bfloat16 else tensor.numpy()


def build(body: Callable[..., Any], inputs: Sequence[Any]) -> FusionDefinition:
    with FusionDefinition() as fd:
        handles = [
            fd.define_tensor([-1] * v.ndim, dtype=dtype_from_numpy(v.dtype))
            if isinstance(v, np.ndarray)
            else fd.define_scalar(None, dtype=DataType.Int)
            for v in inputs
        ]
        outs = body(fd, *handles)
        for out in outs if isinstance(outs, (list, tuple)) else [outs]:
            fd.add_output(out)
    return fd


def on_both(body: Callable[..., Any], inputs: Sequence[Any], exact: bool = True) -> tuple[list[np.ndarray], Any]:
    """The fusion on the reference (NumPy inputs) and in a cuda run (torch CUDA inputs):
    every group a torch library call, the same values. The cuda run's outputs and fd."""
    fd = build(body, inputs)
    with use_options(backend="reference"):
        want = fd.execute(list(inputs))
    with use_options(backend="cuda"):
        got = fd.execute([cuda(v) for v in inputs])
    events = fd.executor_cache.last_runtime.executable.compile_events()
    assert events and all(ON_TORCH in e for e in events), events
    assert all(isinstance(g, torch.Tensor) and g.is_cuda for g in got)
    got = [host(g) for g in got]
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact or g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            assert_close(g, w)
    return got, fd


def assert_close(got: np.ndarray, want: np.ndarray) -> None:
    wide = np.complex128 if got.dtype.kind == "c" else np.float64
    tol = TOLERANCES.get(got.dtype, 0)
    np.testing.assert_allclose(got.astype(wide), want.astype(wide), rtol=tol, atol=tol)


# -- indexing ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL, ids=lambda d: d.name)
def test_index_ops_on_the_device(dtype):
    rng = np.random.default_rng(1)
    x, src = random_array(rng, (6, 7), dtype), random_array(rng, (6, 7), dtype)
    i32 = rng.integers(0, 7, 9).astype(np.int32)
    on_both(lambda fd, t, j: fd.ops.index_select(t, j, 1), [x, i32])
    on_both(lambda fd, t, s: [fd.ops.select(t, s, 1), fd.ops.select(t, -1, 0)], [x, 3])
    on_both(lambda fd, t, j: fd.ops.gather(t, j, 0), [x, rng.integers(0, 6, (3, 4))])
    on_both(lambda fd, t, j: fd.ops.take_along_axis(t, j, 1), [x, rng.integers(0, 7, (6, 11))])
    distinct = np.stack([rng.permutation(7)[:3] for _ in range(6)])
    on_both(lambda fd, t, j, s: [fd.ops.scatter(t, j, s, 1), fd.ops.scatter(t, j, 1, 1)], [x, distinct, src])
    on_both(lambda fd, j, w: fd.ops.embedding_fwd(j, w, padding_idx=0), [rng.integers(0, 6, (3, 5)), x])


@pytest.mark.parametrize("dtype", (*FLOATS, *INTS), ids=lambda d: d.name)
def test_index_put_accumulate_on_the_device(dtype):
    rng = np.random.default_rng(2)
    acc, value = random_array(rng, (5, 3), dtype), random_array(rng, (8, 3), dtype)
    i = np.array([0, 4, 4, 2, 0, 0, 1, 4])
    on_both(lambda fd, a, j, v: fd.ops.index_put_accumulate(a, j, v), [acc, i, value], exact=False)


BAD_INDEX = [
    ("index_select", lambda fd, t, j: fd.ops.index_select(t, j, 0), [1, 5]),
    ("gather", lambda fd, t, j: fd.ops.gather(t, j, 1), [[0, 1], [-1, 0]]),
    ("scatter", lambda fd, t, j: fd.ops.scatter(t, j, 0.5, 0), [[0, 1, 2], [5, 0, 0]]),
    ("embedding_fwd", lambda fd, t, j: fd.ops.embedding_fwd(j, t), [3, 1 << 40]),
]


@pytest.mark.parametrize(("op", "body", "index"), BAD_INDEX, ids=[c[0] for c in BAD_INDEX])
def test_out_of_range_index_is_a_fuser_error_and_the_gpu_works_after(op, body, index):
    x = random_array(np.random.default_rng(3), (5, 3), DataType.Float)
    inputs = [x, np.array(index, np.int64)]
    fd = build(body, inputs)
    with pytest.raises(FuserError) as on_reference, use_options(backend="reference"):
        fd.execute(inputs)
    with pytest.raises(FuserError) as on_device, use_options(backend="cuda"):
        fd.execute([cuda(v) for v in inputs])
    assert on_device.value.op == on_reference.value.op == op and on_device.value.tensor == "T1"
    assert on_device.value.message == on_reference.value.message
    torch.cuda.synchronize()  # no sticky device error
    good = np.zeros_like(inputs[1])
    got, _ = on_both(body, [x, good])  # the same fusion, in range, still runs on the device
    assert got[0].size > 0


# -- sorting, scans, triangles -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", (*FLOATS, *INTS), ids=lambda d: d.name)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_on_the_device(dtype, largest):
    x = distinct_array(np.random.default_rng(4), (7, 33), dtype)
    on_both(lambda fd, t: [*fd.ops.topk(t, 5, 1, largest, True), *fd.ops.topk(t, 7, 0, largest, True)], [x])


@pytest.mark.parametrize("dtype", (*FLOATS, *INTS, DataType.Bool), ids=lambda d: d.name)
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_on_the_device(dtype, descending):
    ties = random_array(np.random.default_rng(5), (5, 300), dtype, -2, 2)
    on_both(lambda fd, t: [fd.ops.argsort(t, 1, descending, True), fd.ops.argsort(t, 0, descending, True)], [ties])
    if dtype != DataType.Bool:
        distinct = distinct_array(np.random.default_rng(6), (5, 40), dtype)
        on_both(lambda fd, t: fd.ops.argsort(t, 1, descending, False), [distinct])


@pytest.mark.parametrize("dtype", ALL, ids=lambda d: d.name)
def test_cumsum_and_triu_on_the_device(dtype):
    x = random_array(np.random.default_rng(7), (3, 9, 5), dtype)
    on_both(lambda fd, t: [fd.ops.cumsum(t, 1), fd.ops.cumsum(t, -1)], [x], exact=dtype.is_integral or dtype.is_boolean)
    on_both(lambda fd, t: [fd.ops.triu(t, -1), fd.ops.triu(t, 2)], [x])


# -- attention ---------------------------------------------------------------------------------------------------------
def _qkv(rng: np.random.Generator, dtype: DataType, e: int, ev: int, lq: int = 37, s: int = 45) -> list[np.ndarray]:
    shapes = ((2, 3, lq, e), (2, 3, s, e), (2, 3, s, ev))
    return [random_array(rng, shape, dtype, -1, 1) for shape in shapes]


@pytest.fixture
def flash_calls(monkeypatch):
    """What flash_attention_fits answered, call by call."""
    answers: list[bool] = []
    real = device_library_torch.flash_attention_fits

    def spy(*args: Any) -> bool:
        answers.append(real(*args))
        return answers[-1]

    monkeypatch.setattr(device_library_torch, "flash_attention_fits", spy)
    return answers


@pytest.mark.parametrize("dtype", (DataType.Half, DataType.BFloat16), ids=lambda d: d.name)
@pytest.mark.parametrize(
    ("e", "ev", "lq", "s"), [(64, 64, 37, 45), (40, 40, 45, 45), (36, 36, 45, 45), (16, 24, 37, 45)]
)
@pytest.mark.parametrize("causal", [False, True])
def test_sdpfa_fwd_and_bwd_without_dropout(dtype, e, ev, lq, s, causal, flash_calls):
    rng = np.random.default_rng(8)
    q, k, v = _qkv(rng, dtype, e, ev, lq, s)
    grad = random_array(rng, (2, 3, lq, ev), dtype, -1, 1)
    flash = e == ev and (lq == s or not causal)  # flash aligns a non-square causal mask bottom-right

    def body(fd, a, b, c, g):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(a, b, c, 0.0, causal, None)
        return [out, lse, seed, offset, *fd.ops.sdpfa_bwd(g, a, b, c, out, lse, 0.0, causal, seed, offset, None)]

    got, _ = on_both(body, [q, k, v, grad], exact=False)
    assert got[1].dtype == np.float32 and got[1].shape == (2, 3, lq) and int(got[2]) == int(got[3]) == 0
    assert flash_calls == [flash, flash]  # forward and backward


@pytest.mark.parametrize("dtype", (DataType.Half, DataType.BFloat16), ids=lambda d: d.name)
def test_sdpfa_dropout_uses_the_reference_mask_on_the_device(dtype, flash_calls):
    rng = np.random.default_rng(9)
    q, k, v = _qkv(rng, dtype, 32, 32)
    grad = random_array(rng, (2, 3, 37, 32), dtype, -1, 1)

    def body(fd, a, b, c, g):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(a, b, c, 0.25, True, 0.2)
        return [out, lse, seed, offset, *fd.ops.sdpfa_bwd(g, a, b, c, out, lse, 0.25, True, seed, offset, 0.2)]

    fd = build(body, [q, k, v, grad])
    with use_options(backend="cuda"):
        got = [host(t) for t in fd.execute([cuda(x) for x in (q, k, v, grad)])]
    assert all(ON_TORCH in e for e in fd.executor_cache.last_runtime.executable.compile_events())
    seed = int(got[2])
    with seeds_from(lambda n: (seed, 0)), use_options(backend="reference"):
        want = fd.execute([q, k, v, grad])
    assert int(want[2]) == seed and flash_calls == [False, False]
    for g, w in zip(got, want, strict=True):
        assert_close(g, w)
