"""The input signature: what of a set of inputs a compiled runtime depends on,
besides the concretization. Sizes are left out (runtimes are size-generic) except
which axes have size 1, and the index type the sizes need."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fuser_core.ir.dtype import DataType
from fuser_core.ir.layout import describe_strides
from fuser_core.runtime.arguments import TensorArg

INT32_LIMIT = 2**31 - 1


@dataclass(frozen=True)
class TensorSignature:
    dtype: DataType
    contiguity: tuple[bool | None, ...]  # allocation order, as define_tensor gives it
    stride_order: tuple[int, ...]  # () when row-major
    size_one: tuple[bool, ...]

    @staticmethod
    def of(arg: TensorArg) -> TensorSignature:
        contiguity, order = describe_strides(list(arg.shape), list(arg.strides))
        return TensorSignature(arg.dtype, tuple(contiguity), tuple(order), tuple(s == 1 for s in arg.shape))


@dataclass(frozen=True)
class InputSignature:
    inputs: tuple[TensorSignature | DataType, ...]
    index_type: str  # "int32" or "int64"

    @staticmethod
    def of(args: Sequence[Any], scalar_dtypes: Sequence[DataType | None]) -> InputSignature:
        entries: list[TensorSignature | DataType] = []
        largest = 0
        for arg, dtype in zip(args, scalar_dtypes, strict=True):
            if isinstance(arg, TensorArg):
                entries.append(TensorSignature.of(arg))
                largest = max(largest, 1 + sum((n - 1) * abs(s) for n, s in zip(arg.shape, arg.strides, strict=True)))
            else:
                entries.append(dtype)  # type: ignore[arg-type]
        return InputSignature(tuple(entries), "int32" if largest <= INT32_LIMIT else "int64")

    def diff(self, old: InputSignature) -> list[str]:
        reasons = []
        for index, (new, prev) in enumerate(zip(self.inputs, old.inputs, strict=True)):
            if not isinstance(new, TensorSignature) or not isinstance(prev, TensorSignature) or new == prev:
                continue
            if new.stride_order != prev.stride_order:
                reasons.append(f"input {index} stride order changed {_order(prev)} -> {_order(new)}")
            elif new.contiguity != prev.contiguity:
                reasons.append(
                    f"input {index} contiguity changed {_flags(prev.contiguity)} -> {_flags(new.contiguity)}"
                )
            if new.size_one != prev.size_one:
                axes = [a for a, (x, y) in enumerate(zip(new.size_one, prev.size_one, strict=True)) if x != y]
                reasons.append(f"input {index} size-1 axes changed at axis {', '.join(map(str, axes))}")
        if self.index_type != old.index_type:
            reasons.append(f"index type {old.index_type} -> {self.index_type}")
        return reasons


def _order(sig: TensorSignature) -> str:
    return str(list(sig.stride_order) if sig.stride_order else list(reversed(range(len(sig.size_one)))))


def _flags(flags: tuple[bool | None, ...]) -> str:
    return " ".join("n" if f is None else ("t" if f else "f") for f in flags)
