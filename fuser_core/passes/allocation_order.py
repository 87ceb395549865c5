"""Allocation order: a user's `add_output(..., stride_order=...)` is a requirement on
the output's allocation domain (nvFuser #2425), set here with hint=False so no
scheduler may drop it. Inferring hints for other tensors is not done yet."""

from __future__ import annotations

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.layout import allocation_positions
from fuser_core.ir.tensor_view import filled_contiguity


def require_output_stride_orders(fusion: Fusion) -> bool:
    changed = False
    for tv, order in fusion.output_stride_order.items():
        dims = tv.logical_no_reductions()
        positions = allocation_positions(order, len(dims))
        alloc = [dims[0]] * len(dims)
        for axis, position in enumerate(positions):
            alloc[position] = dims[axis]
        if [d for d in tv.logical if d.is_reduction]:
            continue  # a reduction output's layout is its logical order without the `r` axes
        tv.domain.set_allocation(alloc, filled_contiguity(alloc, True), hint=False)
        changed = True
    return changed
