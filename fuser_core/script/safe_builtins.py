"""The names a repro script starts with, and the modules it may import.

Builtins are a short list of pure functions on numbers and sequences, each bounded
so that a script cannot make the loader build a billion-element list, a million-digit
number or a quadratic pile of copies. `print` and assertions are `Ignored`: their
arguments are never evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.frontend.handles import Scalar, Tensor, Vector
from fuser_core.ir.dtype import DataType
from fuser_core.script.objects import DATACLASSES, PYTEST, TYPES, TYPING
from fuser_core.script.torch_subset import TESTING, TORCH
from fuser_core.script.values import Ignored, Namespace, SafeFunction

MAX_SEQUENCE = 100_000  # items a script may turn into a list at once
MAX_INT_BITS = 1024  # no int of a script is larger: arithmetic on them is never slow
MAX_STRING = 100_000  # characters of a string a script makes
MAX_NUMBER_TEXT = 1_000  # characters of a string that int(), float() or complex() parse
MAX_NDIGITS = 400  # |ndigits| of round(); round(7, -10**7) would compute 10**10**7

# Builtins a script might reach for to escape the subset: named in the refusal.
REFUSED_BUILTINS = frozenset(
    """exec eval compile open __import__ getattr setattr delattr hasattr globals locals vars
    input breakpoint type object memoryview help exit quit dir id super classmethod
    staticmethod property __builtins__ __loader__ __spec__ __file__ __build_class__""".split()  # noqa: SIM905
)


def length(value: Any) -> int:
    """len(), also of a range longer than an index can be (len(range(10**20)) overflows)."""
    if isinstance(value, range):
        step = value.step
        return max(0, (value.stop - value.start + step - (1 if step > 0 else -1)) // step)
    return len(value)


def bounded(value: Any, what: str = "iterate over") -> list[Any]:
    """The items of a list, tuple, range, string or Vector, refusing huge ones."""
    if not isinstance(value, (list, tuple, range, str, Vector)):
        raise FuserError(f"cannot {what} a {type(value).__name__} in a repro script")
    count = length(value)
    if count > MAX_SEQUENCE:
        raise FuserError(f"a sequence of {count} items is too long for a repro script (max {MAX_SEQUENCE})")
    return list(value)


def check_int(value: Any, what: str) -> Any:
    """`value`, unless it is an int too large for a repro script."""
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise FuserError(f"{what} is too large for a repro script (ints have at most {MAX_INT_BITS} bits)")
    return value


def _range(*args: Any) -> range:
    if not args or any(isinstance(a, bool) or not isinstance(a, int) for a in args):
        raise FuserError(f"range takes ints, got {list(args)!r}", op="range")
    return range(*args)


def _len(value: Any) -> int:
    if isinstance(value, (list, tuple, range, str, Vector, dict)):
        return length(value)
    raise FuserError(f"len of a {type(value).__name__} is not supported", op="len")


def _pick(fn: Callable[[list[Any]], Any]) -> Callable[..., Any]:
    def apply(*args: Any) -> Any:
        return fn(bounded(args[0]) if len(args) == 1 else list(args))

    return apply


def _sum(values: Any, start: Any = 0) -> Any:
    """Numbers (and fusion values) only: sum(rows, []) would copy its lists quadratically."""
    if not _is_number(start):
        raise FuserError(f"start must be a number, got a {type(start).__name__} (sum joins no lists)", op="sum")
    total = start
    for v in bounded(values):
        if not (_is_number(v) or isinstance(v, (Tensor, Scalar))):
            raise FuserError(f"sums numbers and fusion values, got a {type(v).__name__}", op="sum")
        total = total + v
    return total


def _is_number(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex))


def _round(number: Any, ndigits: Any = None) -> Any:
    if not _is_number(number):
        raise FuserError(f"takes a number, got a {type(number).__name__}", op="round")
    if ndigits is not None and (isinstance(ndigits, bool) or not isinstance(ndigits, int)):
        raise FuserError(f"ndigits must be an int, got {ndigits!r}", op="round")
    if ndigits is not None and abs(ndigits) > MAX_NDIGITS:
        raise FuserError(f"ndigits {ndigits} is out of range for a repro script (at most {MAX_NDIGITS})", op="round")
    return round(number, ndigits)


def _str(value: Any = "") -> str:
    if value is None or isinstance(value, (str, bool, int, float, complex)):
        return str(value)
    return f"<{type(value).__name__}>"


def _number_function(name: str, fn: Callable[..., Any]) -> SafeFunction:
    def apply(*args: Any) -> Any:
        for a in args:
            if not isinstance(a, (bool, int, float, complex, str)):
                raise FuserError(f"takes numbers, got {type(a).__name__}", op=name)
            if isinstance(a, str) and len(a) > MAX_NUMBER_TEXT:
                raise FuserError(f"a number of {len(a)} characters is too long for a repro script", op=name)
        return check_int(fn(*args), f"the result of {name}")

    return SafeFunction(name, apply, shallow=True)


BUILTINS: dict[str, Any] = {
    "float": _number_function("float", float),
    "int": _number_function("int", int),
    "bool": SafeFunction("bool", bool, shallow=True),
    "complex": _number_function("complex", complex),
    "str": SafeFunction("str", _str, shallow=True),
    "round": SafeFunction("round", _round, shallow=True),
    "abs": SafeFunction("abs", abs),
    "range": SafeFunction("range", _range, shallow=True),
    "len": SafeFunction("len", _len, shallow=True),
    "list": SafeFunction("list", lambda value=(): bounded(value), shallow=True),
    "tuple": SafeFunction("tuple", lambda value=(): tuple(bounded(value)), shallow=True),
    "min": SafeFunction("min", _pick(min)),
    "max": SafeFunction("max", _pick(max)),
    "sum": SafeFunction("sum", _sum, shallow=True),
    "enumerate": SafeFunction("enumerate", lambda value, start=0: list(enumerate(bounded(value), start)), shallow=True),
    "zip": SafeFunction("zip", lambda *values: list(zip(*(bounded(v) for v in values), strict=False)), shallow=True),
    "print": Ignored("print"),
}


def new_fusion_definition(id: Any = None, max_length: Any = 9999, **ignored: Any) -> FusionDefinition:
    if id is not None and (isinstance(id, bool) or not isinstance(id, int)):
        raise FuserError(f"id must be an int, got {id!r}", op="FusionDefinition")
    return FusionDefinition(id=id, max_length=max_length)


FUSION_DEFINITION = SafeFunction("FusionDefinition", new_fusion_definition)

NVFUSER = Namespace("nvfuser", {"FusionDefinition": FUSION_DEFINITION, "DataType": DataType})
NVFUSER_DIRECT = Namespace("nvfuser_direct", {"FusionDefinition": FUSION_DEFINITION, "DataType": DataType})

MATH = Namespace(
    "math",
    {"inf": math.inf, "nan": math.nan, "pi": math.pi, "e": math.e}
    | {name: _number_function(f"math.{name}", getattr(math, name)) for name in ("sqrt", "ceil", "floor", "log2")},
)

MODULES: dict[str, Namespace] = {
    "torch": TORCH,
    "torch.testing": TESTING,
    "nvfuser": NVFUSER,
    "nvfuser_direct": NVFUSER_DIRECT,
    "math": MATH,
    "dataclasses": DATACLASSES,
    "types": TYPES,
    "typing": TYPING,
    "pytest": PYTEST,
}
