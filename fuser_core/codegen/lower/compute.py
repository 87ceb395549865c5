"""Layer of `Lowering`: values. A tensor's value at an instance: a predicated load of an
input, a read of a materialized buffer, or its definition computed (element-wise ops, cat,
pad, iota, full, random draws), each named once per scope."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.buffers import Buffers
from fuser_core.codegen.lower.elementwise import _cast, _divides_by_a_row_value_into_a_narrow_output, _elementwise
from fuser_core.codegen.lower.model import INDEX, TRUE, Instance, _primary, _Scope, concrete, vector_copies
from fuser_core.codegen.simplify import add, land, lt, mul, sub
from fuser_core.errors import FuserError, InternalError
from fuser_core.ir.dtype import DataType
from fuser_core.ir.elementwise import BinaryOp, TernaryOp, UnaryOp
from fuser_core.ir.iter_domain import IterDomain, Resize
from fuser_core.ir.op_types import BinaryOpType
from fuser_core.ir.rng import RNGOp
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


class Compute(Buffers):
    """Builds the kernel expression of a tensor's value at an instance."""

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
        taken = set(self.buffers.values())  # a reduction's buffers are named T<n>_<k> too
        while True:
            count = self.local_names.get(base, 0)
            self.local_names[base] = count + 1
            name = base if count == 0 else f"{base}_{count}"
            if name not in taken:
                return name

    def _value(self, tv: TensorView, inst: Instance) -> k.Node:
        if tv.definition is None:
            return self._load(tv, inst)
        primary = _primary(tv)
        if primary is not self.computing and primary in self.materialized and primary not in self.outputs:
            if tv.memory_type == MemoryType.Shared:
                return k.Read(tv.dtype, f"T{tv.name}", self._padded(tv, self._read_slot(tv, inst.coords)))
            buffer = self.buffers[(tv.name, self._for_buffer(primary, inst))]
            if not self._in_scope(buffer) and not isinstance(primary.definition, ReductionOp | WelfordOp):
                # Its loops were closed before this consumer's were opened: recompute the
                # value here (an input cache reloads) rather than read a buffer out of scope.
                return self._reread_vector(tv, inst) or self._compute(tv, inst)
            read = k.Read(self.buffer_dtypes.get(buffer, tv.dtype), buffer, self._read_slot(primary, inst.coords))
            # a Half reduction accumulates in float; what it gives its consumers is Half
            return read if read.dtype == tv.dtype else _cast(tv.dtype, read)
        return self._compute(tv, inst)

    def _reread_vector(self, tv: TensorView, inst: Instance) -> k.Node | None:
        """A vector-loaded copy of an input read again in a loop nest opened after its own
        was closed (the later passes of a normalization that re-reads its row): its loads
        are made again in vectors, in their own loops before the consumer's (one 16-byte
        load, not eight 2-byte ones, per vector of a 16-bit row). Where the consumer reads
        the copy other than at the copy's own loops, None: then each element is loaded
        where it is read."""
        expr = tv.definition
        source = expr.inputs[0] if isinstance(expr, LoadStoreOp) else None
        vector = self._vector_width(tv)
        if vector <= 1 or not isinstance(source, TensorView) or source not in self.inputs:
            return None
        # (Its own bounds, checked once a vector, hold where the consumer's do: the same
        # coordinates of the same input, whose extent the vector width divides.)
        if inst.coords != self.own_instance(tv).coords:
            return None
        if self._divides_per_element:
            return None
        # The copy's loops up to its computeAt position are open (the consumer's), and so
        # are those its buffer spans and its lanes', inside them.
        depth = self._open_depth(tv.loop[: tv.compute_at_pos])
        inner = {scope.concrete_id for scope in self.stack[depth + 1 :]} if depth is not None else set()
        if depth is None or any(concrete(d).name not in inner for d in [*self._allocated_dims(tv), tv.loop[-1]]):
            return None
        key = (tv.name, id(self.stack[depth].body))
        name = self.rereads.get(key)
        if name is None:
            name = self.rereads[key] = self._local_name(tv) + "_reread"
            self._emit_reread(tv, source, name, vector, depth)
        return k.Read(tv.dtype, name, self._slot(tv))

    @functools.cached_property
    def _divides_per_element(self) -> bool:
        """Whether the kernel computes an IEEE float division per element (a branch to its
        slow path each). There the re-read's vectors, loaded before the pass and live
        across those branches, measured slower than each element loaded where it is read
        (H100, cross-entropy backward: 267 -> 297 us; softmax, whose division is by the
        row's reciprocal, 106 -> 97 us)."""
        return any(
            isinstance(e, BinaryOp)
            and e.op_type == BinaryOpType.Div
            and e.output.dtype.is_floating
            and not _divides_by_a_row_value_into_a_narrow_output(
                e, DataType.Float if e.output.dtype.is_reduced_float else e.output.dtype
            )
            for e in self.exprs
        )

    def _emit_reread(self, tv: TensorView, source: TensorView, name: str, vector: int, depth: int) -> None:
        """The loads of `_reread_vector` over the copy's own loops (past its computeAt
        position), placed in the open scope at `depth` before the statement that holds the
        consumer's loops (that scope's last)."""
        outer, consumer_scopes = self.stack[depth], self.stack[depth + 1 :]
        del self.stack[depth + 1 :]
        staged: list[k.Stmt] = []
        self.stack.append(_Scope(staged, None))
        try:
            for dim in tv.loop[tv.compute_at_pos : -1]:
                self._open(dim)
            lanes = {concrete(tv.loop[-1]).name: k.Const(INDEX, 0)}
            self._emit_vector_load(tv, source, name, self.own_instance(tv, lanes), lanes, vector)
        finally:
            del self.stack[depth + 1 :]
            self.stack.extend(consumer_scopes)
        alloc = k.Alloc(name, tv.dtype, self._buffer_size(tv), k.Memory.local, zero=self._zero_filled(tv, True))
        outer.body[-1:-1] = [alloc, *staged]

    def _emit_vector_load(
        self, tv: TensorView, source: TensorView, name: str, first: Instance, lanes: Mapping[int, k.Node], vector: int
    ) -> None:
        """One vector load of the input `source` into the register copy `name` of `tv`, its
        first lane at `first` (lanes at 0), checked once for all its lanes."""
        read = self.producer_instance(tv.definition, tv, first, source)
        copies = vector_copies(
            name, self._slot(tv, lanes), f"T{source.name}", self.global_index(source, read.coords), vector, tv.dtype
        )
        if read.valid == TRUE:
            for copy in copies:
                self._emit(copy)
        else:
            self._emit(k.If(read.valid, copies))
        self._copied_in_vectors(f"T{source.name}", vector, tv.dtype)

    def _open_depth(self, dims: list[IterDomain]) -> int | None:
        """The depth of the open loop over the last of `dims` where loops over all of them
        are open, in order (conditions and other loops between them allowed); else None."""
        matched, found = 0, 0
        for depth in range(1, len(self.stack)):
            if matched == len(dims):
                break
            if self.stack[depth].concrete_id == concrete(dims[matched]).name:
                matched, found = matched + 1, depth
        return found if matched == len(dims) else None

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
            return _elementwise(expr, operands)
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

    def value_of_definition(self, tv: TensorView, inst: Instance) -> k.Node:
        node = self._compute(tv, inst)
        return node if node.dtype == tv.dtype else _cast(tv.dtype, node)
