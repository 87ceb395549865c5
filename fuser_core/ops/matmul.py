"""matmul and linear: kept whole in the IR as a MatmulOp (not fused into kernels).

Output domains follow torch's shape rules as nvFuser builds them (newForMatmul and
newForLinear, csrc/ops/composite.cpp): a 1-D operand contributes no M (or N) axis,
batch axes are right-aligned and broadcast like element-wise axes, and a trailing
reduction axis rK stands for the contracted K unless K is a broadcast in both.
"""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.errors import FuserError
from fuser_core.ir.iter_domain import IterDomain, IterType
from fuser_core.ir.tensor_exprs import MatmulOp
from fuser_core.ir.tensor_view import TensorDomain, TensorView
from fuser_core.ops.utils import check_same_static_size, new_output_id, tv_name


def matmul(a: TensorView, b: TensorView) -> TensorView:
    """torch.matmul: [*, M, K] @ [*, K, N] -> [*, M, N]; a 1-D A is [K] (no M), a 1-D B
    is [K] (no N)."""
    _check_operands("matmul", a, b)
    a_ids, b_ids = a.logical_no_reductions(), b.logical_no_reductions()
    a_k = a_ids[-1]
    b_k = b_ids[-2] if len(b_ids) > 1 else b_ids[-1]
    _check_contracted("matmul", (a, a_k), (b, b_k))
    out_ids = _batch_ids("matmul", (a, a_ids[:-2]), (b, b_ids[:-2]))
    out_ids += [new_output_id([m]) for m in a_ids[-2:-1] if len(a_ids) > 1]
    out_ids += [new_output_id([n]) for n in b_ids[-1:] if len(b_ids) > 1]
    return _finish("matmul", [a, b], out_ids, a_k, b_k)


def linear(a: TensorView, weight: TensorView, bias: TensorView | None = None) -> TensorView:
    """torch.nn.functional.linear: [*, K] with weight [N, K] (or [K]) and bias [N] (or
    []) -> [*, N] (or [*] for a 1-D weight)."""
    _check_operands("linear", a, weight, bias)
    if weight.ndim not in (1, 2):
        raise FuserError(f"weight {tv_name(weight)} must be 1-D or 2-D, got {weight.ndim}-D", op="linear")
    if bias is not None and (weight.ndim != 2 or bias.ndim > 1):
        raise FuserError(
            f"bias {tv_name(bias)} ({bias.ndim}-D) needs a 2-D weight and must be 0-D or 1-D "
            f"(weight {tv_name(weight)} is {weight.ndim}-D)",
            op="linear",
            tensor=tv_name(bias),
        )
    a_ids, w_ids = a.logical_no_reductions(), weight.logical_no_reductions()
    _check_contracted("linear", (a, a_ids[-1]), (weight, w_ids[-1]))
    out_ids = [new_output_id([d]) for d in a_ids[:-1]]
    if weight.ndim == 2:
        features = [(weight, w_ids[0])]
        if bias is not None and bias.ndim == 1:
            features.append((bias, bias.logical_no_reductions()[0]))
        check_same_static_size(features, "out_features", "linear")
        out_ids.append(new_output_id([d for _, d in features]))
    operands = [a, weight] + ([bias] if bias is not None else [])
    return _finish("linear", operands, out_ids, a_ids[-1], w_ids[-1])


def _check_operands(op: str, a: TensorView, b: TensorView, bias: TensorView | None = None) -> None:
    for tv, arg in ((a, "arg1"), (b, "arg2")):
        if tv.ndim == 0:
            raise FuserError(f"{arg} {tv_name(tv)} must have at least one axis, got a 0-D tensor", op=op)
    for other in (b, bias):
        if other is not None and other.dtype != a.dtype:
            raise FuserError(
                f"operands must have the same dtype, got {a.dtype!r} {tv_name(a)} and {other.dtype!r} {tv_name(other)}",
                op=op,
                tensor=tv_name(other),
            )


def _check_contracted(op: str, a: tuple[TensorView, IterDomain], b: tuple[TensorView, IterDomain]) -> None:
    """The K axes: both broadcasts or neither (as nvFuser requires), same static size."""
    (a_tv, a_k), (b_tv, b_k) = a, b
    if a_k.is_broadcast != b_k.is_broadcast:
        bcast, other = (a_tv, b_tv) if a_k.is_broadcast else (b_tv, a_tv)
        raise FuserError(
            f"the contracted axis (K) is a broadcast in {tv_name(bcast)} but not in {tv_name(other)}: "
            "define it with size 1 in both, or in neither",
            op=op,
            tensor=tv_name(bcast),
        )
    check_same_static_size([a, b], "the contracted axis (K)", op)


def _batch_ids(
    op: str, a: tuple[TensorView, Sequence[IterDomain]], b: tuple[TensorView, Sequence[IterDomain]]
) -> list[IterDomain]:
    """Batch axes of both operands, right-aligned and broadcast against each other."""
    rank = max(len(a[1]), len(b[1]))
    out = []
    for pos in range(rank):
        ids = [(tv, batch[pos - rank + len(batch)]) for tv, batch in (a, b) if pos >= rank - len(batch)]
        check_same_static_size(ids, f"batch axis {pos}", op)
        out.append(new_output_id([d for _, d in ids]))
    return out


def _finish(
    op: str, operands: list[TensorView], out_ids: list[IterDomain], a_k: IterDomain, b_k: IterDomain
) -> TensorView:
    if not (a_k.is_broadcast and b_k.is_broadcast):
        out_ids.append(new_output_id([a_k, b_k], IterType.Reduction))
    out = TensorView(TensorDomain(out_ids), operands[0].dtype)
    MatmulOp(op, out, operands)
    return out
