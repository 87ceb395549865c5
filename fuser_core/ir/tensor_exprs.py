"""Tensor operations other than element-wise math: reductions, data movement,
reshape, resize (pad, slice, cat) and factories. Each prints itself as nvFuser
does and carries its NumPy reference semantics.

Expressions keep every Val they depend on in `inputs` (scalar operands included),
so traversal and cloning see them; attributes hold plain data only.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any

import numpy as np

from fuser_core.errors import FuserError, InternalError
from fuser_core.ir.base import Expr, ScalarEvaluator, Val
from fuser_core.ir.dtype import saturate, to_storage
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.op_types import REDUCTION_NUMPY, BinaryOpType
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import TensorView


def _tv_op(out: Val, body: str) -> str:
    return f"{out}\n   = {body}\n"


def _as_tensor(value: Any) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else np.asarray(value)


def _store(result: Any, tv: Val) -> np.ndarray:
    return to_storage(result, tv.dtype)


def _accumulator(x: np.ndarray) -> type:
    """Sums and products accumulate in 64 bits: the reference is the ground truth."""
    if x.dtype.kind == "c":
        return np.complex128
    if x.dtype.kind in "iub":
        return np.int64
    return np.float64


def _widened(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float32) if x.dtype.kind == "V" or x.dtype == np.float16 else x


class ReductionOp(Expr):
    def __init__(self, op_type: BinaryOpType, out: TensorView, inp: TensorView, init: Scalar) -> None:
        self.op_type = op_type
        self.allreduce = False
        super().__init__([inp, init], [out])

    @property
    def op_name(self) -> str:  # type: ignore[override]
        return "reduction"

    @property
    def init(self) -> Scalar:
        return self.inputs[1]  # type: ignore[return-value]

    def reduction_axes(self) -> tuple[int, ...]:
        out: TensorView = self.output  # type: ignore[assignment]
        return tuple(i for i, d in enumerate(out.logical) if d.is_reduction)

    def to_string(self) -> str:
        return _tv_op(
            self.output,
            f"reduction( {self.input}, op = {self.op_type.rule.name}, initial value = "
            f"{self.init}, allreduce = {'true' if self.allreduce else 'false'} )",
        )

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x, init = _as_tensor(values[0]), values[1]
        axes = self.reduction_axes()
        reducer = REDUCTION_NUMPY[self.op_type]
        if self.op_type == BinaryOpType.Add:
            result = reducer(x.astype(_accumulator(x)), axis=axes) + init
        elif self.op_type == BinaryOpType.Mul:
            result = reducer(x.astype(_accumulator(x)), axis=axes) * init
        else:
            result = reducer(_widened(x), axis=axes, initial=init)
        return [_store(result, self.output)]


class WelfordOp(Expr):
    """Mean, sum of squared deviations (M2) and count in one pass: var_mean's core."""

    op_name = "Welford"

    def __init__(self, avg: TensorView, var_sum: TensorView, count: TensorView, inp: TensorView) -> None:
        super().__init__([inp], [avg, var_sum, count])

    def to_string(self) -> str:
        avg, var, n = self.outputs
        return f"{avg}(Avg),\n{var}(Var),\n{n}(Count)\n = Welford ( {self.input}(Avg), \n  allreduce = false )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x = _as_tensor(values[0]).astype(np.float64)
        avg_tv: TensorView = self.outputs[0]  # type: ignore[assignment]
        axes = tuple(i for i, d in enumerate(avg_tv.logical) if d.is_reduction)
        count = int(np.prod([x.shape[a] for a in axes]))
        mean = x.mean(axis=axes) if count else np.full(np.delete(x.shape, axes), np.nan)
        m2 = ((x - np.expand_dims(mean, axes)) ** 2).sum(axis=axes) if count else np.zeros_like(mean)
        n = np.full(mean.shape, count)
        return [_store(mean, self.outputs[0]), _store(m2, self.outputs[1]), _store(n, self.outputs[2])]


class BroadcastOp(Expr):
    """Inserts broadcast axes at the output positions flagged True."""

    op_name = "broadcast"
    # Made by an element-wise op to align a lower-rank operand to the right (maybe_broadcast)
    rank_alignment = False

    def __init__(self, out: TensorView, inp: TensorView, flags: Sequence[bool]) -> None:
        self.flags = list(flags)
        super().__init__([inp], [out])

    def to_string(self) -> str:
        return _tv_op(self.output, f"broadcast( {self.input} )")

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        axes = tuple(i for i, f in enumerate(self.flags) if f)
        return [np.expand_dims(_as_tensor(values[0]), axes)]


class SqueezeOp(Expr):
    """Removes the input axes flagged True; each must have size 1."""

    op_name = "squeeze"

    def __init__(self, out: TensorView, inp: TensorView, flags: Sequence[bool]) -> None:
        self.flags = list(flags)
        super().__init__([inp], [out])

    def to_string(self) -> str:
        return _tv_op(self.output, f"squeeze( {self.input} )")

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x = _as_tensor(values[0])
        inp: TensorView = self.input  # type: ignore[assignment]
        index: list[Any] = []
        for flag, size, dim in zip(self.flags, x.shape, inp.logical_no_reductions(), strict=True):
            if flag and size != 1 and not dim.has_expanded_extent:
                raise FuserError(
                    f"cannot squeeze axis {len(index)} of {inp.to_string()}: its size is {size}, not 1",
                    op="squeeze",
                    tensor=f"T{inp.name}",
                    location=self.location,
                )
            index.append(0 if flag else slice(None))
        return [x[tuple(index)]]


class LoadStoreOp(Expr):
    """A copy: `Set`, a permuting `Set.Permute`, or a `SegmenterSet` segment hint."""

    def __init__(self, out: TensorView, inp: TensorView, op_type: str = "Set") -> None:
        if op_type not in ("Set", "SegmenterSet"):
            raise InternalError(f"unknown load/store kind {op_type}")
        self.op_type = op_type
        super().__init__([inp], [out])

    @property
    def op_name(self) -> str:  # type: ignore[override]
        return "segment_set" if self.op_type == "SegmenterSet" else "set"

    def permutation(self) -> list[int] | None:
        out: TensorView = self.output  # type: ignore[assignment]
        if not out.domain.has_root:
            return None
        root = out.domain.maybe_root
        return [next(p for p, r in enumerate(root) if r is d) for d in out.logical]

    def to_string(self) -> str:
        modifier = ".Permute" if self.permutation() is not None else ""
        return _tv_op(self.output, f"{self.op_type}{modifier}( {self.input} )")

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x = _as_tensor(values[0])
        perm = self.permutation()
        return [np.transpose(x, perm) if perm is not None else x]


class ViewOp(Expr):
    """A reshape: the output's root maps to the input, its logical is the new shape."""

    op_name = "reshape"

    def __init__(
        self, out: TensorView, inp: TensorView, inferred_axis: int | None = None, *, dynamic: bool = False
    ) -> None:
        # The output axis given as -1, whose extent is computed from the element count.
        self.inferred_axis = inferred_axis
        # Sizes known only at run time: concretization rebuilds it from its decomposition.
        self.dynamic = dynamic
        super().__init__([inp], [out])

    def to_string(self) -> str:
        return f"{self.output} = view( {self.input} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        out: TensorView = self.output  # type: ignore[assignment]
        shape = [int(ev.evaluate(d.maybe_expanded_extent)) for d in out.logical_no_reductions()]
        x = _as_tensor(values[0])
        if int(np.prod(shape)) != x.size:
            raise FuserError(
                f"cannot reshape {list(x.shape)} ({x.size} elements) into {shape}",
                op="reshape",
                tensor=f"T{out.name}",
                location=self.location,
            )
        return [x.reshape(shape)]


class ExpandOp(Expr):
    op_name = "expand"

    def __init__(self, out: TensorView, inp: TensorView, sizes: Sequence[Scalar]) -> None:
        super().__init__([inp, *sizes], [out])

    def to_string(self) -> str:
        sizes = ", ".join(s.to_string() for s in self.inputs[1:])
        return f"{self.output} = expand( {self.input}, {{{sizes}}} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x = _as_tensor(values[0])
        shape = [int(s) for s in values[1:]]
        return [np.broadcast_to(x, shape)]


class PadOp(Expr):
    """Pads (or with negative widths, crops) every axis; widths outermost first."""

    op_name = "pad"

    def __init__(self, out: TensorView, inp: TensorView, widths: Sequence[Scalar], value: Scalar) -> None:
        super().__init__([inp, value, *widths], [out])

    @property
    def pad_value(self) -> Scalar:
        return self.inputs[1]  # type: ignore[return-value]

    @property
    def widths(self) -> list[Scalar]:
        return self.inputs[2:]  # type: ignore[return-value]

    def to_string(self) -> str:
        widths = ", ".join(w.to_string() for w in self.widths)
        return _tv_op(self.output, f"pad( {self.input}, {{{widths}}} )")

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x, value = _as_tensor(values[0]), values[1]
        widths = [int(w) for w in values[2:]]
        pairs = list(zip(widths[0::2], widths[1::2], strict=True))
        crop = tuple(slice(max(-lo, 0), x.shape[d] - max(-hi, 0)) for d, (lo, hi) in enumerate(pairs))
        cropped = x[crop]
        pad = [(max(lo, 0), max(hi, 0)) for lo, hi in pairs]
        if any(lo or hi for lo, hi in pad):
            cropped = np.pad(cropped, pad, mode="constant", constant_values=value)
        return [_store(cropped, self.output)]


class SliceOp(Expr):
    """A sub-range `{start, stop, step}` of every axis (bounds already normalized)."""

    op_name = "slice"

    def __init__(self, out: TensorView, inp: TensorView, ranges: Sequence[tuple[Scalar, Scalar, Scalar]]) -> None:
        flat = [v for r in ranges for v in r]
        super().__init__([inp, *flat], [out])

    def ranges(self) -> list[tuple[Val, Val, Val]]:
        flat = self.inputs[1:]
        return [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]

    def to_string(self) -> str:
        parts = "".join(f" {{{a}, {b}, {c}}}" for a, b, c in self.ranges())
        return _tv_op(self.output, f"slice( {self.input}, {{{parts} }} )")

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x = _as_tensor(values[0])
        flat = [int(v) for v in values[1:]]
        index = tuple(slice(flat[i], max(flat[i], flat[i + 1]), flat[i + 2]) for i in range(0, len(flat), 3))
        return [x[index]]


class CatOp(Expr):
    """Concatenation of inputs that were each padded to the output's extent."""

    op_name = "cat"

    def __init__(self, out: TensorView, inputs: Sequence[TensorView], dim: int) -> None:
        self.dim = dim
        super().__init__(list(inputs), [out])

    def to_string(self) -> str:
        ins = ", ".join(v.to_string() for v in self.inputs)
        return _tv_op(self.output, f"cat( {ins}, {self.dim} )")

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        pieces = []
        for tv, padded in zip(self.inputs, values, strict=True):
            pad = tv.definition
            if not isinstance(pad, PadOp):
                raise InternalError(f"cat input {tv} is not defined by a pad")
            left = int(ev.evaluate(pad.widths[2 * self.dim]))
            right = int(ev.evaluate(pad.widths[2 * self.dim + 1]))
            arr = _as_tensor(padded)
            index = [slice(None)] * arr.ndim
            index[self.dim] = slice(left, arr.shape[self.dim] - right)
            pieces.append(arr[tuple(index)])
        return [np.concatenate(pieces, axis=self.dim)]


class IotaOp(Expr):
    op_name = "iota"

    def __init__(self, out: TensorView, length: Scalar, start: Scalar, step: Scalar) -> None:
        super().__init__([length, start, step], [out])

    def to_string(self) -> str:
        length, start, step = (v.to_string() for v in self.inputs)
        return _tv_op(self.output, f"iota({length}, {start}, {step}, {self.output.dtype.cuda});")

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        length, start, step = values
        return [_store(start + step * np.arange(int(length)), self.output)]


class FullOp(Expr):
    op_name = "full"

    def __init__(self, out: TensorView, shape: Sequence[Scalar], fill: Scalar) -> None:
        super().__init__([*shape, fill], [out])

    def to_string(self) -> str:
        shape = ", ".join(v.to_inline_string() for v in self.inputs[:-1])
        return _tv_op(self.output, f"full({{{shape}}}, {self.inputs[-1].to_inline_string()});")

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        shape = [int(v) for v in values[:-1]]
        dtype = self.output.dtype
        return [np.full(shape, saturate(values[-1], dtype), dtype=dtype.numpy)]


class MatmulOp(Expr):
    """`matmul` and `linear`: kept whole in the IR (they are not fused into kernels);
    the reference computes them with NumPy, as torch.matmul and F.linear define them."""

    def __init__(self, kind: str, out: TensorView, inputs: Sequence[TensorView]) -> None:
        self.kind = kind
        super().__init__(list(inputs), [out])

    @property
    def op_name(self) -> str:  # type: ignore[override]
        return self.kind

    def to_string(self) -> str:
        """nvFuser's MatmulOp/LinearOp::toString, stray spaces of linear's included."""
        a, b = self.inputs[0], self.inputs[1]
        if self.kind == "matmul":
            return f"{self.output}\n   = matmul({a},\n            {b})\n"
        bias = f"  ,\n          {self.inputs[2]}" if len(self.inputs) > 2 else ""
        return f"{self.output}\n   = linear({a},\n            {b}{bias}  )\n"

    def axis_pairs(self, producer: TensorView) -> list[tuple[IterDomain, IterDomain]]:
        """(producer logical axis, output axis) pairs, as nvFuser's mapMatmulOpIterDomains
        and mapLinearOpIterDomains tie them: batch axes right-aligned, M, N (or
        out_features) and K to the trailing rK. For domain_map, which must not guess."""
        out: TensorView = self.output  # type: ignore[assignment]
        r_k = [d for d in out.logical if d.is_reduction]
        kept = out.logical_no_reductions()
        pairs: list[tuple[IterDomain, IterDomain]] = []
        for position, tv in enumerate(self.inputs):
            if tv is producer:
                ids = producer.logical_no_reductions()
                pairs += self._pairs_of(position, ids, kept) + [(k, r) for k in self._k_of(position, ids) for r in r_k]
        return pairs

    def _k_of(self, position: int, ids: list[IterDomain]) -> list[IterDomain]:
        if position == 2:  # bias
            return []
        return ids[-2:-1] if self.kind == "matmul" and position == 1 and len(ids) > 1 else ids[-1:]

    def _pairs_of(
        self, position: int, ids: list[IterDomain], kept: list[IterDomain]
    ) -> list[tuple[IterDomain, IterDomain]]:
        if self.kind == "linear":
            if position == 0:
                return list(zip(ids[:-1], kept, strict=False))
            return [(ids[0], kept[-1])] if len(ids) == (2 if position == 1 else 1) else []
        a_rows = int(self.inputs[0].ndim > 1)  # type: ignore[attr-defined]
        b_cols = int(self.inputs[1].ndim > 1)  # type: ignore[attr-defined]
        n_batch = len(kept) - a_rows - b_cols
        if len(ids) == 1:
            return []
        own = [(ids[-2], kept[n_batch])] if position == 0 else [(ids[-1], kept[-1])]
        batch = ids[:-2]
        return list(zip(batch, kept[n_batch - len(batch) : n_batch], strict=True)) + own

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        arrays = [_widened(_as_tensor(v)) for v in values]
        arrays = [x.astype(np.complex128 if x.dtype.kind == "c" else np.float64) for x in arrays]
        if self.kind == "matmul":
            result = np.matmul(arrays[0], arrays[1])
        else:
            weight = arrays[1]
            result = np.matmul(arrays[0], weight.T if weight.ndim == 2 else weight)
            if len(arrays) > 2:
                result = result + arrays[2]
        return [_store(result, self.output)]


def downstream_uses(tv: TensorView, within: Collection[int] | None = None) -> Iterator[tuple[Expr, TensorView]]:
    """Every (use, tensor it computes) reachable from `tv` through uses, each tensor once;
    with `within` (expression ids), only through those expressions."""
    stack, seen = [tv], {id(tv)}
    while stack:
        val = stack.pop()
        for use in val.uses:
            if within is not None and id(use) not in within:
                continue
            for out in use.outputs:
                if isinstance(out, TensorView) and id(out) not in seen:
                    seen.add(id(out))
                    stack.append(out)
                    yield use, out


def feeds_reduction(tv: TensorView) -> bool:
    """Whether a reduction (or Welford) reads `tv` or anything computed from it."""
    return any(isinstance(use, ReductionOp | WelfordOp) for use, _ in downstream_uses(tv))
