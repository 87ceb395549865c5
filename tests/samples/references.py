"""Independent NumPy (float64) references for the bundled sample fusions.

One function per sample, registered under the sample's file stem in REFERENCES. It takes
the inputs the sample ran with, the outputs it returned and its FusionDefinition (for a
check that runs it again), computes the same math in float64 with NumPy, and raises
AssertionError naming the output and the worst element when a value is off.

The samples are big (up to 256 MiB an input), so the math runs in chunks along the first
axis of each output (`check_rows`, `sum_rows`): no float64 copy of a whole input exists.
Expected values are rounded to the output's storage dtype before they are compared, and
the tolerances are those of the output dtype (bf16: 2**-6 relative; float32: 1e-5).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np

BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.dtype(np.float32)
TOLERANCES = {BF16: (1.6e-2, 1e-5), F32: (1e-5, 1e-5)}  # (rtol, atol) by output dtype
CHUNK_ELEMENTS = 1 << 22  # elements of one float64 chunk: 32 MiB

Reference = Callable[[list[Any], list[np.ndarray], Any], None]
REFERENCES: dict[str, Reference] = {}


def reference(*names: str) -> Callable[[Reference], Reference]:
    """Register a check for the samples of these stems."""

    def register(fn: Reference) -> Reference:
        for name in names:
            REFERENCES[name] = fn
        return fn

    return register


# -- helpers ------------------------------------------------------------------------------


def f64(a: Any) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def row_chunks(shape: tuple[int, ...]) -> Iterator[slice]:
    """Slices of the first axis, each holding about CHUNK_ELEMENTS elements."""
    row_size = math.prod(shape[1:])
    step = max(1, CHUNK_ELEMENTS // max(row_size, 1))
    for start in range(0, shape[0], step):
        yield slice(start, min(start + step, shape[0]))


def check_rows(
    label: str,
    actual: np.ndarray,
    shape: tuple[int, ...],
    expected_rows: Callable[[slice], np.ndarray],
    dtype: np.dtype,
    rtol: float | None = None,
    atol: float | None = None,
) -> None:
    """`actual` has `shape` and `dtype`, and `actual[rows]` matches `expected_rows(rows)`
    (float64, rounded to `dtype` here) within `atol + rtol * |expected|`, chunk by chunk."""
    default_rtol, default_atol = TOLERANCES[dtype]
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    assert isinstance(actual, np.ndarray), f"{label}: a {type(actual).__name__}, not a NumPy array"
    assert actual.dtype == dtype, f"{label}: dtype {actual.dtype}, expected {dtype}"
    assert actual.shape == tuple(shape), f"{label}: shape {actual.shape}, expected {tuple(shape)}"
    bad, worst = 0, (-1.0, (), 0.0, 0.0)
    for rows in row_chunks(actual.shape):
        a = actual[rows].astype(np.float64)
        e = np.asarray(expected_rows(rows), dtype=np.float64).astype(dtype).astype(np.float64)
        assert e.shape == a.shape, f"{label}: the reference made {e.shape} for rows {rows}, not {a.shape}"
        err = np.abs(a - e)
        mismatch = ~(err <= atol + rtol * np.abs(e))  # a NaN anywhere is a mismatch
        bad += int(mismatch.sum())
        if mismatch.any():
            excess = np.where(mismatch, np.nan_to_num(err, nan=np.inf), -1.0)
            index = np.unravel_index(int(np.argmax(excess)), a.shape)
            if excess[index] > worst[0]:
                where = tuple(int(k) for k in (index[0] + rows.start, *index[1:]))
                worst = (float(excess[index]), where, float(a[index]), float(e[index]))
    assert bad == 0, (
        f"{label}: {bad} of {actual.size} elements differ from the float64 reference by more than "
        f"{atol} + {rtol} * |expected|; worst at {worst[1]}: got {worst[2]!r}, expected {worst[3]!r}"
    )


def check(label: str, actual: np.ndarray, expected: np.ndarray, dtype: np.dtype, **tolerance: float) -> None:
    """`check_rows` with the whole expected array at hand (for small outputs)."""
    check_rows(label, actual, expected.shape, lambda rows: expected[rows], dtype, **tolerance)


def sum_rows(n_rows: int, row_shape: tuple[int, ...], term: Callable[[slice], np.ndarray]) -> np.ndarray:
    """The float64 sum over the first axis of `term(rows)`, one chunk of rows at a time."""
    total = np.zeros(row_shape, dtype=np.float64)
    for rows in row_chunks((n_rows, *row_shape)):
        total += term(rows).sum(axis=0)
    return total


def expect_count(outputs: list[np.ndarray], count: int) -> None:
    assert len(outputs) == count, f"{len(outputs)} outputs, expected {count}"


def check_partials_by_finite_differences(
    label: str,
    actual: np.ndarray,
    loss_of_row: Callable[[int, np.ndarray], float],
    point_of_row: Callable[[int], np.ndarray],
    coordinates: Callable[[int], list[int]],
    rows: list[int],
    dtype: np.dtype,
    h: float = 1e-4,
) -> None:
    """Each sampled `actual[i, j]` is dL_i/dx_ij by central differences of the float64 loss
    of row i: a check of a backward that shares no formula with it (what autograd does)."""
    rtol, atol = TOLERANCES[dtype]
    failures = []
    for i in rows:
        x = point_of_row(i)
        for j in coordinates(i):
            step = np.zeros_like(x)
            step[j] = h
            partial = (loss_of_row(i, x + step) - loss_of_row(i, x - step)) / (2 * h)
            expected = float(np.float64(partial).astype(dtype).astype(np.float64))
            got = float(actual[i, j].astype(np.float64))
            if not abs(got - expected) <= atol + rtol * abs(expected):
                failures.append(f"[{i}, {j}] got {got!r}, finite differences give {partial!r}")
    assert not failures, f"{label}: {len(failures)} partial derivatives are off: {'; '.join(failures[:5])}"


def layer_norm_rows(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    """torch.nn.functional.layer_norm over the last axis, in float64."""
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * weight + bias


def softmax_rows(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def log_softmax_rows(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def torch_pad(a: np.ndarray, widths: list[int]) -> np.ndarray:
    """torch.nn.functional.pad with zeros: (low, high) pairs from the last axis back;
    a negative width trims."""
    for k in range(len(widths) // 2):
        axis = a.ndim - 1 - k
        low, high = widths[2 * k], widths[2 * k + 1]
        index = [slice(None)] * a.ndim
        index[axis] = slice(max(-low, 0), a.shape[axis] - max(-high, 0))
        a = a[tuple(index)]
        pads = [(0, 0)] * a.ndim
        pads[axis] = (max(low, 0), max(high, 0))
        a = np.pad(a, pads)
    return a


# -- the samples --------------------------------------------------------------------------


@reference("issue785_reduction_pow")
def issue785_reduction_pow(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    a, b = inputs
    expect_count(outputs, 2)
    check("T19 sum", outputs[0], sum_rows(a.shape[0], a.shape[1:], lambda r: f64(a[r])).sum(axis=0), F32)
    check_rows("T10 pow", outputs[1], b.shape, lambda r: f64(b[r]) ** 3, F32)


@reference("issue785_gelu_bias_bwd")
def issue785_gelu_bias_bwd(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    s0, s1, s2, s3 = inputs[:4]
    t4, t5, t6 = inputs[4:]
    expect_count(outputs, 2)

    def gelu_grad(rows: slice) -> np.ndarray:
        x, g = f64(t6[rows]), f64(t5[rows])
        tanh = np.tanh(0.797885 * (x + 0.0447150 * x**3))
        t30 = g * (0.5 * x) * (1 - tanh * tanh) * s3
        return t30 + t30 * s2 * s1 * x**2 + g * (1 + tanh) * s0

    bias_grad = sum_rows(t4.shape[0], t4.shape[1:], lambda r: f64(t4[r])).sum(axis=0)
    check("T19 bias grad", outputs[0], bias_grad, F32, rtol=1e-5, atol=1e-4)
    # float32 cancellation in 1 - tanh^2 near saturation, amplified by S1*S2*S3*T6^2:
    # a float32 evaluation of the same formula is 1.8e-4 off float64
    check_rows("T38 gelu grad", outputs[1], t6.shape, gelu_grad, F32, rtol=1e-5, atol=1e-3)


@reference("resize_pad_to_broadcast_dynamic")
def resize_pad_to_broadcast_dynamic(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    t0, t1 = inputs[:2]
    widths = list(inputs[2:])
    assert widths == [0, -1, 0, -4, 1, 1, -1, -1], widths
    expect_count(outputs, 1)
    assert torch_pad(t0[:1], widths).shape[1:] == (1, 4, 1, 5)
    check_rows("T3", outputs[0], t1.shape, lambda r: f64(t1[r]) * torch_pad(f64(t0[r]), widths), F32)


@reference("rope_litgpt", "rope_issue2795")
def rope(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    q, cos, sin = inputs
    n = cos.shape[-1]
    expect_count(outputs, 1)

    def roped(rows: slice) -> np.ndarray:
        block = f64(q[rows])
        x = block[..., :n]
        rotated = np.concatenate((-x[..., n // 2 :], x[..., : n // 2]), axis=-1)
        rotated_half = (x * f64(cos) + rotated * f64(sin)).astype(BF16).astype(np.float64)
        return np.concatenate((rotated_half, block[..., n:]), axis=-1)

    check_rows("q rope", outputs[0], q.shape, roped, BF16)


@reference("dynamic_reshape")
def dynamic_reshape(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    x, n_head = inputs
    b, t, c = x.shape
    expect_count(outputs, 2)

    def heads(rows: slice) -> np.ndarray:
        return f64(x[rows]).reshape(-1, t, n_head, c // n_head)

    def rstd(rows: slice) -> np.ndarray:
        x4 = heads(rows)
        return 1 / np.sqrt((x4 * x4).sum(axis=-1, keepdims=True) / x4.shape[-1] + 1e-6)

    def normalised(rows: slice) -> np.ndarray:
        return (heads(rows) * rstd(rows)).transpose(0, 2, 1, 3)

    check_rows("y", outputs[0], (b, n_head, t, c // n_head), normalised, F32)
    check_rows("rstd", outputs[1], (b, t, n_head, 1), rstd, F32)


@reference("linear_output_order")
def linear_output_order(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    x, w, bias = inputs
    expect_count(outputs, 1)
    logits = np.einsum("bmk,nk->bmn", f64(x), f64(w)) + f64(bias)
    check("logits", outputs[0], logits, F32, rtol=1e-5, atol=1e-4)
    assert outputs[0].flags["C_CONTIGUOUS"], f"logits are not row-major: strides {outputs[0].strides}"


@reference("softmax")
def softmax(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    (x,) = inputs
    expect_count(outputs, 1)
    check_rows("softmax", outputs[0], x.shape, lambda r: softmax_rows(f64(x[r]) * 0.0883883), BF16)


@reference("segment_set_log_softmax")
def segment_set_log_softmax(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    (x,) = inputs
    expect_count(outputs, 1)
    check_rows("log_softmax", outputs[0], x.shape, lambda r: log_softmax_rows(f64(x[r]) * 1.42857), BF16)


@reference("layer_norm_fwd")
def layer_norm_fwd(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    x, w, b = inputs
    n = x.shape[0]
    expect_count(outputs, 3)
    check_rows("y", outputs[0], x.shape, lambda r: layer_norm_rows(f64(x[r]), f64(w), f64(b), 1e-5), BF16)
    check_rows("mean", outputs[1], (n, 1), lambda r: f64(x[r]).mean(axis=1, keepdims=True), F32)
    check_rows("rstd", outputs[2], (n, 1), lambda r: 1 / np.sqrt(f64(x[r]).var(axis=1, keepdims=True) + 1e-5), F32)


@reference("rms_norm_fwd")
def rms_norm_fwd(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    x, w = inputs
    expect_count(outputs, 2)

    def rstd(rows: slice) -> np.ndarray:
        return 1 / np.sqrt((f64(x[rows]) ** 2).mean(axis=-1, keepdims=True) + 1e-6)

    check_rows("y", outputs[0], x.shape, lambda r: f64(x[r]) * rstd(r) * f64(w), BF16)
    check_rows("rstd", outputs[1], (x.shape[0], 1), rstd, F32)


@reference("var_mean")
def var_mean(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    (x,) = inputs
    stats_shape = (*x.shape[:2], 1)
    expect_count(outputs, 3)

    def var(rows: slice) -> np.ndarray:
        return f64(x[rows]).var(axis=2, ddof=1, keepdims=True)

    def mean(rows: slice) -> np.ndarray:
        return f64(x[rows]).mean(axis=2, keepdims=True)

    check_rows("var", outputs[0], stats_shape, var, F32)
    check_rows("mean", outputs[1], stats_shape, mean, F32)
    check_rows("z", outputs[2], x.shape, lambda r: (f64(x[r]) - mean(r)) / np.sqrt(var(r) + 1e-5), F32, atol=1e-4)


@reference("gelu_tanh_fwd")
def gelu_tanh_fwd(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    x, bias = inputs
    expect_count(outputs, 1)

    def gelu(rows: slice) -> np.ndarray:  # torch's gelu(approximate="tanh"), exact constants
        y = f64(x[rows]) + f64(bias)
        return 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y**3)))

    check_rows("gelu", outputs[0], x.shape, gelu, BF16)


@reference("transpose_add")
def transpose_add(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    x, y = inputs
    expect_count(outputs, 2)
    check_rows("x + y", outputs[0], x.shape, lambda r: f64(x[r]) + f64(y[r]), F32)
    check_rows("relu(y.T)", outputs[1], y.T.shape, lambda r: np.maximum(f64(y[:, r]).T, 0.0), F32)
    summed, relu = outputs
    assert summed.flags["F_CONTIGUOUS"] and not summed.flags["C_CONTIGUOUS"], (
        f"x + y must be column-major (stride_order [0, 1]): strides {summed.strides}"
    )
    assert relu.flags["C_CONTIGUOUS"], f"relu(y.T) must be row-major (stride_order [1, 0]): strides {relu.strides}"


@reference("bias_residual_layer_norm")
def bias_residual_layer_norm(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    h, bias, res, w, b = inputs
    expect_count(outputs, 2)

    def residual(rows: slice) -> np.ndarray:
        return f64(res[rows]) + (f64(h[rows]) + f64(bias))

    check_rows("residual", outputs[0], h.shape, residual, BF16)
    check_rows("y", outputs[1], h.shape, lambda r: layer_norm_rows(residual(r), f64(w), f64(b), 1e-5), BF16)


@reference("cross_entropy_bwd")
def cross_entropy_bwd(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    logits, labels, grad = inputs
    n, vocab = logits.shape
    expect_count(outputs, 1)
    assert labels.dtype == np.int64 and labels.min() >= 0 and labels.max() < vocab

    def dlogits(rows: slice) -> np.ndarray:
        d = softmax_rows(f64(logits[rows]))
        d[np.arange(d.shape[0]), labels[rows]] -= 1.0
        return d * f64(grad[rows])[:, None]

    # most of the gradient is ~1e-5 (softmax over 32064 tokens): bf16 keeps 8 bits of
    # those, so the absolute tolerance must sit well below them
    check_rows("dlogits", outputs[0], logits.shape, dlogits, BF16, atol=1e-8)

    def loss(i: int, z: np.ndarray) -> float:  # reduction="none": the row's own loss
        top = z.max()
        return float(grad[i].astype(np.float64) * (top + np.log(np.exp(z - top).sum()) - z[labels[i]]))

    rng = np.random.default_rng(0)
    check_partials_by_finite_differences(
        "dlogits (finite differences)",
        outputs[0],
        loss,
        lambda i: f64(logits[i]),
        lambda i: [int(labels[i]), *rng.integers(0, vocab, 4).tolist()],
        sorted(rng.choice(n, 8, replace=False).tolist()),
        BF16,
    )


def _layer_norm_backward(dy: Any, x: Any, mean: Any, rstd: Any, w: Any) -> tuple[Callable[[slice], np.ndarray], ...]:
    """The closed form for given statistics: grad input by rows, x_hat and dy by rows."""

    def xhat(rows: slice) -> np.ndarray:
        return (f64(x[rows]) - f64(mean[rows])) * f64(rstd[rows])

    def grad_input(rows: slice) -> np.ndarray:
        g, xh, r = f64(dy[rows]) * f64(w), xhat(rows), f64(rstd[rows])
        h = g.shape[1]
        return r / h * (h * g - g.sum(axis=1, keepdims=True) - xh * (g * xh).sum(axis=1, keepdims=True))

    return grad_input, xhat


@reference("layer_norm_bwd")
def layer_norm_bwd(inputs: list[Any], outputs: list[np.ndarray], fd: Any) -> None:
    dy, x, mean, rstd, w = inputs
    n, h = x.shape
    expect_count(outputs, 3)
    grad_input, xhat = _layer_norm_backward(dy, x, mean, rstd, w)
    check_rows("grad_input (closed form, given stats)", outputs[0], x.shape, grad_input, BF16)
    check("grad_weight", outputs[1], sum_rows(n, (h,), lambda r: f64(dy[r]) * xhat(r)), BF16)
    check("grad_bias", outputs[2], sum_rows(n, (h,), lambda r: f64(dy[r])), BF16)
    del outputs[:]  # free before running it again

    # and as the backward of layer_norm: with the statistics its forward would have saved
    # (the inputs' mean and rstd are random), against finite differences of the forward
    mean_saved = np.concatenate([f64(x[r]).mean(axis=1, keepdims=True) for r in row_chunks(x.shape)])
    var_saved = np.concatenate([f64(x[r]).var(axis=1, keepdims=True) for r in row_chunks(x.shape)])
    rstd_saved = 1 / np.sqrt(var_saved + 1e-5)
    again = fd.execute([dy, x, mean_saved.astype(np.float32), rstd_saved.astype(np.float32), w])
    expect_count(again, 3)

    def loss(i: int, row: np.ndarray) -> float:  # bias is zero: it does not change grad input
        return float((f64(dy[i]) * layer_norm_rows(row, f64(w), 0.0, 1e-5)).sum())

    rng = np.random.default_rng(0)
    check_partials_by_finite_differences(
        "grad_input (finite differences of layer_norm)",
        again[0],
        loss,
        lambda i: f64(x[i]),
        lambda i: rng.integers(0, h, 8).tolist(),
        sorted(rng.choice(n, 16, replace=False).tolist()),
        BF16,
    )
    grad_input, xhat = _layer_norm_backward(dy, x, mean_saved, rstd_saved, w)
    check_rows("grad_input (saved stats)", again[0], x.shape, grad_input, BF16)
    check("grad_weight (saved stats)", again[1], sum_rows(n, (h,), lambda r: f64(dy[r]) * xhat(r)), BF16)
    check("grad_bias (saved stats)", again[2], sum_rows(n, (h,), lambda r: f64(dy[r])), BF16)
