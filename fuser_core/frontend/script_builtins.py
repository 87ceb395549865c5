"""The names a repro script starts with, and the modules it may import.

Builtins are a short list of pure functions on numbers and sequences, each bounded
so that a script cannot make the loader build a billion-element list. `print` and
assertions are `Ignored`: their arguments are never evaluated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from fuser_core.errors import FuserError
from fuser_core.frontend.fusion_definition import FusionDefinition
from fuser_core.frontend.handles import Vector
from fuser_core.frontend.script_values import Ignored, Namespace, SafeFunction
from fuser_core.frontend.torch_subset import TESTING, TORCH
from fuser_core.ir.dtype import DataType

MAX_SEQUENCE = 100_000  # items a script may turn into a list at once

# Builtins a script might reach for to escape the subset: named in the refusal.
REFUSED_BUILTINS = frozenset(
    """exec eval compile open __import__ getattr setattr delattr hasattr globals locals vars
    input breakpoint type object memoryview help exit quit dir id super classmethod
    staticmethod property __builtins__ __loader__ __spec__ __file__ __build_class__""".split()  # noqa: SIM905
)


def bounded(value: Any, what: str = "iterate over") -> list[Any]:
    """The items of a list, tuple, range, string or Vector, refusing huge ones."""
    if not isinstance(value, (list, tuple, range, str, Vector)):
        raise FuserError(f"cannot {what} a {type(value).__name__} in a repro script")
    if len(value) > MAX_SEQUENCE:
        raise FuserError(f"a sequence of {len(value)} items is too long for a repro script (max {MAX_SEQUENCE})")
    return list(value)


def _range(*args: Any) -> range:
    if not args or any(isinstance(a, bool) or not isinstance(a, int) for a in args):
        raise FuserError(f"range takes ints, got {list(args)!r}", op="range")
    return range(*args)


def _len(value: Any) -> int:
    if isinstance(value, (list, tuple, range, str, Vector, dict)):
        return len(value)
    raise FuserError(f"len of a {type(value).__name__} is not supported", op="len")


def _pick(fn: Callable[[list[Any]], Any]) -> Callable[..., Any]:
    def apply(*args: Any) -> Any:
        return fn(bounded(args[0]) if len(args) == 1 else list(args))

    return apply


def _sum(values: Any, start: Any = 0) -> Any:
    total = start
    for v in bounded(values):
        total = total + v
    return total


def _str(value: Any = "") -> str:
    if value is None or isinstance(value, (str, bool, int, float, complex)):
        return str(value)
    return f"<{type(value).__name__}>"


def _number_function(name: str, fn: Callable[..., Any]) -> SafeFunction:
    def apply(*args: Any) -> Any:
        for a in args:
            if not isinstance(a, (bool, int, float, complex, str)):
                raise FuserError(f"takes numbers, got {type(a).__name__}", op=name)
        return fn(*args)

    return SafeFunction(name, apply)


BUILTINS: dict[str, Any] = {
    "float": _number_function("float", float),
    "int": _number_function("int", int),
    "bool": SafeFunction("bool", bool),
    "complex": _number_function("complex", complex),
    "str": SafeFunction("str", _str),
    "round": _number_function("round", round),
    "abs": SafeFunction("abs", abs),
    "range": SafeFunction("range", _range),
    "len": SafeFunction("len", _len),
    "list": SafeFunction("list", lambda value=(): bounded(value)),
    "tuple": SafeFunction("tuple", lambda value=(): tuple(bounded(value))),
    "min": SafeFunction("min", _pick(min)),
    "max": SafeFunction("max", _pick(max)),
    "sum": SafeFunction("sum", _sum),
    "enumerate": SafeFunction("enumerate", lambda value, start=0: list(enumerate(bounded(value), start))),
    "zip": SafeFunction("zip", lambda *values: list(zip(*(bounded(v) for v in values), strict=False))),
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
}
