"""Evaluation of scalar Vals from bound inputs: extents, pad widths, slice bounds."""

from __future__ import annotations

from typing import Any

from fuser_core.errors import InternalError
from fuser_core.ir.base import Val
from fuser_core.ir.scalar import Scalar


class ExpressionEvaluator:
    """Binds input scalars and extents to numbers and evaluates expressions of them."""

    def __init__(self) -> None:
        self._values: dict[int, Any] = {}
        self._vals: dict[int, Val] = {}  # keeps bound Vals alive while keyed by id
        self.rng_seed: int | None = None  # the seed drawn for unseeded random ops, if any
        self.rng_offset = 0  # their base Philox offset (op i draws at rng_offset + i)

    def bind(self, val: Val, value: Any) -> None:
        self._values[id(val)] = value
        self._vals[id(val)] = val

    def bind_or_check(self, val: Scalar, value: Any) -> bool:
        """Bind a symbolic scalar, or check a constant or already bound one agrees."""
        if val.is_const:
            return val.value == value
        known = self._values.get(id(val))
        if known is not None:
            return bool(known == value)
        if val.definition is not None:
            return bool(self.evaluate(val) == value)
        self.bind(val, value)
        return True

    def is_bound(self, val: Val) -> bool:
        return id(val) in self._values

    def forget(self, val: Val) -> None:
        """Drop a value no longer needed (the reference frees intermediates this way)."""
        self._values.pop(id(val), None)
        self._vals.pop(id(val), None)

    def evaluate(self, val: Val) -> Any:
        if isinstance(val, Scalar) and val.is_const:
            return val.value
        if id(val) in self._values:
            return self._values[id(val)]
        expr = val.definition
        if expr is None:
            raise UnboundValue(f"{val} has no value: it is not bound to an input")
        inputs = [self.evaluate(v) for v in expr.inputs]
        results = expr.evaluate(inputs, self)
        for out, result in zip(expr.outputs, results, strict=True):
            self.bind(out, result)
        return self._values[id(val)]


class UnboundValue(InternalError):
    pass
