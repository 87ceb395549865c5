"""Random tensors: uniform, normal, rand_like and randn_like (nvFuser's RNGOp).

With `rng_seed` and `rng_offset` an op is deterministic. Without them, every
execution draws a fresh Philox state (a seed and a base offset, symbolic scalars
shared by its unseeded ops) and unseeded op i draws at offset base + i, so two ops of
one fusion never repeat each other's numbers. Torch callers get the state from torch's
generator, as nvFuser's executions do.
"""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.errors import FuserError
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import Val, current_fusion
from fuser_core.ir.dtype import DataType
from fuser_core.ir.rng import RNGOp, RNGOpType, unbound_rng_states
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorDomain, TensorView
from fuser_core.ops.creation import factory_id
from fuser_core.ops.utils import cast_constant, check_rank, tv_name

RANDOM_DTYPES = (DataType.Float, DataType.Double, DataType.Half, DataType.BFloat16)


def _check_dtype(dtype: DataType, op: str, tensor: str | None = None) -> None:
    if dtype not in RANDOM_DTYPES:
        raise FuserError(
            f"random numbers are only made in Float, Double, Half or BFloat16, not {dtype!r}", op=op, tensor=tensor
        )


def _state(seed: Scalar | None, offset: Scalar | None, op: str) -> tuple[Scalar, Scalar, bool]:
    if (seed is None) != (offset is None):
        raise FuserError("rng_seed and rng_offset must be provided together", op=op)
    if seed is not None and offset is not None:
        for value, arg in ((seed, "rng_seed"), (offset, "rng_offset")):
            if not value.dtype.is_integral:
                raise FuserError(f"{arg} must be an integer, got {value} ({value.dtype!r})", op=op)
        return sm.cast(DataType.Int, seed), sm.cast(DataType.Int, offset), True
    unseeded = [e for e in current_fusion().statements() if isinstance(e, RNGOp) and not e.user_seeded]
    if not unseeded:  # the run's Philox state: a seed and a base offset, bound per execution
        return Scalar(DataType.Int), Scalar(DataType.Int), False
    base = unbound_rng_states(unseeded)[0][1]
    return unseeded[0].seed, sm.add(base, sm.const(len(unseeded), DataType.Int)), False  # type: ignore[return-value,arg-type]


def _random(
    kind: RNGOpType,
    shape: Sequence[Scalar],
    params: Sequence[Val],
    dtype: DataType,
    seed: Scalar | None,
    offset: Scalar | None,
    op: str,
) -> TensorView:
    _check_dtype(dtype, op)
    check_rank(len(shape), op)
    extents = [sm.cast(DataType.Index, s) for s in shape]
    for s in extents:
        if s.is_const and int(s.value) < 0:  # type: ignore[arg-type]
            raise FuserError(f"negative size {s.value} in shape", op=op)
    seed_val, offset_val, user_seeded = _state(seed, offset, op)
    compute = DataType.Double if dtype == DataType.Double else DataType.Float
    for p in params:
        if isinstance(p, TensorView):
            raise FuserError(f"distribution parameters must be scalars, got tensor {tv_name(p)}", op=op)
    cast_params = [cast_constant(compute, p, op) for p in params]  # type: ignore[arg-type]
    out = TensorView(TensorDomain([factory_id(s) for s in extents]), dtype)
    RNGOp(kind, out, extents, cast_params, seed_val, offset_val, user_seeded)
    return out


def uniform(
    low: Val,
    high: Val,
    shape: Sequence[Scalar],
    dtype: DataType = DataType.Float,
    seed: Scalar | None = None,
    offset: Scalar | None = None,
) -> TensorView:
    """Values in [low, high)."""
    return _random(RNGOpType.UniformRange, shape, [low, high], dtype, seed, offset, "uniform")


def normal(
    mean: Val,
    std: Val,
    shape: Sequence[Scalar],
    dtype: DataType = DataType.Float,
    seed: Scalar | None = None,
    offset: Scalar | None = None,
) -> TensorView:
    return _random(RNGOpType.NormalGeneral, shape, [mean, std], dtype, seed, offset, "normal")


def _like(kind: RNGOpType, tv: TensorView, seed: Scalar | None, offset: Scalar | None, op: str) -> TensorView:
    _check_dtype(tv.dtype, op, tv_name(tv))
    shape = [d.maybe_expanded_extent for d in tv.logical_no_reductions()]
    return _random(kind, shape, [], tv.dtype, seed, offset, op)


def rand_like(tv: TensorView, seed: Scalar | None = None, offset: Scalar | None = None) -> TensorView:
    """Uniform values in [0, 1) of `tv`'s shape and dtype."""
    return _like(RNGOpType.Uniform, tv, seed, offset, "rand_like")


def randn_like(tv: TensorView, seed: Scalar | None = None, offset: Scalar | None = None) -> TensorView:
    """Standard normal values of `tv`'s shape and dtype."""
    return _like(RNGOpType.NormalStandard, tv, seed, offset, "randn_like")
