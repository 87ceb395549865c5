"""IterDomains, the axes of tensors, and the expressions between them.

A Split, Merge or Resize takes IterDomains to new IterDomains. Reshape and resize
ops use them between a tensor's root and logical domains (the outputs carry `rf`);
schedulers use them between logical and loop domains.
"""

from __future__ import annotations

import enum
from typing import Any

from fuser_core.errors import InternalError
from fuser_core.ir import scalar_math as sm
from fuser_core.ir.base import Expr, Val, current_fusion
from fuser_core.ir.dtype import DataType
from fuser_core.ir.elementwise import BinaryOp
from fuser_core.ir.op_types import BinaryOpType
from fuser_core.ir.scalar import Scalar


class IterType(enum.Enum):
    Iteration = "i"
    Reduction = "r"
    Broadcast = "b"
    Symbolic = "?"


class ParallelType(enum.Enum):
    Serial = "S"
    BIDx = "blockIdx.x"
    BIDy = "blockIdx.y"
    BIDz = "blockIdx.z"
    TIDx = "threadIdx.x"
    TIDy = "threadIdx.y"
    TIDz = "threadIdx.z"
    Vectorize = "V"
    Unroll = "UR"
    Unswitch = "US"
    # Unrolled, and the block reductions inside run once for all its iterations (nvFuser's
    # ParallelType::Group): several rows of a block's loop reduce in one round of barriers.
    Group = "G"


class IterDomain(Val):
    """One axis: `[start, start + extent)`, its kind and how it is parallelized."""

    name_category = "id"

    def __init__(
        self,
        extent: Scalar,
        *,
        start: Scalar | None = None,
        iter_type: IterType = IterType.Iteration,
        parallel_type: ParallelType = ParallelType.Serial,
        expanded_extent: Scalar | None = None,
        is_rfactor_product: bool = False,
    ) -> None:
        fusion = current_fusion()
        self.start = start if start is not None else fusion.zero_val()
        self.extent = extent
        self.expanded_extent = expanded_extent
        self.iter_type = iter_type
        self.parallel_type = parallel_type
        self.is_rfactor_product = is_rfactor_product
        # The loop IterDomain of another tensor this one was replayed from by a
        # scheduler's propagation: chains end at the reference tensor's loop IDs.
        self.replayed_from: IterDomain | None = None
        # A thread axis launched on a constant, larger number of threads (nvFuser's
        # padToMultipleOfWarp): the lanes past `extent` are predicated off.
        self.padded_to: int | None = None
        super().__init__(DataType.Index, fusion)

    # -- queries ---------------------------------------------------------------------
    @property
    def is_broadcast(self) -> bool:
        return self.iter_type == IterType.Broadcast

    @property
    def is_reduction(self) -> bool:
        return self.iter_type == IterType.Reduction

    @property
    def is_symbolic(self) -> bool:
        return self.iter_type == IterType.Symbolic

    @property
    def is_iteration(self) -> bool:
        return self.iter_type == IterType.Iteration

    @property
    def has_expanded_extent(self) -> bool:
        return self.expanded_extent is not None

    @property
    def maybe_expanded_extent(self) -> Scalar:
        return self.expanded_extent if self.expanded_extent is not None else self.extent

    # -- printing --------------------------------------------------------------------
    def to_string(self) -> str:
        text = f"{self.iter_type.value}{self.parallel_type.value}{self.name}{{"
        if not self.start.is_zero_int():
            text += f"{self.start.to_inline_string()} : "
        text += self.extent.to_inline_string()
        if self.expanded_extent is not None:
            text += f" ex {self.expanded_extent.to_inline_string()}"
        text += "}"
        if self.is_rfactor_product:
            text += "rf"
        return text

    # -- building --------------------------------------------------------------------
    def clone_with(self, **changes: Any) -> IterDomain:
        """A new IterDomain (new name) like this one but for `changes`."""
        attrs: dict[str, Any] = {
            "extent": self.extent,
            "start": self.start,
            "iter_type": self.iter_type,
            "parallel_type": self.parallel_type,
            "expanded_extent": self.expanded_extent,
            "is_rfactor_product": self.is_rfactor_product,
        }
        attrs.update(changes)
        return IterDomain(**attrs)


class Split(Expr):
    """`in` of extent N by factor f: an inner split gives (ceilDiv(N, f), f), an
    outer split gives (f, ceilDiv(N, f))."""

    op_name = "Split"

    def __init__(
        self,
        outer: IterDomain,
        inner: IterDomain,
        inp: IterDomain,
        factor: Scalar,
        inner_split: bool,
        divisible: bool = False,
    ) -> None:
        self.inner_split = inner_split
        # The scheduler guarantees the factor divides the extent at every launch (a vector
        # width chosen to divide it): the inner index never runs past, so a bounds check
        # of the input holds for every inner index when it holds for the first.
        self.divisible = divisible
        super().__init__([inp, factor], [outer, inner])

    def to_string(self) -> str:
        kind = "Split: " if self.inner_split else "Outer split: "
        outer, inner = self.outputs
        return f"{kind}{self.inputs[0]} by factor {self.inputs[1]} -> {outer}, {inner}\n"


class Merge(Expr):
    op_name = "Merge"

    def __init__(self, out: IterDomain, outer: IterDomain, inner: IterDomain) -> None:
        super().__init__([outer, inner], [out])

    def to_string(self) -> str:
        outer, inner = self.inputs
        return f"Merge: {outer} and {inner} -> {self.output}\n"


class Resize(Expr):
    """Grows (or with negative amounts, shrinks) an axis on both sides: pad, slice, cat."""

    op_name = "Resize"

    def __init__(self, out: IterDomain, inp: IterDomain, left: Scalar, right: Scalar) -> None:
        super().__init__([inp, left, right], [out])

    @property
    def left(self) -> Scalar:
        return self.inputs[1]  # type: ignore[return-value]

    @property
    def right(self) -> Scalar:
        return self.inputs[2]  # type: ignore[return-value]

    def to_string(self) -> str:
        return (
            f"Resize: {self.inputs[0]} by {self.left.to_inline_string()} and "
            f"{self.right.to_inline_string()} -> {self.output}\n"
        )


def split(
    inp: IterDomain, factor: Scalar | int, inner_split: bool = True, divisible: bool = False
) -> tuple[IterDomain, IterDomain]:
    if not inp.start.is_zero_int():
        raise InternalError(f"cannot split {inp}: non-zero start")
    f = sm.as_scalar(factor)
    remainder = sm.ceil_div(inp.extent, f)
    outer_extent, inner_extent = (remainder, f) if inner_split else (f, remainder)
    common = {"iter_type": inp.iter_type, "is_rfactor_product": inp.is_rfactor_product}
    outer = IterDomain(outer_extent, **common)  # type: ignore[arg-type]
    inner = IterDomain(inner_extent, **common)  # type: ignore[arg-type]
    Split(outer, inner, inp, f, inner_split, divisible)
    return outer, inner


def merge(outer: IterDomain, inner: IterDomain) -> IterDomain:
    kinds = {outer.iter_type, inner.iter_type}
    if IterType.Reduction in kinds:
        iter_type = IterType.Reduction
    elif kinds == {IterType.Broadcast}:
        iter_type = IterType.Broadcast
    elif IterType.Symbolic in kinds:
        iter_type = IterType.Symbolic
    else:
        iter_type = IterType.Iteration
    extent = sm.mul(outer.extent, inner.extent)
    out = IterDomain(
        extent,
        iter_type=iter_type,
        is_rfactor_product=outer.is_rfactor_product or inner.is_rfactor_product,
    )
    Merge(out, outer, inner)
    return out


def resize(
    inp: IterDomain,
    left: Scalar,
    right: Scalar,
    *,
    mark_rfactor: bool = True,
    iter_type: IterType | None = None,
) -> IterDomain:
    """The axis `inp` extended by `left` and `right` elements (negative shrinks).

    The output is Broadcast when its extent is provably 1, Iteration when provably
    other, and Symbolic when that is only known once the inputs are.
    """
    size = _resized_extent(inp, left, right)
    if iter_type is None:
        iter_type = IterType.Symbolic
        if size.is_const:
            iter_type = IterType.Broadcast if size.value == 1 else IterType.Iteration
        elif left.is_const and right.is_const and left.value + right.value > 1:  # type: ignore[operator]
            iter_type = IterType.Iteration
    extent = current_fusion().one_val() if iter_type == IterType.Broadcast else size
    out = IterDomain(extent, iter_type=iter_type, is_rfactor_product=mark_rfactor)
    Resize(out, inp, left, right)
    return out


def _resized_extent(inp: IterDomain, left: Scalar, right: Scalar) -> Scalar:
    # A slice's right expansion is `stop - extent`: then the size is `left + stop`.
    definition = right.definition
    is_sub = isinstance(definition, BinaryOp) and definition.op_type == BinaryOpType.Sub
    if is_sub and definition.inputs[1] is inp.extent:  # type: ignore[union-attr]
        return sm.add(left, definition.inputs[0])  # type: ignore[union-attr, arg-type]
    return sm.add(sm.add(inp.maybe_expanded_extent, left), right)
