"""Lowering: a scheduled group's fusion becomes a kernel IR loop nest.

Everything here is read off the schedule; nothing is decided per scheduler:

- **Loops** are the tensors' loop domains. Loop IDs replayed from the reference share
  its loops (their *concrete* ID is the end of the `replayed_from` chain); a tensor
  inlined at `ca_pos` k is computed inside the first k loops it shares with its consumers,
  and its other loop IDs become loops of its own. Parallel types bind loops to
  blockIdx/threadIdx, `V` makes one vector access, `UR` an unrolled loop.
- **Materialized** tensors (outputs, shared-memory tensors, and tensors inlined at
  `ca_pos` < their loop count) get a loop nest and a buffer: a register array over their
  own serial loops, a shared-memory tile, or the global output. Fully inlined tensors are
  scalar values computed where a consumer needs them.
- **Coordinates**: an output or a shared-memory tile computes its logical coordinates
  from its own loop indices, walking its Split/Merge/Resize transforms backward (with a
  bounds predicate where a split may not divide); every producer's coordinates come from
  its consumer's through the op (a broadcast reads 0, a slice or pad shifts by the Resize
  offset and a pad selects its value outside the input, a reshape inverts the consumer's
  rfactor transforms). A tensor needed at two different coordinate functions (RoPE's
  halves of one input) is computed once per function.
- **Indices** linearize coordinates with the allocation strides: literals when
  concretization made extents constant, `T0.logical_size[i]`/`alloc_stride[i]` otherwise;
  zero for broadcast axes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.simplify import add, conjuncts, const_value, div, index_bounds, land, lt, mod, mul, rebuild, sub
from fuser_core.errors import FuserError, InternalError
from fuser_core.ir.base import Val
from fuser_core.ir.dtype import DataType
from fuser_core.ir.elementwise import BinaryOp, TernaryOp, UnaryOp
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, Merge, ParallelType, Resize, Split
from fuser_core.ir.op_types import BinaryOpType, UnaryOpType
from fuser_core.ir.rng import RNGOp, unbound_rng_states
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import (
    BroadcastOp,
    CatOp,
    ExpandOp,
    FullOp,
    IotaOp,
    LoadStoreOp,
    PadOp,
    ReductionOp,
    SliceOp,
    SqueezeOp,
    ViewOp,
    WelfordOp,
)
from fuser_core.ir.tensor_view import MemoryType, TensorView, transforms_between
from fuser_core.scheduler.loop_check import loop_domain_problems
from fuser_core.scheduler.reduction import MAX_THREADS

INDEX = DataType.Index
HARDWARE = {
    ParallelType.BIDx: "blockIdx.x",
    ParallelType.BIDy: "blockIdx.y",
    ParallelType.BIDz: "blockIdx.z",
    ParallelType.TIDx: "threadIdx.x",
    ParallelType.TIDy: "threadIdx.y",
    ParallelType.TIDz: "threadIdx.z",
}
LOOP_KIND = {
    ParallelType.Serial: k.LoopKind.serial,
    ParallelType.Unroll: k.LoopKind.unroll,
    ParallelType.Unswitch: k.LoopKind.unswitch,
    ParallelType.Vectorize: k.LoopKind.vectorize,
}

Coords = tuple[k.Node, ...]


@dataclass(frozen=True)
class Instance:
    """One coordinate function of a tensor: its logical coordinates and when they are valid."""

    coords: Coords
    valid: k.Node


TRUE = k.Const(DataType.Bool, True)


def concrete(dim: IterDomain) -> IterDomain:
    while dim.replayed_from is not None:
        dim = dim.replayed_from
    return dim


def loop_var(dim: IterDomain) -> k.Var:
    return k.Var(INDEX, f"i{concrete(dim).name}")


@dataclass
class _Scope:
    body: list[k.Stmt]
    concrete_id: int | None  # name of the concrete loop ID; None for the kernel body
    memo: dict[tuple[int, Instance], k.Node] = field(default_factory=dict)


class Lowering:
    def __init__(self, fusion: Fusion, name: str, index_type: DataType, vectorize: bool = True) -> None:
        self.fusion = fusion
        self.name = name
        self.index_type = index_type
        self.vectorize = vectorize
        self.exprs = [e for e in fusion.exprs() if e.is_tensor_op()]
        self.inputs = [v for v in fusion.inputs if isinstance(v, TensorView)]
        self.outputs = [v for v in fusion.outputs if isinstance(v, TensorView)]
        self.scalars: dict[int, k.Node] = {}
        self.tensor_args: list[k.TensorArg] = []
        self.scalar_args: list[k.ScalarArg] = []
        self._bind_arguments()
        self.materialized: list[TensorView] = _hoisted(
            [e.output for e in self.exprs if isinstance(e.output, TensorView) and self._is_materialized(e.output)]
        )
        self.instances: dict[int, list[Instance]] = {}
        self.buffers: dict[tuple[int, Instance], str] = {}
        self.launch: list[k.LaunchDim] = []
        self.shared_bytes = 0
        self.vector_widths: dict[str, int] = {}
        self.body: list[k.Stmt] = []
        self.stack: list[_Scope] = [_Scope(self.body, None)]
        self.computing: TensorView | None = None
        self.local_names: dict[str, int] = {}
        self.alloc_depth: dict[int, int] = {}
        self.bounds: dict[str, int] = {}
        self.buffer_dtypes: dict[str, DataType] = {}
        self.workspaces: list[k.Workspace] = []
        self.reduce_scratch: dict[tuple[DataType, int], k.Alloc] = {}
        self.grid_last: dict[str, k.Var] = {}  # blockIdx.* reduced by a grid reduction -> its `last` flag
        self.hardware_used: set[str] = set()

    # -- arguments and extents ---------------------------------------------------------
    def _bind_arguments(self) -> None:
        # Scalars first: an output's shape may be a scalar input (`full([t0.size(0), s])`).
        for pos, val in enumerate(self.fusion.inputs):
            if isinstance(val, Scalar) and not val.is_const:
                name = f"s{val.name}"
                self.scalar_args.append(k.ScalarArg(name, val.dtype, pos))
                self.scalars[id(val)] = k.ScalarParam(val.dtype, name)
        for seed, base, _ in unbound_rng_states(self.exprs):
            for leaf in (seed, base):  # the run's Philox state, drawn afresh for each run
                if isinstance(leaf, Scalar) and not leaf.is_const and id(leaf) not in self.scalars:
                    name = f"s{leaf.name}"
                    self.scalar_args.append(k.ScalarArg(name, leaf.dtype, -1, leaf=leaf.name))
                    self.scalars[id(leaf)] = k.ScalarParam(leaf.dtype, name)
        for pos, tv in enumerate(self.inputs):
            self._bind_tensor(tv, pos, is_output=False)
        for pos, tv in enumerate(self.outputs):
            if tv not in self.inputs:
                self._bind_tensor(tv, pos, is_output=True)

    def _bind_tensor(self, tv: TensorView, pos: int, is_output: bool) -> None:
        logical = tv.logical_no_reductions()
        alloc = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
        if not is_output:
            for axis, dim in enumerate(logical):
                extent = dim.maybe_expanded_extent
                if not extent.is_const:
                    self.scalars.setdefault(id(extent), k.TensorField(INDEX, f"T{tv.name}", "logical_size", axis))
        shape = tuple(self.scalar(d.maybe_expanded_extent, INDEX) for d in logical) if is_output else ()
        self.tensor_args.append(
            k.TensorArg(f"T{tv.name}", tv.dtype, len(logical), len(alloc), is_output, pos, 1, shape)
        )

    def scalar(self, val: Val, dtype: DataType | None = None) -> k.Node:
        """A fusion scalar as a kernel expression: a literal, an argument, or math on them."""
        assert isinstance(val, Scalar), val
        node = self._scalar(val)
        if dtype is not None and node.dtype != dtype:
            if isinstance(node, k.Const):
                return k.Const(dtype, _convert_const(node.value, dtype))
            return k.Cast(dtype, node)
        return node

    def _scalar(self, val: Scalar) -> k.Node:
        if val.is_const:
            return k.Const(val.dtype if val.dtype != DataType.Null else INDEX, val.value)  # type: ignore[arg-type]
        found = self.scalars.get(id(val))
        if found is not None:
            return found
        expr = val.definition
        if isinstance(expr, BinaryOp | UnaryOp | TernaryOp):
            node = self._elementwise(expr, [self._scalar(v) for v in expr.inputs])  # type: ignore[arg-type]
            self.scalars[id(val)] = node
            return node
        raise InternalError(f"kernel {self.name}: no kernel argument gives the value of {val}")

    def extent(self, dim: IterDomain) -> k.Node:
        return self.scalar(dim.extent, INDEX)

    # -- what is materialized -----------------------------------------------------------
    def _is_materialized(self, tv: TensorView) -> bool:
        if tv in self.outputs or tv.memory_type == MemoryType.Shared:
            return True
        return 0 < tv.compute_at_pos < len(tv.loop) or (tv.compute_at_pos == 0 and bool(tv.uses))

    def _own_coords_roots(self, tv: TensorView) -> bool:
        return tv in self.outputs or tv.memory_type == MemoryType.Shared

    # -- coordinates --------------------------------------------------------------------
    def own_instance(self, tv: TensorView, lanes: Mapping[int, k.Node] | None = None) -> Instance:
        """Logical coordinates from the tensor's own loop indices, and their bounds: a
        logical index is checked only where a split may not divide or a shared loop runs
        past this tensor's own extent (the checks of inner IDs follow from it)."""
        index, valid = self._loop_index(tv, lanes, reductions=False)
        coords = [k.Const(INDEX, 0) if dim.is_broadcast else index[id(dim)] for dim in tv.logical_no_reductions()]
        return Instance(tuple(coords), valid)

    def _loop_index(
        self, tv: TensorView, lanes: Mapping[int, k.Node] | None, reductions: bool
    ) -> tuple[dict[int, k.Node], k.Node]:
        """The index of every logical ID from the loop indices, and the bounds checks of
        the iteration IDs (`reductions`: of the reduction IDs, for a reduction's input)."""
        index: dict[int, k.Node] = {}
        overflow: dict[int, bool] = {}
        for dim in tv.loop:
            var: k.Node = loop_var(dim)
            if lanes is not None and concrete(dim).name in lanes:
                var = lanes[concrete(dim).name]
            index[id(dim)] = var
            overflow[id(dim)] = concrete(dim) is not dim and self.extent(dim) != self.extent(concrete(dim))
        valid: k.Node = TRUE
        for expr in reversed(transforms_between(tv.logical, tv.loop)):
            implied = self._backward(expr, index)
            if not reductions:
                valid = land(valid, implied)
            valid = land(valid, self._inner_split_check(expr, index, overflow, reductions))
            _propagate_overflow(self, expr, overflow)
        for dim in tv.logical:
            if dim.is_broadcast or dim.is_reduction != reductions:
                continue
            if overflow.get(id(dim), False):
                valid = land(valid, lt(index[id(dim)], self.extent(dim)))
        return index, valid

    def _inner_split_check(
        self, expr: object, index: dict[int, k.Node], overflow: dict[int, bool], reductions: bool
    ) -> k.Node:
        """An inner split output whose index may run past its extent would alias the next
        outer index's elements (read twice): it is checked against its own extent."""
        if not isinstance(expr, Split):
            return TRUE
        inner = expr.outputs[1]
        assert isinstance(inner, IterDomain)
        if not overflow.get(id(inner), False) or inner.is_broadcast or inner.is_reduction != reductions:
            return TRUE
        return lt(index[id(inner)], self.extent(inner))

    def _backward(self, expr: object, index: dict[int, k.Node]) -> k.Node:
        """Indices of an ID expression's inputs from its outputs; the validity it implies."""
        if isinstance(expr, Split):
            outer, inner = expr.outputs
            inp = expr.inputs[0]
            assert isinstance(inp, IterDomain) and isinstance(outer, IterDomain) and isinstance(inner, IterDomain)
            inner_extent = self.extent(inner)
            value = add(mul(index[id(outer)], inner_extent), index[id(inner)])
            index[id(inp)] = value
            return TRUE
        if isinstance(expr, Merge):
            outer, inner = expr.inputs
            assert isinstance(outer, IterDomain) and isinstance(inner, IterDomain)
            out = index[id(expr.outputs[0])]
            if inner.is_broadcast:
                index[id(outer)], index[id(inner)] = out, k.Const(INDEX, 0)
            elif outer.is_broadcast:
                index[id(outer)], index[id(inner)] = k.Const(INDEX, 0), out
            else:
                inner_extent = self.extent(inner)
                index[id(outer)] = div(out, inner_extent)
                index[id(inner)] = mod(out, inner_extent)
            return TRUE
        if isinstance(expr, Resize):
            inp = expr.inputs[0]
            assert isinstance(inp, IterDomain)
            value = sub(index[id(expr.outputs[0])], self.scalar(expr.left, INDEX))
            index[id(inp)] = value
            return self._resize_validity(expr, value)
        raise InternalError(f"kernel {self.name}: cannot index through {expr}")

    def _resize_validity(self, expr: Resize, value: k.Node) -> k.Node:
        inp = expr.inputs[0]
        assert isinstance(inp, IterDomain)
        left, right = const_value(self.scalar(expr.left)), const_value(self.scalar(expr.right))
        valid: k.Node = TRUE
        if left is None or left > 0:
            valid = land(valid, k.Bin(DataType.Bool, ">=", value, k.Const(INDEX, 0)))
        if right is None or right > 0:
            valid = land(valid, lt(value, self.extent(inp)))
        return valid

    def producer_instance(self, expr: object, consumer: TensorView, inst: Instance, producer: TensorView) -> Instance:
        """Where `producer` is read when `consumer` is computed at `inst`."""
        coords = list(inst.coords)
        valid = inst.valid
        if isinstance(expr, ReductionOp | WelfordOp):
            coords, valid = self._reduction_input_coords(consumer, inst)
        elif isinstance(expr, BroadcastOp):
            coords = [c for c, flag in zip(coords, expr.flags, strict=True) if not flag]  # type: ignore[attr-defined]
        elif isinstance(expr, SqueezeOp):
            it = iter(coords)
            coords = [k.Const(INDEX, 0) if flag else next(it) for flag in expr.flags]  # type: ignore[attr-defined]
        elif consumer.domain.has_root and not isinstance(expr, CatOp):
            coords, valid = self._root_coords(consumer, coords, valid, expr)
        dims = producer.logical_no_reductions()
        if len(dims) != len(coords):
            raise InternalError(f"kernel {self.name}: {expr} maps {len(coords)} coordinates onto {len(dims)} axes")
        coords = [k.Const(INDEX, 0) if d.is_broadcast else c for d, c in zip(dims, coords, strict=True)]
        return Instance(tuple(coords), valid)

    def _reduction_input_coords(self, tv: TensorView, inst: Instance) -> tuple[list[k.Node], k.Node]:
        """Where a reduction reads its input: the iteration coordinates of `inst` and the
        reduction coordinates of the reduction's own loops (through an rfactor's root)."""
        index, valid = self._loop_index(tv, None, reductions=True)
        for dim, coord in zip(tv.logical_no_reductions(), inst.coords, strict=True):
            index[id(dim)] = coord
        valid = land(inst.valid, valid)
        if tv.domain.has_root:
            overflow: dict[int, bool] = {}
            for t in reversed(transforms_between(tv.root, tv.logical)):
                self._backward(t, index)
                valid = land(valid, self._inner_split_check(t, index, overflow, True))
                _propagate_overflow(self, t, overflow)
            for dim in tv.root:
                if dim.is_reduction and overflow.get(id(dim), False):
                    valid = land(valid, lt(index[id(dim)], self.extent(dim)))
            dims = tv.root
        else:
            dims = tv.logical
        return [k.Const(INDEX, 0) if d.is_broadcast else index[id(d)] for d in dims], valid

    def _for_buffer(self, tv: TensorView, inst: Instance) -> Instance:
        """The instance a materialized tensor is computed at: the consumer's bounds checks on
        loops this tensor does not iterate (a later reduction's, say) say nothing of it."""
        own = {loop_var(d).name for d in tv.loop if not d.is_reduction}  # a reduction's value spans its own
        terms: list[k.Node] = []
        for term in conjuncts(inst.valid):
            if _loop_vars(term) <= own and term not in terms:
                terms.append(term)
        valid: k.Node = TRUE
        for term in terms:
            valid = land(valid, term)
        return Instance(inst.coords, valid)

    def _root_coords(
        self, tv: TensorView, coords: list[k.Node], valid: k.Node, expr: object
    ) -> tuple[list[k.Node], k.Node]:
        index = {id(d): c for d, c in zip(tv.logical_no_reductions(), coords, strict=True)}
        for t in reversed(transforms_between(tv.root, tv.logical)):
            implied = self._backward(t, index)
            # Outside a pad's input the producer is not read (the pad value is used).
            if isinstance(expr, PadOp):
                valid = land(valid, implied)
        root = [d for d in tv.root if not d.is_reduction]
        return [index[id(d)] if id(d) in index else k.Const(INDEX, 0) for d in root], valid

    # -- demands: which instances each materialized tensor must hold --------------------
    def collect_instances(self) -> None:
        for tv in reversed(self.materialized):
            if self._own_coords_roots(tv):
                self.instances[tv.name] = [self.own_instance(tv)]
            for inst in self.instances.get(tv.name, []):
                self._demand_inputs(tv, inst, set())

    def _demand_inputs(self, tv: TensorView, inst: Instance, seen: set[tuple[int, Instance]]) -> None:
        expr = tv.definition
        if expr is None:
            return
        for producer in expr.inputs:
            if not isinstance(producer, TensorView):
                continue
            p_inst = self.producer_instance(expr, tv, inst, producer)
            key = (producer.name, p_inst)
            if key in seen:
                continue
            seen.add(key)
            if producer in self.inputs and producer.definition is None:
                continue
            producer = _primary(producer)
            if producer in self.materialized and not self._own_coords_roots(producer):
                p_inst = self._for_buffer(producer, p_inst)
                found = self.instances.setdefault(producer.name, [])
                if p_inst not in found:
                    found.append(p_inst)
                continue
            if producer.memory_type == MemoryType.Shared:
                continue
            self._demand_inputs(producer, p_inst, seen)

    # -- loops ---------------------------------------------------------------------------
    def _open_loops(self, tv: TensorView, skip_vector: bool) -> None:
        """Reuse the open loops this tensor shares with its producers and consumers (its
        first max(ca_pos, produce_pos) loop IDs, in order; open loops over IDs it does
        not have, its broadcasts, are stayed in), then open its own loops."""
        # Loops before ca_pos are its consumers' (shared with any sibling producer emitted
        # before it); past that, only those its materialized producers need.
        cap = max(min(tv.compute_at_pos, len(tv.loop)), self._reuse_cap(tv))
        if skip_vector and tv.loop and tv.loop[-1].parallel_type == ParallelType.Vectorize:
            # The lanes of a vector access are its own loop: an open loop left over the same
            # ID (an earlier store's) would run the whole access once per lane.
            cap = min(cap, len(tv.loop) - 1)
        wanted = [concrete(d).name for d in tv.loop]
        matched, keep = 0, 0
        depth_of: dict[int, int] = {}
        for depth in range(1, len(self.stack)):
            cid = self.stack[depth].concrete_id
            if matched < cap and cid == wanted[matched]:
                depth_of[matched] = depth
                matched += 1
                keep = depth
            elif cid not in wanted and matched < cap:
                loop = self.stack[depth - 1].body[-1]
                if isinstance(loop, k.For) and loop.hardware is not None:
                    keep = depth
            else:
                break
        del self.stack[keep + 1 :]
        for pos in range(matched, len(tv.loop)):
            dim = tv.loop[pos]
            if skip_vector and dim.parallel_type == ParallelType.Vectorize and pos == len(tv.loop) - 1:
                break
            self._open(dim)
            depth_of[pos] = len(self.stack) - 1
        ca = tv.compute_at_pos
        if isinstance(tv.definition, ReductionOp | WelfordOp):
            # A partial result lives inside the iteration loops before the reduction's.
            ca = max(ca, next((p for p, d in enumerate(tv.loop) if d.is_reduction), len(tv.loop)))
        self.alloc_depth[tv.name] = depth_of.get(ca - 1, len(self.stack) - 1) if ca > 0 else 0

    def _reuse_cap(self, tv: TensorView) -> int:
        """How many of the tensor's loops it must share with what was emitted before it:
        those its materialized producers are computed in (their ca_pos, in this tensor's
        positions), since their buffers hold one iteration of those loops. Its other
        loops are its own, so all of a thread's loads are issued before the first use."""
        positions = {concrete(d).name: p for p, d in enumerate(tv.loop)}
        cap = 0
        stack = [v for v in (tv.definition.inputs if tv.definition else []) if isinstance(v, TensorView)]
        seen: set[int] = set()
        while stack:
            producer = stack.pop()
            if producer.name in seen or producer.definition is None:
                continue
            seen.add(producer.name)
            if producer in self.materialized and producer not in self.outputs:
                ca = producer.compute_at_pos
                if ca > 0:
                    cap = max(cap, positions.get(concrete(producer.loop[ca - 1]).name, -1) + 1)
                continue
            stack.extend(v for v in producer.definition.inputs if isinstance(v, TensorView))
        return min(cap, len(tv.loop))

    def _open(self, dim: IterDomain) -> None:
        c = concrete(dim)
        extent = self.extent(c)
        hardware = HARDWARE.get(dim.parallel_type)
        kind = LOOP_KIND.get(dim.parallel_type, k.LoopKind.serial)
        if hardware is not None:
            kind = k.LoopKind.block if hardware.startswith("block") else k.LoopKind.thread
            self._launch_dim(hardware, extent)
        elif kind == k.LoopKind.vectorize and not self.vectorize:
            kind = k.LoopKind.unroll
        loop = k.For(loop_var(dim), extent, kind, hardware=hardware, label=c.to_string())
        self._bound(loop.index, extent)
        self.stack[-1].body.append(loop)
        self.stack.append(_Scope(loop.body, c.name))

    def _bound(self, index: k.Var, extent: k.Node) -> None:
        value = const_value(extent)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            self.bounds[index.name] = value

    def _launch_dim(self, hardware: str, extent: k.Node) -> None:
        if not any(d.hardware == hardware and d.extent == extent for d in self.launch):
            self.launch.append(k.LaunchDim(hardware, extent))

    def _finish_guards(self) -> None:
        """A bound loop narrower than its launch dimension is predicated."""
        by_hw: dict[str, int] = {}
        for dim in self.launch:
            by_hw[dim.hardware] = by_hw.get(dim.hardware, 0) + 1
        for stmt in k.walk(self.body):
            if isinstance(stmt, k.For) and stmt.hardware is not None:
                stmt.guarded = by_hw.get(stmt.hardware, 0) > 1

    def _emit(self, stmt: k.Stmt) -> None:
        self.stack[-1].body.append(stmt)

    def _alloc_for(self, tv: TensorView, stmt: k.Alloc) -> None:
        """A buffer goes to the top of the scope inside the loops it shares (ca_pos)."""
        self.stack[self.alloc_depth[tv.name]].body.insert(0, stmt)

    # -- buffers ---------------------------------------------------------------------------
    def _allocated_dims(self, tv: TensorView) -> list[IterDomain]:
        dims = []
        for dim in tv.loop[tv.compute_at_pos :]:
            if dim.is_reduction:
                continue  # a reduction's buffer holds one partial result per iteration point
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

    def _forward_slot(self, tv: TensorView, coords: Coords) -> k.Node:
        """The position of logical `coords` in a tile laid out by the tensor's loop domain."""
        index = self._forward_index(tv, coords)
        slot: k.Node = k.Const(INDEX, 0)
        for dim in self._allocated_dims(tv):
            slot = add(mul(slot, self._const_extent(dim, tv)), index[id(dim)])
        return slot

    def _forward_index(self, tv: TensorView, coords: Coords) -> dict[int, k.Node]:
        """The index of every loop ID at logical `coords`, through the loop transforms."""
        index: dict[int, k.Node] = {id(d): c for d, c in zip(tv.logical_no_reductions(), coords, strict=True)}
        for expr in transforms_between(tv.logical, tv.loop):
            if isinstance(expr, Split):
                outer, inner = expr.outputs
                value = index[id(expr.inputs[0])]
                index[id(outer)] = div(value, self.extent(inner))  # type: ignore[arg-type]
                index[id(inner)] = mod(value, self.extent(inner))  # type: ignore[arg-type]
            elif isinstance(expr, Merge):
                outer, inner = expr.inputs
                index[id(expr.outputs[0])] = add(mul(index[id(outer)], self.extent(inner)), index[id(inner)])  # type: ignore[arg-type]
            elif isinstance(expr, Resize):
                index[id(expr.outputs[0])] = add(index[id(expr.inputs[0])], self.scalar(expr.left, INDEX))
        return index

    def _const_extent(self, dim: IterDomain, tv: TensorView) -> k.Node:
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

    # -- global indexing ----------------------------------------------------------------------
    def global_index(self, tv: TensorView, coords: Coords) -> k.Node:
        logical = tv.logical_no_reductions()
        alloc = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
        contiguity = [
            c for d, c in zip(tv.domain.maybe_allocation, tv.domain.contiguity, strict=True) if not d.is_reduction
        ]
        coord_of = {id(d): c for d, c in zip(logical, coords, strict=True)}
        terms: list[tuple[k.Node, k.Node, k.Node]] = []  # (coordinate, stride, extent), inner first
        stride: k.Node = k.Const(INDEX, 1)
        is_input = tv in self.inputs
        for axis in reversed(range(len(alloc))):
            dim = alloc[axis]
            if dim.is_broadcast or (is_input and dim.has_expanded_extent):
                continue
            if is_input and contiguity[axis] is False:
                stride = k.TensorField(INDEX, f"T{tv.name}", "alloc_stride", axis)
            extent = self.scalar(dim.maybe_expanded_extent, INDEX)
            terms.append((coord_of[id(dim)], stride, extent))
            stride = mul(stride, extent)
        index: k.Node = k.Const(INDEX, 0)
        for coord, term_stride, _ in _merge_contiguous(terms):
            index = add(index, mul(coord, term_stride))
        return index

    # -- values ----------------------------------------------------------------------------------
    def value(self, tv: TensorView, inst: Instance) -> k.Node:
        key = (tv.name, inst)
        for scope in reversed(self.stack):
            if key in scope.memo:
                return scope.memo[key]
        node = self._value(tv, inst)
        if not isinstance(node, k.Const | k.Var | k.ScalarParam | k.Read):
            var = k.Var(node.dtype, self._local_name(tv))
            self._emit(k.Define(var, node))
            node = var
        self.stack[-1].memo[key] = node
        return node

    def _local_name(self, tv: TensorView) -> str:
        base = f"T{tv.name}"
        count = self.local_names.get(base, 0)
        self.local_names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def _value(self, tv: TensorView, inst: Instance) -> k.Node:
        if tv.definition is None:
            return self._load(tv, inst)
        primary = _primary(tv)
        if primary is not self.computing and primary in self.materialized and primary not in self.outputs:
            if tv.memory_type == MemoryType.Shared:
                return k.Read(tv.dtype, f"T{tv.name}", self._padded(tv, self._forward_slot(tv, inst.coords)))
            buffer = self.buffers[(tv.name, self._for_buffer(primary, inst))]
            return k.Read(self.buffer_dtypes.get(buffer, tv.dtype), buffer, self._read_slot(primary, inst.coords))
        return self._compute(tv, inst)

    def _load(self, tv: TensorView, inst: Instance) -> k.Node:
        """A predicated read of a global input (zero where the coordinates are invalid)."""
        read = k.Read(tv.dtype, f"T{tv.name}", self.global_index(tv, inst.coords))
        if inst.valid == TRUE:
            return read
        name = self._local_name(tv) + "_in"
        self._emit(k.Alloc(name, tv.dtype, 1, k.Memory.local, zero=True))
        self._emit(k.If(inst.valid, [k.Store(name, k.Const(INDEX, 0), read)]))
        return k.Read(tv.dtype, name, k.Const(INDEX, 0))

    def _compute(self, tv: TensorView, inst: Instance) -> k.Node:
        expr = tv.definition
        assert expr is not None
        if isinstance(expr, CatOp):
            return self._cat(expr, tv, inst)
        if isinstance(expr, IotaOp):
            _length, start, step = expr.inputs
            dtype = tv.dtype
            return k.Bin(
                dtype,
                "+",
                self.scalar(start, dtype),
                k.Bin(dtype, "*", self.scalar(step, dtype), k.Cast(dtype, inst.coords[0])),
            )
        if isinstance(expr, FullOp):
            return self.scalar(expr.inputs[-1], tv.dtype)
        if isinstance(expr, RNGOp):
            return self._random(expr, tv, inst)
        args: list[k.Node] = []
        for val in expr.inputs:
            if isinstance(val, TensorView):
                args.append(self.value(val, self.producer_instance(expr, tv, inst, val)))
        if isinstance(expr, LoadStoreOp | BroadcastOp | SqueezeOp | ExpandOp | ViewOp | SliceOp):
            return args[0]
        if isinstance(expr, PadOp):
            validity = self._pad_validity(tv, inst)
            if validity == TRUE:
                return args[0]
            return k.Call(tv.dtype, "where", (validity, args[0], self.scalar(expr.pad_value, tv.dtype)))
        if isinstance(expr, UnaryOp | BinaryOp | TernaryOp):
            operands = []
            it = iter(args)
            for val in expr.inputs:
                operands.append(next(it) if isinstance(val, TensorView) else self._scalar(val))  # type: ignore[arg-type]
            return self._elementwise(expr, operands)
        raise FuserError(
            f"{type(expr).__name__} has no CUDA lowering yet (reductions come with issue 9)",
            op=getattr(expr, "op_name", type(expr).__name__),
            tensor=f"T{tv.name}",
        )

    def _random(self, expr: RNGOp, tv: TensorView, inst: Instance) -> k.Node:
        """A random draw at the element's row-major linear index in the tensor's logical
        shape: what the reference draws there, whatever the schedule."""
        fn = k.rng_function(expr.kind.value, tv.dtype)
        if fn is None:
            raise FuserError(f"random {tv.dtype} values have no CUDA lowering", op=expr.op_name, tensor=f"T{tv.name}")
        linear: k.Node = k.Const(INDEX, 0)
        for dim, coord in zip(tv.logical_no_reductions(), inst.coords, strict=True):
            linear = add(mul(linear, self.extent(dim)), coord)
        params = [self.scalar(p, DataType.Double) for p in expr.params]
        return k.Call(tv.dtype, fn, (self.scalar(expr.seed), self.scalar(expr.offset), linear, *params))

    def _pad_validity(self, tv: TensorView, inst: Instance) -> k.Node:
        index = {id(d): c for d, c in zip(tv.logical_no_reductions(), inst.coords, strict=True)}
        valid: k.Node = TRUE
        for t in reversed(transforms_between(tv.root, tv.logical)):
            implied = self._backward(t, index)
            if isinstance(t, Resize):
                valid = land(valid, implied)
        return valid

    def _cat(self, expr: CatOp, tv: TensorView, inst: Instance) -> k.Node:
        pieces = []
        for val in expr.inputs:
            assert isinstance(val, TensorView)
            pieces.append((val, self.value(val, self.producer_instance(expr, tv, inst, val))))
        coord = inst.coords[expr.dim]
        result = pieces[-1][1]
        for val, piece in reversed(pieces[:-1]):
            end = self._cat_end(val, expr.dim)
            result = k.Call(tv.dtype, "where", (lt(coord, end), piece, result))
        return result

    def _cat_end(self, piece: TensorView, dim: int) -> k.Node:
        """Where a padded cat input's own elements stop along the cat axis. A pad by 0 and 0
        there (the first or last piece beside empty ones) leaves no Resize once
        concretization removes trivial ones: that piece spans the whole axis."""
        logical = piece.logical_no_reductions()[dim]
        resize = logical.definition
        if isinstance(resize, Resize):
            return sub(self.extent(logical), self.scalar(resize.right, INDEX))
        if isinstance(piece.definition, PadOp) and resize is None:
            return self.extent(logical)
        raise InternalError(f"cat input T{piece.name} is not padded along axis {dim}")

    def _elementwise(self, expr: UnaryOp | BinaryOp | TernaryOp, operands: list[k.Node]) -> k.Node:
        out = expr.output
        out_dtype = out.dtype
        if isinstance(expr, UnaryOp) and expr.op_type == UnaryOpType.Cast:
            return k.Cast(out_dtype, operands[0])
        rule = expr.rule
        compute = _compute_dtype(out_dtype, [v.dtype for v in expr.inputs], rule.bool_output)
        args = [a if a.dtype == compute else _cast(compute, a) for a in operands]
        if isinstance(expr, TernaryOp) and rule.name == "where":
            args[0] = operands[0] if operands[0].dtype == DataType.Bool else _cast(DataType.Bool, operands[0])
        result_dtype = DataType.Bool if rule.bool_output else (compute if out_dtype.is_reduced_float else out_dtype)
        if rule.bool_output:
            result_dtype = DataType.Bool
        node: k.Node
        if rule.inline and len(args) == 2:
            op = rule.inline
            if op == "%" and compute.is_floating:
                node = k.Call(result_dtype, "fmod", tuple(args))
            else:
                node = k.Bin(result_dtype, op, args[0], args[1])
        elif rule.inline and len(args) == 1:
            node = k.Un(result_dtype, rule.inline, args[0])
        else:
            node = k.Call(result_dtype, rule.name, tuple(args))
        return node if node.dtype == out_dtype else _cast(out_dtype, node)

    # -- emission ----------------------------------------------------------------------------------
    def lower(self) -> k.Kernel:
        with index_bounds() as self.bounds:
            return self._lower()

    def _lower(self) -> k.Kernel:
        problems = loop_domain_problems(self.fusion)
        if problems:  # a kernel from these loops would skip data: refuse it (the group runs on the host)
            raise FuserError(
                f"the schedule's loops do not cover the data ({problems[0]})", op="codegen", tensor=self.name
            )
        for tv in self.materialized:
            for dim in tv.loop:
                c = concrete(dim)
                if c.is_broadcast and not dim.is_broadcast and self.extent(c) != self.extent(dim):
                    raise FuserError(  # its loop would run once, not over the axis
                        f"the schedule's loops do not cover the data (T{tv.name}: {dim} is replayed from {c})",
                        op="codegen",
                        tensor=self.name,
                    )
        for tv in self.outputs:
            if any(d.is_broadcast and d.has_expanded_extent for d in tv.logical_no_reductions()):
                raise FuserError(
                    "an output with an expanded broadcast axis is not generated (it would need a stride-0 allocation)",
                    op="codegen",
                    tensor=f"T{tv.name}",
                )
        for tv in self.materialized:
            if isinstance(tv.definition, ReductionOp | WelfordOp) and tv in self.outputs:
                raise FuserError(
                    "a reduction written straight to a fusion output is not generated: the scheduler caches it",
                    op=tv.definition.op_name,
                    tensor=f"T{tv.name}",
                )
            self.hardware_used.update(HARDWARE[d.parallel_type] for d in tv.loop if d.parallel_type in HARDWARE)
        # Every loop's extent is known before any index is built, so all index math folds alike.
        for tv in self.materialized:
            for dim in tv.loop:
                self._bound(loop_var(dim), self.extent(concrete(dim)))
        self.collect_instances()
        for tv in self.materialized:
            for number, inst in enumerate(self.instances.get(tv.name, [])):
                self._materialize(tv, inst, number)
        self._finish_guards()
        self._size_reduce_scratch()
        if sum(1 for s in k.walk(self.body) if isinstance(s, k.ParallelReduce) and s.block_dims) > 1:
            # Each grid reduction's last block is found by its own semaphore: a value that
            # combined two of them could be read in a block that is last for one only.
            raise FuserError("a kernel with two grid reductions is not generated yet", op="codegen", tensor=self.name)
        unscoped = _unscoped_buffer(self.body, {t.name for t in self.tensor_args})
        if unscoped is not None:
            raise FuserError(
                f"{unscoped} would be read outside the loops that compute it (two reductions of one "
                "input in a reduction kernel are not generated yet)",
                op="codegen",
                tensor=self.name,
            )
        vectorized = {name: w for name, w in self.vector_widths.items()}
        tensors = [
            k.TensorArg(
                t.name,
                t.dtype,
                t.ndim,
                t.alloc_ndim,
                t.is_output,
                t.fusion_position,
                vectorized.get(t.name, 1),
                t.shape,
            )
            for t in self.tensor_args
        ]
        return k.Kernel(
            self.name,
            tensors,
            self.scalar_args,
            self.body,
            self.launch,
            self.index_type,
            self.shared_bytes,
            vectorized=bool(vectorized),
            workspaces=self.workspaces,
            max_threads=self._max_threads() if self.reduce_scratch else 0,
        )

    def _materialize(self, tv: TensorView, inst: Instance, number: int) -> None:
        expr = tv.definition
        assert expr is not None
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

    def _vector_width(self, tv: TensorView) -> int:
        last = tv.loop[-1] if tv.loop else None
        if not self.vectorize or last is None or last.parallel_type != ParallelType.Vectorize:
            return 1
        if last.is_broadcast:  # one element, read by every lane: no vector access
            return 1
        width = const_value(self.extent(last))
        return int(width) if width is not None else 1

    # -- reductions ----------------------------------------------------------------------------
    def _materialize_reduction(
        self, tv: TensorView, expr: ReductionOp | WelfordOp, inst: Instance, number: int
    ) -> None:
        """Accumulate in registers over the reduction's loops, then combine across the
        threads and blocks its reduction IDs are bound to."""
        welford = isinstance(expr, WelfordOp)
        outs = [o for o in expr.outputs if isinstance(o, TensorView)] if welford else [tv]
        self._open_loops(tv, skip_vector=False)
        depth = self.alloc_depth[tv.name]
        size = self._buffer_size(tv)
        names, dtypes = [], []
        for position, out in enumerate(outs):
            name = f"T{out.name}" if number == 0 else f"T{out.name}_{number}"
            dtype = _accumulator(out.dtype)
            init = k.Const(dtype, 0) if welford else self.scalar(expr.init, dtype)  # type: ignore[union-attr]
            if welford and position == 2:
                init = k.Const(dtype, 0)
            self.buffers[(out.name, inst)] = name
            self.buffer_dtypes[name] = dtype
            self._alloc_for(tv, k.Alloc(name, dtype, size, k.Memory.local, init=init))
            names.append(name)
            dtypes.append(dtype)
        producer = expr.inputs[0]
        assert isinstance(producer, TensorView)
        self.computing = tv
        p_inst = self.producer_instance(expr, tv, inst, producer)
        slot = self._slot(tv)
        with self._predicated(p_inst.valid):
            value = self.value(producer, p_inst)
            if welford:
                self._welford_update(names, dtypes, slot, value)
            else:
                acc = k.Read(dtypes[0], names[0], slot)
                operand = value if value.dtype == dtypes[0] else _cast(dtypes[0], value)
                self._emit(k.Store(names[0], slot, _combine(expr.op_type, acc, operand)))  # type: ignore[union-attr]
        self.computing = None
        thread_dims = tuple(
            HARDWARE[d.parallel_type] for d in tv.loop if d.is_reduction and d.parallel_type in _THREADS
        )
        block_dims = tuple(HARDWARE[d.parallel_type] for d in tv.loop if d.is_reduction and d.parallel_type in _BLOCKS)
        if not thread_dims and not block_dims:
            # A serial partial (an rfactor) leaves its loops open: a sibling partial of the
            # same input shares them, and the input's register buffers with them.
            return
        del self.stack[depth + 1 :]
        reduce = k.ParallelReduce(
            "welford" if welford else expr.op_type.rule.name,  # type: ignore[union-attr]
            tuple(names),
            k.Const(INDEX, 0),
            tuple(dtypes),
            thread_dims,
            block_dims,
            count=size,
            workspace=tuple(self._reduce_scratch(d, position) for position, d in enumerate(dtypes)),
        )
        if block_dims:
            label = names[0]
            reduce.work = tuple(
                self._workspace(f"work_{n}", d, per_thread=size) for n, d in zip(names, dtypes, strict=True)
            )
            reduce.semaphores = self._workspace(f"sem_{label}", DataType.Int32, per_block=1, zeroed=True)
            reduce.last = k.Var(DataType.Bool, f"last_{label}")
            for hw in block_dims:
                self.grid_last[hw] = reduce.last
        self._emit(reduce)

    def _welford_update(self, names: list[str], dtypes: list[DataType], slot: k.Node, value: k.Node) -> None:
        """One element into a running (avg, M2, N): Welford's update."""
        avg_t, m2_t, n_t = dtypes
        avg, m2, n = (k.Read(d, b, slot) for b, d in zip(names, dtypes, strict=True))
        x = value if value.dtype == avg_t else _cast(avg_t, value)
        count = k.Var(n_t, self._local_name_for(names[2] + "_n"))
        self._emit(k.Define(count, k.Bin(n_t, "+", n, k.Const(n_t, 1))))
        delta = k.Var(avg_t, self._local_name_for(names[0] + "_delta"))
        self._emit(k.Define(delta, k.Bin(avg_t, "-", x, avg)))
        new_avg = k.Bin(avg_t, "+", avg, k.Bin(avg_t, "/", delta, _cast(avg_t, count)))
        self._emit(k.Store(names[0], slot, new_avg))
        after = k.Read(avg_t, names[0], slot)
        self._emit(k.Store(names[1], slot, k.Bin(m2_t, "+", m2, k.Bin(m2_t, "*", delta, k.Bin(avg_t, "-", x, after)))))
        self._emit(k.Store(names[2], slot, count))

    def _local_name_for(self, base: str) -> str:
        count = self.local_names.get(base, 0)
        self.local_names[base] = count + 1
        return base if count == 0 else f"{base}_{count}"

    def _reduce_scratch(self, dtype: DataType, position: int) -> str:
        """Shared scratch for block reductions, one per dtype and buffer position (Welford
        combines three at once), reused by every reduction of the kernel and sized once the
        launch is known (`_size_reduce_scratch`)."""
        alloc = self.reduce_scratch.get((dtype, position))
        if alloc is None:
            suffix = f"_{position}" if position else ""
            alloc = k.Alloc(f"reduce_{dtype.cuda.replace(' ', '_')}{suffix}", dtype, 0, k.Memory.shared)
            self.reduce_scratch[(dtype, position)] = alloc
            self.body.insert(0, alloc)
        return alloc.buffer

    def _max_threads(self) -> int:
        """An upper bound of the block size: the product of the constant thread extents;
        a symbolic one (a persistent kernel's threads per row, the row length over a
        constant batch) is at most what the reduction heuristics ever launch."""
        threads = 1
        for hw in ("threadIdx.x", "threadIdx.y", "threadIdx.z"):
            extents = [const_value(d.extent) for d in self.launch if d.hardware == hw]
            if any(e is None for e in extents):
                return REDUCTION_MAX_THREADS if self.reduce_scratch else MAX_BLOCK_THREADS
            threads *= max((int(e) for e in extents), default=1)  # type: ignore[arg-type]
        return min(threads, MAX_BLOCK_THREADS)

    def _size_reduce_scratch(self) -> None:
        threads = self._max_threads()
        for (dtype, _), alloc in self.reduce_scratch.items():
            alloc.size = threads
            self.shared_bytes += threads * dtype.itemsize

    def _workspace(
        self, name: str, dtype: DataType, per_thread: int = 0, per_block: int = 0, zeroed: bool = False
    ) -> str:
        self.workspaces.append(k.Workspace(name, dtype, per_thread, per_block, zeroed))
        return name

    def _write_predicate(self, tv: TensorView) -> k.Node:
        """One thread writes each element: along a launch dimension the tensor does not
        vary with (a reduced one, or one its broadcast is bound to), the first thread or
        block writes, or the last block of a grid reduction."""
        varying = {
            HARDWARE[d.parallel_type]
            for d in tv.loop
            if d.parallel_type in HARDWARE and not d.is_broadcast and not d.is_reduction
        }
        cond: k.Node = TRUE
        for dim in tv.loop:
            if dim.is_broadcast and dim.parallel_type not in HARDWARE and const_value(self.extent(concrete(dim))) != 1:
                cond = land(cond, k.Bin(DataType.Bool, "==", loop_var(dim), k.Const(INDEX, 0)))
        for hw in sorted(self.hardware_used - varying):
            if hw in self.grid_last:
                cond = land(cond, self.grid_last[hw])
            else:
                cond = land(cond, k.Bin(DataType.Bool, "==", k.Var(INDEX, hw), k.Const(INDEX, 0)))
        return cond

    def _store_global(self, tv: TensorView, inst: Instance, vector: int) -> None:
        name = f"T{tv.name}"
        if vector == 1:
            with self._predicated(land(self._write_predicate(tv), inst.valid)):
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

    @contextlib.contextmanager
    def _predicated(self, cond: k.Node) -> Iterator[None]:
        """Emit inside `if (cond)`: nothing is computed, read or written out of bounds."""
        if cond == TRUE:
            yield
            return
        branch = k.If(cond)
        self._emit(branch)
        depth = len(self.stack)
        self.stack.append(_Scope(branch.then, None))
        try:
            yield
        finally:
            del self.stack[depth:]  # the branch and any loop opened inside it

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
        # The tile is complete once every thread has written its part.
        del self.stack[self.alloc_depth[tv.name] + 1 :]
        self._emit(k.Sync())

    def _store_local(self, tv: TensorView, inst: Instance, number: int, vector: int) -> None:
        name = f"T{tv.name}" if number == 0 else f"T{tv.name}_{number}"
        self.buffers[(tv.name, inst)] = name
        self._alloc_for(tv, k.Alloc(name, tv.dtype, self._buffer_size(tv), k.Memory.local, zero=True))
        expr = tv.definition
        source = expr.inputs[0] if isinstance(expr, LoadStoreOp) else None
        if vector > 1 and isinstance(source, TensorView) and source in self.inputs:
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

    def value_of_definition(self, tv: TensorView, inst: Instance) -> k.Node:
        node = self._compute(tv, inst)
        return node if node.dtype == tv.dtype else _cast(tv.dtype, node)


# -- helpers ----------------------------------------------------------------------------------------

MAX_BLOCK_THREADS = 1024
REDUCTION_MAX_THREADS = MAX_THREADS  # the reduction schedulers' largest block
_THREADS = (ParallelType.TIDx, ParallelType.TIDy, ParallelType.TIDz)
_BLOCKS = (ParallelType.BIDx, ParallelType.BIDy, ParallelType.BIDz)


def _merge_contiguous(terms: list[tuple[k.Node, k.Node, k.Node]]) -> list[tuple[k.Node, k.Node, k.Node]]:
    """Adjacent axes whose coordinates split one index `x` by the inner extent n, as
    (x / n, x % n), with the outer stride n times the inner one, are one axis indexed by
    `x`: a merged schedule axis over contiguous memory needs no division."""
    changed = True
    while changed:
        changed = False
        for i in range(len(terms) - 1):
            (inner, inner_stride, inner_extent), (outer, outer_stride, outer_extent) = terms[i], terms[i + 1]
            if (
                isinstance(inner, k.Bin)
                and isinstance(outer, k.Bin)
                and inner.op == "%"
                and outer.op == "/"
                and inner.a == outer.a
                and inner.b == outer.b == inner_extent
                and outer_stride == mul(inner_stride, inner_extent)
            ):
                terms[i : i + 2] = [(inner.a, inner_stride, mul(inner_extent, outer_extent))]
                changed = True
                break
    return terms


def _unscoped_buffer(body: list[k.Stmt], globals_: set[str]) -> str | None:
    """The first register or shared buffer read or written outside the scope it is
    allocated in, or None: a lowering that reopened loops past a buffer's must not print."""

    def reads(node: k.Node) -> Iterator[str]:
        if isinstance(node, k.Read):
            yield node.buffer
            yield from reads(node.index)
        elif isinstance(node, k.Bin):
            yield from reads(node.a)
            yield from reads(node.b)
        elif isinstance(node, k.Un | k.Cast):
            yield from reads(node.a)
        elif isinstance(node, k.Call):
            for arg in node.args:
                yield from reads(arg)

    def used(stmt: k.Stmt) -> Iterator[str]:
        if isinstance(stmt, k.Store):
            yield stmt.buffer
            yield from reads(stmt.index)
            yield from reads(stmt.value)
        elif isinstance(stmt, k.Define):
            yield from reads(stmt.value)
        elif isinstance(stmt, k.VectorCopy):
            yield from (stmt.dst, stmt.src)
        elif isinstance(stmt, k.ParallelReduce):
            yield from (*stmt.buffers, *stmt.workspace)
        elif isinstance(stmt, k.If):
            yield from reads(stmt.cond)

    def visit(stmts: list[k.Stmt], scope: set[str]) -> str | None:
        scope = set(scope)
        for stmt in stmts:
            if isinstance(stmt, k.Alloc):
                scope.add(stmt.buffer)
                continue
            for name in used(stmt):
                if name not in scope and name not in globals_:
                    return name
            if isinstance(stmt, k.For):
                found = visit(stmt.body, scope)
            elif isinstance(stmt, k.If):
                found = visit(stmt.then, scope) or visit(stmt.orelse, scope)
            else:
                found = None
            if found is not None:
                return found
        return None

    return visit(body, set())


def _hoisted(materialized: list[TensorView]) -> list[TensorView]:
    """Tensors computed outside every shared loop (ca_pos 0) from inputs alone, such as a
    weight loaded once per thread for all its rows, go first: before the loops they are
    reused in, not between two of them."""
    names = {tv.name for tv in materialized}

    def depends_on_loops(tv: TensorView) -> bool:
        stack = [v for v in (tv.definition.inputs if tv.definition else []) if isinstance(v, TensorView)]
        while stack:
            val = stack.pop()
            if val.name in names:
                return True
            if val.definition is not None:
                stack.extend(v for v in val.definition.inputs if isinstance(v, TensorView))
        return False

    first = [tv for tv in materialized if tv.compute_at_pos == 0 and not depends_on_loops(tv)]
    order = first + [tv for tv in materialized if tv not in first]

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

    partials = {tv.name: sources(tv) for tv in order if _is_serial_partial(tv)}
    for tv in list(order):
        if tv.name not in partials:
            continue
        earlier = [q for q in order[: order.index(tv)] if partials.get(q.name, set()) & partials[tv.name]]
        if not earlier:
            continue
        at = order.index(earlier[-1])
        position = {q.name: i for i, q in enumerate(order)}
        if all(position.get(name, -1) <= at for name in partials[tv.name]):  # its inputs are ready there
            order.remove(tv)
            order.insert(at + 1, tv)
    return order


def _is_serial_partial(tv: TensorView) -> bool:
    """A reduction whose reduced loops are all serial: an rfactor's per-thread partial."""
    return isinstance(tv.definition, ReductionOp) and not any(
        d.is_reduction and d.parallel_type in HARDWARE for d in tv.loop
    )


def _loop_vars(node: k.Node) -> set[str]:
    """The loop indices an expression reads (named `i<ID>`)."""
    if isinstance(node, k.Var):
        return {node.name} if node.name.startswith("i") else set()
    if isinstance(node, k.Bin):
        return _loop_vars(node.a) | _loop_vars(node.b)
    if isinstance(node, k.Un | k.Cast):
        return _loop_vars(node.a)
    if isinstance(node, k.Call):
        return set().union(*(_loop_vars(a) for a in node.args)) if node.args else set()
    if isinstance(node, k.Read):
        return _loop_vars(node.index)
    return set()


def _primary(tv: TensorView) -> TensorView:
    """A Welford's first output stands for all three (one loop nest computes them)."""
    expr = tv.definition
    if isinstance(expr, WelfordOp):
        first = expr.outputs[0]
        assert isinstance(first, TensorView)
        return first
    return tv


def _accumulator(dtype: DataType) -> DataType:
    return DataType.Float if dtype.is_reduced_float else dtype


def _combine(op: BinaryOpType, a: k.Node, b: k.Node) -> k.Node:
    rule = op.rule
    if rule.inline:
        return k.Bin(a.dtype, rule.inline, a, b)
    return k.Call(a.dtype, rule.name, (a, b))


def _substitute(node: k.Node, subst: dict[str, k.Node]) -> k.Node:
    if isinstance(node, k.Var):
        return subst.get(node.name, node)
    if isinstance(node, k.Bin):
        return rebuild(node, _substitute(node.a, subst), _substitute(node.b, subst))
    if isinstance(node, k.Un):
        return k.Un(node.dtype, node.op, _substitute(node.a, subst))
    if isinstance(node, k.Call):
        return k.Call(node.dtype, node.fn, tuple(_substitute(a, subst) for a in node.args))
    if isinstance(node, k.Cast):
        return k.Cast(node.dtype, _substitute(node.a, subst))
    if isinstance(node, k.Read):
        return k.Read(node.dtype, node.buffer, _substitute(node.index, subst))
    return node


def _cast(dtype: DataType, node: k.Node) -> k.Node:
    if isinstance(node, k.Const):
        return k.Const(dtype, _convert_const(node.value, dtype))
    return k.Cast(dtype, node)


def _convert_const(value: int | float | bool | complex, dtype: DataType) -> int | float | bool:
    if dtype.is_complex:  # a refusal, so the group runs on the host (the printer has no complex types)
        raise FuserError(f"{dtype!r} has no CUDA code generation yet", op="codegen")
    if isinstance(value, complex):  # a cast to a real type keeps the real part, as std::real
        value = value.real
    if dtype.is_boolean:
        return bool(value)
    if dtype.is_integral:
        return int(value)
    return float(value)


def _compute_dtype(out: DataType, inputs: list[DataType], bool_output: bool) -> DataType:
    if not bool_output:
        return DataType.Float if out.is_reduced_float else out
    tensor_types = [t for t in inputs if t != DataType.Null]
    best = tensor_types[0]
    for t in tensor_types[1:]:
        if _rank(t) > _rank(best):
            best = t
    return DataType.Float if best.is_reduced_float else best


def _rank(dtype: DataType) -> int:
    order = [
        DataType.Bool,
        DataType.Int32,
        DataType.Int,
        DataType.Index,
        DataType.Half,
        DataType.BFloat16,
        DataType.Float,
        DataType.Double,
    ]
    return order.index(dtype) if dtype in order else 0


def _propagate_overflow(lowering: Lowering, expr: object, overflow: dict[int, bool]) -> None:
    """Whether an ID's index may reach past its extent, from its outputs' (backward)."""
    if isinstance(expr, Split):
        inp = expr.inputs[0]
        assert isinstance(inp, IterDomain)
        outs = any(overflow.get(id(o), False) for o in expr.outputs)
        overflow[id(inp)] = outs or (not inp.is_broadcast and not _divides(lowering, inp, expr))
    elif isinstance(expr, Merge):
        # The inner index is a remainder, always in range; only the outer can run past,
        # unless the outer is a broadcast: then the inner takes the whole index.
        outer, inner = expr.inputs
        assert isinstance(outer, IterDomain)
        overflow[id(outer)] = overflow.get(id(expr.outputs[0]), False)
        overflow[id(inner)] = overflow[id(outer)] and outer.is_broadcast
    elif isinstance(expr, Resize):
        overflow[id(expr.inputs[0])] = overflow.get(id(expr.outputs[0]), False)


def _divides(lowering: Lowering, inp: IterDomain, expr: Split) -> bool:
    extent = const_value(lowering.extent(inp))
    factor = const_value(lowering.scalar(expr.inputs[1], INDEX))
    if extent is None or factor is None:
        return False
    return int(extent) % int(factor) == 0


def lower_group(fusion: Fusion, name: str, index_type: DataType, vectorize: bool = True) -> k.Kernel:
    return Lowering(fusion, name, index_type, vectorize).lower()
