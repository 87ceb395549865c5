"""Builders of the library ops (topk, argsort, cumsum, triu, sdpfa_fwd, sdpfa_bwd)
with their definition-time checks; fuser_core.ir.library evaluates them."""

from __future__ import annotations

from fuser_core.errors import FuserError
from fuser_core.ir.base import Val
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.library import ArgsortOp, CumsumOp, SdpaBwdOp, SdpaFwdOp, TopKOp, TriuOp
from fuser_core.ir.tensor_view import TensorDomain, TensorView
from fuser_core.ops.utils import check_same_static_size, new_output_id, normalize_axis, tv_name

ATTENTION_DTYPES = (DataType.Half, DataType.BFloat16)


def _like(tv: TensorView, dtype: DataType, replace: dict[int, IterDomain] | None = None) -> TensorView:
    ids = [
        replace[a] if replace and a in replace else new_output_id([d]) for a, d in enumerate(tv.logical_no_reductions())
    ]
    return TensorView(TensorDomain(ids), dtype)


def _integer_scalar(value: Val, op: str, what: str) -> None:
    if isinstance(value, TensorView) or not value.dtype.is_integral:
        raise FuserError(f"{what} must be an integer scalar, got {value}", op=op)


def _const(value: Val) -> int | None:
    return int(value.value) if getattr(value, "is_const", False) else None  # type: ignore[attr-defined]


def topk(tv: TensorView, k: Val, dim: int, largest: bool, sorted_: bool) -> tuple[TensorView, TensorView]:
    op = "topk"
    if tv.ndim == 0:
        raise FuserError(f"{tv_name(tv)} has no axis to pick from", op=op, tensor=tv_name(tv))
    dim = normalize_axis(dim, tv.ndim, op, tv)
    _integer_scalar(k, op, "k")
    if tv.dtype.is_complex:
        raise FuserError(f"complex {tv_name(tv)} has no order", op=op, tensor=tv_name(tv))
    axis = tv.logical_no_reductions()[dim]
    count, size = _const(k), _const(axis.maybe_expanded_extent)
    if count is not None and (count < 0 or (size is not None and count > size)):
        raise FuserError(f"k = {count} is out of range for axis {dim} of {tv_name(tv)} (size {size})", op=op)
    kept = {dim: IterDomain(k)}  # type: ignore[arg-type]
    values = _like(tv, tv.dtype, kept)
    indices = _like(tv, DataType.Int, {dim: IterDomain(k)})  # type: ignore[arg-type]
    TopKOp(values, indices, tv, k, dim, largest, sorted_)
    return values, indices


def argsort(tv: TensorView, dim: int, descending: bool, stable: bool) -> TensorView:
    op = "argsort"
    if tv.ndim == 0:
        raise FuserError(f"{tv_name(tv)} has no axis to sort", op=op, tensor=tv_name(tv))
    dim = normalize_axis(dim, tv.ndim, op, tv)
    if tv.dtype.is_complex:
        raise FuserError(f"complex {tv_name(tv)} has no order", op=op, tensor=tv_name(tv))
    out = _like(tv, DataType.Int)
    ArgsortOp(out, tv, dim, descending, stable)
    return out


def cumsum(tv: TensorView, dim: int) -> TensorView:
    op = "cumsum"
    if tv.ndim == 0:
        raise FuserError(f"{tv_name(tv)} has no axis to scan", op=op, tensor=tv_name(tv))
    dim = normalize_axis(dim, tv.ndim, op, tv)
    dtype = DataType.Int if tv.dtype.is_integral or tv.dtype.is_boolean else tv.dtype
    out = _like(tv, dtype)
    CumsumOp(out, tv, dim)
    return out


def triu(tv: TensorView, diagonal: Val) -> TensorView:
    op = "triu"
    if tv.ndim < 2:
        raise FuserError(f"{tv_name(tv)} must have at least 2 axes, has {tv.ndim}", op=op, tensor=tv_name(tv))
    _integer_scalar(diagonal, op, "diagonal")
    out = _like(tv, tv.dtype)
    TriuOp(out, tv, diagonal)
    return out


def _check_attention(tvs: list[tuple[TensorView, str]], op: str) -> None:
    for tv, what in tvs:
        if tv.ndim != 4:
            raise FuserError(
                f"{what} {tv_name(tv)} must be 4-D [N, H, L, E], has {tv.ndim} axes", op=op, tensor=tv_name(tv)
            )
        if tv.dtype not in ATTENTION_DTYPES:
            raise FuserError(
                f"{what} {tv_name(tv)} must be Half or BFloat16 (flash attention), got {tv.dtype!r}",
                op=op,
                tensor=tv_name(tv),
            )
    dtypes = {tv.dtype for tv, _ in tvs}
    if len(dtypes) > 1:
        raise FuserError(f"{', '.join(w for _, w in tvs)} must share one dtype, got {sorted(map(repr, dtypes))}", op=op)


def _same(pairs: list[tuple[TensorView, int]], what: str, op: str) -> None:
    check_same_static_size([(tv, tv.logical_no_reductions()[a]) for tv, a in pairs], what, op)


def _check_scalars(op: str, dropout_p: Val, is_causal: Val, scale: Val | None) -> None:
    if isinstance(dropout_p, TensorView) or not (dropout_p.dtype.is_floating or dropout_p.dtype.is_integral):
        raise FuserError(f"dropout_p must be a number, got {dropout_p}", op=op)
    p = getattr(dropout_p, "value", None) if getattr(dropout_p, "is_const", False) else None
    if p is not None and not 0.0 <= float(p) < 1.0:
        raise FuserError(f"dropout_p must be in [0, 1), got {p}", op=op)
    if isinstance(is_causal, TensorView) or not is_causal.dtype.is_boolean:
        raise FuserError(f"is_causal must be a bool, got {is_causal}", op=op)
    if scale is not None and (isinstance(scale, TensorView) or not scale.dtype.is_floating):
        raise FuserError(f"scale must be a floating-point scalar, got {scale}", op=op)


def sdpfa_fwd(
    q: TensorView, k: TensorView, v: TensorView, dropout_p: Val, is_causal: Val, scale: Val | None
) -> tuple[TensorView, TensorView, TensorView, TensorView]:
    op = "sdpfa_fwd"
    _check_attention([(q, "query"), (k, "key"), (v, "value")], op)
    _check_scalars(op, dropout_p, is_causal, scale)
    for a, what in ((0, "the batch axis 0"), (1, "the head axis 1")):
        _same([(q, a), (k, a), (v, a)], what, op)
    _same([(k, 2), (v, 2)], "the key/value sequence axis 2", op)
    _same([(q, 3), (k, 3)], "the query/key head dimension (axis 3)", op)
    qd, vd = q.logical_no_reductions(), v.logical_no_reductions()
    out = TensorView(TensorDomain([new_output_id([d]) for d in qd[:3]] + [new_output_id([vd[3]])]), q.dtype)
    lse = TensorView(TensorDomain([new_output_id([d]) for d in qd[:3]]), DataType.Float)
    seed = TensorView(TensorDomain([]), DataType.Int)
    offset = TensorView(TensorDomain([]), DataType.Int)
    SdpaFwdOp([out, lse, seed, offset], q, k, v, dropout_p, is_causal, scale)
    return out, lse, seed, offset


def sdpfa_bwd(
    grad_output: TensorView,
    q: TensorView,
    k: TensorView,
    v: TensorView,
    output: TensorView,
    logsumexp: TensorView,
    dropout_p: Val,
    is_causal: Val,
    philox_seed: TensorView,
    philox_offset: TensorView,
    scale: Val | None,
) -> tuple[TensorView, TensorView, TensorView]:
    op = "sdpfa_bwd"
    _check_attention([(grad_output, "grad_output"), (q, "query"), (k, "key"), (v, "value"), (output, "output")], op)
    _check_scalars(op, dropout_p, is_causal, scale)
    if logsumexp.ndim != 3 or logsumexp.dtype != DataType.Float:
        raise FuserError(
            f"logsumexp {tv_name(logsumexp)} must be 3-D [N, H, L] Float, got {logsumexp.ndim}-D {logsumexp.dtype!r}",
            op=op,
            tensor=tv_name(logsumexp),
        )
    for tv, what in ((philox_seed, "philox_seed"), (philox_offset, "philox_offset")):
        if tv.ndim != 0 or not tv.dtype.is_integral:
            raise FuserError(f"{what} {tv_name(tv)} must be a 0-D integer tensor (sdpfa_fwd's)", op=op)
    for a in range(4):
        _same([(grad_output, a), (output, a)], f"axis {a} of grad_output and output", op)
    for a in range(3):
        _same([(q, a), (output, a), (logsumexp, a)], f"axis {a} of query, output and logsumexp", op)
    _same([(k, 2), (v, 2)], "the key/value sequence axis 2", op)
    _same([(q, 3), (k, 3)], "the query/key head dimension (axis 3)", op)
    _same([(v, 3), (output, 3)], "the value/output head dimension (axis 3)", op)
    grads = [_like(t, t.dtype) for t in (q, k, v)]
    inputs = [grad_output, q, k, v, output, logsumexp, dropout_p, is_causal, philox_seed, philox_offset]
    SdpaBwdOp(grads, inputs + ([scale] if scale is not None else []), scale is not None)
    return grads[0], grads[1], grads[2]
