"""batch_norm forward, built from Welford and element-wise ops as nvFuser builds it.

    y, mean, invstd = batch_norm(x, weight, bias, running_mean, running_var,
                                 momentum, eps, training, channels_last)

The channel axis is 1 (the last with channels_last); every other axis is reduced.
Training (or no running stats): batch statistics from Welford, mean = avg and
invstd = rsqrt(var_sum / N + eps) (biased); with running stats, their updates
(1 - momentum) * running + momentum * batch (the variance unbiased: var_sum / (N - 1))
are returned as `aliases`, each to be written back into its input, as nvFuser's
aliased outputs are. Inference with running stats: y from them, mean = set(running_mean),
invstd = rsqrt(running_var + eps).
"""

from __future__ import annotations

from dataclasses import dataclass

from fuser_core.errors import FuserError
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import Val
from fuser_core.ir.dtype import DataType
from fuser_core.ir.op_types import BinaryOpType, UnaryOpType
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorView
from fuser_core.ops import arith
from fuser_core.ops.reductions import num_features, welford
from fuser_core.ops.utils import broadcast, check_same_static_size, tv_name

OP = "batch_norm"


@dataclass
class BatchNormResult:
    output: TensorView
    mean: TensorView
    invstd: TensorView
    aliases: list[tuple[TensorView, TensorView]]  # (updated running stat, the input it overwrites)


def _mul(a: Val, b: Val) -> TensorView:
    return arith.binary(BinaryOpType.Mul, a, b)  # type: ignore[return-value]


def _add(a: Val, b: Val) -> TensorView:
    return arith.binary(BinaryOpType.Add, a, b)  # type: ignore[return-value]


def _check_per_channel(tv: TensorView | None, what: str, x: TensorView, c_axis: int) -> None:
    if tv is None:
        return
    if tv.ndim != 1:
        raise FuserError(f"{what} {tv_name(tv)} must have 1 axis (channels), has {tv.ndim}", op=OP, tensor=tv_name(tv))
    channels = x.logical_no_reductions()[c_axis]
    check_same_static_size([(x, channels), (tv, tv.logical_no_reductions()[0])], f"the channel axis {c_axis}", OP)


def _check_scalar(value: Scalar, what: str) -> None:
    if isinstance(value, TensorView) or not value.dtype.is_floating:
        raise FuserError(f"{what} must be a floating-point scalar, got {value}", op=OP)


def batch_norm(
    x: TensorView,
    weight: TensorView | None,
    bias: TensorView | None,
    running_mean: TensorView | None,
    running_var: TensorView | None,
    momentum: Scalar,
    eps: Scalar,
    training: bool,
    channels_last: bool = False,
) -> BatchNormResult:
    if x.dtype not in (DataType.Float, DataType.Double):
        raise FuserError(
            f"input {tv_name(x)} must be Float or Double, got {x.dtype!r}; cast it first, as Thunder does",
            op=OP,
            tensor=tv_name(x),
        )
    if x.ndim < 2:
        raise FuserError(f"input {tv_name(x)} must have at least 2 axes (N, C, ...), has {x.ndim}", op=OP)
    if (running_mean is None) != (running_var is None):
        raise FuserError("running_mean and running_var must be given together", op=OP)
    c_axis = x.ndim - 1 if channels_last else 1
    for tv, what in ((weight, "weight"), (bias, "bias"), (running_mean, "running_mean"), (running_var, "running_var")):
        _check_per_channel(tv, what, x, c_axis)
    _check_scalar(momentum, "momentum")
    _check_scalar(eps, "eps")
    axes = [a for a in range(x.ndim) if a != c_axis]
    flags = [a != c_axis for a in range(x.ndim)]
    aliases: list[tuple[TensorView, TensorView]] = []
    if training or running_mean is None:
        avg, var_sum, _ = welford(x, axes)
        count = sm.cast(DataType.Double, num_features(x, axes))
        if running_mean is not None and running_var is not None:
            aliases = _running_updates(avg, var_sum, count, running_mean, running_var, momentum)
        mean = avg
        var = _mul(var_sum, arith.unary(UnaryOpType.Reciprocal, count))
        invstd: TensorView = arith.unary(UnaryOpType.Rsqrt, _add(var, eps))  # type: ignore[assignment]
        centered = arith.binary(BinaryOpType.Sub, x, broadcast(mean, flags))
    else:
        assert running_var is not None
        invstd = arith.unary(UnaryOpType.Rsqrt, _add(running_var, eps))  # type: ignore[assignment]
        mean = arith.set_(running_mean)
        centered = arith.binary(BinaryOpType.Sub, x, broadcast(running_mean, flags))
    y = _mul(centered, broadcast(invstd, flags))
    if weight is not None:
        y = _mul(y, broadcast(weight, flags))
    if bias is not None:
        y = _add(y, broadcast(bias, flags))
    return BatchNormResult(y, mean, invstd, aliases)


def _running_updates(
    avg: TensorView,
    var_sum: TensorView,
    count: Scalar,
    running_mean: TensorView,
    running_var: TensorView,
    momentum: Scalar,
) -> list[tuple[TensorView, TensorView]]:
    """(1 - momentum) * running + momentum * batch, computed in Float at least and
    stored back in each running stat's own dtype."""
    rev_momentum = sm.sub(sm.const(1.0, DataType.Double), momentum)
    unbiased = _mul(var_sum, arith.unary(UnaryOpType.Reciprocal, sm.sub(count, sm.const(1.0, DataType.Double))))
    updates = []
    for running, batch in ((running_mean, avg), (running_var, unbiased)):
        stat: Val = running
        if running.dtype.is_reduced_float:
            stat = arith.cast(running, DataType.Float)
        new = _add(_mul(stat, rev_momentum), _mul(batch, momentum))
        if new.dtype != running.dtype:
            new = arith.cast(new, running.dtype)  # type: ignore[assignment]
        updates.append((new, running))
    return updates
