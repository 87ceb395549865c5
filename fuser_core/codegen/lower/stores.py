"""Layer of `Lowering`: materializing a tensor. Its vector width, and the store of each
value into its buffer: a global output (vectorized through a register staging array), a
shared tile (then a Sync), a register array (vector loads straight from an input)."""

from __future__ import annotations

from collections.abc import Mapping

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.model import (
    INDEX,
    TRUE,
    Instance,
    _loop_vars,
    _Scope,
    _substitute,
    concrete,
    loop_var,
    read_by_writers,
)
from fuser_core.codegen.lower.reductions import Reductions
from fuser_core.codegen.simplify import const_value, land
from fuser_core.ir.iter_domain import ParallelType
from fuser_core.ir.tensor_exprs import CatOp, LoadStoreOp, PadOp, ReductionOp, SliceOp, WelfordOp, downstream_uses
from fuser_core.ir.tensor_view import MemoryType, TensorView


class Stores(Reductions):
    """Emits the loops and stores that materialize a tensor at an instance."""

    def _materialize(self, tv: TensorView, inst: Instance, number: int) -> None:
        expr = tv.definition
        assert expr is not None
        if self.pending_reduces and self._reads_pending(tv):
            self._close_loops(min(depth for depth, _ in self.pending_reduces))
        if isinstance(expr, ReductionOp | WelfordOp):
            self._materialize_reduction(tv, expr, inst, number)
            return
        vector = self._vector_width(tv)
        self._open_loops(tv, skip_vector=vector > 1)
        self.computing = tv
        if tv in self.outputs:
            self._store_global(tv, inst, vector)
        elif tv.memory_type == MemoryType.Shared:
            self._store_shared(tv, inst)
        else:
            self._store_local(tv, inst, number, vector)
        self.computing = None

    def _reads_pending(self, tv: TensorView) -> bool:
        """Whether `tv` must wait for the pending block/grid reductions: anything but a
        reduction does (it may read their results), and so does a reduction of one."""
        if not isinstance(tv.definition, ReductionOp | WelfordOp):
            return True
        pending = {name for _, reduce in self.pending_reduces for name in reduce.buffers}
        stack = [v for v in tv.definition.inputs if isinstance(v, TensorView)]
        seen: set[int] = set()
        while stack:
            val = stack.pop()
            if val.name in seen:
                continue
            seen.add(val.name)
            if any(name == f"T{val.name}" or name.startswith(f"T{val.name}_") for name in pending):
                return True
            if val.definition is not None and val not in self.inputs:
                stack.extend(v for v in val.definition.inputs if isinstance(v, TensorView))
        return False

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

    def _store_global(self, tv: TensorView, inst: Instance, vector: int) -> None:
        name = f"T{tv.name}"
        if vector == 1:
            once = self.broadcast_write_once(tv)
            with self._predicated(land(land(self._write_predicate(tv), once), inst.valid)):
                value = self.value_of_definition(tv, inst)
                self._emit(k.Store(name, self.global_index(tv, inst.coords), value))
            return
        lane_dim = tv.loop[-1]
        lane = loop_var(lane_dim)
        first = self.own_instance(tv, {concrete(lane_dim).name: k.Const(INDEX, 0)})
        # Launch checks make the extent divisible by the width: lane 0's bounds are all lanes'.
        self._bound(lane, k.Const(INDEX, vector))
        with self._predicated(land(self._write_predicate(tv), first.valid)):
            staging = self._local_name(tv) + "_vec"
            self._emit(k.Alloc(staging, tv.dtype, vector, k.Memory.local))
            loop = k.For(lane, k.Const(INDEX, vector), k.LoopKind.unroll, label=concrete(lane_dim).to_string())
            self._emit(loop)
            self.stack.append(_Scope(loop.body, concrete(lane_dim).name))
            self._emit(k.Store(staging, lane, self.value_of_definition(tv, inst)))
            self.stack.pop()
            copy = k.VectorCopy(name, self.global_index(tv, first.coords), staging, k.Const(INDEX, 0), vector, tv.dtype)
            self._emit(copy)
        self.vector_widths[name] = max(vector, self.vector_widths.get(name, 1))

    def _store_shared(self, tv: TensorView, inst: Instance) -> None:
        name = f"T{tv.name}"
        size = self._buffer_size(tv)
        row = self._shared_row(tv)
        if row is not None:
            size += size // row
        if not any(isinstance(s, k.Alloc) and s.buffer == name for s in self.body):
            self.body.insert(0, k.Alloc(name, tv.dtype, size, k.Memory.shared))
            self.shared_bytes += size * tv.dtype.itemsize
        store = k.Store(name, self._padded(tv, self._slot(tv)), self.value_of_definition(tv, inst))
        self._emit(store)
        if read_by_writers(tv):  # a persistent row: each thread reads back what it stored
            return
        # The tile is complete once every thread has written its part.
        self._close_loops(self.alloc_depth[tv.name])
        self._emit(k.Sync())

    def _store_local(self, tv: TensorView, inst: Instance, number: int, vector: int) -> None:
        name = f"T{tv.name}" if number == 0 else f"T{tv.name}_{number}"
        self.buffers[(tv.name, inst)] = name
        expr = tv.definition
        source = expr.inputs[0] if isinstance(expr, LoadStoreOp) else None
        vector_load = vector > 1 and isinstance(source, TensorView) and source in self.inputs
        # A vector-loaded copy of a 16-bit (or narrower) input is read where its load was
        # made (its readers carry the load's bounds) or under a select that discards it:
        # it is not zero-filled first. Zeroing such a copy costs a byte-permute per element
        # before every predicated load (H100: layer norm backward 250 -> 217 us,
        # cross-entropy backward 315 -> 268). A float copy's zeros are a move each and
        # stay (linear_output_order's unrolled float loads: 44.9 us with them, 50.2 without
        # in two later runs, not A/B'd alone). A copy whose uses reach a pad, slice or cat
        # (RoPE's halves, read at several offsets) keeps its zeros too: without them RoPE's
        # kernel took 8 more registers and ran 18% slower. The interpreter fills an
        # unzeroed buffer with NaN poison, which shows in the outputs of tests whose shapes
        # skip loads, wherever such an element is read into a value.
        zero = not (
            vector_load
            and tv.dtype.itemsize < 4
            and not any(isinstance(use, CatOp | PadOp | SliceOp) for use, _ in downstream_uses(tv))
        )
        self._alloc_for(tv, k.Alloc(name, tv.dtype, self._buffer_size(tv), k.Memory.local, zero=zero))
        if vector_load:
            assert isinstance(source, TensorView)
            lane_dim = tv.loop[-1]
            lanes = {concrete(lane_dim).name: k.Const(INDEX, 0)}
            first = self.producer_instance(expr, tv, self._lane_instance(inst, lanes), source)
            copy = k.VectorCopy(
                name,
                self._slot(tv, lanes),
                f"T{source.name}",
                self.global_index(source, first.coords),
                vector,
                tv.dtype,
            )
            self._emit(copy if first.valid == TRUE else k.If(first.valid, [copy]))
            self.vector_widths[f"T{source.name}"] = max(vector, self.vector_widths.get(f"T{source.name}", 1))
            return
        if vector > 1:
            # The vector width divides the extent: lane 0's bounds are every lane's, so
            # the check is made once, outside the lanes.
            lane = {concrete(tv.loop[-1]).name: k.Const(INDEX, 0)}
            with self._predicated(self._lane_instance(inst, lane).valid):
                self._open(tv.loop[-1])
                self._emit(k.Store(name, self._slot(tv), self.value_of_definition(tv, inst)))
            return
        with self._predicated(inst.valid):
            self._emit(k.Store(name, self._slot(tv), self.value_of_definition(tv, inst)))

    def _lane_instance(self, inst: Instance, lanes: Mapping[int, k.Node]) -> Instance:
        subst = {f"i{c}": v for c, v in lanes.items()}
        return Instance(tuple(_substitute(c, subst) for c in inst.coords), _substitute(inst.valid, subst))
