"""The torch device path of library groups (fuser_core.runtime.device_library_torch),
run on CPU torch tensors: every op against the reference backend's values (exact for
the index ops, topk and argsort; close for cumsum and attention), the reference's
FuserError for a bad index, and which groups device_path sends to torch or leaves on
the host. The CUDA run itself is tests/gpu/test_device_library_gpu.py."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.ir.dtype import dtype_from_numpy
from fuser_core.ir.rng import seeds_from
from fuser_core.ir.tensor_view import TensorView
from fuser_core.runtime.arguments import bind_args, convert_inputs
from fuser_core.runtime.device_library import device_path, run_on_device
from fuser_core.runtime.device_library_torch import flash_attention_fits, run_torch
from fuser_core.runtime.reference import bind_leaves, evaluate_fusion, leaf_values

torch = pytest.importorskip("torch", reason="the torch device path needs torch (CI has none)")

BF16 = np.dtype(ml_dtypes.bfloat16)


@pytest.fixture(autouse=True)
def _torch_counts_as_cuda(monkeypatch):
    """device_path takes the torch path only for a torch that sees a GPU; here CPU
    tensors stand in for the device's."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


def test_a_cpu_only_torch_leaves_library_groups_on_the_host(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True)
        t1 = fd.define_tensor(shape=[-1], contiguity=True, dtype=DataType.Int)
        fd.add_output(fd.ops.index_select(t0, t1, 0))
    assert device_path(fd.fusion) is None


FLOATS = (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16)
INTS = (DataType.Int, DataType.Int32)
MAIN = (*FLOATS, *INTS, DataType.Bool)
TOLERANCES = {DataType.Double: 1e-12, DataType.Float: 1e-5, DataType.Half: 2e-3, DataType.BFloat16: 2e-2}


# -- helpers ---------------------------------------------------------------------------------------------------
def random_array(rng: np.random.Generator, shape: Sequence[int], dtype: DataType, low: float = -3, high: float = 3):
    if dtype.is_boolean:
        return rng.random(shape) < 0.5
    if dtype.is_integral:
        return rng.integers(int(low), int(high), size=shape, endpoint=True).astype(dtype.numpy)
    return rng.uniform(low, high, shape).astype(dtype.numpy)


def distinct_array(rng: np.random.Generator, shape: Sequence[int], dtype: DataType) -> np.ndarray:
    """No two entries equal (exactly representable in every dtype): orders have no ties."""
    values = rng.permutation(int(np.prod(shape, dtype=np.int64))) - 20
    return values.reshape(shape).astype(dtype.numpy)


def to_torch(array: Any) -> Any:
    array = np.asarray(array)
    if array.dtype == BF16:
        return torch.from_numpy(np.array(array.view(np.int16))).view(torch.bfloat16)
    return torch.from_numpy(np.array(array))


def to_numpy(tensor: Any) -> np.ndarray:
    if tensor.dtype == torch.bfloat16:
        return tensor.view(torch.int16).numpy().view(BF16)
    return tensor.numpy()


def define(fd: FusionDefinition, value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return fd.define_tensor([-1] * value.ndim, dtype=dtype_from_numpy(value.dtype))
    return fd.define_scalar(None, dtype=DataType.Int)


def build(body: Callable[..., Any], inputs: Sequence[Any]) -> FusionDefinition:
    with FusionDefinition() as fd:
        outs = body(fd, *[define(fd, v) for v in inputs])
        for out in outs if isinstance(outs, (list, tuple)) else [outs]:
            fd.add_output(out)
    return fd


def run_groups(fd: FusionDefinition, inputs: Sequence[Any]) -> tuple[list[np.ndarray], list[str | None]]:
    """The fusion group by group as the cuda backend runs it, with CPU torch tensors in
    place of device arrays: "torch" groups through run_torch, the others on the reference."""
    complete = fd.runtime_for(list(inputs)).segmented.complete
    leaves = leaf_values(complete, bind_args(complete, convert_inputs(complete, list(inputs)), values=False))
    tensors = {
        tv.name: to_torch(v) for tv, v in zip(complete.inputs, inputs, strict=True) if isinstance(tv, TensorView)
    }
    paths = []
    for group in fd.runtime_for(list(inputs)).segmented.groups:
        fusion = group.unscheduled
        paths.append(device_path(fusion))
        if paths[-1] == "torch":
            run_torch(fusion, tensors, leaves)
        else:
            _run_on_reference(fusion, tensors, leaves)
    return [to_numpy(tensors[out.name]) for out in complete.outputs], paths


def _run_on_reference(fusion: Any, tensors: dict[int, Any], leaves: dict[int, Any]) -> None:
    ev = bind_leaves(fusion, leaves)
    for tv in fusion.inputs:
        if isinstance(tv, TensorView):
            ev.bind(tv, to_numpy(tensors[tv.name]))
    for out, value in zip(fusion.outputs, evaluate_fusion(fusion, ev), strict=True):
        tensors[out.name] = to_torch(value)


def compare(body: Callable[..., Any], inputs: Sequence[Any], exact: bool = True) -> list[np.ndarray]:
    """Run through torch and on the reference; every group must have gone to torch."""
    fd = build(body, inputs)
    got, paths = run_groups(fd, inputs)
    want = fd.execute(list(inputs))
    assert paths and all(p == "torch" for p in paths), paths
    for g, w in zip(got, want, strict=True):
        assert g.dtype == w.dtype and g.shape == w.shape
        if exact or g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            dtype = next(d for d in FLOATS if d.value.numpy == g.dtype)
            tol = TOLERANCES[dtype]
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=tol, atol=tol)
    return got


# -- indexing: exact ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", MAIN, ids=lambda d: d.name)
@pytest.mark.parametrize("index_dtype", INTS, ids=lambda d: d.name)
def test_index_select(dtype, index_dtype):
    rng = np.random.default_rng(1)
    x, i = random_array(rng, (5, 7), dtype), rng.integers(0, 7, 9).astype(index_dtype.numpy)
    compare(lambda fd, t, j: fd.ops.index_select(t, j, 1), [x, i])


def test_index_select_with_a_0d_index_keeps_the_axis():
    x = random_array(np.random.default_rng(2), (4, 3), DataType.Float)
    (out,) = compare(lambda fd, t, j: fd.ops.index_select(t, j, 0), [x, np.array(2)])
    assert out.shape == (1, 3)


@pytest.mark.parametrize("dtype", MAIN, ids=lambda d: d.name)
def test_select_positive_and_negative_index(dtype):
    x = random_array(np.random.default_rng(3), (3, 5, 7), dtype)
    compare(lambda fd, t, s: [fd.ops.select(t, s, 1), fd.ops.select(t, -1, 2)], [x, 3])


@pytest.mark.parametrize("dtype", MAIN, ids=lambda d: d.name)
def test_gather_and_take_along_axis(dtype):
    rng = np.random.default_rng(4)
    x = random_array(rng, (5, 7), dtype)
    small = rng.integers(0, 5, (3, 4))
    along = rng.integers(0, 7, (5, 11)).astype(np.int32)
    compare(lambda fd, t, j: fd.ops.gather(t, j, 0), [x, small])
    compare(lambda fd, t, j: fd.ops.take_along_axis(t, j, 1), [x, along])


@pytest.mark.parametrize("dtype", MAIN, ids=lambda d: d.name)
def test_scatter_tensor_and_scalar_src(dtype):
    rng = np.random.default_rng(5)
    x, src = random_array(rng, (6, 5), dtype), random_array(rng, (6, 5), dtype)
    i = np.stack([rng.permutation(5)[:3] for _ in range(6)])  # distinct per row: no write races
    compare(lambda fd, t, j, s: [fd.ops.scatter(t, j, s, 1), fd.ops.scatter(t, j, 1, 1)], [x, i, src])


def test_scatter_with_an_index_numpy_broadcasts_keeps_the_reference_semantics():
    rng = np.random.default_rng(6)
    x, src = random_array(rng, (4, 5), DataType.Float), random_array(rng, (4, 5), DataType.Float)
    i = np.array([[4, 0]])  # one row: the reference broadcasts it over x's 4 rows, ATen would not
    (out,) = compare(lambda fd, t, j, s: fd.ops.scatter(t, j, s, 1), [x, i, src])
    np.testing.assert_array_equal(out[:, [4, 0]], np.broadcast_to(src[:1, :2], (4, 2)))


@pytest.mark.parametrize("dtype", (*FLOATS, *INTS), ids=lambda d: d.name)
def test_index_put_accumulate_adds_repeated_rows(dtype):
    rng = np.random.default_rng(7)
    acc, value = random_array(rng, (5, 3), dtype), random_array(rng, (8, 3), dtype)
    i = np.array([0, 4, 4, 2, 0, 0, 1, 4])
    compare(lambda fd, a, j, v: fd.ops.index_put_accumulate(a, j, v), [acc, i, value], exact=False)


@pytest.mark.parametrize("dtype", MAIN, ids=lambda d: d.name)
def test_embedding_fwd(dtype):
    rng = np.random.default_rng(8)
    ids, weight = rng.integers(0, 11, (3, 5)), random_array(rng, (11, 6), dtype)
    compare(lambda fd, i, w: [fd.ops.embedding_fwd(i, w), fd.ops.embedding_fwd(i, w, padding_idx=0)], [ids, weight])


BAD_INDEX = [
    ("index_select", lambda fd, t, j: fd.ops.index_select(t, j, 0), [1, 5]),
    ("gather", lambda fd, t, j: fd.ops.gather(t, j, 1), [[0, 1], [-1, 0]]),
    ("take_along_axis", lambda fd, t, j: fd.ops.take_along_axis(t, j, 1), [[0, 0, 0]] * 4 + [[0, 3, 0]]),
    ("scatter", lambda fd, t, j: fd.ops.scatter(t, j, 0.5, 0), [[0, 1, 2], [5, 0, 0]]),
    ("index_put_accumulate", None, [1, 7]),
    ("embedding_fwd", lambda fd, t, j: fd.ops.embedding_fwd(j, t), [3, 9]),
]


@pytest.mark.parametrize(("op", "body", "index"), BAD_INDEX, ids=[c[0] for c in BAD_INDEX])
def test_out_of_range_index_is_the_reference_fuser_error(op, body, index):
    x = random_array(np.random.default_rng(9), (5, 3), DataType.Float)
    inputs: list[Any] = [x, np.array(index, np.int64)]
    if body is None:  # index_put_accumulate takes a value too
        inputs.append(random_array(np.random.default_rng(9), (2, 3), DataType.Float))
        body = lambda fd, a, j, v: fd.ops.index_put_accumulate(a, j, v)  # noqa: E731
    fd = build(body, inputs)
    with pytest.raises(FuserError) as on_torch:
        run_groups(fd, inputs)
    with pytest.raises(FuserError) as on_reference:
        fd.execute(inputs)
    assert on_torch.value.op == on_reference.value.op == op
    assert on_torch.value.tensor == on_reference.value.tensor == "T1"
    assert on_torch.value.message == on_reference.value.message and "out of range" in on_torch.value.message


def test_select_out_of_range_and_topk_k_out_of_range_are_the_reference_errors():
    x = random_array(np.random.default_rng(10), (3, 4), DataType.Float)
    for body, bad in ((lambda fd, t, s: fd.ops.select(t, s, 1), 4), (lambda fd, t, k: list(fd.ops.topk(t, k, 1)), 5)):
        fd = build(body, [x, 1])
        with pytest.raises(FuserError) as on_torch:
            run_groups(fd, [x, bad])
        with pytest.raises(FuserError) as on_reference:
            fd.execute([x, bad])
        assert on_torch.value.message == on_reference.value.message and on_torch.value.op == on_reference.value.op


# -- sorting, scans, triangles -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", (*FLOATS, *INTS), ids=lambda d: d.name)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize(("shape", "dim", "k"), [((5, 9), 1, 3), ((7, 3, 5), 0, 7), ((3, 4), -1, 0), ((0, 6), 1, 2)])
def test_topk_values_and_indices(dtype, largest, shape, dim, k):
    x = distinct_array(np.random.default_rng(11), shape, dtype)
    compare(lambda fd, t: list(fd.ops.topk(t, k, dim, largest, True)), [x])


def test_topk_with_ties_picks_entries_of_the_same_values():
    x = np.array([[1, 3, 3, 2, 3, 1]], np.int32)
    fd = build(lambda fd, t: list(fd.ops.topk(t, 3, 1)), [x])
    (values, indices), _ = run_groups(fd, [x])
    np.testing.assert_array_equal(values, [[3, 3, 3]])
    assert sorted(indices[0]) == [1, 2, 4]


def test_topk_nan_is_the_largest():
    x = np.array([[1.0, np.nan, 3.0, 2.0]], np.float32)
    fd = build(lambda fd, t: list(fd.ops.topk(t, 2, 1)), [x])
    (values, indices), _ = run_groups(fd, [x])
    np.testing.assert_array_equal(indices, [[1, 2]])
    assert np.isnan(values[0, 0]) and values[0, 1] == 3.0


@pytest.mark.parametrize("dtype", MAIN, ids=lambda d: d.name)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize(("shape", "dim"), [((5, 9), 1), ((7, 3, 5), 0), ((0, 4), 0), ((1,), 0)])
def test_argsort_stable_matches_exactly(dtype, descending, shape, dim):
    x = random_array(np.random.default_rng(12), shape, dtype, -2, 2)  # few distinct values: many ties
    compare(lambda fd, t: fd.ops.argsort(t, dim, descending, True), [x])


def test_argsort_unstable_matches_where_there_are_no_ties():
    x = distinct_array(np.random.default_rng(13), (6, 17), DataType.Float)
    compare(lambda fd, t: [fd.ops.argsort(t, 1, True, False), fd.ops.argsort(t, 0, False, False)], [x])


@pytest.mark.parametrize("dtype", MAIN, ids=lambda d: d.name)
@pytest.mark.parametrize(("shape", "dim"), [((5, 9), 1), ((7, 3, 5), 0), ((3, 0), 1), ((11,), -1)])
def test_cumsum(dtype, shape, dim):
    x = random_array(np.random.default_rng(14), shape, dtype)
    (out,) = compare(lambda fd, t: fd.ops.cumsum(t, dim), [x], exact=False)
    assert out.dtype == (np.int64 if dtype in (*INTS, DataType.Bool) else x.dtype)


@pytest.mark.parametrize("dtype", MAIN, ids=lambda d: d.name)
@pytest.mark.parametrize("diagonal", [-1, 0, 2])
@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 2), (0, 3), (6, 1)])
def test_triu(dtype, diagonal, shape):
    compare(lambda fd, t: fd.ops.triu(t, diagonal), [random_array(np.random.default_rng(15), shape, dtype)])


# -- attention (the math path off CUDA) -----------------------------------------------------------------------
def _qkv(rng: np.random.Generator, dtype: DataType, n=2, h=3, lq=5, s=7, e=4, ev=6) -> list[np.ndarray]:
    return [random_array(rng, shape, dtype, -1, 1) for shape in ((n, h, lq, e), (n, h, s, e), (n, h, s, ev))]


@pytest.mark.parametrize("dtype", (DataType.Half, DataType.BFloat16), ids=lambda d: d.name)
@pytest.mark.parametrize(("causal", "scale"), [(False, None), (True, None), (False, 0.3), (True, 2.0)])
def test_sdpfa_fwd_without_dropout(dtype, causal, scale):
    q, k, v = _qkv(np.random.default_rng(16), dtype)
    _, lse, seed, offset = compare(
        lambda fd, a, b, c: list(fd.ops.sdpfa_fwd(a, b, c, 0.0, causal, scale)), [q, k, v], exact=False
    )
    assert lse.dtype == np.float32 and lse.shape == (2, 3, 5) and int(seed) == int(offset) == 0


@pytest.mark.parametrize("dtype", (DataType.Half, DataType.BFloat16), ids=lambda d: d.name)
@pytest.mark.parametrize(("causal", "p"), [(False, 0.0), (True, 0.0), (False, 0.3), (True, 0.2)])
def test_sdpfa_fwd_and_bwd_with_the_reference_seed_and_mask(dtype, causal, p):
    rng = np.random.default_rng(17)
    q, k, v = _qkv(rng, dtype, n=1, h=2, lq=6, s=5, e=4, ev=4)
    grad = random_array(rng, (1, 2, 6, 4), dtype, -1, 1)

    def body(fd, a, b, c, g):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(a, b, c, p, causal, None)
        return [out, lse, *fd.ops.sdpfa_bwd(g, a, b, c, out, lse, p, causal, seed, offset, None), seed, offset]

    with seeds_from(lambda n: (1234, 0)):  # both runs draw the same Philox seed: the same dropout mask
        got = compare(body, [q, k, v, grad], exact=False)
    assert int(got[-2]) == (1234 if p else 0)


# -- the CuPy wrapper, with NumPy standing in for CuPy (both speak DLPack) ---------------------------------------
class NumpyAsCupy:
    uint16, bool_ = np.uint16, np.bool_

    @staticmethod
    def from_dlpack(tensor: Any) -> np.ndarray:
        return np.from_dlpack(tensor)


def test_run_on_device_hands_bf16_and_bool_over_as_bits():
    rng = np.random.default_rng(18)
    x = random_array(rng, (4, 6), DataType.BFloat16)
    mask = random_array(rng, (4, 6), DataType.Bool)
    fd = build(lambda fd, t, m: [fd.ops.topk(t, 2, 1)[0], fd.ops.triu(m, 0)], [x, mask])
    complete = fd.runtime_for([x, mask]).segmented.complete
    leaves = leaf_values(complete, bind_args(complete, convert_inputs(complete, [x, mask]), values=False))
    tensors: dict[int, Any] = {complete.inputs[0].name: x.view(np.uint16), complete.inputs[1].name: mask}
    for group in fd.runtime_for([x, mask]).segmented.groups:
        assert device_path(group.unscheduled) == "torch"
        run_on_device(group.unscheduled, "torch", tensors, NumpyAsCupy, leaves)
    top, upper = (tensors[out.name] for out in complete.outputs)
    assert top.dtype == np.uint16 and upper.dtype == np.bool_
    want = fd.execute([x, mask])
    np.testing.assert_array_equal(top.view(BF16), want[0])
    np.testing.assert_array_equal(upper, want[1])


# -- which groups go where ------------------------------------------------------------------------------------------
def _only_group(body: Callable[..., Any], inputs: Sequence[Any]) -> Any:
    groups = build(body, inputs).runtime_for(list(inputs)).segmented.groups
    assert len(groups) == 1
    return groups[0].unscheduled


def _fp8(shape: Sequence[int]) -> np.ndarray:
    return np.zeros(shape, ml_dtypes.float8_e4m3fn)


IDX = np.zeros(2, np.int64)


DECISIONS = [
    ("index_select", lambda fd, t, j: fd.ops.index_select(t, j, 0), [np.ones((3, 2), np.float32), IDX], "torch"),
    ("topk float", lambda fd, t: list(fd.ops.topk(t, 1, 0)), [np.ones(3, np.float32)], "torch"),
    ("topk bool: no rule", lambda fd, t: list(fd.ops.topk(t, 1, 0)), [np.ones(3, bool)], None),
    ("index_select fp8", lambda fd, t, j: fd.ops.index_select(t, j, 0), [_fp8((3, 2)), IDX], None),
    ("cumsum complex", lambda fd, t: fd.ops.cumsum(t, 0), [np.ones(3, np.complex64)], "torch"),
    (
        "index_put complex: no rule",
        lambda fd, a, j, v: fd.ops.index_put_accumulate(a, j, v),
        [np.ones((3, 2), np.complex64), IDX, np.ones((2, 2), np.complex64)],
        None,
    ),
    ("bf16 matmul", lambda fd, a, b: fd.ops.matmul(a, b), [np.ones((2, 3), BF16), np.ones((3, 4), BF16)], "torch"),
]


@pytest.mark.parametrize(("case", "body", "inputs", "path"), DECISIONS, ids=[c[0] for c in DECISIONS])
def test_device_path_with_torch_loaded(case, body, inputs, path):
    assert device_path(_only_group(body, inputs)) == path


def test_without_torch_only_matmul_leaves_the_host(monkeypatch):
    f32 = [np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)]
    matmul = _only_group(lambda fd, a, b: fd.ops.matmul(a, b), f32)
    bf16_matmul = _only_group(lambda fd, a, b: fd.ops.matmul(a, b), [a.astype(BF16) for a in f32])
    topk = _only_group(lambda fd, t: list(fd.ops.topk(t, 1, 0)), [np.ones(3, np.float32)])
    monkeypatch.delitem(sys.modules, "torch")
    assert device_path(matmul) == "cupy"
    assert device_path(bf16_matmul) is None  # CuPy has no bf16 matmul
    assert device_path(topk) is None


def test_a_group_with_a_non_library_op_stays_on_the_host():
    fd = build(lambda fd, t, j: fd.ops.exp(fd.ops.index_select(t, j, 0)), [np.ones((3, 2), np.float32), IDX])
    complete = fd.runtime_for([np.ones((3, 2), np.float32), np.zeros(2, np.int64)]).segmented.complete
    assert device_path(complete) is None  # the whole fusion, as one group: exp has no library call


# -- when attention takes flash (decided on shapes: checked here with stand-ins for CUDA tensors) -------------------
class FakeCudaTorch:
    class cuda:  # named as torch.cuda
        @staticmethod
        def get_device_capability(device: Any) -> tuple[int, int]:
            return (9, 0)


def _on_cuda(*shape: int) -> Any:
    return SimpleNamespace(shape=shape, device=SimpleNamespace(type="cuda"))


FLASH_CASES = [
    # (query/key head dim, key length, value head dim); 8 queries
    ("plain", (8, 8, 8), 0.0, False, True),
    ("causal square", (8, 8, 8), 0.0, True, True),
    ("causal, more keys than queries: flash aligns it bottom-right", (8, 9, 8), 0.0, True, False),
    ("not causal, more keys", (8, 9, 8), 0.0, False, True),
    ("dropout: the reference's Philox mask", (8, 8, 8), 0.1, False, False),
    ("value head dim differs", (8, 8, 16), 0.0, False, False),
    ("head dim 36: padded to 40", (36, 8, 36), 0.0, False, True),
    ("head dim 264", (264, 8, 264), 0.0, False, False),
]


@pytest.mark.parametrize(("case", "dims", "p", "causal", "flash"), FLASH_CASES, ids=[c[0] for c in FLASH_CASES])
def test_flash_attention_fits(case, dims, p, causal, flash):
    e, s, ev = dims
    q, k, v = _on_cuda(2, 3, 8, e), _on_cuda(2, 3, s, e), _on_cuda(2, 3, s, ev)
    assert flash_attention_fits(FakeCudaTorch, q, k, v, p, causal) is flash


def test_flash_attention_needs_cuda():
    q = torch.zeros(1, 1, 4, 8, dtype=torch.float16)
    assert not flash_attention_fits(torch, q, q, q, 0.0, False)
