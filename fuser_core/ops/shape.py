"""Shape ops: broadcast, broadcast_in_dim, squeeze, permute, expand and reshape."""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.errors import FuserError
from fuser_core.ir import iter_domain as idx
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import IterDomain, IterType
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import ExpandOp, SqueezeOp, ViewOp
from fuser_core.ir.tensor_view import TensorDomain, TensorView
from fuser_core.ops import arith
from fuser_core.ops.creation import full
from fuser_core.ops.utils import (
    broadcast,
    broadcast_to_rank,
    check_rank,
    new_output_id,
    normalize_axes,
    normalize_axis,
    tv_name,
)
from fuser_core.ops.view_analysis import ViewAnalysis, analyze_view


def _const_int(value: Scalar) -> int | None:
    return int(value.value) if value.is_const_int() else None  # type: ignore[arg-type]


def squeeze(tv: TensorView, dims: Sequence[int], squeeze_expanded: bool = False) -> TensorView:
    axes = normalize_axes(list(dims), tv.ndim, "squeeze", tv)
    logical = tv.logical_no_reductions()
    for a in axes:
        dim = logical[a]
        size = _const_int(dim.extent)
        if dim.has_expanded_extent and not squeeze_expanded:
            raise FuserError(
                f"axis {a} of {tv_name(tv)} is an expanded broadcast {dim}; pass squeeze_expanded=True",
                op="squeeze",
                tensor=tv_name(tv),
            )
        if dim.is_iteration and size is not None and size != 1:
            raise FuserError(
                f"axis {a} of {tv_name(tv)} has size {size}; only size-1 axes can be squeezed",
                op="squeeze",
                tensor=tv_name(tv),
            )
    flags = [pos in axes for pos in range(len(logical))]
    kept = [new_output_id([d]) for d, f in zip(logical, flags, strict=True) if not f]
    out = TensorView(TensorDomain(kept), tv.dtype)
    SqueezeOp(out, tv, flags)
    return out


def permute(tv: TensorView, dims: Sequence[int]) -> TensorView:
    ndim = tv.ndim
    normalized = [normalize_axis(d, ndim, "permute", tv, "dims") for d in dims]
    if sorted(normalized) != list(range(ndim)):
        raise FuserError(
            f"dims {list(dims)} is not a permutation of the {ndim} axes of {tv_name(tv)}",
            op="permute",
            tensor=tv_name(tv),
        )
    if normalized == list(range(ndim)):
        return arith.set_(tv)
    root = [new_output_id([d]) for d in tv.logical_no_reductions()]
    out = TensorView(TensorDomain([root[d] for d in normalized], root=root), tv.dtype)
    arith.LoadStoreOp(out, tv)
    return out


def broadcast_in_dim(tv: TensorView, shape: Sequence[Scalar], broadcast_dims: Sequence[int]) -> TensorView:
    n_out = len(shape)
    check_rank(n_out, "broadcast_in_dim", tv)
    if len(broadcast_dims) != tv.ndim:
        raise FuserError(
            f"broadcast_dims {list(broadcast_dims)} must name one output axis per input axis "
            f"({tv.ndim} for {tv_name(tv)})",
            op="broadcast_in_dim",
            tensor=tv_name(tv),
        )
    if n_out < tv.ndim:
        raise FuserError(
            f"output shape has rank {n_out}, lower than {tv_name(tv)}'s {tv.ndim}",
            op="broadcast_in_dim",
            tensor=tv_name(tv),
        )
    positions = [normalize_axis(d, n_out, "broadcast_in_dim", tv, "broadcast_dims") for d in broadcast_dims]
    if positions != sorted(set(positions)):
        raise FuserError(
            f"broadcast_dims {list(broadcast_dims)} must be strictly increasing",
            op="broadcast_in_dim",
            tensor=tv_name(tv),
        )
    flags = [pos not in positions for pos in range(n_out)]
    out = broadcast(tv, flags, "broadcast_in_dim") if any(flags) else tv
    sizes = []
    in_dims = iter(tv.logical_no_reductions())
    for pos in range(n_out):
        if flags[pos]:
            sizes.append(shape[pos])
            continue
        dim = next(in_dims)
        if dim.is_broadcast:
            sizes.append(shape[pos])
        else:
            _check_same_size(dim, shape[pos], pos, "broadcast_in_dim", tv)
            sizes.append(sm.const(-1, DataType.Int))
    return expand(out, sizes, op="broadcast_in_dim", copy_if_unchanged=out is tv)


def _check_same_size(dim: IterDomain, size: Scalar, pos: int, op: str, tv: TensorView) -> None:
    have, want = _const_int(dim.extent), _const_int(size)
    if have is not None and want is not None and want != -1 and have != want:
        raise FuserError(
            f"axis {pos} of {tv_name(tv)} has size {have}, which cannot be broadcast to {want}",
            op=op,
            tensor=tv_name(tv),
        )


def expand(
    tv: TensorView,
    shape: Sequence[Scalar],
    *,
    op: str = "expand",
    copy_if_unchanged: bool = True,
) -> TensorView:
    if len(shape) < tv.ndim:
        raise FuserError(
            f"shape {[str(s) for s in shape]} has fewer axes than {tv_name(tv)} ({tv.ndim})",
            op=op,
            tensor=tv_name(tv),
        )
    check_rank(len(shape), op, tv)
    tv = broadcast_to_rank(tv, len(shape))
    expanded = False
    out_ids, sizes = [], []
    for pos, (dim, size) in enumerate(zip(tv.logical_no_reductions(), shape, strict=True)):
        want = _const_int(size)
        if want is not None and want < -1:
            raise FuserError(f"invalid size {want} for axis {pos}: use -1 to keep a size", op=op, tensor=tv_name(tv))
        new = new_output_id([dim])
        sizes.append(dim.extent)
        if want == -1:
            pass
        elif _const_int(dim.extent) == 1 and want != 1:
            new = IterDomain(
                tv.fusion.one_val(), iter_type=IterType.Broadcast, expanded_extent=sm.cast(DataType.Index, size)
            )
            sizes[-1] = new.maybe_expanded_extent
            expanded = True
        elif dim.is_symbolic and not dim.extent.is_const and dim.extent is not size:
            new = IterDomain(sm.cast(DataType.Index, size), iter_type=IterType.Symbolic)
            sizes[-1] = new.extent
            expanded = True
        elif not dim.extent.is_const:
            new = IterDomain(sm.cast(DataType.Index, size), iter_type=dim.iter_type)
        else:
            _check_same_size(dim, size, pos, op, tv)
        out_ids.append(new)
    if not expanded and not copy_if_unchanged:
        return tv
    out = TensorView(TensorDomain(out_ids), tv.dtype)
    if expanded:
        ExpandOp(out, tv, sizes).user_op = op  # type: ignore[arg-type]  # errors name broadcast_in_dim, as written
    else:
        arith.LoadStoreOp(out, tv).user_op = op  # its size checks name `op`, not set
    return out


def reshape(tv: TensorView, new_shape: Sequence[Scalar]) -> TensorView:
    """Static when every size is known now; otherwise a Symbolic placeholder output
    that concretization replaces once the inputs are known."""
    check_rank(len(new_shape), "reshape", tv)
    in_sizes = [_const_int(d.maybe_expanded_extent) for d in tv.logical_no_reductions()]
    new_sizes = [_const_int(s) for s in new_shape]
    if sum(1 for s in new_sizes if s == -1) > 1:
        raise FuserError(
            f"at most one -1 may be given, got {[str(s) for s in new_shape]}", op="reshape", tensor=tv_name(tv)
        )
    if all(s is not None for s in in_sizes) and all(s is not None for s in new_sizes):
        if 0 in in_sizes:  # type: ignore[operator]
            return _empty_reshape(tv, new_sizes)  # type: ignore[arg-type]
        try:
            analysis = analyze_view(in_sizes, new_sizes)  # type: ignore[arg-type]
        except FuserError as err:  # the analysis knows sizes only: name the tensor too
            raise FuserError(err.message, op="reshape", tensor=tv_name(tv)) from None
        return apply_view(tv, analysis)
    return _symbolic_reshape(tv, new_shape)


def _empty_reshape(tv: TensorView, new_sizes: list[int]) -> TensorView:
    sizes = [0 if s == -1 else s for s in new_sizes]
    if 0 not in sizes:
        raise FuserError(f"cannot reshape an empty tensor into {new_sizes}", op="reshape", tensor=tv_name(tv))
    return full([sm.const(s, DataType.Index) for s in sizes], sm.const(0, tv.dtype), tv.dtype)


def _symbolic_reshape(tv: TensorView, new_shape: Sequence[Scalar]) -> TensorView:
    root = [new_output_id([d]) for d in tv.logical_no_reductions()]
    logical = []
    inferred = None
    for pos, size in enumerate(new_shape):
        if _const_int(size) == -1:
            inferred = pos
            numel = sm.product([d.maybe_expanded_extent for d in root])
            others = sm.product([sm.cast(DataType.Index, s) for p, s in enumerate(new_shape) if p != pos])
            size = sm.div(numel, others)
        if _const_int(size) == 1:  # nvFuser: a constant 1 is a Broadcast axis, expandable at once
            logical.append(IterDomain(tv.fusion.one_val(), iter_type=IterType.Broadcast, is_rfactor_product=True))
            continue
        extent = sm.cast(DataType.Index, size)
        logical.append(IterDomain(extent, iter_type=IterType.Symbolic, is_rfactor_product=True))
    out = TensorView(TensorDomain(logical, root=root), tv.dtype)
    ViewOp(out, tv, inferred, dynamic=True)
    return out


def _view_root_id(dim: IterDomain) -> IterDomain:
    """A reshape reads every element of an expanded axis: it splits and merges its
    expanded size, not the broadcast's 1."""
    if dim.expanded_extent is not None:
        return IterDomain(dim.expanded_extent, iter_type=IterType.Iteration)
    return new_output_id([dim])


def apply_view(tv: TensorView, analysis: ViewAnalysis) -> TensorView:
    """Squeeze, split/merge and broadcast `tv` as `analysis` says."""
    current = tv
    if any(analysis.squeeze):
        current = squeeze(current, [i for i, s in enumerate(analysis.squeeze) if s], squeeze_expanded=True)
    if analysis.transforms:
        root = [_view_root_id(d) for d in current.logical_no_reductions()]
        working = list(root)
        for kind, pos, factor in analysis.transforms:
            if kind == "merge":
                working[pos : pos + 2] = [idx.merge(working[pos], working[pos + 1])]
            else:
                working[pos : pos + 1] = list(idx.split(working[pos], factor, inner_split=False))
        for dim in root:
            dim.is_rfactor_product = bool(dim.uses)
        for dim in working:
            dim.is_rfactor_product = dim.definition is not None
        out = TensorView(TensorDomain(working, root=root), tv.dtype)
        ViewOp(out, current)
        current = out
    if any(analysis.broadcast):
        current = broadcast(current, list(analysis.broadcast), "reshape")
    return current if current is not tv else arith.set_(tv)
