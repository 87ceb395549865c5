"""`fd.ops`: nvFuser's op names and argument forms, turned into IR by fuser_core.ops.

Arguments may be Tensor/Scalar handles, Python numbers (which become constants),
and lists of ints or Scalars (or a Vector) for shapes. Both `dims=` and the older
`axes=` are accepted by reductions.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fuser_core.errors import FuserError
from fuser_core.frontend.call_site import constant, dtype_arg, int_arg, user_call
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.ir.base import Val
from fuser_core.ir.dtype import DataType
from fuser_core.ir.op_types import BinaryOpType, UnaryOpType
from fuser_core.ir.scalar import Scalar as IrScalar
from fuser_core.ir.tensor_view import TensorView
from fuser_core.ops import arith, creation, reductions, resize
from fuser_core.ops import indexing as indexing_ops
from fuser_core.ops import layout as layout_ops
from fuser_core.ops import library as library_ops
from fuser_core.ops import matmul as matmul_ops
from fuser_core.ops import normalization as normalization_ops
from fuser_core.ops import random as random_ops
from fuser_core.ops import shape as shape_ops
from fuser_core.ops.utils import broadcast as broadcast_tv
from fuser_core.ops.utils import normalize_axis, tv_name

if TYPE_CHECKING:
    from fuser_core.frontend.fusion_definition import FusionDefinition

UNARY_OPS: dict[str, UnaryOpType] = {
    "abs": UnaryOpType.Abs, "neg": UnaryOpType.Neg, "exp": UnaryOpType.Exp, "exp2": UnaryOpType.Exp2,
    "expm1": UnaryOpType.Expm1, "log": UnaryOpType.Log, "log2": UnaryOpType.Log2,
    "log10": UnaryOpType.Log10, "log1p": UnaryOpType.Log1p, "sin": UnaryOpType.Sin,
    "cos": UnaryOpType.Cos, "tan": UnaryOpType.Tan, "asin": UnaryOpType.Asin,
    "acos": UnaryOpType.Acos, "atan": UnaryOpType.Atan, "sinh": UnaryOpType.Sinh,
    "cosh": UnaryOpType.Cosh, "tanh": UnaryOpType.Tanh, "sigmoid": UnaryOpType.Sigmoid,
    "silu": UnaryOpType.Silu, "relu": UnaryOpType.Relu, "sqrt": UnaryOpType.Sqrt,
    "rsqrt": UnaryOpType.Rsqrt, "reciprocal": UnaryOpType.Reciprocal, "erf": UnaryOpType.Erf,
    "erfc": UnaryOpType.Erfc, "lgamma": UnaryOpType.Lgamma, "floor": UnaryOpType.Floor,
    "ceil": UnaryOpType.Ceil, "round": UnaryOpType.Round, "trunc": UnaryOpType.Trunc,
    "sign": UnaryOpType.Sign, "isnan": UnaryOpType.IsNan, "isinf": UnaryOpType.IsInf,
    "isfinite": UnaryOpType.IsFinite, "logical_not": UnaryOpType.LogicalNot,
    "bitwise_not": UnaryOpType.BitwiseNot, "acosh": UnaryOpType.Acosh, "asinh": UnaryOpType.Asinh,
    "atanh": UnaryOpType.Atanh, "erfinv": UnaryOpType.Erfinv, "erfcinv": UnaryOpType.Erfcinv,
    "frac": UnaryOpType.Frac, "signbit": UnaryOpType.Signbit, "isneginf": UnaryOpType.IsNegInf,
    "isposinf": UnaryOpType.IsPosInf, "isreal": UnaryOpType.IsReal,
}  # fmt: skip

BINARY_OPS: dict[str, BinaryOpType] = {
    "add": BinaryOpType.Add, "sub": BinaryOpType.Sub, "mul": BinaryOpType.Mul,
    "div": BinaryOpType.Div, "mod": BinaryOpType.Mod, "fmod": BinaryOpType.Fmod,
    "remainder": BinaryOpType.Remainder, "pow": BinaryOpType.Pow, "atan2": BinaryOpType.Atan2,
    "maximum": BinaryOpType.Max, "minimum": BinaryOpType.Min, "eq": BinaryOpType.Eq,
    "ne": BinaryOpType.NE, "lt": BinaryOpType.LT, "le": BinaryOpType.LE, "gt": BinaryOpType.GT,
    "ge": BinaryOpType.GE, "logical_and": BinaryOpType.LogicalAnd,
    "logical_or": BinaryOpType.LogicalOr, "bitwise_and": BinaryOpType.BitwiseAnd,
    "bitwise_or": BinaryOpType.BitwiseOr, "bitwise_xor": BinaryOpType.BitwiseXor,
    "bitwise_left_shift": BinaryOpType.Lshift, "bitwise_right_shift": BinaryOpType.Rshift,
    "nextafter": BinaryOpType.Nextafter, "gcd": BinaryOpType.Gcd,
}  # fmt: skip

# nvFuser ops this project does not compile or evaluate yet: a clear error, not a crash.
UNSUPPORTED_OPS = frozenset(
    """
    scaled_mm grouped_mm
    """.split()  # noqa: SIM905
)

REDUCTIONS = {
    "sum": BinaryOpType.Add,
    "prod": BinaryOpType.Mul,
    "max": BinaryOpType.Max,
    "min": BinaryOpType.Min,
}


class Operators:
    """The `fd.ops` namespace."""

    def __init__(self, fd: FusionDefinition) -> None:
        self.fd = fd

    # -- argument conversion ----------------------------------------------------------
    def _val(self, x: Any, op: str, arg: str = "arg") -> Val:
        if isinstance(x, Tensor):
            return x.tv
        if isinstance(x, Scalar):
            return x.val
        if isinstance(x, (bool, int, float, complex)) or type(x).__module__ == "numpy":
            return constant(x, None, op)
        raise FuserError(f"{arg} must be a tensor or a scalar, got {type(x).__name__} {x!r}", op=op)

    def _tensor(self, x: Any, op: str, arg: str = "arg") -> TensorView:
        if not isinstance(x, Tensor):
            raise FuserError(f"{arg} must be a tensor, got {type(x).__name__} {x!r}", op=op)
        return x.tv

    def _scalar(self, x: Any, op: str, dtype: DataType | None = None) -> IrScalar:
        if isinstance(x, Scalar):
            return x.val
        if isinstance(x, Tensor):
            raise FuserError(f"expected a scalar, got tensor T{x.tv.name}", op=op)
        return constant(x, dtype, op)

    def _shape(self, x: Any, op: str, arg: str = "shape") -> list[IrScalar]:
        if isinstance(x, Vector):
            return list(x.vals)
        if isinstance(x, (list, tuple)):
            vals = [self._scalar(v, op, DataType.Int if isinstance(v, int) else None) for v in x]
            for val in vals:  # sizes, widths and bounds count elements
                if not val.dtype.is_integral:
                    raise FuserError(f"{arg} entries must be integers, got {val} ({val.dtype!r})", op=op)
            return vals
        raise FuserError(f"{arg} must be a list of ints or scalars, got {type(x).__name__}", op=op)

    def _ints(self, x: Any, op: str, arg: str) -> list[int]:
        if isinstance(x, int) and not isinstance(x, bool):
            return [x]
        if not isinstance(x, (list, tuple)):
            raise FuserError(f"{arg} must be a list of ints, got {x!r}", op=op)
        return [int_arg(v, op, arg) for v in x]

    def _wrap(self, value: Val) -> Tensor | Scalar:
        if isinstance(value, TensorView):
            return Tensor(self.fd, value)
        return Scalar(self.fd, value)  # type: ignore[arg-type]

    # -- element-wise -----------------------------------------------------------------
    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name in UNARY_OPS:
            return _unary_method(self, name)
        if name in BINARY_OPS:
            return _binary_method(self, name)
        if name in UNSUPPORTED_OPS:
            return _unsupported_method(self, name)
        raise AttributeError(f"fd.ops has no op {name!r}{_closest_op(name)}")

    @user_call("truediv")
    def truediv(self, arg1: Any, arg2: Any) -> Tensor | Scalar:
        a, b = self._val(arg1, "truediv", "arg1"), self._val(arg2, "truediv", "arg2")
        return self._wrap(arith.binary(BinaryOpType.Div, a, b, promotion="float"))

    @user_call("cast")
    def cast(self, arg: Any, dtype: DataType) -> Tensor | Scalar:
        return self._wrap(arith.cast(self._val(arg, "cast"), dtype_arg(dtype, "cast")))

    @user_call("where")
    def where(self, pred: Any, arg1: Any, arg2: Any) -> Tensor | Scalar:
        vals = [self._val(v, "where", n) for v, n in ((pred, "pred"), (arg1, "arg1"), (arg2, "arg2"))]
        return self._wrap(arith.where(*vals))

    @user_call("lerp")
    def lerp(self, start: Any, end: Any, weight: Any) -> Tensor | Scalar:
        return self._wrap(arith.lerp(*(self._val(v, "lerp") for v in (start, end, weight))))

    @user_call("clamp")
    def clamp(self, arg: Any, min: Any, max: Any) -> Tensor | Scalar:
        return self._wrap(arith.clamp(*(self._val(v, "clamp") for v in (arg, min, max))))

    @user_call("threshold")
    def threshold(self, arg: Any, threshold: Any, value: Any) -> Tensor | Scalar:
        return self._wrap(arith.threshold(*(self._val(v, "threshold") for v in (arg, threshold, value))))

    @user_call("add_alpha")
    def add_alpha(self, arg1: Any, arg2: Any, arg3: Any) -> Tensor | Scalar:
        a, b, alpha = (self._val(v, "add_alpha", n) for v, n in ((arg1, "arg1"), (arg2, "arg2"), (arg3, "arg3")))
        return self._wrap(arith.add_alpha(a, b, alpha))

    @user_call("sub_alpha")
    def sub_alpha(self, arg1: Any, arg2: Any, arg3: Any) -> Tensor | Scalar:
        a, b, alpha = (self._val(v, "sub_alpha", n) for v, n in ((arg1, "arg1"), (arg2, "arg2"), (arg3, "arg3")))
        return self._wrap(arith.add_alpha(a, b, alpha, BinaryOpType.Sub))

    @user_call("addcmul")
    def addcmul(self, arg1: Any, arg2: Any, arg3: Any, arg4: Any) -> Tensor | Scalar:
        names = ("arg1", "arg2", "arg3", "arg4")
        vals = [self._val(v, "addcmul", n) for v, n in zip((arg1, arg2, arg3, arg4), names, strict=True)]
        return self._wrap(arith.addcmul(*vals))

    @user_call("logical_right_shift")
    def logical_right_shift(self, arg1: Any, arg2: Any) -> Tensor | Scalar:
        x, shift = self._val(arg1, "logical_right_shift", "arg1"), self._val(arg2, "logical_right_shift", "arg2")
        return self._wrap(arith.logical_right_shift(x, shift))

    @user_call("real")
    def real(self, arg: Any) -> Tensor | Scalar:
        return self._wrap(arith.real(self._val(arg, "real")))

    @user_call("imag")
    def imag(self, arg: Any) -> Tensor | Scalar:
        return self._wrap(arith.imag(self._val(arg, "imag")))

    @user_call("set")
    def set(self, arg: Any) -> Tensor:
        return Tensor(self.fd, arith.set_(self._tensor(arg, "set")))

    @user_call("segment_set")
    def segment_set(self, arg: Any) -> Tensor:
        return Tensor(self.fd, arith.set_(self._tensor(arg, "segment_set"), "SegmenterSet"))

    # -- reductions -------------------------------------------------------------------
    def _reduction_args(
        self, op: str, tv: TensorView, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[list[int], bool, DataType]:
        """(dims, keepdim, dtype) from `(arg, dims, keepdim, dtype)`, `(arg, dtype)`,
        `dims=`/`axes=`/`dim=` keywords; no dims means all axes."""
        args = list(args)  # type: ignore[assignment]
        if args and isinstance(args[0], DataType):
            kwargs.setdefault("dtype", args.pop(0))  # type: ignore[attr-defined]
        names = ["dims", "keepdim", "dtype"]
        for name, value in zip(names, args, strict=False):
            if name in kwargs:
                raise FuserError(f"{name} given twice", op=op)
            kwargs[name] = value
        dims = None
        for key in ("dims", "axes", "dim"):
            if key in kwargs:
                if dims is not None:
                    raise FuserError("give only one of dims=, axes=, dim=", op=op)
                dims = self._ints(kwargs.pop(key), op, key)
        unknown = set(kwargs) - {"keepdim", "dtype", "correction"}
        if unknown:
            raise FuserError(f"unexpected argument(s) {sorted(unknown)}", op=op)
        dtype = dtype_arg(kwargs.get("dtype", DataType.Null), op)
        keepdim = bool(kwargs.get("keepdim", False))
        return (list(range(tv.ndim)) if dims is None else dims), keepdim, dtype

    def _reduce(self, op: str, arg: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Tensor:
        tv = self._tensor(arg, op)
        dims, keepdim, dtype = self._reduction_args(op, tv, args, kwargs)
        self.fd._recorder.canonical(op, (arg,), {"dims": dims, "keepdim": keepdim, "dtype": dtype})
        return Tensor(self.fd, reductions.reduction(REDUCTIONS[op], tv, dims, keepdim, dtype, op_name=op))

    @user_call("sum")
    def sum(self, arg: Any, *args: Any, **kwargs: Any) -> Tensor:
        return self._reduce("sum", arg, args, kwargs)

    @user_call("prod")
    def prod(self, arg: Any, *args: Any, **kwargs: Any) -> Tensor:
        return self._reduce("prod", arg, args, kwargs)

    @user_call("max")
    def max(self, arg: Any, *args: Any, **kwargs: Any) -> Tensor:
        return self._reduce("max", arg, args, kwargs)

    @user_call("min")
    def min(self, arg: Any, *args: Any, **kwargs: Any) -> Tensor:
        return self._reduce("min", arg, args, kwargs)

    def _variance_args(
        self, op: str, arg: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[TensorView, list[int], int, bool]:
        tv = self._tensor(arg, op)
        names = ["dims", "correction", "keepdim"]
        for name, value in zip(names, args, strict=False):
            kwargs[name] = value
        dims_arg = next((kwargs.pop(k) for k in ("dims", "axes", "dim") if k in kwargs), None)
        dims = list(range(tv.ndim)) if dims_arg is None else self._ints(dims_arg, op, "dims")
        correction = int_arg(kwargs.pop("correction", 1), op, "correction")
        keepdim = bool(kwargs.pop("keepdim", False))
        if kwargs:
            raise FuserError(f"unexpected argument(s) {sorted(kwargs)}", op=op)
        self.fd._recorder.canonical(op, (arg,), {"dims": dims, "correction": correction, "keepdim": keepdim})
        return tv, dims, correction, keepdim

    @user_call("var")
    def var(self, arg: Any, *args: Any, **kwargs: Any) -> Tensor:
        tv, dims, correction, keepdim = self._variance_args("var", arg, args, kwargs)
        return Tensor(self.fd, reductions.var(tv, dims, correction, keepdim))

    @user_call("var_mean")
    def var_mean(self, arg: Any, *args: Any, **kwargs: Any) -> tuple[Tensor, Tensor]:
        tv, dims, correction, keepdim = self._variance_args("var_mean", arg, args, kwargs)
        variance, mean = reductions.var_mean(tv, dims, correction, keepdim)
        return Tensor(self.fd, variance), Tensor(self.fd, mean)

    # -- shapes -----------------------------------------------------------------------
    @user_call("welford")
    def welford(self, arg: Any, dims: Any) -> tuple[Tensor, Tensor, Tensor]:
        """nvFuser's Welford: (avg, var_sum, n) over `dims`."""
        tv = self._tensor(arg, "welford")
        avg, var_sum, n = reductions.welford(tv, self._ints(dims, "welford", "dims"))
        return Tensor(self.fd, avg), Tensor(self.fd, var_sum), Tensor(self.fd, n)

    @user_call("batch_norm")
    def batch_norm(
        self,
        arg: Any,
        weight: Any,
        bias: Any,
        running_mean: Any,
        running_var: Any,
        momentum: Any,
        eps: Any,
        training: Any,
        channels_last: Any = False,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """(output, mean, invstd); with training and running stats, the updated stats are
        aliased outputs: each execution writes them back into those inputs."""
        op = "batch_norm"
        named = (weight, "weight"), (bias, "bias"), (running_mean, "running_mean"), (running_var, "running_var")
        w, b, rm, rv = (None if t is None else self._tensor(t, op, name) for t, name in named)
        for flag, name in ((training, "training"), (channels_last, "channels_last")):
            if not isinstance(flag, bool):
                raise FuserError(f"{name} must be True or False, got {flag!r}", op=op)
        result = normalization_ops.batch_norm(
            self._tensor(arg, op, "arg"),
            w,
            b,
            rm,
            rv,
            self._scalar(momentum, op, DataType.Double),
            self._scalar(eps, op, DataType.Double),
            training,
            channels_last,
        )
        for updated, running in result.aliases:
            self.fd._alias_output(updated, running, op)
        return Tensor(self.fd, result.output), Tensor(self.fd, result.mean), Tensor(self.fd, result.invstd)

    @user_call("stride_order")
    def stride_order(self, arg: Any, stride_order: Any) -> Tensor:
        tv = self._tensor(arg, "stride_order")
        return Tensor(self.fd, layout_ops.stride_order(tv, self._ints(stride_order, "stride_order", "stride_order")))

    @user_call("broadcast_in_dim")
    def broadcast_in_dim(self, arg: Any, shape: Any, broadcast_dims: Any) -> Tensor:
        tv = self._tensor(arg, "broadcast_in_dim")
        sizes = self._shape(shape, "broadcast_in_dim")
        dims = self._ints(broadcast_dims, "broadcast_in_dim", "broadcast_dims")
        return Tensor(self.fd, shape_ops.broadcast_in_dim(tv, sizes, dims))

    @user_call("broadcast")
    def broadcast(self, arg: Any, is_broadcast_dim: Sequence[bool]) -> Tensor:
        tv = self._tensor(arg, "broadcast")
        flags = [bool(f) for f in is_broadcast_dim]
        if len(flags) - sum(flags) != tv.ndim:
            raise FuserError(
                f"is_broadcast_dim {flags} must have one False per axis of {tv_name(tv)} ({tv.ndim})",
                op="broadcast",
                tensor=tv_name(tv),
            )
        return Tensor(self.fd, broadcast_tv(tv, flags))

    @user_call("squeeze")
    def squeeze(self, arg: Any, dims: Any, squeeze_expanded: bool = False) -> Tensor:
        tv = self._tensor(arg, "squeeze")
        return Tensor(self.fd, shape_ops.squeeze(tv, self._ints(dims, "squeeze", "dims"), squeeze_expanded))

    @user_call("permute")
    def permute(self, arg: Any, dims: Any) -> Tensor:
        tv = self._tensor(arg, "permute")
        return Tensor(self.fd, shape_ops.permute(tv, self._ints(dims, "permute", "dims")))

    @user_call("expand")
    def expand(self, arg: Any, shape: Any) -> Tensor:
        tv = self._tensor(arg, "expand")
        return Tensor(self.fd, shape_ops.expand(tv, self._shape(shape, "expand")))

    @user_call("reshape")
    def reshape(self, arg: Any, new_shape: Any, *rest: Any) -> Tensor:
        tv = self._tensor(arg, "reshape")
        if rest:  # the old form reshape(arg, original_shape, new_shape)
            new_shape = rest[0]
        return Tensor(self.fd, shape_ops.reshape(tv, self._shape(new_shape, "reshape", "new_shape")))

    view = reshape

    @user_call("pad")
    def pad(self, arg: Any, pad_widths: Any, value: Any = None) -> Tensor:
        tv = self._tensor(arg, "pad")
        widths = self._shape(pad_widths, "pad", "pad_widths")
        fill = None if value is None else self._scalar(value, "pad")
        return Tensor(self.fd, resize.pad(tv, widths, fill))

    @user_call("slice")
    def slice(
        self,
        arg: Any,
        start_indices: Any,
        end_indices: Any,
        strides: Any = None,
        manual_normalization: bool = False,
    ) -> Tensor:
        tv = self._tensor(arg, "slice")
        starts = self._shape(start_indices, "slice", "start_indices")
        stops = self._shape(end_indices, "slice", "end_indices")
        steps = None if strides is None else self._shape(strides, "slice", "strides")
        _check_slice_args(tv, starts, stops, steps)
        return Tensor(self.fd, resize.slice_(tv, starts, stops, steps, manual_normalization))

    @user_call("cat")
    def cat(self, tensors: Sequence[Any], dim: int = 0, manual_padding: bool = False) -> Tensor:
        tvs = [self._tensor(t, "cat", "tensors") for t in tensors]
        return Tensor(self.fd, resize.cat(tvs, int_arg(dim, "cat", "dim"), manual_padding))

    # -- sizes ------------------------------------------------------------------------
    @user_call("size")
    def size(self, arg: Any, dim: int) -> Scalar:
        tv = self._tensor(arg, "size")
        pos = _normalize(dim, tv, "size")
        return Scalar(self.fd, tv.logical_no_reductions()[pos].maybe_expanded_extent)

    @user_call("shape")
    def shape(self, arg: Any) -> Vector:
        tv = self._tensor(arg, "shape")
        return Vector(self.fd, [d.maybe_expanded_extent for d in tv.logical_no_reductions()])

    @user_call("tensor_sizes")
    def tensor_sizes(self, arg: Any) -> list[Scalar]:
        tv = self._tensor(arg, "tensor_sizes")
        return [Scalar(self.fd, d.maybe_expanded_extent) for d in tv.logical_no_reductions()]

    # -- factories --------------------------------------------------------------------
    @user_call("full")
    def full(self, shape: Any, fill_value: Any, dtype: DataType) -> Tensor:
        dt = dtype_arg(dtype, "full")
        sizes = self._shape(shape, "full")
        return Tensor(self.fd, creation.full(sizes, self._scalar(fill_value, "full"), dt))

    @user_call("iota")
    def iota(self, length: Any, start: Any = None, step: Any = None, dtype: DataType = DataType.Int) -> Tensor:
        dt = dtype_arg(dtype, "iota")
        n = self._scalar(length, "iota")
        first = None if start is None else self._scalar(start, "iota")
        stride = None if step is None else self._scalar(step, "iota")
        return Tensor(self.fd, creation.iota(n, first, stride, dt))

    # -- random numbers ---------------------------------------------------------------
    def _rng_state(self, op: str, rng_seed: Any, rng_offset: Any) -> tuple[IrScalar | None, IrScalar | None]:
        seed = None if rng_seed is None else self._scalar(rng_seed, op, DataType.Int)
        offset = None if rng_offset is None else self._scalar(rng_offset, op, DataType.Int)
        return seed, offset

    @user_call("uniform")
    def uniform(
        self,
        minval: Any,
        maxval: Any,
        shape: Any,
        *,
        rng_seed: Any = None,
        rng_offset: Any = None,
        dtype: DataType = DataType.Float,
    ) -> Tensor:
        low, high = self._scalar(minval, "uniform"), self._scalar(maxval, "uniform")
        seed, offset = self._rng_state("uniform", rng_seed, rng_offset)
        sizes = self._shape(shape, "uniform")
        dt = dtype_arg(dtype, "uniform")
        return Tensor(self.fd, random_ops.uniform(low, high, sizes, dt, seed, offset))

    @user_call("normal")
    def normal(
        self,
        mean: Any,
        std: Any,
        shape: Any,
        *,
        rng_seed: Any = None,
        rng_offset: Any = None,
        dtype: DataType = DataType.Float,
    ) -> Tensor:
        mu, sigma = self._scalar(mean, "normal"), self._scalar(std, "normal")
        seed, offset = self._rng_state("normal", rng_seed, rng_offset)
        sizes = self._shape(shape, "normal")
        return Tensor(self.fd, random_ops.normal(mu, sigma, sizes, dtype_arg(dtype, "normal"), seed, offset))

    @user_call("rand_like")
    def rand_like(self, arg: Any, *, rng_seed: Any = None, rng_offset: Any = None) -> Tensor:
        seed, offset = self._rng_state("rand_like", rng_seed, rng_offset)
        return Tensor(self.fd, random_ops.rand_like(self._tensor(arg, "rand_like"), seed, offset))

    @user_call("randn_like")
    def randn_like(self, arg: Any, *, rng_seed: Any = None, rng_offset: Any = None) -> Tensor:
        seed, offset = self._rng_state("randn_like", rng_seed, rng_offset)
        return Tensor(self.fd, random_ops.randn_like(self._tensor(arg, "randn_like"), seed, offset))

    # -- indexing (library ops: expr_eval) ------------------------------------------------
    @user_call("index_select")
    def index_select(self, arg: Any, index: Any, dim: int) -> Tensor:
        tv, idx = self._tensor(arg, "index_select"), self._tensor(index, "index_select", "index")
        return Tensor(self.fd, indexing_ops.index_select(tv, idx, int_arg(dim, "index_select", "dim")))

    @user_call("select")
    def select(self, arg: Any, index: Any, dim: int) -> Tensor:
        tv = self._tensor(arg, "select")
        idx = self._scalar(index, "select", DataType.Int)
        return Tensor(self.fd, indexing_ops.select(tv, idx, int_arg(dim, "select", "dim")))

    @user_call("gather")
    def gather(self, arg: Any, index: Any, dim: int) -> Tensor:
        tv, idx = self._tensor(arg, "gather"), self._tensor(index, "gather", "index")
        return Tensor(self.fd, indexing_ops.gather(tv, idx, int_arg(dim, "gather", "dim"), exact_sizes=False))

    @user_call("take_along_axis")
    def take_along_axis(self, arg: Any, index: Any, dim: int) -> Tensor:
        tv, idx = self._tensor(arg, "take_along_axis"), self._tensor(index, "take_along_axis", "index")
        dim = int_arg(dim, "take_along_axis", "dim")
        return Tensor(self.fd, indexing_ops.gather(tv, idx, dim, exact_sizes=True))

    @user_call("scatter")
    def scatter(self, arg: Any, index: Any, src: Any, dim: int) -> Tensor:
        tv, idx = self._tensor(arg, "scatter"), self._tensor(index, "scatter", "index")
        source = self._val(src, "scatter", "src")
        return Tensor(self.fd, indexing_ops.scatter(tv, idx, source, int_arg(dim, "scatter", "dim")))

    @user_call("index_put_accumulate")
    def index_put_accumulate(self, acc: Any, indices: Any, value: Any) -> Tensor:
        op = "index_put_accumulate"
        tvs = [self._tensor(v, op, n) for v, n in ((acc, "acc"), (indices, "indices"), (value, "value"))]
        return Tensor(self.fd, indexing_ops.index_put_accumulate(*tvs))

    @user_call("embedding_fwd")
    def embedding_fwd(
        self,
        input: Any,
        weight: Any,
        padding_idx: Any = None,
        max_norm: Any = None,
        norm_type: Any = None,
        scale_grad_by_freq: Any = None,
        sparse: Any = None,
    ) -> Tensor:
        """norm_type, scale_grad_by_freq and sparse affect only max_norm or the gradient."""
        op = "embedding_fwd"
        idx, w = self._tensor(input, op, "input"), self._tensor(weight, op, "weight")
        pad = None if padding_idx is None else self._scalar(padding_idx, op, DataType.Int)
        norm = None if max_norm is None else self._scalar(max_norm, op)
        return Tensor(self.fd, indexing_ops.embedding_fwd(idx, w, pad, norm))

    # -- library ops (expr_eval) --------------------------------------------------------
    @user_call("topk")
    def topk(
        self, arg: Any, k: Any, dim: int = -1, largest: bool = True, sorted: bool = False
    ) -> tuple[Tensor, Tensor]:
        """(values, indices) of the k largest (smallest) entries along `dim`."""
        op = "topk"
        _flags(op, largest=largest, sorted=sorted)
        values, indices = library_ops.topk(
            self._tensor(arg, op), self._scalar(k, op, DataType.Int), int_arg(dim, op, "dim"), largest, sorted
        )
        return Tensor(self.fd, values), Tensor(self.fd, indices)

    @user_call("argsort")
    def argsort(self, arg: Any, dim: int, descending: bool = False, stable: bool = False) -> Tensor:
        op = "argsort"
        _flags(op, descending=descending, stable=stable)
        return Tensor(self.fd, library_ops.argsort(self._tensor(arg, op), int_arg(dim, op, "dim"), descending, stable))

    @user_call("cumsum")
    def cumsum(self, arg: Any, dim: int) -> Tensor:
        return Tensor(self.fd, library_ops.cumsum(self._tensor(arg, "cumsum"), int_arg(dim, "cumsum", "dim")))

    @user_call("triu")
    def triu(self, arg: Any, diagonal: Any = 0) -> Tensor:
        op = "triu"
        return Tensor(self.fd, library_ops.triu(self._tensor(arg, op), self._scalar(diagonal, op, DataType.Int)))

    def _attention_scalars(self, op: str, dropout_p: Any, is_causal: Any, scale: Any) -> tuple[IrScalar, ...]:
        p = self._scalar(0.0 if dropout_p is None else dropout_p, op, DataType.Double)
        causal = self._scalar(False if is_causal is None else is_causal, op, DataType.Bool)
        return (p, causal) if scale is None else (p, causal, self._scalar(scale, op, DataType.Double))

    @user_call("sdpfa_fwd")
    def sdpfa_fwd(
        self, query: Any, key: Any, value: Any, dropout_p: Any = None, is_causal: Any = None, scale: Any = None
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """(output, logsumexp, philox_seed, philox_offset) of flash attention."""
        op = "sdpfa_fwd"
        q, k, v = (self._tensor(t, op, n) for t, n in ((query, "query"), (key, "key"), (value, "value")))
        scalars = self._attention_scalars(op, dropout_p, is_causal, scale)
        outs = library_ops.sdpfa_fwd(q, k, v, scalars[0], scalars[1], scalars[2] if len(scalars) > 2 else None)
        return tuple(Tensor(self.fd, t) for t in outs)  # type: ignore[return-value]

    @user_call("sdpfa_bwd")
    def sdpfa_bwd(
        self,
        grad_output: Any,
        query: Any,
        key: Any,
        value: Any,
        output: Any,
        log_sumexp: Any,
        dropout_p: Any = None,
        is_causal: Any = None,
        philox_seed: Any = None,
        philox_offset: Any = None,
        scale: Any = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        """(grad_query, grad_key, grad_value) of flash attention."""
        op = "sdpfa_bwd"
        named = (
            (grad_output, "grad_output"), (query, "query"), (key, "key"), (value, "value"), (output, "output"),
            (log_sumexp, "log_sumexp"), (philox_seed, "philox_seed"), (philox_offset, "philox_offset"),
        )  # fmt: skip
        go, q, k, v, out, lse, seed, offset = (self._tensor(t, op, n) for t, n in named)
        scalars = self._attention_scalars(op, dropout_p, is_causal, scale)
        s = scalars[2] if len(scalars) > 2 else None
        grads = library_ops.sdpfa_bwd(go, q, k, v, out, lse, scalars[0], scalars[1], seed, offset, s)
        return tuple(Tensor(self.fd, t) for t in grads)  # type: ignore[return-value]

    # -- ops kept whole ---------------------------------------------------------------
    @user_call("matmul")
    def matmul(self, arg1: Any, arg2: Any) -> Tensor:
        a, b = self._tensor(arg1, "matmul", "arg1"), self._tensor(arg2, "matmul", "arg2")
        return Tensor(self.fd, matmul_ops.matmul(a, b))

    @user_call("linear")
    def linear(self, arg1: Any, arg2: Any, bias: Any = None) -> Tensor:
        a, b = self._tensor(arg1, "linear", "arg1"), self._tensor(arg2, "linear", "arg2")
        c = None if bias is None else self._tensor(bias, "linear", "bias")
        return Tensor(self.fd, matmul_ops.linear(a, b, c))


def _check_slice_args(
    tv: TensorView, starts: list[IrScalar], stops: list[IrScalar], steps: list[IrScalar] | None
) -> None:
    """nvFuser's frontend checks of a slice (the 2024-07 era), with its messages, in its
    order: lengths first, then per axis a constant start below 0, an end before its
    start, and a stride other than 1."""
    name = tv_name(tv)
    shown = f"Start Indices: {_ints_of(starts)} End Indices: {_ints_of(stops)} Strides: {_ints_of(steps or [])}"
    if steps is not None and len(starts) != len(steps):
        raise FuserError(
            f"Slice start_indices and strides don't match! Start Indices: {len(starts)} Strides: {len(steps)}",
            op="slice",
        )
    if len(starts) != tv.ndim:
        raise FuserError(
            f"Number of tensor dimensions does not match slice dimensions! Tensor-dims: {tv.ndim} "
            f"Slice-dims: {len(starts)}",
            op="slice",
            tensor=name,
        )
    if len(starts) != len(stops):
        raise FuserError(
            f"Slice indexing attribute dimensions don't match! Start Indices: {len(starts)} End Indices: {len(stops)}",
            op="slice",
        )
    for axis, start in enumerate(starts):
        stop, step = stops[axis], (steps[axis] if steps is not None else None)
        if start.is_const_int() and int(start.value) < 0:  # type: ignore[arg-type]
            raise FuserError(
                f"Slice operation start_indices must be greater-than-or-equal-to 0. {shown}", op="slice", tensor=name
            )
        if start.is_const_int() and stop.is_const_int() and int(stop.value) < int(start.value):  # type: ignore[arg-type]
            raise FuserError(
                f"Slice operation end_indices must be greater-than-or-equal-to start_indices. {shown}",
                op="slice",
                tensor=name,
            )
        if step is not None and step.is_const_int() and step.value != 1:
            raise FuserError(
                f"nvFuser Limitation: All slice operation strides must be of size 1. {shown}", op="slice", tensor=name
            )


def _ints_of(vals: Sequence[IrScalar]) -> list[Any]:
    return [v.value if v.is_const else str(v) for v in vals]


def _flags(op: str, **flags: Any) -> None:
    for name, flag in flags.items():
        if not isinstance(flag, bool):
            raise FuserError(f"{name} must be True or False, got {flag!r}", op=op)


def _normalize(dim: int, tv: TensorView, op: str) -> int:
    return normalize_axis(int_arg(dim, op, "dim"), tv.ndim, op, tv)


def _unary_method(ops: Operators, name: str) -> Callable[..., Any]:
    @user_call(name)
    def apply(self: Operators, arg: Any) -> Tensor | Scalar:
        return self._wrap(arith.unary(UNARY_OPS[name], self._val(arg, name)))

    return apply.__get__(ops)


def _binary_method(ops: Operators, name: str) -> Callable[..., Any]:
    @user_call(name)
    def apply(self: Operators, arg1: Any, arg2: Any) -> Tensor | Scalar:
        a, b = self._val(arg1, name, "arg1"), self._val(arg2, name, "arg2")
        return self._wrap(arith.binary(BINARY_OPS[name], a, b))

    return apply.__get__(ops)


def _unsupported_method(ops: Operators, name: str) -> Callable[..., Any]:
    @user_call(name)
    def apply(self: Operators, *args: Any, **kwargs: Any) -> Any:
        raise FuserError("is not supported by fuser-workbench yet", op=name)

    return apply.__get__(ops)


def _closest_op(name: str) -> str:
    """`: did you mean 'rsqrt'?` for a misspelled op, or nothing."""
    known = {*UNARY_OPS, *BINARY_OPS, *(n for n in dir(Operators) if not n.startswith("_"))}
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f": did you mean {close[0]!r}?" if close else ""
