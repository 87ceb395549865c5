"""Element-wise op kinds, each with its rule: how it prints, how types promote, and
what it computes on NumPy arrays (the reference semantics).

One table entry per op, so a new op is one line here plus a frontend name; a
missing rule fails loudly with the op's name. Codegen adds its CUDA spelling to
these same entries.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

# How operand types are promoted before the op (nvFuser's TypePromotion configs):
#   "default"    common type of the operands; half types compute in float
#   "float"      as default, and integers or bools become float
#   "float_only" as default, but the result must be float or double
#   "comparison" as default, and the output is Bool
#   "none"       the operand keeps its type (relu, floor, ...)
#   "bool"       the operand is cast to Bool (logical ops)
#   "integral"   integers or bools only (bitwise ops)
#   "floating"   the operand keeps its type, which must be a real floating type (frac)
Promotion = str


@dataclass(frozen=True)
class OpRule:
    name: str  # printed name, also the frontend name unless given elsewhere
    numpy: Callable[..., Any]
    promotion: Promotion = "default"
    inline: str | None = None  # C operator printed infix/prefix, if any
    float_suffix: bool = False  # printed with an `f` when the output is Float
    bool_output: bool = False
    real_only: bool = False  # complex operands are refused (no such CUDA function)


def _c_int_div(a: Any, b: Any) -> Any:
    """C division: integers truncate toward zero, floats divide."""
    if _is_integral(a) and _is_integral(b):
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.floor_divide(a, b)
            r = np.remainder(a, b)
            fix = (r != 0) & ((np.asarray(a) < 0) != (np.asarray(b) < 0))
        return q + fix
    return np.true_divide(a, b)


def _c_mod(a: Any, b: Any) -> Any:
    """C `%`: the remainder takes the sign of the dividend."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, b)


def _ceil_div(a: Any, b: Any) -> Any:
    """The ceiling of a / b (a split's outer extent); integers never round toward zero."""
    if _is_integral(a) and _is_integral(b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return -np.floor_divide(-np.asarray(a), b)
    return np.ceil(np.true_divide(a, b))


def _pow(a: Any, b: Any) -> Any:
    if _is_integral(a) and _is_integral(b) and np.any(np.asarray(b) < 0):
        return np.trunc(np.power(np.asarray(a, dtype=np.float64), b)).astype(np.int64)
    return np.power(a, b)


def _is_integral(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, int):
        return True
    return bool(np.issubdtype(np.asarray(x).dtype, np.integer))


def _sigmoid(x: Any) -> Any:
    return 1 / (1 + np.exp(-x))


def _lerp(start: Any, end: Any, weight: Any) -> Any:
    # The two-sided form nvFuser's runtime uses, exact at both ends.
    diff = np.subtract(end, start)
    return np.where(np.less(weight, 0.5), start + weight * diff, end - diff * (1 - np.asarray(weight)))


def _lgamma(x: float) -> float:
    """C's lgamma: +inf at the poles (0, -1, -2, ...), where math.lgamma raises."""
    try:
        return math.lgamma(x)
    except ValueError:
        return math.inf


def _exact(fn: Callable[[float], float]) -> Callable[[Any], Any]:
    """Element-wise math-module function: exact, and slow; used where NumPy has none."""
    vectorized = np.frompyfunc(fn, 1, 1)

    def apply(x: Any) -> Any:
        arr = np.asarray(x)
        out = vectorized(arr.astype(np.float64))
        return np.asarray(out, dtype=np.float64).astype(arr.dtype if arr.dtype.kind == "f" else np.float64)

    return apply


_SQRT_PI = math.sqrt(math.pi)


def _solve_decreasing(fn: Callable[[float], float], target: float, lo: float, hi: float, z: float) -> float:
    """The z in [lo, hi] with fn(z) == target, fn decreasing with derivative
    -2/sqrt(pi) exp(-z^2) (erfc): Newton's method, kept inside a shrinking bracket."""
    for _ in range(200):
        f = fn(z) - target
        if f == 0:
            return z
        if f > 0:
            lo = z
        else:
            hi = z
        slope = -2.0 / _SQRT_PI * math.exp(-z * z)
        new = z - f / slope if slope != 0 else (lo + hi) / 2
        if not lo < new < hi:
            new = (lo + hi) / 2
        if abs(new - z) <= 4e-16 * max(1.0, abs(z)):
            return new
        z = new
    return z


def _erfcinv(y: float) -> float:
    """The z with erfc(z) == y, to double precision; y outside [0, 2] is NaN."""
    if math.isnan(y) or y < 0 or y > 2:
        return math.nan
    if y == 0:
        return math.inf
    if y == 2:
        return -math.inf
    if y > 1:
        return -_erfcinv(2 - y)
    return _solve_decreasing(math.erfc, y, 0.0, 27.3, math.sqrt(max(-math.log(y), 0.0)))


def _erfinv(x: float) -> float:
    """The z with erf(z) == x; small |x| solved on erf itself (1 - x would lose digits)."""
    if math.isnan(x) or abs(x) > 1:
        return math.nan
    a = abs(x)
    if a <= 0.5:
        z = _solve_decreasing(lambda t: -math.erf(t), -a, 0.0, 0.5, a * _SQRT_PI / 2)
    else:
        z = _erfcinv(1 - a)  # exact: 1 - a is representable for a in [0.5, 1]
    return math.copysign(z, x)


def _signbit(x: Any) -> Any:
    arr = np.asarray(x)
    return np.signbit(arr) if arr.dtype.kind == "f" else np.less(arr, 0)


def _isneginf(x: Any) -> Any:
    return np.isinf(x) & np.less(x, 0)


def _isposinf(x: Any) -> Any:
    return np.isinf(x) & np.greater(x, 0)


def _isreal(x: Any) -> Any:
    arr = np.asarray(x)
    return np.imag(arr) == 0 if arr.dtype.kind == "c" else np.ones(arr.shape, dtype=bool)


def _frac(x: Any) -> Any:
    return np.subtract(x, np.trunc(x))


def _gcd(a: Any, b: Any) -> Any:
    """nvFuser's gcd helper: Euclid on the absolute values (gcd(0, 0) is 0)."""
    return np.gcd(a, b)


class UnaryOpType(enum.Enum):
    Abs = OpRule("abs", np.abs, "none")
    Neg = OpRule("neg", np.negative, "default", inline="-")
    Exp = OpRule("exp", np.exp, "float", float_suffix=True)
    Exp2 = OpRule("exp2", np.exp2, "float", float_suffix=True)
    Expm1 = OpRule("expm1", np.expm1, "float", float_suffix=True)
    Log = OpRule("log", np.log, "float", float_suffix=True)
    Log2 = OpRule("log2", np.log2, "float", float_suffix=True)
    Log10 = OpRule("log10", np.log10, "float", float_suffix=True)
    Log1p = OpRule("log1p", np.log1p, "float", float_suffix=True)
    Sin = OpRule("sin", np.sin, "float", float_suffix=True)
    Cos = OpRule("cos", np.cos, "float", float_suffix=True)
    Tan = OpRule("tan", np.tan, "float", float_suffix=True)
    Asin = OpRule("asin", np.arcsin, "float", float_suffix=True)
    Acos = OpRule("acos", np.arccos, "float", float_suffix=True)
    Atan = OpRule("atan", np.arctan, "float", float_suffix=True)
    Sinh = OpRule("sinh", np.sinh, "float", float_suffix=True)
    Cosh = OpRule("cosh", np.cosh, "float", float_suffix=True)
    Tanh = OpRule("tanh", np.tanh, "float", float_suffix=True)
    Acosh = OpRule("acosh", np.arccosh, "float", float_suffix=True)
    Asinh = OpRule("asinh", np.arcsinh, "float", float_suffix=True)
    Atanh = OpRule("atanh", np.arctanh, "float", float_suffix=True)
    Sigmoid = OpRule("sigmoid", _sigmoid, "float")
    Silu = OpRule("silu", lambda x: x * _sigmoid(x), "none")
    Relu = OpRule("relu", lambda x: np.maximum(x, np.zeros((), np.asarray(x).dtype)), "none")
    Sqrt = OpRule("sqrt", np.sqrt, "float", float_suffix=True)
    Rsqrt = OpRule("rsqrt", lambda x: 1 / np.sqrt(x), "float", float_suffix=True)
    Reciprocal = OpRule("reciprocal", lambda x: 1 / np.asarray(x), "float")
    Erf = OpRule("erf", _exact(math.erf), "float", float_suffix=True)
    Erfc = OpRule("erfc", _exact(math.erfc), "float", float_suffix=True)
    Lgamma = OpRule("lgamma", _exact(_lgamma), "float", float_suffix=True)
    Erfinv = OpRule("erfinv", _exact(_erfinv), "float", float_suffix=True, real_only=True)
    Erfcinv = OpRule("erfcinv", _exact(_erfcinv), "float", float_suffix=True, real_only=True)
    Frac = OpRule("frac", _frac, "floating", real_only=True)
    Signbit = OpRule("signbit", _signbit, "default", bool_output=True, real_only=True)
    Floor = OpRule("floor", np.floor, "none", float_suffix=True)
    Ceil = OpRule("ceil", np.ceil, "none", float_suffix=True)
    Round = OpRule("nearbyint", np.rint, "none", float_suffix=True)
    Trunc = OpRule("trunc", np.trunc, "none", float_suffix=True)
    Sign = OpRule("sign", np.sign, "none")
    IsNan = OpRule("isnan", np.isnan, "none", bool_output=True)
    IsInf = OpRule("isinf", np.isinf, "none", bool_output=True)
    IsFinite = OpRule("isfinite", np.isfinite, "none", bool_output=True)
    IsNegInf = OpRule("isneginf", _isneginf, "none", bool_output=True, real_only=True)
    IsPosInf = OpRule("isposinf", _isposinf, "none", bool_output=True, real_only=True)
    IsReal = OpRule("isreal", _isreal, "none", bool_output=True)
    Real = OpRule("std::real", np.real, "none")  # complex operands only; the output is real
    Imag = OpRule("std::imag", np.imag, "none")
    LogicalNot = OpRule("logical_not", np.logical_not, "bool", inline="!")
    BitwiseNot = OpRule("bitwise_not", np.invert, "integral", inline="~")
    Cast = OpRule("cast", lambda x: x, "none")

    @property
    def rule(self) -> OpRule:
        return self.value


class BinaryOpType(enum.Enum):
    Add = OpRule("add", np.add, inline="+")
    Sub = OpRule("sub", np.subtract, inline="-")
    Mul = OpRule("mul", np.multiply, inline="*")
    Div = OpRule("div", _c_int_div, inline="/", float_suffix=True)
    Mod = OpRule("mod", _c_mod, inline="%")
    Fmod = OpRule("fmod", _c_mod, float_suffix=True)
    Remainder = OpRule("remainder", np.remainder)
    CeilDiv = OpRule("ceilDiv", _ceil_div)
    Pow = OpRule("pow", _pow)
    Atan2 = OpRule("atan2", np.arctan2, "float", float_suffix=True)
    Max = OpRule("fmax", np.maximum)
    Min = OpRule("fmin", np.minimum)
    Eq = OpRule("equal", np.equal, "comparison", inline="==", bool_output=True)
    NE = OpRule("notEqual", np.not_equal, "comparison", inline="!=", bool_output=True)
    LT = OpRule("lessThan", np.less, "comparison", inline="<", bool_output=True)
    LE = OpRule("lessThanOrEqual", np.less_equal, "comparison", inline="<=", bool_output=True)
    GT = OpRule("greaterThan", np.greater, "comparison", inline=">", bool_output=True)
    GE = OpRule("greaterThanOrEqual", np.greater_equal, "comparison", inline=">=", bool_output=True)
    LogicalAnd = OpRule("logical_and", np.logical_and, "bool", inline="&&")
    LogicalOr = OpRule("logical_or", np.logical_or, "bool", inline="||")
    BitwiseAnd = OpRule("bitwise_and", np.bitwise_and, "integral", inline="&")
    BitwiseOr = OpRule("bitwise_or", np.bitwise_or, "integral", inline="|")
    BitwiseXor = OpRule("bitwise_xor", np.bitwise_xor, "integral", inline="^")
    Lshift = OpRule("lshift", np.left_shift, "integral", inline="<<")
    Rshift = OpRule("rshift", np.right_shift, "integral", inline=">>")  # arithmetic on signed types
    Nextafter = OpRule("nextafter", np.nextafter, "float_only", real_only=True)
    Gcd = OpRule("gcd", _gcd, "integral")

    @property
    def rule(self) -> OpRule:
        return self.value


class TernaryOpType(enum.Enum):
    Where = OpRule("where", lambda c, a, b: np.where(c, a, b))
    Lerp = OpRule("lerp", _lerp)
    Clamp = OpRule("clamp", lambda x, lo, hi: np.minimum(np.maximum(x, lo), hi))
    Threshold = OpRule("threshold", lambda x, t, v: np.where(np.less_equal(x, t), v, x))

    @property
    def rule(self) -> OpRule:
        return self.value


# Reductions are binary ops folded over axes: the NumPy reducer and identity of each.
REDUCTION_NUMPY: dict[BinaryOpType, Callable[..., Any]] = {
    BinaryOpType.Add: np.sum,
    BinaryOpType.Mul: np.prod,
    BinaryOpType.Max: np.max,
    BinaryOpType.Min: np.min,
}
