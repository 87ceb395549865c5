"""Layer of `Lowering`: materializing a tensor. Its vector width, and the store of each
value into its buffer: a global output (vectorized through a register staging array), a
shared tile (then a Sync), a register array (vector loads straight from an input)."""

from __future__ import annotations

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.model import (
    INDEX,
    Instance,
    _loop_vars,
    _Scope,
    _substitute,
    concrete,
    loop_var,
    read_by_writers,
    vector_copies,
)
from fuser_core.codegen.lower.reductions import Reductions
from fuser_core.codegen.simplify import land
from fuser_core.ir.tensor_exprs import LoadStoreOp, ReductionOp, WelfordOp
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
        # An expanded axis outside the vector (the lanes are contiguous in the compact
        # storage) is written once too, as element by element: where its index is first.
        once = _substitute(self.broadcast_write_once(tv), {lane.name: k.Const(INDEX, 0)})
        with self._predicated(land(land(self._write_predicate(tv), once), first.valid)):
            staging = self._local_name(tv) + "_vec"
            self._emit(k.Alloc(staging, tv.dtype, vector, k.Memory.local))
            loop = k.For(lane, k.Const(INDEX, vector), k.LoopKind.unroll, label=concrete(lane_dim).to_string())
            self._emit(loop)
            self.stack.append(_Scope(loop.body, concrete(lane_dim).name))
            self._emit(k.Store(staging, lane, self.value_of_definition(tv, inst)))
            self.stack.pop()
            for copy in vector_copies(
                name,
                self.global_index(tv, first.coords),
                staging,
                k.Const(INDEX, 0),
                vector,
                tv.dtype,
                streaming=tv.name in self.fusion.streaming_stores,
            ):
                self._emit(copy)
        self._copied_in_vectors(name, vector, tv.dtype)

    def _lanes_advance(self, tv: TensorView, source: TensorView, inst: Instance) -> bool:
        """Whether the element of `source` that `inst` of its copy `tv` reads moves with the
        copy's vector lane (its innermost loop), one element a lane. At the copy's own
        coordinates (up to how mapped extents are spelled) the scheduler's vectorization
        says so. At a consumer's other coordinates (a reshape of a permuted input, read in
        logical order), only an index that is the lane plus terms without it does: the
        lanes of `k / 5 + (k % 5) * 2` are not one vector."""
        read = self.producer_instance(tv.definition, tv, inst, source)
        lane = loop_var(tv.loop[-1]).name
        index = self.global_index(source, read.coords)
        if lane not in _loop_vars(index):
            return False
        own = self.own_instance(tv).coords
        same = [self.same_extent(c) for c in inst.coords] == [self.same_extent(c) for c in own]
        return same or _lane_plus_rest(index, lane)

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
        # Not where its lanes read one element: the copy a one-wide slice takes of an input
        # that the rest of the kernel reads in vectors along the sliced axis (x - x[:, k]).
        # A vector from there would read k, k+1, ... (and need not be aligned): each lane
        # loads the element instead.
        vector_load = (
            vector > 1
            and isinstance(source, TensorView)
            and source in self.inputs
            and self._lanes_advance(tv, source, inst)
        )
        self._alloc_for(
            tv, k.Alloc(name, tv.dtype, self._buffer_size(tv), k.Memory.local, zero=self._zero_filled(tv, vector_load))
        )
        if vector_load:
            assert isinstance(source, TensorView)
            lanes = {concrete(tv.loop[-1]).name: k.Const(INDEX, 0)}
            self._emit_vector_load(tv, source, name, self._lane_instance(inst, lanes), lanes, vector)
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


def _lane_plus_rest(index: k.Node, lane: str) -> bool:
    """Whether `index` moves one element a lane: a sum and difference of terms where one
    term, added, is the loop index `lane` (or such a sum wrapped around an extent, the
    `(flat + lane) % n` of a broadcast bias read along a flattened axis), and every other
    term reads the lane only inside a quotient (`(flat + lane) / n`: the vector does not
    cross n where the width divides it, as `common.vector_width` makes it divide the
    innermost extents; not proven here). The lanes of `k / 5 + (k % 5) * 2` (a permuted
    input read in logical order) are not one vector."""
    advancing = 0
    for term, sign in _sum_terms(index):
        if lane not in _loop_vars(term) or _lane_only_in_quotients(term, lane):
            continue
        if sign != 1 or not _advances(term, lane):
            return False
        advancing += 1
    return advancing == 1


def _sum_terms(node: k.Node) -> list[tuple[k.Node, int]]:
    terms, stack = [], [(node, 1)]
    while stack:
        node, sign = stack.pop()
        node = _uncast(node)
        if isinstance(node, k.Bin) and node.op in ("+", "-"):
            stack += [(node.a, sign), (node.b, sign if node.op == "+" else -sign)]
        else:
            terms.append((node, sign))
    return terms


def _uncast(node: k.Node) -> k.Node:
    while isinstance(node, k.Cast):
        node = node.a
    return node


def _advances(term: k.Node, lane: str) -> bool:
    term = _uncast(term)
    if isinstance(term, k.Var):
        return term.name == lane
    if isinstance(term, k.Bin) and term.op == "%" and lane not in _loop_vars(term.b):
        return _lane_plus_rest(term.a, lane)
    return False


def _lane_only_in_quotients(node: k.Node, lane: str) -> bool:
    node = _uncast(node)
    if isinstance(node, k.Var):
        return node.name != lane
    if isinstance(node, k.Bin):
        if node.op == "/":
            return lane not in _loop_vars(node.b)
        return _lane_only_in_quotients(node.a, lane) and _lane_only_in_quotients(node.b, lane)
    if isinstance(node, k.Un):
        return _lane_only_in_quotients(node.a, lane)
    if isinstance(node, k.Call):
        return all(_lane_only_in_quotients(a, lane) for a in node.args)
    return lane not in _loop_vars(node)
