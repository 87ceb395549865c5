"""The base layer of `Lowering`: the state of one lowering, the kernel's arguments
(tensor and scalar parameters), fusion scalars and extents as kernel expressions, and which
tensors are materialized."""

from __future__ import annotations

import re
from typing import Any

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.elementwise import _convert_const, _elementwise
from fuser_core.codegen.lower.model import HARDWARE, INDEX, Instance, _Scope, concrete, copy_width, read_by_writers
from fuser_core.codegen.lower.order import _hoisted
from fuser_core.codegen.simplify import const_value, is_int
from fuser_core.errors import InternalError
from fuser_core.ir.base import Val
from fuser_core.ir.dtype import DataType
from fuser_core.ir.elementwise import BinaryOp, TernaryOp, UnaryOp
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.rng import unbound_rng_states
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_exprs import LoadStoreOp, ReductionOp, WelfordOp
from fuser_core.ir.tensor_view import MemoryType, TensorView, tensors_of
from fuser_core.scheduler.id_map import IdMap, constant_extents, symbolic_axes


class Arguments:
    """A lowering's state, set up from the fusion: arguments bound, materialized tensors
    chosen and ordered; the layers above emit into it."""

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
        computed = [e.output for e in self.exprs if isinstance(e.output, TensorView)]
        self.per_row_loads = frozenset(tv.name for tv in computed if self._loaded_outside_consumer_loops(tv))
        self.materialized: list[TensorView] = _hoisted(
            [tv for tv in computed if self._is_materialized(tv)], self.per_row_loads
        )
        self.instances: dict[int, list[Instance]] = {}
        self._instances_by_checks: dict[tuple[Any, ...], Instance] = {}
        self.buffers: dict[tuple[int, Instance], str] = {}
        self.launch: list[k.LaunchDim] = []
        self.shared_bytes = 0
        self.vector_widths: dict[str, int] = {}  # tensor -> elements of its widest copy (its alignment)
        self.body: list[k.Stmt] = []
        self.stack: list[_Scope] = [_Scope(self.body, None)]
        self.computing: TensorView | None = None
        self.local_names: dict[str, int] = {}
        self.alloc_depth: dict[int, int] = {}
        # Block and grid reductions whose accumulation loops are left open, by the depth they
        # go to once those close: a sibling reduction of the same input shares the loops.
        self.pending_reduces: list[tuple[int, k.ParallelReduce]] = []
        self.alloc_scopes: dict[str, list[k.Stmt]] = {}  # register buffer -> the body it is allocated in
        # (input copy, id of the scope body) -> its vector loaded again there (Compute._reread_vector)
        self.rereads: dict[tuple[int, int], str] = {}
        self.bounds: dict[str, int] = {}
        self.buffer_dtypes: dict[str, DataType] = {}
        self.workspaces: list[k.Workspace] = []
        self.reduce_scratch: dict[tuple[DataType, int], k.Alloc] = {}
        self.grid_last: dict[
            str, k.ParallelReduce
        ] = {}  # blockIdx.* reduced by a grid reduction -> the reduction (its `last` flag)
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
        id_map = IdMap(self.exprs)
        constants = constant_extents(id_map, tensors_of(self.exprs))
        for pos, tv in enumerate(self.inputs):
            self._bind_tensor(tv, pos, is_output=False, id_map=id_map, constants=constants)
        self._one_extent_per_mapped_axis(id_map)
        for pos, tv in enumerate(self.outputs):
            if tv not in self.inputs:
                self._bind_tensor(tv, pos, is_output=True)

    def _one_extent_per_mapped_axis(self, id_map: IdMap) -> None:
        """Axes the ops map exactly have equal extents (the runtime refuses inputs where
        they differ: arguments.check_mapped_sizes), however each consumer spells them:
        `same_extent` renders an expression with each read of such an extent as that of
        the first tensor holding its set, so that one value checked and indexed through
        different tensors' sizes is one buffer instance (a row's [N, 1] mean beside x
        [N, H]: its consumers checked `T3.logical_size[0]` and `T0.logical_size[0]`, and
        each load was made twice). The kernel keeps each tensor's own spelling: forcing
        the reference's onto a transpose's other input measured 5% slower on the H100."""
        first: dict[int, str] = {}
        renamed: dict[str, str] = {}
        for _, _, dim, key in symbolic_axes(id_map, [*self._references(), *self.outputs, *self.inputs]):
            node = self.scalars.get(id(dim.maybe_expanded_extent))
            if not isinstance(node, k.TensorField):
                continue  # computed, not read from an input (a reshape's product)
            text = k.expr_text(node)
            if key not in first:
                first[key] = text
            elif text != first[key]:
                renamed[text] = first[key]
        pattern = re.compile("|".join(re.escape(t) for t in renamed)) if renamed else None
        self._extent_names = (pattern, renamed)

    def same_extent(self, node: k.Node) -> str:
        """`node` as text, every mapped extent read as its set's first (see above)."""
        text = k.expr_text(node)
        pattern, renamed = self._extent_names
        return pattern.sub(lambda m: renamed[m.group(0)], text) if pattern is not None else text

    def _references(self) -> list[TensorView]:
        """The tensor whose loop IDs the most loops of the kernel are replayed from."""
        tensors = {id(v): v for e in self.exprs for v in e.outputs if isinstance(v, TensorView)}
        uses: dict[int, int] = {}
        for tv in tensors.values():
            for dim in tv.loop:
                root = concrete(dim)
                if root is not dim:
                    uses[id(root)] = uses.get(id(root), 0) + 1
        owners = [(sum(uses.get(id(d), 0) for d in tv.loop), tv) for tv in tensors.values()]
        best = max(owners, key=lambda pair: pair[0], default=(0, None))
        return [best[1]] if best[1] is not None and best[0] > 0 else []

    def _bind_tensor(
        self,
        tv: TensorView,
        pos: int,
        is_output: bool,
        id_map: IdMap | None = None,
        constants: dict[int, int] | None = None,
    ) -> None:
        logical = tv.logical_no_reductions()
        alloc = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
        if not is_output:
            for axis, dim in enumerate(logical):
                extent = dim.maybe_expanded_extent
                if extent.is_const:
                    continue
                # An axis tied to a static one (a pad to a static width) is that constant:
                # index math divides by a literal, not a size. The runtime checks fusion
                # inputs against it, and sizes made from scalar inputs (`full([n])`).
                constant = (
                    constants.get(id_map.exact(dim))
                    if constants and id_map is not None and not dim.is_broadcast and id_map.knows(dim)
                    else None
                )
                field = k.TensorField(INDEX, f"T{tv.name}", "logical_size", axis)
                self.scalars.setdefault(id(extent), field if constant is None else k.Const(INDEX, constant))
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
            node = _folded(_elementwise(expr, [self._scalar(v) for v in expr.inputs]))  # type: ignore[arg-type]
            self.scalars[id(val)] = node
            return node
        raise InternalError(f"kernel {self.name}: no kernel argument gives the value of {val}")

    def extent(self, dim: IterDomain) -> k.Node:
        return self.scalar(dim.extent, INDEX)

    # -- what is materialized -----------------------------------------------------------
    def _copied_in_vectors(self, name: str, width: int, dtype: DataType) -> None:
        """Record that kernel argument `name` is read or written `width` elements at a time:
        the launch checks its alignment to one copy of those (16 bytes at most)."""
        self.vector_widths[name] = max(copy_width(width, dtype), self.vector_widths.get(name, 1))

    def _is_materialized(self, tv: TensorView) -> bool:
        if tv in self.outputs or tv.memory_type == MemoryType.Shared:
            return True
        if isinstance(tv.definition, ReductionOp | WelfordOp):
            return True  # never inlined: a Welford's avg is computed even when only its M2 is read
        if tv.compute_at_pos == 0 and tv.uses and self._reloadable(tv):
            return False
        if tv.name in self.per_row_loads:
            return True
        return 0 < tv.compute_at_pos < len(tv.loop) or (tv.compute_at_pos == 0 and bool(tv.uses))

    def _loaded_outside_consumer_loops(self, tv: TensorView) -> bool:
        """A cache of an input inlined at all its loops while a consumer runs serial loops
        inside them (cross-entropy's label and gradient, one per row, read by every element
        of the row): loaded once where its own loops are, as nvFuser places every tensor at
        its loop nest's depth. Inlined into the consumer instead, each element would load it
        again: the compiler cannot move a global load past the row's stores."""
        expr = tv.definition
        if not isinstance(expr, LoadStoreOp) or expr.input not in self.inputs or tv.memory_type != MemoryType.Local:
            return False
        if tv.compute_at_pos != len(tv.loop) or not tv.loop:
            return False
        own = [concrete(d).name for d in tv.loop]
        stack, seen = [tv], set()
        while stack:  # through consumers inlined at the same loops (a cast of it)
            for use in stack.pop().uses:
                for out in use.outputs:
                    if not isinstance(out, TensorView) or out.name in seen:
                        continue
                    seen.add(out.name)
                    inner = _loops_inside(out, own)
                    if inner is None:
                        continue
                    if any(
                        d.parallel_type not in HARDWARE and const_value(self.extent(concrete(d))) != 1 for d in inner
                    ):
                        return True
                    if not inner and out.compute_at_pos == len(out.loop) and out not in self.outputs:
                        stack.append(out)
        return False

    def _reloadable(self, tv: TensorView) -> bool:
        """A cache of an input left outside every loop (its consumers' loops do not match)
        whose register buffer would have a run-time size: each consumer loads its elements
        itself instead."""
        expr = tv.definition
        if not isinstance(expr, LoadStoreOp) or expr.input not in self.inputs:
            return False
        serial = [d for d in tv.loop if not d.is_reduction and d.parallel_type not in HARDWARE]
        return any(const_value(self.extent(concrete(d))) is None for d in serial)

    def _own_coords_roots(self, tv: TensorView) -> bool:
        """Whether `tv` is computed at the coordinates of its own loops: an output, and a
        shared tile, unless it is a row its threads read back at the slots they stored
        (a persistent buffer) along loops of its that are narrower than the ones it runs
        in (narrower_loops): those slots hold the coordinates its consumers read there."""
        if tv in self.outputs:
            return True
        return tv.memory_type == MemoryType.Shared and not (read_by_writers(tv) and self.narrower_loops(tv))

    def narrower_loops(self, tv: TensorView) -> bool:
        """Whether a loop ID of `tv` is shorter than the loop it runs in (its concrete ID),
        as where a merge took in a broadcast axis the reference iterates (a weight [1, 1, H]
        beside rows merged from [A, H]: its merge covers H, the loop A * H). Its own loop
        indices then do not give the coordinates its consumers read at the same slots."""
        return any(
            not d.is_broadcast and concrete(d) is not d and self.extent(d) != self.extent(concrete(d)) for d in tv.loop
        )


def _loops_inside(consumer: TensorView, loops: list[int]) -> list[IterDomain] | None:
    """The loops `consumer` runs inside `loops` (concrete IDs, in order): those after the
    last of them, where its loops run all of them in order with only broadcast or launch
    loops between (as the lowering opens a nest); else None (its nest is not theirs)."""
    matched = 0
    for position, dim in enumerate(consumer.loop):
        if matched == len(loops):
            return consumer.loop[position:]
        if concrete(dim).name == loops[matched]:
            matched += 1
        elif not (dim.is_broadcast or dim.parallel_type in HARDWARE):
            return None
    return [] if matched == len(loops) else None


def _folded(node: k.Node) -> k.Node:
    """Extent math on literals as its value: an axis made static (`ceilDiv(32064, 8)`)."""
    if isinstance(node, k.Call) and node.fn == "ceilDiv" and len(node.args) == 2:
        a, b = (const_value(arg) for arg in node.args)
        if is_int(a) and is_int(b) and a >= 0 and b > 0:
            return k.Const(node.dtype, -(-a // b))
    if isinstance(node, k.Bin) and node.op in ("*", "+") and node.dtype.is_integral:
        a, b = const_value(node.a), const_value(node.b)
        if is_int(a) and is_int(b):
            return k.Const(node.dtype, a * b if node.op == "*" else a + b)
    return node
