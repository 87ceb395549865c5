"""topk, argsort, cumsum, triu, sdpfa_fwd and sdpfa_bwd against NumPy or a formula on
random data in every dtype each takes, odd sizes and empty tensors; each runs as its
own expr_eval group; definition-time refusals name the op and tensor."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.ir.library import dropout_keep
from fuser_core.scheduler.base import SchedulerType

from ._helpers import MAIN_DTYPES, as_float64, assert_close, random_array, run_fusion, run_one

ORDERED = MAIN_DTYPES  # every real dtype has an order


def _expr_eval_groups(fd: FusionDefinition, inputs: list) -> int:
    groups = fd.runtime_for(inputs).segmented.groups
    return [g.scheduler for g in groups].count(SchedulerType.expr_eval)


# -- topk / argsort -------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ORDERED, ids=lambda d: d.name)
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize(("shape", "dim", "k"), [((5, 9), 1, 3), ((7, 3, 5), 0, 7), ((3, 4), -1, 0), ((0, 6), 1, 2)])
def test_topk(dtype, largest, shape, dim, k):
    x = random_array(np.random.default_rng(10), shape, dtype)
    (values, indices), fd = run_fusion(lambda fd, t: list(fd.ops.topk(t, k, dim, largest, True)), [x])
    keys = as_float64(x)
    order = np.argsort(-keys if largest else keys, axis=dim, kind="stable")
    expected_index = np.take(order, np.arange(k), axis=dim)
    np.testing.assert_array_equal(indices, expected_index)
    np.testing.assert_array_equal(values, np.take_along_axis(x, expected_index, axis=dim))
    assert indices.dtype == np.int64 and values.dtype == x.dtype
    assert _expr_eval_groups(fd, [x]) == 1 and "= topk( T0_g" in fd.fusion_ir()


def test_topk_k_as_a_runtime_scalar_is_checked_at_execution():
    x = random_array(np.random.default_rng(11), (4, 5), DataType.Float)
    (values, _), fd = run_fusion(lambda fd, t, k: list(fd.ops.topk(t, k, 1)), [x, 2])
    np.testing.assert_array_equal(values, -np.sort(-x, axis=1)[:, :2])
    with pytest.raises(FuserError, match=r"topk: k = 6 is out of range for axis 1 of T0 of size 5"):
        fd.execute([x, 6])


def test_topk_nan_is_the_largest():
    x = np.array([[1.0, np.nan, 3.0, 2.0]], np.float32)
    (values, indices), _ = run_fusion(lambda fd, t: list(fd.ops.topk(t, 2, 1)), [x])
    np.testing.assert_array_equal(indices, [[1, 2]])
    assert np.isnan(values[0, 0]) and values[0, 1] == 3.0


@pytest.mark.parametrize("dtype", ORDERED, ids=lambda d: d.name)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize(("shape", "dim"), [((5, 9), 1), ((7, 3, 5), 0), ((0, 4), 0), ((1,), 0)])
def test_argsort_is_a_stable_sort(dtype, descending, shape, dim):
    x = random_array(np.random.default_rng(12), shape, dtype, -2, 2)  # few distinct values: many ties
    out, fd = run_one(lambda fd, t: fd.ops.argsort(t, dim, descending, True), x)
    keys = as_float64(x)
    expected = np.argsort(-keys if descending else keys, axis=dim, kind="stable")
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.int64 and _expr_eval_groups(fd, [x]) == 1


# -- cumsum / triu ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize(("shape", "dim"), [((5, 9), 1), ((7, 3, 5), 0), ((3, 0), 1), ((11,), -1)])
def test_cumsum(dtype, shape, dim):
    x = random_array(np.random.default_rng(13), shape, dtype)
    out, fd = run_one(lambda fd, t: fd.ops.cumsum(t, dim), x)
    integral = dtype.is_integral or dtype.is_boolean
    expected = np.cumsum(x.astype(np.int64) if integral else as_float64(x), axis=dim)
    assert out.dtype == (np.int64 if integral else x.dtype)
    assert_close(out, expected, DataType.Int if integral else dtype)
    assert _expr_eval_groups(fd, [x]) == 1 and "= cumsum( T0_g" in fd.fusion_ir()


@pytest.mark.parametrize("dtype", MAIN_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("diagonal", [-1, 0, 2])
@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 2), (0, 3), (6, 1)])
def test_triu(dtype, diagonal, shape):
    x = random_array(np.random.default_rng(14), shape, dtype)
    out, fd = run_one(lambda fd, t: fd.ops.triu(t, diagonal), x)
    rows, cols = np.indices(shape[-2:])
    np.testing.assert_array_equal(out, np.where(cols - rows >= diagonal, x, np.zeros_like(x)))
    assert _expr_eval_groups(fd, [x]) == 1


# -- attention ----------------------------------------------------------------------------------------------
def _attention(q, k, v, scale, causal, keep=None, p=0.0):
    """Attention in float64: (output, logsumexp), an independent formula."""
    scores = np.einsum("nhle,nhse->nhls", q, k) * scale
    if causal:
        scores = np.where(np.tril(np.ones(scores.shape[-2:], bool)), scores, -np.inf)
    lse = np.log(np.exp(scores).sum(-1))
    probs = np.exp(scores - lse[..., None])
    if keep is not None:
        probs = probs * keep / (1 - p)
    return np.einsum("nhls,nhse->nhle", probs, v), lse


def _qkv(rng, dtype, n=2, h=3, lq=5, s=7, e=4, ev=6):
    return [random_array(rng, shape, dtype, -1, 1) for shape in ((n, h, lq, e), (n, h, s, e), (n, h, s, ev))]


ATTENTION_DTYPES = (DataType.Half, DataType.BFloat16)


@pytest.mark.parametrize("dtype", ATTENTION_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize(("causal", "scale"), [(False, None), (True, None), (False, 0.3), (True, 2.0)])
def test_sdpfa_fwd_without_dropout(dtype, causal, scale):
    q, k, v = _qkv(np.random.default_rng(15), dtype)
    outs, fd = run_fusion(lambda fd, a, b, c: list(fd.ops.sdpfa_fwd(a, b, c, 0.0, causal, scale)), [q, k, v])
    out, lse, seed, offset = outs
    used = scale if scale is not None else 1 / math.sqrt(q.shape[-1])
    expected, expected_lse = _attention(as_float64(q), as_float64(k), as_float64(v), used, causal)
    assert_close(out, expected, dtype)
    assert_close(lse, expected_lse, DataType.Float)
    assert out.dtype == q.dtype and lse.dtype == np.float32 and int(seed) == 0 and int(offset) == 0
    assert _expr_eval_groups(fd, [q, k, v]) == 1 and "= sdpa(T0_g" in fd.fusion_ir()


def test_sdpfa_fwd_dropout_drops_about_p_and_its_seed_reproduces_the_mask():
    q, k, v = _qkv(np.random.default_rng(16), DataType.Half, n=1, h=2, lq=64, s=64, e=8, ev=8)
    v = np.ones_like(v)  # each output entry is then the row's kept probability mass
    p = 0.25
    outs, fd = run_fusion(lambda fd, a, b, c: list(fd.ops.sdpfa_fwd(a, b, c, p, False, None)), [q, k, v])
    out, lse, seed, offset = outs
    keep = dropout_keep(int(seed), int(offset), (1, 2, 64, 64), p)
    assert abs(1 - keep.mean() - p) < 0.02  # about p of the probabilities dropped
    expected, expected_lse = _attention(as_float64(q), as_float64(k), as_float64(v), 1 / math.sqrt(8), False, keep, p)
    assert_close(out, expected, DataType.Half)
    assert_close(lse, expected_lse, DataType.Float)  # of the scores: dropout comes after it
    second = fd.execute([q, k, v])
    assert int(second[2]) != int(seed)  # a fresh seed per execution


@pytest.mark.parametrize("dtype", ATTENTION_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize(("causal", "p"), [(False, 0.0), (True, 0.0), (False, 0.3), (True, 0.2)])
def test_sdpfa_bwd_matches_the_gradient_of_attention(dtype, causal, p):
    rng = np.random.default_rng(17)
    q, k, v = _qkv(rng, dtype, n=1, h=2, lq=3, s=5, e=4, ev=3)
    grad = random_array(rng, (1, 2, 3, 3), dtype, -1, 1)

    def build(fd, a, b, c, g):
        out, lse, seed, offset = fd.ops.sdpfa_fwd(a, b, c, p, causal, None)
        return [*fd.ops.sdpfa_bwd(g, a, b, c, out, lse, p, causal, seed, offset, None), seed, offset]

    (gq, gk, gv, seed, offset), fd = run_fusion(build, [q, k, v, grad])
    keep = dropout_keep(int(seed), int(offset), (1, 2, 3, 5), p) if p else None
    scale = 1 / math.sqrt(4)
    g64 = as_float64(grad)
    base = [as_float64(t) for t in (q, k, v)]

    def loss(tensors):  # sum(output * grad): its gradient is what sdpfa_bwd returns
        return float((_attention(*tensors, scale, causal, keep, p)[0] * g64).sum())

    for which, actual in enumerate((gq, gk, gv)):
        numeric = np.zeros_like(base[which])
        for index in np.ndindex(*numeric.shape):
            up = [t.copy() for t in base]
            down = [t.copy() for t in base]
            up[which][index] += 1e-6
            down[which][index] -= 1e-6
            numeric[index] = (loss(up) - loss(down)) / 2e-6
        assert_close(actual, numeric, dtype)
    assert _expr_eval_groups(fd, [q, k, v, grad]) == 2


ATTENTION_REFUSALS = [
    ("Float query", "query T0 must be Half or BFloat16"),
    ("3-D key", "key T1 must be 4-D"),
    ("head dims differ", "the query/key head dimension"),
    ("dropout 1", "dropout_p must be in \\[0, 1\\)"),
    ("is_causal int", "is_causal must be a bool"),
]


@pytest.mark.parametrize(("case", "message"), ATTENTION_REFUSALS, ids=[c for c, _ in ATTENTION_REFUSALS])
def test_sdpfa_fwd_refusals(case, message):
    with pytest.raises(FuserError, match=f"sdpfa_fwd: .*{message}") as info, FusionDefinition() as fd:
        dtype = DataType.Float if case == "Float query" else DataType.Half
        q = fd.define_tensor([2, 3, 5, 4], dtype=dtype)
        key_shape = {"3-D key": [2, 3, 7], "head dims differ": [2, 3, 7, 8]}.get(case, [2, 3, 7, 4])
        k = fd.define_tensor(key_shape, dtype=DataType.Half)
        v = fd.define_tensor([2, 3, 7, 6], dtype=DataType.Half)
        causal = fd.define_scalar(None, dtype=DataType.Int) if case == "is_causal int" else False
        fd.ops.sdpfa_fwd(q, k, v, 1.0 if case == "dropout 1" else 0.0, causal, None)
    assert info.value.location is not None


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda fd, t: fd.ops.triu(fd.ops.sum(t, [0])), "triu: T1 must have at least 2 axes"),
        (lambda fd, t: fd.ops.topk(t, 9, 1), "topk: k = 9 is out of range for axis 1 of T0"),
        (lambda fd, t: fd.ops.topk(t, 2, 2), "topk: .*out of range"),
        (lambda fd, t: fd.ops.argsort(t, 0, descending=1), "argsort: descending must be True or False"),
        (lambda fd, t: fd.ops.cumsum(fd.ops.sum(t, [0, 1]), 0), "cumsum: T1 has no axis to scan"),
        (lambda fd, t: fd.ops.topk(t, 1.5, 0), "topk: k must be an integer scalar"),
    ],
)
def test_library_op_refusals(build, message):
    with pytest.raises(FuserError, match=message), FusionDefinition() as fd:
        build(fd, fd.define_tensor([4, 5]))
