"""Layer of `Lowering`: the buffers of materialized tensors. The loop IDs a register array
or shared tile allocates, its constant size, the slot a loop iteration or coordinates
address, and the padding of shared tiles against bank conflicts."""

from __future__ import annotations

from collections.abc import Mapping

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.indexing import Indexing
from fuser_core.codegen.lower.model import (
    HARDWARE,
    INDEX,
    THREADS,
    Coords,
    Instance,
    _loop_vars,
    _substitute,
    buffer_layout,
    concrete,
    first_reduction_position,
    loop_var,
    padded_size,
)
from fuser_core.codegen.simplify import add, const_value, div, mul
from fuser_core.errors import FuserError
from fuser_core.ir.iter_domain import IterDomain, Merge, ParallelType, Resize, Split
from fuser_core.ir.tensor_exprs import CatOp, PadOp, ReductionOp, SliceOp, WelfordOp, downstream_uses
from fuser_core.ir.tensor_view import MemoryType, TensorView, transforms_between


class Buffers(Indexing):
    """Lays out register arrays and shared tiles and addresses their slots."""

    # -- buffers ---------------------------------------------------------------------------
    def _allocated_dims(self, tv: TensorView) -> list[IterDomain]:
        """The loop IDs the buffer holds, in its layout's order (model.buffer_layout)."""
        dims = []
        start = tv.compute_at_pos
        if isinstance(tv.definition, ReductionOp | WelfordOp):  # allocated before its reduction loops
            start = min(start, first_reduction_position(tv))
        position = {id(dim): pos for pos, dim in enumerate(tv.loop)}
        for dim in buffer_layout(tv):
            if position[id(dim)] < start and not (tv.memory_type == MemoryType.Shared and dim.parallel_type in THREADS):
                continue  # a shared tile holds every thread's part, even along its consumers' loops
            if dim.is_reduction:
                continue  # a reduction's buffer holds one partial result per iteration point
            if dim.is_broadcast and tv.memory_type == MemoryType.Local and not _sliced_to_one(tv, dim):
                continue  # one value along its own broadcast axis, however far it is iterated
            hw = HARDWARE.get(dim.parallel_type)
            if hw is not None and (tv.memory_type == MemoryType.Local or hw.startswith("block")):
                continue
            dims.append(dim)
        return dims

    def _slot(self, tv: TensorView, lanes: Mapping[int, k.Node] | None = None) -> k.Node:
        """A buffer position from the current loop indices (the tensor's own, past ca_pos)."""
        slot: k.Node = k.Const(INDEX, 0)
        for dim in self._allocated_dims(tv):
            var: k.Node = loop_var(dim)
            if lanes is not None and concrete(dim).name in lanes:
                var = lanes[concrete(dim).name]
            slot = add(mul(slot, self._const_extent(dim, tv)), var)
        return slot

    def _padded(self, tv: TensorView, slot: k.Node) -> k.Node:
        """A shared tile whose rows are a multiple of 32 elements wide gets one element of
        padding per row, so a column walked by a warp falls in 32 different banks."""
        row = self._shared_row(tv)
        return slot if row is None else add(slot, div(slot, k.Const(INDEX, row)))

    def _shared_row(self, tv: TensorView) -> int | None:
        """The row width of a shared tile made by merging two axes (the inner one's
        extent), when it is a multiple of 32; the tile's allocated loops split that merge."""
        if tv.memory_type != MemoryType.Shared:
            return None
        dims = self._allocated_dims(tv)
        sources = {id(d.definition.inputs[0]) for d in dims if isinstance(d.definition, Split)}
        if len(sources) != 1 or any(not isinstance(d.definition, Split) for d in dims):
            return None
        merged = dims[0].definition.inputs[0]  # type: ignore[union-attr]
        merge = merged.definition
        if not isinstance(merge, Merge):
            return None
        row = const_value(self.extent(merge.inputs[1]))  # type: ignore[arg-type]
        return int(row) if isinstance(row, int) and row % 32 == 0 else None

    def _read_slot(self, tv: TensorView, coords: Coords) -> k.Node:
        """Where a consumer reads a register buffer at `coords`: along an allocated loop
        that encloses the read (one the consumer shares) its index; along one that does
        not (a broadcast the consumer squeezed away), the position the coordinates give."""
        open_loops = {scope.concrete_id for scope in self.stack}
        dims = self._allocated_dims(tv)
        if all(concrete(d).name in open_loops for d in dims):
            return self._slot(tv)
        index = self._forward_index(tv, coords)
        slot: k.Node = k.Const(INDEX, 0)
        for dim in dims:
            position = loop_var(dim) if concrete(dim).name in open_loops else index[id(dim)]
            slot = add(mul(slot, self._const_extent(dim, tv)), position)
        return slot

    def _const_extent(self, dim: IterDomain, tv: TensorView) -> k.Node:
        padded = padded_size(dim)
        if tv.memory_type == MemoryType.Shared and dim.parallel_type in THREADS and padded is not None:
            return k.Const(INDEX, padded)  # the launched threads bound a run-time extent
        extent = self.extent(concrete(dim) if tv.memory_type == MemoryType.Local else dim)
        if const_value(extent) is None:
            raise FuserError(
                f"T{tv.name} would need a buffer of symbolic size along {dim}: its loop is not inlined far enough",
                op="codegen",
                tensor=f"T{tv.name}",
            )
        return extent

    def _buffer_size(self, tv: TensorView) -> int:
        size = 1
        for dim in self._allocated_dims(tv):
            size *= int(const_value(self._const_extent(dim, tv)))  # type: ignore[arg-type]
        return size

    def _vector_width(self, tv: TensorView) -> int:
        last = tv.loop[-1] if tv.loop else None
        if not self.vectorize or last is None or last.parallel_type != ParallelType.Vectorize:
            return 1
        if last.is_broadcast:  # one element, read by every lane: no vector access
            return 1
        if tv in self.outputs:
            coords = self.own_instance(tv).coords
            if loop_var(last).name not in set().union(*(_loop_vars(c) for c in coords)):
                return 1  # its lanes run along a broadcast axis of the output: one element, no vector
        width = const_value(self.extent(last))
        return int(width) if width is not None else 1

    def _lane_instance(self, inst: Instance, lanes: Mapping[int, k.Node]) -> Instance:
        subst = {f"i{c}": v for c, v in lanes.items()}
        return Instance(tuple(_substitute(c, subst) for c in inst.coords), _substitute(inst.valid, subst))

    @staticmethod
    def _zero_filled(tv: TensorView, vector_load: bool) -> bool:
        """Whether a register copy of `tv` is zero-filled where it is allocated.

        A vector-loaded copy of a 16-bit (or narrower) input is read where its load was
        made (its readers carry the load's bounds) or under a select that discards it:
        it is not zero-filled first. Zeroing such a copy costs a byte-permute per element
        before every predicated load (H100: layer norm backward 250 -> 217 us,
        cross-entropy backward 315 -> 268). A float copy's zeros are a move each and
        stay (linear_output_order's unrolled float loads: 44.9 us with them, 50.2 without
        in two later runs, not A/B'd alone). A copy whose uses reach a pad, slice or cat
        (RoPE's halves, read at several offsets) keeps its zeros too: without them RoPE's
        kernel took 8 more registers and ran 18% slower. The interpreter fills an
        unzeroed buffer with NaN poison, which shows in the outputs of tests whose shapes
        skip loads, wherever such an element is read into a value."""
        return not (
            vector_load
            and tv.dtype.itemsize < 4
            and not any(isinstance(use, CatOp | PadOp | SliceOp) for use, _ in downstream_uses(tv))
        )


def _sliced_to_one(tv: TensorView, dim: IterDomain) -> bool:
    """Whether loop ID `dim` of `tv` comes from one of its iterated axes resized to a single
    element (a slice of width 1, concretized as a broadcast) in its own loop transforms. An
    input cache read by two slices takes its loops from one of them: the other slice's
    instance of it still varies along the loops split from that axis, so its buffer holds
    each of them (seed 20 case 170: cat of x[:, 6:7] and x[:, 0:6], summed; two unrolled
    steps loaded into one slot, the first read the second's values). A tensor only that
    slice reads holds its one value there, as any broadcast."""
    if len(tv.uses) < 2:
        return False
    resized = set()
    for expr in transforms_between(tv.logical, tv.loop):
        source = expr.inputs[0]
        if isinstance(expr, Resize) and isinstance(source, IterDomain) and not source.is_broadcast:
            resized.add(id(expr.outputs[0]))
        elif any(id(i) in resized for i in expr.inputs if isinstance(i, IterDomain)):
            resized.update(id(o) for o in expr.outputs)
    return id(dim) in resized
