"""A program as a FusionDefinition, and the arrays it runs on.

`Builder` turns each op of the list into the `fd.ops` call of the same name (Refs become
the handles built so far, `Size` becomes `fd.ops.size`, `Extent` a product of those) and
records each value's dtype as fuser_core infers it. `make_arrays` lays each tensor input
out as its `TensorIn` says (memory order, a gap on the innermost memory axis, stride-0
axes); the definition's contiguity and stride order are read off those strides by
nvFuser's rule, as `fd.from_pytorch` would.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from fuser_core import DataType, FusionDefinition
from fuser_core.ir.layout import compute_tensor_descriptor

from .program import FLOATS, Extent, Op, Program, Ref, ScalarIn, Size, TensorIn


def data_type(name: str) -> DataType:
    return DataType[name]


def dtype_name(handle: Any) -> str:
    return str(handle.dtype.name)


# -- layouts ---------------------------------------------------------------------------------


def input_strides(inp: TensorIn) -> tuple[list[int], list[int]]:
    """(strides in elements, memory shape) of the input's storage."""
    mem_shape = [1 if inp.expanded[a] else inp.shape[a] for a in inp.order]
    if mem_shape:
        mem_shape[-1] += inp.gap
    mem_strides = [0] * len(mem_shape)
    running = 1
    for k in reversed(range(len(mem_shape))):
        mem_strides[k] = running
        running *= max(mem_shape[k], 1)
    strides = [0] * len(inp.shape)
    for k, axis in enumerate(inp.order):
        strides[axis] = 0 if inp.expanded[axis] else mem_strides[k]
    return strides, mem_shape


@dataclass
class HostInput:
    """One input's storage and view (strides in elements); `value` for a scalar."""

    storage: np.ndarray | None
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    value: Any = None

    def view(self) -> Any:
        if self.storage is None:
            return self.value
        item = self.storage.itemsize
        return np.lib.stride_tricks.as_strided(
            self.storage, self.shape, tuple(s * item for s in self.strides), writeable=False
        )


def random_values(rng: np.random.Generator, dtype: str, shape: list[int]) -> np.ndarray:
    if dtype in FLOATS:
        values = rng.uniform(-3.0, 3.0, shape)
        return values.astype(data_type(dtype).numpy)
    if dtype == "Bool":
        return rng.random(shape) < 0.5
    return rng.integers(-9, 10, shape).astype(data_type(dtype).numpy)


def make_inputs(program: Program, salt: int = 0) -> list[HostInput]:
    rng = np.random.default_rng([program.seed & 0xFFFFFFFF, program.index, salt])
    out = []
    for inp in program.inputs:
        if isinstance(inp, ScalarIn):
            out.append(HostInput(None, (), (), inp.value))
            continue
        strides, mem_shape = input_strides(inp)
        storage = (
            random_values(rng, inp.dtype, [math.prod(mem_shape)]) if mem_shape else random_values(rng, inp.dtype, [1])
        )
        out.append(HostInput(storage, tuple(inp.shape), tuple(strides)))
    return out


# -- building ----------------------------------------------------------------------------------


class Builder:
    """Applies a program's inputs and ops to an open FusionDefinition."""

    def __init__(self, fd: FusionDefinition, dtypes: dict[int, str]) -> None:
        self.fd = fd
        self.handles: dict[int, Any] = {}
        self.dtypes = dtypes

    def add_input(self, inp: TensorIn | ScalarIn) -> None:
        if isinstance(inp, ScalarIn):
            handle = self.fd.define_scalar(None, dtype=data_type(inp.dtype))
        else:
            strides, _ = input_strides(inp)
            contiguity, order = compute_tensor_descriptor(list(inp.shape), strides)
            shape = [s if (s == 1 or static) else -1 for s, static in zip(inp.shape, inp.static, strict=True)]
            handle = self.fd.define_tensor(
                shape=shape, contiguity=contiguity, dtype=data_type(inp.dtype), stride_order=order
            )
        self.handles[inp.vid] = handle
        self.dtypes[inp.vid] = dtype_name(handle)

    def operand(self, item: Any) -> Any:
        if isinstance(item, Ref):
            return self.handles[item.vid]
        if isinstance(item, Size):
            return self.fd.ops.size(self.handles[item.vid], item.axis)
        if isinstance(item, Extent):
            parts = [self.operand(p) for p in item.parts]
            value = parts[0]
            for p in parts[1:]:
                value = self.fd.ops.mul(value, p)
            return value
        if isinstance(item, list | tuple):
            return [self.operand(x) for x in item]
        return item

    def apply(self, op: Op) -> list[Any]:
        args = [self.operand(a) for a in op.args]
        kwargs = {k: (data_type(v) if k == "dtype" else self.operand(v)) for k, v in op.kwargs.items()}
        result = getattr(self.fd.ops, op.name)(*args, **kwargs)
        outs = list(result) if isinstance(result, tuple | list) else [result]
        if len(outs) != len(op.outs):
            raise AssertionError(f"{op.name} gave {len(outs)} values, the program expects {len(op.outs)}")
        for vid, handle in zip(op.outs, outs, strict=True):
            self.handles[vid] = handle
            self.dtypes[vid] = dtype_name(handle)
        return outs

    def add_outputs(self, program: Program) -> None:
        for out in program.outputs:
            if out.stride_order is not None:
                self.fd.add_output(self.handles[out.vid], stride_order=list(out.stride_order))
            else:
                self.fd.add_output(self.handles[out.vid])


def build(program: Program) -> FusionDefinition:
    """The program's FusionDefinition (its dtypes recorded into `program.dtypes`)."""
    with FusionDefinition() as fd:
        builder = Builder(fd, program.dtypes)
        for inp in program.inputs:
            builder.add_input(inp)
        for op in program.ops:
            builder.apply(op)
        builder.add_outputs(program)
    return fd
