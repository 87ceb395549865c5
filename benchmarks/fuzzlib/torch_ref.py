"""The op list of a program evaluated by torch eager, and the tolerant comparison.

Each op computes as nvFuser defines it, in torch: operands are converted to the op's
compute type first (the result's dtype, or float for a Half/BFloat16 result: nvFuser
computes narrow floats in float and rounds on store), then the result is stored in the
dtype fuser_core inferred for it. Where torch's own op has another definition, the
nvFuser one is written out: `mod` is C's `%` (torch.fmod), integer `div` truncates,
`threshold` is `x <= t ? v : x`, `logical_right_shift` clears the copied sign bits,
`erfcinv(x)` is `erfinv(1 - x)` in double, welford's `var_sum` is the variance times
the count.

Random ops (rand_like, randn_like) draw nvFuser's Philox stream, which torch does not:
by definition torch cannot compute them, so `TorchEval` raises `NeedsReference` and the
runner compares such a fusion with fuser_core's reference backend instead (which draws
the same stream, bit for bit for uniform draws).

`TorchEval(torch, program, wide=True)` runs the same ops with every float in float64:
where that result and the normal one disagree, the element is ill-conditioned (a
cancellation, a comparison of two nearly equal floats, a cast of a float that rounds
across an integer) and `compare` gives it that much more room, or for integers and
bools skips it.

`TorchEval(torch, program, nudge=signs)` moves each float reduction's result by its
own rounding bound, up or down by reduction (`signs`), before the rest of the program
uses it. A compiler sums in its own order, so its sum may round to a neighbour of
torch's; where an op downstream is discontinuous in it (`fmod` or `frac` of a Half
sum, a comparison) or cancels it (`x - mean` summed), the nudged runs move by as much
as the compiler's answer may, and `compare` gives that element the room (or skips an
integer or bool element whose nudged values differ).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .build import HostInput
from .program import FLOATS, NARROW, Extent, Op, Program, Ref, ScalarIn, Size, pad_widths

REFERENCE_ONLY = frozenset(["rand_like", "randn_like"])


class NeedsReference(Exception):
    """The program has an op torch cannot compute as nvFuser defines it: compare the fusion
    with the reference backend instead."""


COMPARE_OPS = frozenset(["eq", "ne", "lt", "le", "gt", "ge"])
PREDICATES = frozenset(["isnan", "isinf", "isfinite", "isneginf", "isposinf", "signbit", "isreal", "logical_not"])


def torch_dtype(torch: Any, name: str) -> Any:
    return {
        "Float": torch.float32,
        "Double": torch.float64,
        "Half": torch.float16,
        "BFloat16": torch.bfloat16,
        "Int": torch.int64,
        "Index": torch.int64,
        "Int32": torch.int32,
        "Bool": torch.bool,
    }[name]


def to_torch(torch: Any, host: HostInput, device: str) -> Any:
    """The input as a torch tensor on `device`, with the same strides (stride 0 kept)."""
    if host.storage is None:
        return host.value
    storage = host.storage
    if storage.dtype.name == "bfloat16":
        base = torch.from_numpy(storage.view(np.int16).copy()).view(torch.bfloat16)
    else:
        base = torch.from_numpy(storage.copy())
    return torch.as_strided(base.to(device), host.shape, host.strides)


def to_numpy(torch: Any, value: Any) -> np.ndarray:
    """A result (torch tensor, NumPy or CuPy array) on the host; narrow floats widened."""
    if type(value).__module__.split(".")[0] == "torch":
        value = value.detach().to("cpu")
        if value.dtype in (torch.bfloat16, torch.float16):
            value = value.float()
        return np.asarray(value.numpy())
    if hasattr(value, "get"):
        value = value.get()
    value = np.asarray(value)
    if value.dtype.kind == "f" or value.dtype.name == "bfloat16":
        return value.astype(np.float64)
    return value


# the unit roundoff of each float dtype (half its relative spacing)
UNIT_ROUNDOFF = {"Double": 2.0**-53, "Float": 2.0**-24, "Half": 2.0**-11, "BFloat16": 2.0**-8}


def nudge_patterns(program: Program) -> list[tuple[int, ...]]:
    """Sign patterns for the nudged runs: every reduction up, every one down, and where
    there are several, alternating both ways (two sums that cancel move apart)."""
    count = sum((2 if op.name in ("var_mean", "welford") else 1) for op in program.ops if op.name in NUDGED)
    if count == 0:
        return []
    patterns = [(1,) * count, (-1,) * count]
    if count > 1:
        patterns += [
            tuple(1 if i % 2 == 0 else -1 for i in range(count)),
            tuple(-1 if i % 2 == 0 else 1 for i in range(count)),
        ]
    return patterns


class TorchEval:
    def __init__(self, torch: Any, program: Program, wide: bool = False, nudge: tuple[int, ...] = ()) -> None:
        self.torch = torch
        self.program = program
        self.wide = wide
        self.nudge = list(nudge)
        self.env: dict[int, Any] = {}
        self.device: Any = "cpu"

    # -- dtypes --------------------------------------------------------------------------------
    def dt(self, name: str) -> Any:
        return self.torch.float64 if self.wide and name in FLOATS else torch_dtype(self.torch, name)

    def compute_dt(self, name: str) -> Any:
        return self.torch.float32 if name in NARROW and not self.wide else self.dt(name)

    def out(self, op: Op, k: int = 0) -> str:
        return self.program.dtypes[op.outs[k]]

    def tensor(self, value: Any, dtype: Any) -> Any:
        if isinstance(value, self.torch.Tensor):
            return value.to(dtype)
        return self.torch.tensor(value, dtype=dtype, device=self.device)

    def compare_dt(self, values: list[Any]) -> Any:
        """nvFuser's compute type of a comparison: the widest float among the tensors,
        else double for a float scalar, else the widest integer tensor (an int scalar
        does not widen it), else bool; narrow floats compare as float."""
        torch = self.torch
        dtypes = [v.dtype for v in values if isinstance(v, torch.Tensor)]
        floats = [d for d in dtypes if d.is_floating_point]
        if floats:
            return torch.float64 if torch.float64 in floats else torch.float32
        if any(isinstance(v, float) for v in values):
            return torch.float64
        ints = [d for d in dtypes if d != torch.bool]
        if ints:
            return torch.int64 if torch.int64 in ints else ints[0]
        return torch.int64 if any(type(v) is int for v in values) else torch.bool

    # -- running -------------------------------------------------------------------------------
    def run(self, inputs: list[Any]) -> list[Any]:
        torch = self.torch
        for inp, value in zip(self.program.inputs, inputs, strict=True):
            if isinstance(inp, ScalarIn):
                self.env[inp.vid] = value
            else:
                self.device = value.device
                self.env[inp.vid] = value.to(self.dt(inp.dtype)) if self.wide else value
        for op in self.program.ops:
            results = self.apply(op)
            for vid, value in zip(op.outs, results, strict=True):
                self.env[vid] = value
        return [self.env[o.vid] if isinstance(self.env[o.vid], torch.Tensor) else None for o in self.program.outputs]

    def value(self, item: Any) -> Any:
        if isinstance(item, Ref):
            return self.env[item.vid]
        if isinstance(item, Size):
            return int(self.env[item.vid].shape[item.axis])
        if isinstance(item, Extent):
            return math.prod(self.value(p) for p in item.parts)
        if isinstance(item, list | tuple):
            return [self.value(x) for x in item]
        return item

    def apply(self, op: Op) -> list[Any]:
        if op.name in REFERENCE_ONLY:
            raise NeedsReference(op.name)
        handler = getattr(self, "op_" + op.name, None)
        if handler is not None:
            return handler(op, [self.value(a) for a in op.args], {k: self.value(v) for k, v in op.kwargs.items()})
        if op.name in UNARY_FNS:
            return [self.unary(op, self.value(op.args[0]))]
        if op.name in BINARY_FNS:
            return [self.binary(op, [self.value(a) for a in op.args])]
        raise NotImplementedError(f"torch reference has no rule for {op.name}")

    def unary(self, op: Op, x: Any) -> Any:
        out = self.out(op)
        if op.name in PREDICATES:
            if x.dtype in (self.torch.float16, self.torch.bfloat16):
                x = x.float()
            return UNARY_FNS[op.name](self.torch, x).to(self.torch.bool)
        return UNARY_FNS[op.name](self.torch, x.to(self.compute_dt(out))).to(self.dt(out))

    def binary(self, op: Op, args: list[Any]) -> Any:
        out = self.out(op)
        torch = self.torch
        if out == "Bool":
            narrowed = [
                a.float() if isinstance(a, torch.Tensor) and a.dtype in (torch.float16, torch.bfloat16) else a
                for a in args
            ]
            cdt = torch.bool if op.name.startswith("logical") else self.compare_dt(narrowed)
            if self.wide and cdt.is_floating_point:
                cdt = torch.float64
        else:
            cdt = self.compute_dt(out)
        a, b = (self.tensor(v, cdt) for v in args)
        return BINARY_FNS[op.name](torch, a, b).to(self.dt(out))

    def elementwise(self, op: Op, args: list[Any]) -> list[Any]:
        out = self.out(op)
        cdt = self.compute_dt(out)
        return [self.tensor(a, cdt) for a in args]

    # -- ternary and composite ops ---------------------------------------------------------------
    def op_where(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        cond, a, b = args
        dt = self.dt(self.out(op))
        cond = self.tensor(cond, self.torch.bool)
        return [self.torch.where(cond, self.tensor(a, dt), self.tensor(b, dt))]

    def op_lerp(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        s, e, w = self.elementwise(op, args)
        d = e - s
        y = self.torch.where(w.abs() < 0.5, s + w * d, e - d * (1 - w))
        return [y.to(self.dt(self.out(op)))]

    def op_clamp(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        x, lo, hi = self.elementwise(op, args)
        y = self.torch.minimum(self.torch.maximum(x, lo), hi)
        return [y.to(self.dt(self.out(op)))]

    def op_threshold(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        x, t, v = self.elementwise(op, args)
        return [self.torch.where(x <= t, v, x).to(self.dt(self.out(op)))]

    def op_add_alpha(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        a, b, alpha = self.elementwise(op, args)
        return [(a + b * alpha).to(self.dt(self.out(op)))]

    def op_sub_alpha(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        a, b, alpha = self.elementwise(op, args)
        return [(a - b * alpha).to(self.dt(self.out(op)))]

    def op_addcmul(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        a, b, c, v = self.elementwise(op, args)
        return [(a + b * (c * v)).to(self.dt(self.out(op)))]

    def op_cast(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        return [args[0].to(self.dt(self.out(op)))]

    def op_set(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        return [args[0]]

    op_segment_set = op_set
    op_stride_order = op_set

    # -- reductions ---------------------------------------------------------------------------
    def acc_dt(self, out: str) -> Any:
        torch = self.torch
        if out in FLOATS:
            return torch.float64 if self.wide or out == "Double" else torch.float32
        return torch.int64

    def nudged(self, y: Any, bound: Any, out: str, n: int) -> Any:
        """`y` moved by its reduction's rounding bound (`bound` times the accumulator's
        roundoff, log2(n) + 2 times: a tree of partial sums rounds at each level) and by a
        rounding of the stored dtype, in this run's direction for this reduction."""
        if not self.nudge or out not in FLOATS:
            return y
        sign = self.nudge.pop(0)
        acc = "Double" if out == "Double" else "Float"
        levels = math.ceil(math.log2(max(n, 1))) + 2
        step = bound * (levels * UNIT_ROUNDOFF[acc]) + y.abs() * (2 * UNIT_ROUNDOFF[out])
        return y + sign * step

    def op_sum(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        out = self.out(op)
        x = args[0].to(self.acc_dt(out))
        keep = kw.get("keepdim", False)
        y = x.sum(dim=kw["dims"], keepdim=keep)
        if self.nudge and out in FLOATS:
            y = self.nudged(y, x.abs().sum(dim=kw["dims"], keepdim=keep), out, _count(x, kw["dims"]))
        return [y.to(self.dt(out))]

    def op_prod(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        out = self.out(op)
        x = args[0].to(self.acc_dt(out))
        y = x
        for d in sorted(kw["dims"], reverse=True):
            y = y.prod(dim=d, keepdim=kw.get("keepdim", False))
        if self.nudge and out in FLOATS:
            n = _count(x, kw["dims"])
            # each product rounds relative to itself: the bound grows with the count, not its log
            y = self.nudged(y, y.abs() * n / (math.ceil(math.log2(max(n, 1))) + 2), out, n)
        return [y.to(self.dt(out))]

    def op_max(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        out = self.out(op)
        y = self.torch.amax(args[0].to(self.compute_dt(out)), dim=kw["dims"], keepdim=kw.get("keepdim", False))
        return [y.to(self.dt(out))]

    def op_min(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        out = self.out(op)
        y = self.torch.amin(args[0].to(self.compute_dt(out)), dim=kw["dims"], keepdim=kw.get("keepdim", False))
        return [y.to(self.dt(out))]

    def _moments_nudged(self, x: Any, dims: list[int], keep: bool, var: Any, mean: Any, out_var: str,
                        out_mean: str, var_scale: float) -> tuple[Any, Any]:  # fmt: skip
        """Nudge a variance (times `var_scale`, e.g. the count for welford's var_sum) and
        a mean, each by the rounding bound of the sums that make it."""
        if not self.nudge or out_var not in FLOATS:
            return var, mean
        n = _count(x, dims)
        var = self.nudged(var, (x * x).sum(dim=dims, keepdim=keep) * (var_scale / max(n, 1)) * 2, out_var, n)
        if self.nudge:
            mean = self.nudged(mean, x.abs().sum(dim=dims, keepdim=keep) / max(n, 1), out_mean, n)
        return var, mean

    def op_var(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        out = self.out(op)
        x = args[0].to(self.compute_dt(out))
        keep = kw.get("keepdim", False)
        y = self.torch.var(x, dim=kw["dims"], correction=kw["correction"], keepdim=keep)
        if self.nudge and out in FLOATS:
            n = _count(x, kw["dims"])
            y = self.nudged(y, (x * x).sum(dim=kw["dims"], keepdim=keep) * 2 / max(n - kw["correction"], 1), out, n)
        return [y.to(self.dt(out))]

    def op_var_mean(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        out = self.out(op)
        x = args[0].to(self.compute_dt(out))
        keep = kw.get("keepdim", False)
        var, mean = self.torch.var_mean(x, dim=kw["dims"], correction=kw["correction"], keepdim=keep)
        n = _count(x, kw["dims"])
        var, mean = self._moments_nudged(x, kw["dims"], keep, var, mean, out, self.out(op, 1),
                                         n / max(n - kw["correction"], 1))  # fmt: skip
        return [var.to(self.dt(out)), mean.to(self.dt(self.out(op, 1)))]

    def op_welford(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        x = args[0].to(self.compute_dt(self.out(op)))
        dims = kw["dims"]
        count = math.prod(x.shape[d] for d in dims)
        var, mean = self.torch.var_mean(x, dim=dims, correction=0)
        var_sum = var * count
        var_sum, mean = self._moments_nudged(x, dims, False, var_sum, mean, self.out(op, 1), self.out(op), count)
        n = self.torch.full(mean.shape, count, dtype=self.torch.int64, device=x.device)
        return [mean.to(self.dt(self.out(op))), var_sum.to(self.dt(self.out(op, 1))), n]

    # -- shapes -------------------------------------------------------------------------------
    def op_broadcast(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        x, flags = args[0], kw["is_broadcast_dim"]
        shape, it = [], iter(x.shape)
        for flag in flags:
            shape.append(1 if flag else next(it))
        return [x.reshape(shape)]

    def op_broadcast_in_dim(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        x, target, dims = args[0], kw["shape"], kw["broadcast_dims"]
        view = [1] * len(target)
        for j, d in enumerate(dims):
            view[d] = x.shape[j]
        return [x.reshape(view).expand(target)]

    def op_expand(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        return [args[0].expand(kw["shape"])]

    def op_reshape(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        return [args[0].reshape(kw["new_shape"])]

    def op_squeeze(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        x = args[0]
        for d in sorted(kw["dims"], reverse=True):
            x = x.squeeze(d)
        return [x]

    def op_permute(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        return [args[0].permute(kw["dims"])]

    def op_slice(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        index = tuple(slice(s, e) for s, e in zip(kw["start_indices"], kw["end_indices"], strict=True))
        return [args[0][index]]

    def op_pad(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        x = args[0]
        metas = {op.args[0].vid: _Shape(tuple(x.shape))}
        widths = pad_widths(op, metas, self.program)  # type: ignore[arg-type]
        shape = [n + lo + hi for n, (lo, hi) in zip(x.shape, widths, strict=True)]
        y = self.torch.full(shape, kw["value"], dtype=x.dtype, device=x.device) if shape else x.clone()
        src, dst = [], []
        for n, (lo, hi) in zip(x.shape, widths, strict=True):
            src.append(slice(max(0, -lo), n - max(0, -hi)))
            dst.append(slice(max(0, lo), max(0, lo) + n - max(0, -lo) - max(0, -hi)))
        y[tuple(dst)] = x[tuple(src)]
        return [y]

    def op_cat(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        return [self.torch.cat(args[0], dim=kw["dim"])]

    def op_full(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        dt = self.dt(self.out(op))
        return [self.torch.full(kw["shape"], kw["fill_value"], dtype=dt, device=self.device)]

    def op_iota(self, op: Op, args: list[Any], kw: dict[str, Any]) -> list[Any]:
        i = self.torch.arange(kw["length"], dtype=self.torch.int64, device=self.device)
        return [(i * kw["step"] + kw["start"]).to(self.dt(self.out(op)))]


# reductions whose float result depends on the order of its terms (max and min do not)
NUDGED = frozenset(["sum", "prod", "var", "var_mean", "welford"])


def _count(x: Any, dims: list[int]) -> int:
    return math.prod(int(x.shape[d]) for d in dims)


@dataclass(frozen=True)
class _Shape:
    shape: tuple[int, ...]

    @property
    def rank(self) -> int:
        return len(self.shape)


def _logical_right_shift(torch: Any, a: Any, b: Any) -> Any:
    bits = 8 * a.element_size()
    shifted = torch.bitwise_right_shift(a, b)
    keep = torch.where(
        b >= bits, torch.zeros_like(b), torch.bitwise_left_shift(torch.ones_like(b), (bits - b).clamp(max=bits - 1)) - 1
    )
    full = (b == 0) | (bits - b >= bits)
    return torch.where(full, a, shifted & keep)


def _erfcinv(torch: Any, x: Any) -> Any:
    return torch.erfinv(1 - x.double()).to(x.dtype)


def _int_div(torch: Any, a: Any, b: Any) -> Any:
    if a.dtype.is_floating_point:
        return a / b
    return torch.div(a, b, rounding_mode="trunc")


UNARY_FNS: dict[str, Any] = {
    "abs": lambda t, x: t.abs(x),
    "neg": lambda t, x: t.neg(x),
    "exp": lambda t, x: t.exp(x),
    "exp2": lambda t, x: t.exp2(x),
    "expm1": lambda t, x: t.expm1(x),
    "log": lambda t, x: t.log(x),
    "log2": lambda t, x: t.log2(x),
    "log10": lambda t, x: t.log10(x),
    "log1p": lambda t, x: t.log1p(x),
    "sin": lambda t, x: t.sin(x),
    "cos": lambda t, x: t.cos(x),
    "tan": lambda t, x: t.tan(x),
    "asin": lambda t, x: t.asin(x),
    "acos": lambda t, x: t.acos(x),
    "atan": lambda t, x: t.atan(x),
    "sinh": lambda t, x: t.sinh(x),
    "cosh": lambda t, x: t.cosh(x),
    "tanh": lambda t, x: t.tanh(x),
    "sigmoid": lambda t, x: t.sigmoid(x),
    "silu": lambda t, x: t.nn.functional.silu(x),
    "relu": lambda t, x: t.relu(x),
    "sqrt": lambda t, x: t.sqrt(x),
    "rsqrt": lambda t, x: t.rsqrt(x),
    "reciprocal": lambda t, x: t.reciprocal(x),
    "erf": lambda t, x: t.erf(x),
    "erfc": lambda t, x: t.erfc(x),
    "lgamma": lambda t, x: t.lgamma(x),
    "floor": lambda t, x: t.floor(x),
    "ceil": lambda t, x: t.ceil(x),
    "round": lambda t, x: t.round(x),
    "trunc": lambda t, x: t.trunc(x),
    "sign": lambda t, x: t.sign(x),
    "isnan": lambda t, x: t.isnan(x),
    "isinf": lambda t, x: t.isinf(x),
    "isfinite": lambda t, x: t.isfinite(x),
    "logical_not": lambda t, x: t.logical_not(x),
    "bitwise_not": lambda t, x: t.bitwise_not(x),
    "acosh": lambda t, x: t.acosh(x),
    "asinh": lambda t, x: t.asinh(x),
    "atanh": lambda t, x: t.atanh(x),
    "erfinv": lambda t, x: t.erfinv(x),
    "erfcinv": _erfcinv,
    "frac": lambda t, x: t.frac(x),
    "signbit": lambda t, x: t.signbit(x),
    "isneginf": lambda t, x: t.isneginf(x),
    "isposinf": lambda t, x: t.isposinf(x),
    "isreal": lambda t, x: t.isreal(x),
}

BINARY_FNS: dict[str, Any] = {
    "add": lambda t, a, b: a + b,
    "sub": lambda t, a, b: a - b,
    "mul": lambda t, a, b: a * b,
    "div": _int_div,
    "truediv": lambda t, a, b: a / b,
    "mod": lambda t, a, b: t.fmod(a, b),
    "fmod": lambda t, a, b: t.fmod(a, b),
    "remainder": lambda t, a, b: t.remainder(a, b),
    "pow": lambda t, a, b: t.pow(a, b),
    "atan2": lambda t, a, b: t.atan2(a, b),
    "maximum": lambda t, a, b: t.maximum(a, b),
    "minimum": lambda t, a, b: t.minimum(a, b),
    "eq": lambda t, a, b: a == b,
    "ne": lambda t, a, b: a != b,
    "lt": lambda t, a, b: a < b,
    "le": lambda t, a, b: a <= b,
    "gt": lambda t, a, b: a > b,
    "ge": lambda t, a, b: a >= b,
    "logical_and": lambda t, a, b: t.logical_and(a, b),
    "logical_or": lambda t, a, b: t.logical_or(a, b),
    "bitwise_and": lambda t, a, b: t.bitwise_and(a, b),
    "bitwise_or": lambda t, a, b: t.bitwise_or(a, b),
    "bitwise_xor": lambda t, a, b: t.bitwise_xor(a, b),
    "bitwise_left_shift": lambda t, a, b: t.bitwise_left_shift(a, b),
    "bitwise_right_shift": lambda t, a, b: t.bitwise_right_shift(a, b),
    "logical_right_shift": _logical_right_shift,
    "nextafter": lambda t, a, b: t.nextafter(a, b),
    "gcd": lambda t, a, b: t.gcd(a, b),
}


# -- comparison -------------------------------------------------------------------------------

# (rtol, atol as a fraction of the output's largest magnitude), per dtype
TOLERANCE = {
    "Double": (1e-9, 1e-10),
    "Float": (1e-4, 1e-5),
    "Half": (4e-3, 2e-3),
    "BFloat16": (3e-2, 1.6e-2),
}
SLACK = 4.0  # times the float64 evaluation's distance from the normal one


def compare(
    got: Any,
    want: np.ndarray,
    wide: np.ndarray,
    dtype: str,
    loose: bool,
    precision: str | None = None,
    nudged: Sequence[np.ndarray] = (),
) -> str | None:
    """None when `got` matches torch's `want` (with `wide`, the float64 evaluation, and
    `nudged`, the runs with reductions moved by their rounding bounds, as the measure of
    each element's conditioning); else what differs. Floats are held to the tolerance of
    `precision`, the least precise float the value was computed in (a Float result cast
    to Double is as good as a Float), where that is looser than `dtype`'s."""
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"shape {got.shape}, torch has {want.shape}"
    if dtype not in FLOATS:
        stable = want == wide
        for other in nudged:
            stable &= want == other
        bad = (got != want) & stable
        if bad.any():
            return _describe(bad, got, want, wide, "exact")
        return None
    g, w, w64 = (np.asarray(a, dtype=np.float64) for a in (got, want, wide))
    rtol, atol = TOLERANCE[dtype]
    if precision is not None and TOLERANCE[precision][0] > rtol:
        rtol, atol = TOLERANCE[precision]
    if loose:
        rtol, atol = rtol * 10, atol * 10
    with np.errstate(all="ignore"):
        finite = np.isfinite(w64) & np.isfinite(w)
        scale = float(np.abs(w64[finite]).max()) if finite.any() else 1.0
        same_special = ~np.isfinite(w) & ((np.isnan(w) & np.isnan(w64)) | (w == w64))
        tol = atol * scale + rtol * np.abs(w) + SLACK * np.abs(w - w64)
        for other in nudged:
            moved = np.abs(np.asarray(other, dtype=np.float64) - w)
            tol = tol + np.where(np.isfinite(moved), moved, np.inf)
        close = np.abs(g - w) <= tol
        ok_special = (np.isnan(g) & np.isnan(w)) | (g == w)
        bad = np.where(finite, ~close, np.where(same_special, ~ok_special, False))
        bad |= np.isnan(g) & finite  # never NaN for a number
    if bad.any():
        return _describe(bad, g, w, w64, f"rtol {rtol:g}, atol {atol * scale:.3g}")
    return None


def _describe(bad: np.ndarray, got: np.ndarray, want: np.ndarray, wide: np.ndarray, tol: str) -> str:
    if got.ndim == 0:
        return f"got {got.item()!r}, torch {want.item()!r} (float64 {wide.item()!r}; {tol})"
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    return (
        f"{int(bad.sum())} of {bad.size} elements differ; first at {where}: got {got[where]!r}, "
        f"torch {want[where]!r} (float64 {wide[where]!r}; {tol})"
    )
