"""How frontend calls run: at the user's line, inside the definition's fusion; and
the parsing of their plain arguments (dtypes, ints, Python constants)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from fuser_core.errors import FuserError, at_location, caller_location, current_location
from fuser_core.ir.dtype import DataType, dtype_of_python_scalar, parse_dtype
from fuser_core.ir.scalar import Scalar as IrScalar

F = TypeVar("F", bound=Callable[..., Any])


def user_call(op_name: str) -> Callable[[F], F]:
    """Run a frontend method at the user's line, inside the definition's fusion, and
    record the outermost call (see recording.py).

    The method's owner is a FusionDefinition or has one as `.fd`."""

    def wrap(method: F) -> F:
        @functools.wraps(method)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            fd = getattr(self, "fd", self)
            with at_location(current_location() or caller_location()):
                fusion = fd._active_fusion(op_name)
                recorder = fd._recorder
                recorder.depth += 1
                try:
                    with fusion.guard():
                        result = method(self, *args, **kwargs)
                finally:
                    recorder.depth -= 1
                if recorder.depth == 0:
                    recorder.finish_call(self is not fd, op_name, method.__get__(self), args, kwargs, result)
                return result

        return run  # type: ignore[return-value]

    return wrap


def constant(value: Any, dtype: DataType | None, op: str) -> IrScalar:
    try:
        natural = dtype_of_python_scalar(value)
    except TypeError:
        raise FuserError(f"{value!r} is not a number", op=op) from None
    target = dtype_arg(dtype, op) if dtype is not None else natural
    try:
        return IrScalar(target, value)
    except (TypeError, ValueError) as err:
        raise FuserError(f"{value!r} is not a valid {target!r}: {err}", op=op) from None


def dtype_arg(dtype: Any, op: str) -> DataType:
    try:
        return parse_dtype(dtype)
    except ValueError as err:
        raise FuserError(str(err), op=op) from None


def int_arg(value: Any, op: str, arg: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FuserError(f"{arg} entries must be ints, got {value!r}", op=op)
    return int(value)
