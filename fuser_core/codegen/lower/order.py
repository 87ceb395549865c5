"""The order materialized tensors are emitted in: loads reused by every loop first, then
the loads of a persistent kernel's row that its reductions read, serial partials of one
input one after the other."""

from __future__ import annotations

from fuser_core.codegen.lower.model import HARDWARE, concrete
from fuser_core.ir.iter_domain import ParallelType
from fuser_core.ir.tensor_exprs import LoadStoreOp, ReductionOp, WelfordOp, feeds_reduction
from fuser_core.ir.tensor_view import MemoryType, TensorView

_BLOCK_TYPES = (ParallelType.BIDx, ParallelType.BIDy, ParallelType.BIDz)


def _hoisted(materialized: list[TensorView], per_row_loads: frozenset[int] = frozenset()) -> list[TensorView]:
    """Tensors computed outside every shared loop (ca_pos 0) from inputs alone, such as a
    weight loaded once per thread for all its rows, go first: before the loops they are
    reused in, not between two of them. `per_row_loads` (by name: input caches loaded
    outside the loops their consumers run inside them, one value a row) come next."""
    names = {tv.name for tv in materialized}

    def depends_on_loops(tv: TensorView, hoisted: set[int]) -> bool:
        stack = [v for v in (tv.definition.inputs if tv.definition else []) if isinstance(v, TensorView)]
        while stack:
            val = stack.pop()
            if val.name in hoisted:
                continue
            if val.name in names:
                return True
            if val.definition is not None:
                # A Welford's count or variance is materialized as its average is.
                outputs = [o for o in val.definition.outputs if isinstance(o, TensorView)]
                if any(o.name in names and o.name not in hoisted for o in outputs):
                    return True
                stack.extend(v for v in val.definition.inputs if isinstance(v, TensorView))
        return False

    # What is computed outside every loop from those alone goes with them (fuzzer seed 68
    # case 273: an output copied from a hoisted [1, 1, 1] load, emitted between a grid
    # reduction's serial partial and the grid reduction, closed the loops they share).
    first: list[TensorView] = []
    hoisted: set[int] = set()
    for tv in materialized:
        if tv.compute_at_pos == 0 and not depends_on_loops(tv, hoisted):
            first.append(tv)
            hoisted.add(tv.name)
    # Then every load of an input that a reduction reads, made outside every serial loop (a
    # persistent kernel's row): all of a row's loads are in flight together before the first
    # reduction, instead of one memory round trip per reduction (layer norm's backward read
    # its second input only after the first block reduction). A load inside a reduction's
    # serial loop stays in the loop of the reduction that reads it.
    # A per-row value goes before all of those: its load is in flight with the row's first
    # loads rather than waited for after the row's reductions (cross_entropy_bwd's label and
    # gradient, H100: 257.4 and 257.7 us in two runs, against 260.6 and 258.9 loaded just
    # before the output's loop).
    per_row = [tv for tv in materialized if tv.name in per_row_loads and tv not in first]
    early = [
        tv
        for tv in materialized
        if tv not in first
        and tv not in per_row
        and _is_input_load(tv)
        and feeds_reduction(tv)
        and _outside_serial_loops(tv)
    ]
    placed = first + per_row + early
    order = placed + [tv for tv in materialized if tv not in placed]
    # Any other register load goes just before the first tensor that reads it, past
    # unrelated ones (transpose_add's row-major input after the shared-memory tile and its
    # barrier: its loads are then in flight together, not held across the tile). A kernel
    # with several outputs may so load an input after another output's stores.
    for tv in [q for q in order if q not in placed and _is_register_load(q)]:
        at = order.index(tv)
        reader = next((q for q in order[at + 1 :] if _reads_any(q, {tv.name})), None)
        if reader is not None and not all(_is_register_load(q) for q in order[at + 1 : order.index(reader)]):
            order.remove(tv)
            order.insert(order.index(reader), tv)

    # Serial partials of one input (sum and max of a row) go one after the other: they
    # share the loops, and the register buffers, their input is loaded in.
    def sources(tv: TensorView) -> set[int]:
        """The materialized tensors (or inputs) `tv` reads, through inlined ones."""
        found: set[int] = set()
        stack = [v for v in (tv.definition.inputs if tv.definition else []) if isinstance(v, TensorView)]
        while stack:
            val = stack.pop()
            if val.name in names or val.definition is None:
                found.add(val.name)
            else:
                stack.extend(v for v in val.definition.inputs if isinstance(v, TensorView))
        return found

    # (A Welford reducing serially and across threads in one op counts as the first of them.)
    partials = {tv.name: sources(tv) for tv in order if isinstance(tv.definition, ReductionOp | WelfordOp)}
    for tv in list(order):
        if not _is_serial_partial(tv):
            continue
        earlier = [q for q in order[: order.index(tv)] if partials.get(q.name, set()) & partials[tv.name]]
        if not earlier:
            continue
        at = order.index(earlier[-1])
        position = {q.name: i for i, q in enumerate(order)}
        if all(position.get(name, -1) <= at for name in partials[tv.name]):  # its inputs are ready there
            order.remove(tv)
            order.insert(at + 1, tv)
    # Reductions go one after the other too when nothing between feeds them (two grid
    # reductions of one input: their accumulations share the loops, then they arrive once).
    for tv in list(order):
        if not isinstance(tv.definition, ReductionOp | WelfordOp) or _is_serial_partial(tv):
            continue
        at = order.index(tv)
        earlier = [q for q in order[:at] if isinstance(q.definition, ReductionOp | WelfordOp)]
        if not earlier or order.index(earlier[-1]) == at - 1:
            continue
        last = order.index(earlier[-1])
        position = {q.name: i for i, q in enumerate(order)}
        if all(position.get(name, -1) <= last for name in sources(tv)):  # its inputs are ready there
            order.remove(tv)
            order.insert(last + 1, tv)
    return _grid_results_last(order)


def _grid_results_last(order: list[TensorView]) -> list[TensorView]:
    """A grid reduction's result, and what is computed from it, go after everything else:
    it exists only once every block has arrived, after the loops its partial accumulated
    in (an inner-outer kernel's column sums, after the row loop whose other tensors would
    otherwise be emitted in a second copy of that loop)."""
    grid = [
        tv
        for tv in order
        if isinstance(tv.definition, ReductionOp | WelfordOp)
        and any(d.is_reduction and d.parallel_type in _BLOCK_TYPES for d in tv.loop)
    ]
    if not grid:
        return order
    # (a Welford's siblings too: a variance reads its M2)
    late: set[int] = {out.name for tv in grid for out in tv.definition.outputs if isinstance(out, TensorView)}  # type: ignore[union-attr]
    for tv in order:
        if tv.name not in late and _reads_any(tv, late):
            late.add(tv.name)
    return [tv for tv in order if tv.name not in late] + [tv for tv in order if tv.name in late]


def _reads_any(tv: TensorView, names: set[int]) -> bool:
    """Whether `tv` is computed from a tensor named in `names` (through inlined ones)."""
    stack = [v for v in (tv.definition.inputs if tv.definition else []) if isinstance(v, TensorView)]
    seen: set[int] = set()
    while stack:
        val = stack.pop()
        if val.name in names:
            return True
        if val.name in seen or val.definition is None:
            continue
        seen.add(val.name)
        stack.extend(v for v in val.definition.inputs if isinstance(v, TensorView))
    return False


def _outside_serial_loops(tv: TensorView) -> bool:
    """Whether every loop `tv` shares with its consumers is bound to hardware or runs
    over rows (an inner-outer kernel's row loop: each row's loads go first in it), none
    over a reduction's elements."""
    return all(d.parallel_type in HARDWARE or not concrete(d).is_reduction for d in tv.loop[: tv.compute_at_pos])


def _is_input_load(tv: TensorView) -> bool:
    """A copy of a fusion input (an input has no definition) into the kernel."""
    expr = tv.definition
    return (
        isinstance(expr, LoadStoreOp) and isinstance(expr.inputs[0], TensorView) and expr.inputs[0].definition is None
    )


def _is_register_load(tv: TensorView) -> bool:
    return _is_input_load(tv) and tv.memory_type == MemoryType.Local


def _is_serial_partial(tv: TensorView) -> bool:
    """A reduction whose reduced loops are all serial: an rfactor's per-thread partial."""
    return isinstance(tv.definition, ReductionOp) and not any(
        d.is_reduction and d.parallel_type in HARDWARE for d in tv.loop
    )
