"""Layer of `Lowering`: coordinates and indices. A tensor's logical coordinates from its
loop indices (backward through Split/Merge/Resize), a producer's from its consumer's through
the op, which instances each materialized tensor must hold, loop indices from coordinates
(forward), and the linear index into a global tensor's allocation."""

from __future__ import annotations

from collections.abc import Mapping

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.model import (
    INDEX,
    TRUE,
    Coords,
    Instance,
    _loop_vars,
    _primary,
    _substitute,
    concrete,
    loop_var,
)
from fuser_core.codegen.lower.predicates import Predicates, _propagate_overflow, first_lanes
from fuser_core.codegen.simplify import add, conjuncts, const_value, div, land, lt, mod, mul, sub
from fuser_core.errors import FuserError, InternalError
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import IterDomain, Merge, Resize, Split
from fuser_core.ir.tensor_exprs import BroadcastOp, CatOp, PadOp, ReductionOp, SqueezeOp, WelfordOp
from fuser_core.ir.tensor_view import MemoryType, TensorView, transforms_between


class Indexing(Predicates):
    """Maps loop indices, logical coordinates and memory offsets onto each other."""

    # -- coordinates --------------------------------------------------------------------
    def own_instance(self, tv: TensorView, lanes: Mapping[int, k.Node] | None = None) -> Instance:
        """Logical coordinates from the tensor's own loop indices, and their bounds: a
        logical index is checked only where a split may not divide or a shared loop runs
        past this tensor's own extent (the checks of inner IDs follow from it)."""
        index, valid = self._loop_index(tv, lanes, reductions=False)
        coords = [k.Const(INDEX, 0) if dim.is_broadcast else index[id(dim)] for dim in tv.logical_no_reductions()]
        return Instance(tuple(coords), valid)

    def broadcast_write_once(self, tv: TensorView) -> k.Node:
        """Where a tensor's loops run an index along one of its expanded broadcast axes
        (loops it shares with a tensor that iterates that axis: an expanded output beside a
        full one), its one element there is written only where that index has its first
        valid value (the loops' first iteration's, or 0 past a pad), not by every thread."""
        index, _ = self._loop_index(tv, None, reductions=False)
        first: dict[str, k.Node] = {loop_var(d).name: k.Const(INDEX, 0) for d in tv.loop if not d.is_broadcast}
        cond: k.Node = TRUE
        for dim in tv.logical_no_reductions():
            value = index.get(id(dim))
            if (
                not (dim.is_broadcast and dim.has_expanded_extent)
                or value is None
                or not _loop_vars(value) & first.keys()
            ):
                continue
            start = _substitute(value, first)
            at = const_value(start)
            if at is not None:  # the index only grows with the loops: its first valid value
                start = k.Const(INDEX, max(int(at), 0))
            cond = land(cond, k.Bin(DataType.Bool, "==", value, start))
        return cond

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
            # a loop shorter than the one it runs in (same_extent: not merely spelled through
            # another tensor's size of the same mapped axis) runs past its own extent
            overflow[id(dim)] = concrete(dim) is not dim and self.same_extent(self.extent(dim)) != self.same_extent(
                self.extent(concrete(dim))
            )
        valid: k.Node = TRUE
        for expr in reversed(transforms_between(tv.logical, tv.loop)):
            implied = self._backward(expr, index)
            if not reductions:
                valid = land(valid, implied)
            valid = land(valid, self._inner_split_check(expr, index, overflow, reductions))
            _propagate_overflow(self, expr, overflow)
        first = first_lanes(self, tv)
        for dim in tv.logical:
            if dim.is_broadcast or dim.is_reduction != reductions:
                continue
            if overflow.get(id(dim), False):
                valid = land(valid, _substitute(lt(index[id(dim)], self.extent(dim)), first))
        return index, valid

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
            lanes = first_lanes(self, tv, from_root=True)
            for dim in tv.root:
                if dim.is_reduction and overflow.get(id(dim), False):
                    valid = land(valid, _substitute(lt(index[id(dim)], self.extent(dim)), lanes))
            dims = tv.root
        else:
            dims = tv.logical
        return [k.Const(INDEX, 0) if d.is_broadcast else index[id(d)] for d in dims], valid

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
            elif tv.memory_type == MemoryType.Shared:
                # A tile filled where its consumers read it (narrower_loops) holds one value
                # per slot: the first consumer's coordinates there. Every consumer reads the
                # slot of its loop iteration, as from a tile filled at its own coordinates, so
                # they agree (up to how an extent is spelled: x's width or its weight's).
                del self.instances.get(tv.name, [])[1:]
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

    def _for_buffer(self, tv: TensorView, inst: Instance) -> Instance:
        """The instance a materialized tensor is computed at: the consumer's bounds checks on
        loops this tensor does not iterate (a later reduction's, say) say nothing of it.
        Coordinates in loop indices the tensor has none of (a consumer scheduled apart, whose
        loops it is not computed in) cannot be computed where its loops are: its buffer is
        filled at its own coordinates, and that consumer reads it at the forward slot."""
        loops = {loop_var(d).name for d in tv.loop}
        if not all(_loop_vars(c) <= loops for c in inst.coords):
            if tv.memory_type == MemoryType.Shared:  # its own coordinates are not its slots'
                raise FuserError(
                    f"T{tv.name} is a shared tile read outside the loops that fill it, along loops "
                    "its own do not line up with: not generated",
                    op="codegen",
                    tensor=self.name,
                )
            inst = self.own_instance(tv)
        own = {loop_var(d).name for d in tv.loop if not d.is_reduction}  # a reduction's value spans its own
        lanes = first_lanes(self, tv)  # as its own checks are made: once per vector
        terms: list[k.Node] = []
        for term in conjuncts(inst.valid):
            term = _substitute(term, lanes)
            if _loop_vars(term) <= own and term not in terms:
                terms.append(term)
        # The same checks in another order (from another consumer) are the same instance:
        # the first one found, in its order.
        key = (
            tuple(self.same_extent(c) for c in inst.coords),
            tuple(sorted(self.same_extent(term) for term in terms)),
        )
        found = self._instances_by_checks.get(key)
        if found is not None:
            return found
        valid: k.Node = TRUE
        for term in terms:
            valid = land(valid, term)
        self._instances_by_checks[key] = Instance(inst.coords, valid)
        return self._instances_by_checks[key]

    # -- forward indexing: loop indices at logical coordinates ---------------------------
    def _forward_index(self, tv: TensorView, coords: Coords) -> dict[int, k.Node]:
        """The index of every loop ID at logical `coords`, through the loop transforms.

        Along a broadcast axis (or a reduced one) the tensor holds one value, and its
        coordinate there stands for any: a loop ID made from such axes alone is at a
        position its loops compute. Through a Resize (a slice's or a pad's, replayed from
        the reference onto an expanded broadcast) that is the first position whose input
        coordinate is in range, not coordinate 0's, which lies before the loops' start
        past a slice's offset (a negative slot: seed 13 case 224)."""
        index: dict[int, k.Node] = {id(d): c for d, c in zip(tv.logical_no_reductions(), coords, strict=True)}
        # a reduction's result does not vary along what it reduced (its loop IDs made from a
        # reduced axis, a size-1 broadcast Welford reduces, say, are at 0)
        index.update({id(d): k.Const(INDEX, 0) for d in tv.logical if d.is_reduction})
        uniform = {id(d) for d in tv.logical if d.is_broadcast or d.is_reduction}
        for expr in transforms_between(tv.logical, tv.loop):
            if isinstance(expr, Split):
                outer, inner = expr.outputs
                value = index[id(expr.inputs[0])]
                index[id(outer)] = div(value, self.extent(inner))  # type: ignore[arg-type]
                index[id(inner)] = mod(value, self.extent(inner))  # type: ignore[arg-type]
                if id(expr.inputs[0]) in uniform:
                    uniform.update((id(outer), id(inner)))
            elif isinstance(expr, Merge):
                outer, inner = expr.inputs
                index[id(expr.outputs[0])] = add(mul(index[id(outer)], self.extent(inner)), index[id(inner)])  # type: ignore[arg-type]
                if id(outer) in uniform and id(inner) in uniform:
                    uniform.add(id(expr.outputs[0]))
            elif isinstance(expr, Resize):
                inp, out = expr.inputs[0], expr.outputs[0]
                if id(inp) in uniform:
                    index[id(out)] = self._first_resized_position(expr)
                    uniform.add(id(out))
                else:
                    index[id(out)] = add(index[id(inp)], self.scalar(expr.left, INDEX))
        return index

    def _first_resized_position(self, expr: Resize) -> k.Node:
        """The first position of a Resize's output whose input coordinate is in range: past
        a pad (left > 0) the input's 0, at a slice's start (left <= 0) the output's 0."""
        left = self.scalar(expr.left, INDEX)
        at = const_value(left)
        if at is not None:
            return k.Const(INDEX, max(int(at), 0))
        zero = k.Const(INDEX, 0)
        return k.Call(INDEX, "where", (lt(left, zero), zero, left))

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


def _merge_contiguous(terms: list[tuple[k.Node, k.Node, k.Node]]) -> list[tuple[k.Node, k.Node, k.Node]]:
    """Adjacent axes whose coordinates split one index `x` by the inner extent n, as
    (x / n, x % n) or (x / n, x % n + q), with the outer stride n times the inner one, are
    one axis indexed by `x` (`x + q`): a merged schedule axis over contiguous memory needs
    no division."""
    changed = True
    while changed:
        changed = False
        for i in range(len(terms) - 1):
            (inner, inner_stride, inner_extent), (outer, outer_stride, outer_extent) = terms[i], terms[i + 1]
            x, small = _remainder_parts(inner)
            if (
                x is not None
                and isinstance(outer, k.Bin)
                and outer.op == "/"
                and x.a == outer.a
                and x.b == outer.b == inner_extent
                and outer_stride == mul(inner_stride, inner_extent)
            ):
                merged = x.a if small is None else add(x.a, small)
                terms[i : i + 2] = [(merged, inner_stride, mul(inner_extent, outer_extent))]
                changed = True
                break
    return terms


def _remainder_parts(coord: k.Node) -> tuple[k.Bin | None, k.Node | None]:
    """`x % n` as (it, None); `x % n + q` as (x % n, q): the simplifier's form of
    `(x + q) % n` (a vector lane beside a constant extent), whose quotient it wrote as
    `x / n`. The merge is exact for any q: (x % n + q) + (x / n) * n is x + q."""
    if isinstance(coord, k.Bin) and coord.op == "%":
        return coord, None
    if isinstance(coord, k.Bin) and coord.op == "+" and isinstance(coord.a, k.Bin) and coord.a.op == "%":
        return coord.a, coord.b
    return None, None
