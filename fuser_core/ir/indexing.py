"""Indexing ops: index_select, select, gather / take_along_axis, scatter,
index_put_accumulate and embedding. They read data at positions other tensors hold,
so no generated kernel here computes them: they are library ops (the segmenter gives
each its own expr_eval group) and the reference evaluates them with NumPy.

Every index is checked when the op is evaluated: one out of range is a FuserError
naming the op, the index tensor, the bad value and where it sits, never a wrong
answer or a wrapped-around read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from fuser_core.errors import FuserError
from fuser_core.ir.base import Expr, ScalarEvaluator, Val
from fuser_core.ir.dtype import to_storage
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.tensor_view import TensorView


class LibraryOp(Expr):
    """An op no generated kernel holds (nvFuser's expr_eval-only ops).

    `ties` lists (input position, input axis, output axis[, output position]): the
    axes the op keeps, so concretization and the id maps can follow them (output 0
    when the position is left out)."""

    ties: Sequence[tuple[int, ...]]

    def axis_pairs(
        self, producer: TensorView, consumer: TensorView | None = None
    ) -> list[tuple[IterDomain, IterDomain]]:
        """(producer axis, output axis) pairs; of `consumer` only, when given."""
        pairs = []
        for tie in self.ties:
            pos, in_axis, out_axis = tie[:3]
            out: TensorView = self.outputs[tie[3] if len(tie) > 3 else 0]  # type: ignore[assignment]
            if self.inputs[pos] is producer and (consumer is None or out is consumer):
                pairs.append((producer.logical_no_reductions()[in_axis], out.domain.maybe_root[out_axis]))
        return pairs

    def _tv(self, pos: int) -> str:
        return f"T{self.inputs[pos].name}"


def check_indices(op: Expr, index: np.ndarray, size: int, tensor: str, what: str) -> None:
    """Every entry of `index` in [0, size); else a FuserError naming the first bad one."""
    bad = (index < 0) | (index >= size)
    if np.any(bad):
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        value = int(index[where])
        raise FuserError(
            f"index {value} at position {list(where)} of {tensor} is out of range for {what} of size {size}",
            op=op.op_name,
            tensor=tensor,
            location=op.location,
        )


def _arr(value: Any) -> np.ndarray:
    return value if isinstance(value, np.ndarray) else np.asarray(value)


def _wide(x: np.ndarray) -> np.ndarray:
    """Sums accumulate in 64 bits (narrow floats through float32, which holds them exactly)."""
    if x.dtype.kind in "iu":
        return x.astype(np.int64)
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    return x.astype(np.float32).astype(np.float64) if x.dtype.kind == "V" or x.itemsize < 4 else x.astype(np.float64)


class IndexSelectOp(LibraryOp):
    op_name = "index_select"

    def __init__(self, out: TensorView, inp: TensorView, dim: int, index: TensorView) -> None:
        self.dim = dim
        self.ties = [(0, a, a) for a in range(inp.ndim) if a != dim] + ([(1, 0, dim)] if index.ndim else [])
        super().__init__([inp, index], [out])

    def to_string(self) -> str:
        return f"{self.output}\n   = indexSelect( {self.inputs[0]}, dim = {self.dim}, {self.inputs[1]} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x, index = _arr(values[0]), _arr(values[1]).astype(np.int64)
        check_indices(self, index, x.shape[self.dim], self._tv(1), f"axis {self.dim} of {self._tv(0)}")
        return [np.take(x, index.reshape(-1), axis=self.dim)]


class SelectOp(LibraryOp):
    op_name = "select"

    def __init__(self, out: TensorView, inp: TensorView, dim: int, index: Val) -> None:
        self.dim = dim
        self.ties = [(0, a, a - (a > dim)) for a in range(inp.ndim) if a != dim]
        super().__init__([inp, index], [out])

    def to_string(self) -> str:
        inp: TensorView = self.inputs[0]  # type: ignore[assignment]
        axis = inp.logical_no_reductions()[self.dim]
        return f"{self.output}\n   = select( {inp}, axis = {axis}, index = {self.inputs[1]} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x, index = _arr(values[0]), int(values[1])
        size = x.shape[self.dim]
        if not -size <= index < size:
            raise FuserError(
                f"index {index} ({self.inputs[1]}) is out of range for axis {self.dim} of {self._tv(0)} of size {size}",
                op=self.op_name,
                tensor=self._tv(0),
                location=self.location,
            )
        return [np.take(x, index % size, axis=self.dim)]


class GatherOp(LibraryOp):
    """torch.gather (`exact_sizes` False: the index may be smaller off `dim`) and
    take_along_axis (True: same sizes but on `dim`)."""

    def __init__(self, out: TensorView, inp: TensorView, dim: int, index: TensorView, exact_sizes: bool) -> None:
        self.dim = dim
        self.exact_sizes = exact_sizes
        self.ties = [(1, a, a) for a in range(index.ndim)]
        if exact_sizes:
            self.ties += [(0, a, a) for a in range(inp.ndim) if a != dim]
        super().__init__([inp, index], [out])

    @property
    def op_name(self) -> str:  # type: ignore[override]
        return "take_along_axis" if self.exact_sizes else "gather"

    def to_string(self) -> str:
        inp, index = self.inputs
        if self.exact_sizes:
            return f"{self.output}\n   = takeAlongAxis( {inp}, {index}, dim = {self.dim} )\n"
        return f"{self.output}\n   = torchGather( {inp}, dim = {self.dim}, {index} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x, index = _arr(values[0]), _arr(values[1]).astype(np.int64)
        check_indices(self, index, x.shape[self.dim], self._tv(1), f"axis {self.dim} of {self._tv(0)}")
        for axis in range(x.ndim):
            if axis != self.dim and index.shape[axis] > x.shape[axis]:
                raise FuserError(
                    f"{self._tv(1)} has size {index.shape[axis]} on axis {axis}, larger than "
                    f"{self._tv(0)}'s {x.shape[axis]}",
                    op=self.op_name,
                    tensor=self._tv(1),
                    location=self.location,
                )
        trimmed = x[tuple(slice(0, s) if a != self.dim else slice(None) for a, s in enumerate(index.shape))]
        return [np.take_along_axis(trimmed, index, axis=self.dim)]


class ScatterOp(LibraryOp):
    """`out = in` with `out[.., index[i], ..] = src[i]` along `dim` (src a tensor or a scalar)."""

    op_name = "scatter"

    def __init__(self, out: TensorView, inp: TensorView, dim: int, index: TensorView, src: Val) -> None:
        self.dim = dim
        self.ties = [(0, a, a) for a in range(inp.ndim)]
        super().__init__([inp, index, src], [out])

    def to_string(self) -> str:
        inp, index, src = self.inputs
        return f"{self.output}\n   = scatter(in = {inp}, dim = {self.dim}, src = {src}, idx = {index} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        x, index = _arr(values[0]), _arr(values[1]).astype(np.int64)
        check_indices(self, index, x.shape[self.dim], self._tv(1), f"axis {self.dim} of {self._tv(0)}")
        src = values[2]
        src_arr = _arr(src) if isinstance(self.inputs[2], TensorView) else np.full(index.shape, src)
        src_arr = src_arr[tuple(slice(0, s) for s in index.shape)]
        out = np.array(x, copy=True)
        np.put_along_axis(out, index, src_arr.astype(out.dtype), axis=self.dim)
        return [out]


class IndexPutAccumulateOp(LibraryOp):
    """`out = acc` with `out[indices[i], ...] += value[i, ...]` (torch.index_put_, accumulate)."""

    op_name = "index_put_accumulate"

    def __init__(self, out: TensorView, acc: TensorView, indices: TensorView, value: TensorView) -> None:
        self.ties = [(0, a, a) for a in range(acc.ndim)]
        super().__init__([acc, indices, value], [out])

    def to_string(self) -> str:
        acc, indices, value = self.inputs
        return f"{self.output}\n   = indexPutAccumulate( {acc}, {indices}, {value} )\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        acc, index, value = _arr(values[0]), _arr(values[1]).astype(np.int64), _arr(values[2])
        check_indices(self, index, acc.shape[0], self._tv(1), f"axis 0 of {self._tv(0)}")
        total = _wide(acc)
        np.add.at(total, index.reshape(-1), _wide(value))
        return [to_storage(total, self.output.dtype)]


class EmbeddingFwdOp(LibraryOp):
    """Rows of `weight` picked by `input`: out[..., :] = weight[input[...], :].
    padding_idx, scale_grad_by_freq and sparse change only the gradient."""

    op_name = "embedding_fwd"

    def __init__(self, out: TensorView, inp: TensorView, weight: TensorView, padding_idx: Val | None) -> None:
        self.ties = [(0, a, a) for a in range(inp.ndim)] + [(1, 1, inp.ndim)]
        self.has_padding_idx = padding_idx is not None
        super().__init__([inp, weight] + ([padding_idx] if padding_idx is not None else []), [out])

    def to_string(self) -> str:
        """nvFuser's EmbeddingFwdOp::toString: continuation lines indented 12 spaces."""
        cont = " " * 12
        lines = [f"{self.output},", f"   = embedding({self.inputs[0]},", f"{cont}{self.inputs[1]},"]
        if self.has_padding_idx:
            lines.append(f"{cont}padding_idx = {self.inputs[2]},")
        lines += [f"{cont}norm_type = double(2),", f"{cont}scale_grad_by_freq = false,", f"{cont}sparse = false)"]
        return "\n".join(lines) + "\n"

    def evaluate(self, values: Sequence[Any], ev: ScalarEvaluator) -> list[Any]:
        index, weight = _arr(values[0]).astype(np.int64), _arr(values[1])
        check_indices(self, index, weight.shape[0], self._tv(0), f"the rows of {self._tv(1)}")
        return [weight[index]]
