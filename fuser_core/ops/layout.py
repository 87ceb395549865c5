"""`stride_order`: a copy of a tensor that must be laid out in a given order.

As nvFuser's frontend does, the op is a `Set` whose output gets a *required*
allocation domain (hint=False): a user's requirement, kept apart from the hints that
allocation-order inference proposes, never dropped by a scheduler, and not a no-op
to remove even though it copies. `stride_order[i]` is axis i's rank among the strides
(0: the innermost), as in define_tensor and add_output.
"""

from __future__ import annotations

from collections.abc import Sequence

from fuser_core.errors import FuserError
from fuser_core.ir.layout import allocation_positions
from fuser_core.ir.tensor_view import TensorView, filled_contiguity
from fuser_core.ops import arith
from fuser_core.ops.utils import tv_name


def stride_order(tv: TensorView, order: Sequence[int]) -> TensorView:
    op = "stride_order"
    rank = tv.ndim
    order = list(order)
    if sorted(order) != list(range(rank)):
        raise FuserError(
            f"stride_order {order} is not a permutation of 0..{rank - 1} for the {rank}-D tensor {tv_name(tv)}",
            op=op,
            tensor=tv_name(tv),
        )
    out = arith.set_(tv)
    dims = out.logical_no_reductions()
    alloc = list(dims)
    for axis, position in enumerate(allocation_positions(order, rank)):
        alloc[position] = dims[axis]
    out.domain.set_allocation(alloc, filled_contiguity(alloc, True), hint=False)
    return out
