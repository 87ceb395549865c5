"""Builders of the indexing ops, with their definition-time checks (index dtype and
rank, static sizes that cannot fit). Out-of-range index values are checked when the
op is evaluated (fuser_core.ir.indexing)."""

from __future__ import annotations

from fuser_core.errors import FuserError
from fuser_core.ir.base import Val, current_fusion
from fuser_core.ir.dtype import DataType
from fuser_core.ir.indexing import (
    EmbeddingFwdOp,
    GatherOp,
    IndexPutAccumulateOp,
    IndexSelectOp,
    ScatterOp,
    SelectOp,
)
from fuser_core.ir.iter_domain import IterDomain, IterType
from fuser_core.ir.tensor_view import TensorDomain, TensorView
from fuser_core.ops.utils import cast_constant, check_same_static_size, new_output_id, normalize_axis, tv_name

INDEX_DTYPES = (DataType.Int, DataType.Int32)


def _check_index(index: Val, op: str, arg: str = "index") -> None:
    if index.dtype not in INDEX_DTYPES:
        raise FuserError(
            f"{arg} {tv_name(index)} must be Int or Int32, got {index.dtype!r}", op=op, tensor=tv_name(index)
        )


def _check_rank(tv: TensorView, rank: int, op: str, what: str) -> None:
    if tv.ndim != rank:
        raise FuserError(f"{what} {tv_name(tv)} must have {rank} axes, has {tv.ndim}", op=op, tensor=tv_name(tv))


def _out(ids: list[list[IterDomain]], dtype: DataType) -> TensorView:
    return TensorView(TensorDomain([new_output_id(group) for group in ids]), dtype)


def _larger(a: IterDomain, b: IterDomain) -> bool:
    """Whether static extents show axis `a` longer than the (non-broadcast) axis `b`."""
    if not (a.extent.is_const and b.extent.is_const) or b.is_broadcast:
        return False
    return int(a.extent.value) > int(b.extent.value)  # type: ignore[arg-type]


def index_select(tv: TensorView, index: TensorView, dim: int) -> TensorView:
    op = "index_select"
    dim = normalize_axis(dim, tv.ndim, op, tv)
    _check_index(index, op)
    if index.ndim == 0:  # a 0-D index selects one entry and keeps the axis, as torch does
        ids = [[d] for d in tv.logical_no_reductions()]
        out_ids = [new_output_id(group) for group in ids]
        out_ids[dim] = IterDomain(current_fusion().one_val(), iter_type=IterType.Broadcast)
        out = TensorView(TensorDomain(out_ids), tv.dtype)
        IndexSelectOp(out, tv, dim, index)
        return out
    _check_rank(index, 1, op, "index")
    ids = [[d] for d in tv.logical_no_reductions()]
    ids[dim] = [index.logical_no_reductions()[0]]
    out = _out(ids, tv.dtype)
    IndexSelectOp(out, tv, dim, index)
    return out


def select(tv: TensorView, index: Val, dim: int) -> TensorView:
    op = "select"
    dim = normalize_axis(dim, tv.ndim, op, tv)
    if isinstance(index, TensorView):
        raise FuserError(f"index must be a scalar, got tensor {tv_name(index)}; use index_select", op=op)
    _check_index(index, op)
    out = _out([[d] for a, d in enumerate(tv.logical_no_reductions()) if a != dim], tv.dtype)
    SelectOp(out, tv, dim, index)
    return out


def gather(tv: TensorView, index: TensorView, dim: int, exact_sizes: bool) -> TensorView:
    op = "take_along_axis" if exact_sizes else "gather"
    dim = normalize_axis(dim, tv.ndim, op, tv)
    _check_index(index, op)
    _check_rank(index, tv.ndim, op, "index")
    logical, idx = tv.logical_no_reductions(), index.logical_no_reductions()
    for a in range(tv.ndim):
        if a == dim:
            continue
        if exact_sizes:
            check_same_static_size([(tv, logical[a]), (index, idx[a])], f"axis {a}", op)
        elif _larger(idx[a], logical[a]):
            raise FuserError(
                f"index {tv_name(index)} is larger than {tv_name(tv)} on axis {a}", op=op, tensor=tv_name(index)
            )
    ids = [[idx[a]] + ([logical[a]] if exact_sizes and a != dim else []) for a in range(tv.ndim)]
    out = _out(ids, tv.dtype)
    GatherOp(out, tv, dim, index, exact_sizes)
    return out


def scatter(tv: TensorView, index: TensorView, src: Val, dim: int) -> TensorView:
    op = "scatter"
    dim = normalize_axis(dim, tv.ndim, op, tv)
    _check_index(index, op)
    _check_rank(index, tv.ndim, op, "index")
    if isinstance(src, TensorView):
        _check_rank(src, tv.ndim, op, "src")
        if src.dtype != tv.dtype:
            raise FuserError(
                f"src {tv_name(src)} is {src.dtype!r}, but {tv_name(tv)} is {tv.dtype!r}", op=op, tensor=tv_name(src)
            )
    else:
        src = cast_constant(tv.dtype, src, op, tv)  # type: ignore[arg-type]
    out = _out([[d] for d in tv.logical_no_reductions()], tv.dtype)
    ScatterOp(out, tv, dim, index, src)
    return out


def index_put_accumulate(acc: TensorView, indices: TensorView, value: TensorView) -> TensorView:
    op = "index_put_accumulate"
    _check_index(indices, op, "indices")
    _check_rank(indices, 1, op, "indices")
    _check_rank(value, acc.ndim, op, "value")
    if acc.dtype.is_boolean or value.dtype != acc.dtype:
        raise FuserError(
            f"value {tv_name(value)} ({value.dtype!r}) must have the numeric dtype of {tv_name(acc)} ({acc.dtype!r})",
            op=op,
            tensor=tv_name(value),
        )
    a_ids, v_ids = acc.logical_no_reductions(), value.logical_no_reductions()
    check_same_static_size([(indices, indices.logical_no_reductions()[0]), (value, v_ids[0])], "axis 0", op)
    for a in range(1, acc.ndim):
        check_same_static_size([(acc, a_ids[a]), (value, v_ids[a])], f"axis {a}", op)
    out = _out([[d] for d in a_ids], acc.dtype)
    IndexPutAccumulateOp(out, acc, indices, value)
    return out


def embedding_fwd(inp: TensorView, weight: TensorView, padding_idx: Val | None, max_norm: Val | None) -> TensorView:
    op = "embedding_fwd"
    _check_index(inp, op, "input")
    _check_rank(weight, 2, op, "weight")
    if max_norm is not None:
        raise FuserError(
            "max_norm is not supported: it renormalizes rows of the weight in place, which a fusion cannot do",
            op=op,
            tensor=tv_name(weight),
        )
    if padding_idx is not None and not padding_idx.dtype.is_integral:
        raise FuserError(f"padding_idx must be an integer, got {padding_idx}", op=op)
    ids = [[d] for d in inp.logical_no_reductions()] + [[weight.logical_no_reductions()[1]]]
    out = _out(ids, weight.dtype)
    EmbeddingFwdOp(out, inp, weight, padding_idx)
    return out
