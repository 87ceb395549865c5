"""Scalar values: constants (`768`, `float(0)`, `true`) and symbolic ones (`i0`, `d3`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from fuser_core.ir.base import Val
from fuser_core.ir.dtype import DataType

if TYPE_CHECKING:
    from fuser_core.ir.fusion import Fusion

ScalarValue = bool | int | float | complex


def normalize_value(value: Any, dtype: DataType) -> ScalarValue:
    """A Python value of the kind `dtype` holds (floats of narrow types rounded)."""
    if dtype.is_boolean:
        return bool(value)
    if dtype.is_integral:
        if isinstance(value, (float, np.floating)) and not float(value).is_integer():
            raise ValueError(f"{value!r} is not an integer")
        return int(value)
    if dtype.is_complex:
        return complex(value)
    if dtype.is_floating:
        as_float = float(value)
        if dtype != DataType.Double:
            as_float = float(np.array(as_float, dtype=dtype.numpy))
        return as_float
    raise ValueError(f"no scalar of type {dtype!r}")


class Scalar(Val):
    """A scalar Val. `value` is set for constants and None for symbolic scalars."""

    name_category = "scalar"

    def __init__(
        self,
        dtype: DataType,
        value: object = None,
        fusion: Fusion | None = None,
    ) -> None:
        super().__init__(dtype, fusion)
        self.value: ScalarValue | None = None if value is None else normalize_value(value, dtype)

    @property
    def is_const(self) -> bool:
        return self.value is not None

    def is_const_int(self, expected: int | None = None) -> bool:
        if self.value is None or not self.dtype.is_integral:
            return False
        return expected is None or self.value == expected

    def is_zero_int(self) -> bool:
        return self.is_const_int(0)

    def is_one_int(self) -> bool:
        return self.is_const_int(1)

    def to_string(self) -> str:
        if self.value is None:
            return f"{self.dtype.prefix}{self.name}"
        return format_constant(self.value, self.dtype)

    def to_inline_string(self) -> str:
        if self.definition is not None:
            return f"( {self.definition.to_inline_string()} )"
        return self.to_string()


def format_constant(value: Any, dtype: DataType) -> str:
    """nvFuser's spelling of a constant: `true`, `768`, `float(0)`, `double(0.5)`."""
    if dtype.is_boolean:
        return "true" if value else "false"
    if dtype.is_floating:
        digits = 17 if dtype == DataType.Double else 9
        return f"{dtype.cuda}({_format_float(float(value), digits)})"
    if dtype.is_complex:
        c = complex(value)
        return f"{dtype.cuda}(({_format_float(c.real, 17)},{_format_float(c.imag, 17)}))"
    return str(int(value))


def _format_float(value: float, digits: int) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.{digits}g}"
