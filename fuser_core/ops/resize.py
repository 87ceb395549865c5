"""Resize ops: pad, slice and cat. Each resized axis is a Resize from a root axis to
an `rf` logical axis; with widths or bounds only known at run time the output axis
is Symbolic until concretization."""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.errors import FuserError
from fuser_core.ir import iter_domain as idx
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import current_fusion
from fuser_core.ir.dtype import DataType
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import CatOp, PadOp, SliceOp
from fuser_core.ir.tensor_view import TensorDomain, TensorView
from fuser_core.ops import arith
from fuser_core.ops.utils import cast_constant, new_output_id, new_output_tv, normalize_axis, tv_name


def _resized_tensor(tv: TensorView, widths: Sequence[tuple[Scalar, Scalar]], always: bool = False) -> TensorView | None:
    """The output of resizing each axis of `tv` by (left, right); None if none moves
    (unless `always`: a cat's input is a pad output even where it moves nothing)."""
    root, logical, moved = [], [], False
    for dim, (left, right) in zip(tv.logical_no_reductions(), widths, strict=True):
        if left.is_zero_int() and right.is_zero_int():
            same = new_output_id([dim])
            root.append(same)
            logical.append(same)
            continue
        if not (dim.is_iteration or dim.is_broadcast or dim.is_symbolic):
            raise FuserError(f"cannot resize axis {dim}", op="pad", tensor=tv_name(tv))
        base = new_output_id([dim])
        base.is_rfactor_product = True
        root.append(base)
        logical.append(idx.resize(base, left, right))
        moved = True
    if not moved and not always:
        return None
    return TensorView(TensorDomain(logical, root=root), tv.dtype)


def _default_pad_value(dtype: DataType) -> Scalar:
    return sm.const(False if dtype.is_boolean else 0, dtype)


def pad(
    tv: TensorView, pad_widths: Sequence[Scalar], value: Scalar | None = None, *, for_cat: bool = False
) -> TensorView:
    """`pad_widths` as torch.nn.functional.pad: innermost axis first, (left, right).
    A pad that moves no axis is a copy (a Set), except one made `for_cat`: a cat reads
    where each of its inputs starts and stops from that input's pad (nvFuser #2275: the
    only non-empty piece of a cat, padded by 0 and 0)."""
    ndim = tv.ndim
    if len(pad_widths) % 2 or len(pad_widths) // 2 > ndim:
        raise FuserError(
            f"needs an even number of widths, at most {2 * ndim} for {ndim}-D {tv_name(tv)}; got {len(pad_widths)}",
            op="pad",
            tensor=tv_name(tv),
        )
    if value is None:
        value = _default_pad_value(tv.dtype)
    elif value.dtype.is_complex != tv.dtype.is_complex or (value.dtype.is_boolean and not tv.dtype.is_boolean):
        raise FuserError(f"pad value {value} does not fit a {tv.dtype!r} tensor", op="pad", tensor=tv_name(tv))
    for w in pad_widths:
        if not w.dtype.is_integral:
            raise FuserError(f"pad widths must be integers, got {w} ({w.dtype!r})", op="pad", tensor=tv_name(tv))
    n_padded = len(pad_widths) // 2
    zero = current_fusion().zero_val()
    pairs: list[tuple[Scalar, Scalar]] = [(zero, zero)] * (ndim - n_padded)
    for i in range(n_padded):
        left = pad_widths[2 * (n_padded - 1 - i)]
        right = pad_widths[2 * (n_padded - 1 - i) + 1]
        pairs.append((sm.cast(DataType.Index, left), sm.cast(DataType.Index, right)))
    _check_static_pad(tv, pairs)
    out = _resized_tensor(tv, pairs, always=for_cat)
    if out is None:
        return arith.set_(tv)
    PadOp(out, tv, [w for pair in pairs for w in pair], cast_constant(tv.dtype, value, "pad", tv))
    return out


def _check_static_pad(tv: TensorView, pairs: Sequence[tuple[Scalar, Scalar]]) -> None:
    """Negative widths may crop an axis down to nothing, not below."""
    for pos, (dim, (left, right)) in enumerate(zip(tv.logical_no_reductions(), pairs, strict=True)):
        extent = dim.maybe_expanded_extent
        if extent.is_const and left.is_const and right.is_const:
            size = int(extent.value) + int(left.value) + int(right.value)  # type: ignore[arg-type]
            if size < 0:
                raise FuserError(
                    f"axis {pos} would have size {size} (size {extent.value} padded by {left.value} and {right.value})",
                    op="pad",
                    tensor=tv_name(tv),
                )


def _normalize_bound(bound: Scalar, extent: Scalar, clamp_low: Scalar) -> Scalar:
    """Python semantics: negative counts from the end; then clamp to [low, extent]."""
    bound = sm.cast(DataType.Index, bound)
    wrapped = sm.where(sm.lt(bound, 0), sm.add(bound, extent), bound)
    return sm.maximum(clamp_low, sm.minimum(extent, wrapped))


def slice_(
    tv: TensorView,
    starts: Sequence[Scalar],
    stops: Sequence[Scalar],
    steps: Sequence[Scalar] | None = None,
    manual_normalization: bool = False,
) -> TensorView:
    ndim = tv.ndim
    steps = list(steps) if steps is not None else [sm.const(1, DataType.Index)] * ndim
    for name, seq in (("start_indices", starts), ("end_indices", stops), ("strides", steps)):
        if len(seq) != ndim:
            raise FuserError(
                f"{name} has {len(seq)} entries but {tv_name(tv)} has {ndim} axes",
                op="slice",
                tensor=tv_name(tv),
            )
    ranges, widths = [], []
    zero = current_fusion().zero_val()
    for pos, (dim, start, stop, step) in enumerate(zip(tv.logical_no_reductions(), starts, stops, steps, strict=True)):
        if not (step.is_const_int() and step.value == 1):
            raise FuserError(f"stride {step} on axis {pos} is not supported: only 1", op="slice", tensor=tv_name(tv))
        extent = dim.maybe_expanded_extent
        if manual_normalization:
            start, stop = sm.cast(DataType.Index, start), sm.cast(DataType.Index, stop)
        else:
            start = zero if start.is_zero_int() else _normalize_bound(start, extent, zero)
            stop = extent if stop is extent else _normalize_bound(stop, extent, start)
        _check_static_bounds(start, stop, extent, pos, tv)
        ranges.append((start, stop, sm.const(1, DataType.Index)))
        if start.is_zero_int() and stop is extent:
            widths.append((zero, zero))
        else:
            widths.append((sm.neg(start), sm.sub(stop, extent)))
    out = _resized_tensor(tv, widths)
    if out is None:
        return arith.set_(tv)
    SliceOp(out, tv, ranges)
    return out


def _check_static_bounds(start: Scalar, stop: Scalar, extent: Scalar, pos: int, tv: TensorView) -> None:
    if start.is_const and stop.is_const and int(stop.value) < int(start.value):  # type: ignore[arg-type]
        raise FuserError(f"axis {pos}: stop {stop.value} is before start {start.value}", op="slice", tensor=tv_name(tv))
    if extent.is_const and stop.is_const and int(stop.value) > int(extent.value):  # type: ignore[arg-type]
        raise FuserError(
            f"axis {pos}: stop {stop.value} is past the end of an axis of size {extent.value}",
            op="slice",
            tensor=tv_name(tv),
        )


def cat(tensors: Sequence[TensorView], dim: int = 0, manual_padding: bool = False) -> TensorView:
    """Each input is padded to the full extent of the concatenated axis, then joined."""
    if not tensors:
        raise FuserError("needs at least one tensor", op="cat")
    first = tensors[0]
    for tv in tensors:
        if tv.dtype != first.dtype:
            raise FuserError(
                f"cannot concatenate {first.dtype!r} {tv_name(first)} with {tv.dtype!r} {tv_name(tv)}",
                op="cat",
                tensor=tv_name(tv),
            )
        if tv.ndim != first.ndim:
            raise FuserError(
                f"{tv_name(tv)} has {tv.ndim} axes but {tv_name(first)} has {first.ndim}",
                op="cat",
                tensor=tv_name(tv),
            )
    ndim = first.ndim
    dim = normalize_axis(dim, ndim, "cat", first)
    if len(tensors) == 1:
        return arith.set_(first)
    if manual_padding:
        _check_manual_padding(tensors, dim)
        out = new_output_tv(list(tensors), first.dtype, "cat")
        CatOp(out, tensors, dim)
        return out
    extents = [tv.logical_no_reductions()[dim].maybe_expanded_extent for tv in tensors]
    total: Scalar | None = None
    for e in extents:
        total = sm.add(total, e)
    zero = current_fusion().zero_val()
    left: Scalar = zero
    padded = []
    for i, tv in enumerate(tensors):
        right = zero if i == len(tensors) - 1 else sm.sub(sm.sub(total, left), extents[i])  # type: ignore[arg-type]
        widths: list[Scalar] = []
        for d in reversed(range(ndim)):
            widths += [left, right] if d == dim else [zero, zero]
        padded.append(pad(tv, widths, for_cat=True))
        left = sm.add(left, extents[i])
    out = new_output_tv(padded, first.dtype, "cat")
    CatOp(out, padded, dim)
    return out


_MANUAL_PADDING = "with manual_padding every input must be a pad output of the full size"


def _check_manual_padding(tensors: Sequence[TensorView], dim: int) -> None:
    """Each input is a pad whose unpadded part is its piece of the output: where the
    widths and sizes are known now, the pieces must tile the concatenated axis."""
    spans = [_pad_span(tv, dim) for tv in tensors]
    known = [span for span in spans if span is not None]
    if len(known) != len(spans):
        return
    total = sum(extent for _, extent, _ in known)
    start = 0
    for tv, (left, extent, right) in zip(tensors, known, strict=True):
        if left != start or left + extent + right != total:
            raise FuserError(
                f"{_MANUAL_PADDING}: {tv_name(tv)} holds elements [{left}, {left + extent}) of axis {dim} "
                f"padded to {left + extent + right}, but its piece of the {total} is [{start}, {start + extent})",
                op="cat",
                tensor=tv_name(tv),
            )
        start += extent


def _pad_span(tv: TensorView, dim: int) -> tuple[int, int, int] | None:
    """(left width, unpadded size, right width) of the pad that made `tv`, on `dim`;
    None if one is only known at run time."""
    pad_op = tv.definition
    if not isinstance(pad_op, PadOp):
        made_by = "a fusion input" if pad_op is None else f"made by {pad_op.op_name}"
        raise FuserError(f"{_MANUAL_PADDING}; {tv_name(tv)} is {made_by}", op="cat", tensor=tv_name(tv))
    source: TensorView = pad_op.input  # type: ignore[assignment]
    extent = source.logical_no_reductions()[dim].maybe_expanded_extent
    values = [v.value for v in (pad_op.widths[2 * dim], extent, pad_op.widths[2 * dim + 1]) if v.is_const_int()]
    return (int(values[0]), int(values[1]), int(values[2])) if len(values) == 3 else None  # type: ignore[arg-type]
