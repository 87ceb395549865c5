"""Layer of `Lowering`: bounds predicates. Which indices need a check (an inner split
that may run past its extent, a Resize's pad region), how an overflow propagates backward
through the transforms, which checks a materialized tensor keeps, which thread writes an
element, and emission under an `if`."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower.arguments import Arguments
from fuser_core.codegen.lower.grid_groups import scope_of
from fuser_core.codegen.lower.loops import Loops
from fuser_core.codegen.lower.model import (
    HARDWARE,
    INDEX,
    TRUE,
    _Scope,
    concrete,
    loop_var,
)
from fuser_core.codegen.simplify import const_value, land, lt
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import IterDomain, Merge, Resize, Split
from fuser_core.ir.tensor_view import TensorView, transforms_between


class Predicates(Loops):
    """Builds the conditions under which an index is valid or a thread writes."""

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

    def _resize_validity(self, expr: Resize, value: k.Node) -> k.Node:
        inp = expr.inputs[0]
        assert isinstance(inp, IterDomain)
        left, right = const_value(self.scalar(expr.left)), const_value(self.scalar(expr.right))
        valid: k.Node = TRUE
        if left is None or left > 0:
            valid = land(valid, k.Bin(DataType.Bool, ">=", value, k.Const(INDEX, 0)))
        if right is None or right > 0:
            # a pad of an expanded broadcast axis keeps all of its expanded elements
            extent = self.scalar(inp.expanded_extent, INDEX) if inp.expanded_extent is not None else self.extent(inp)
            valid = land(valid, lt(value, extent))
        return valid

    def _write_predicate(self, tv: TensorView) -> k.Node:
        """One thread writes each element: along a launch dimension the tensor does not
        vary with (a reduced one, or one its broadcast is bound to), the first thread or
        block writes, or, once a grid reduction along it is emitted, its last block (the
        only one that holds its result, which the written value may be computed from)."""
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
            reduce = self.grid_last.get(hw)
            last = self._last_flag(reduce) if reduce is not None else None
            if last is not None:
                cond = land(cond, last)
            else:  # before the grid reduction: what is written cannot depend on its result
                cond = land(cond, k.Bin(DataType.Bool, "==", k.Var(INDEX, hw), k.Const(INDEX, 0)))
        return cond

    def _last_flag(self, reduce: k.ParallelReduce) -> k.Node | None:
        """The grid reduction's `last` flag as what is emitted now can read it, or None
        before the reduction is emitted. Inside the scope the reduction was emitted in, the
        flag itself; past it (a value computed from the result outside the loops the
        reduction closes: a squeeze of it), a copy in a kernel-level register, made right
        after the reduction on first need (C scoping hides the flag there)."""
        if reduce.last is None:
            return None
        if self._emitted_in_scope(reduce):
            return reduce.last
        scope = scope_of(self.body, reduce)
        if scope is None:
            return None
        kept = f"{reduce.last.name}_kept"
        if not any(isinstance(s, k.Alloc) and s.buffer == kept for s in self.body):
            at = next(i for i, s in enumerate(scope) if s is reduce)
            scope.insert(at + 1, k.Store(kept, k.Const(INDEX, 0), reduce.last))
            self.body.insert(0, k.Alloc(kept, DataType.Bool, 1, k.Memory.local, zero=True))
        return k.Read(DataType.Bool, kept, k.Const(INDEX, 0))

    def _emitted_in_scope(self, stmt: k.Stmt) -> bool:
        """Whether `stmt` was emitted into a scope enclosing what is emitted now (so what
        it declares, a grid reduction's `last` flag, can be read here)."""
        return any(any(s is stmt for s in scope.body) for scope in self.stack)

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


def _propagate_overflow(lowering: Arguments, expr: object, overflow: dict[int, bool]) -> None:
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


def _divides(lowering: Arguments, inp: IterDomain, expr: Split) -> bool:
    """Whether the split's factor divides its input's extent at every launch: a factor of
    1, constants that divide, or a split the scheduler promised divides (`divisible`)."""
    factor = const_value(lowering.scalar(expr.inputs[1], INDEX))
    if factor == 1 or _promised_divisible(lowering, expr):
        return True
    extent = const_value(lowering.extent(inp))
    if extent is None or factor is None:
        return False
    return int(extent) % int(factor) == 0


def _promised_divisible(lowering: Arguments, t: Split) -> bool:
    """A split the scheduler made knowing its factor divides (a vector width), replayed
    onto an axis as long as the one it split: a replay onto a tensor that lacks an
    expanded axis of it splits a shorter axis, which need not divide."""
    if not t.divisible:
        return False
    scheduled = concrete(t.outputs[1]).definition  # type: ignore[arg-type]
    if not isinstance(scheduled, Split):
        return False
    return bool(lowering.extent(t.inputs[0]) == lowering.extent(scheduled.inputs[0]))  # type: ignore[arg-type]


def first_lanes(lowering: Arguments, tv: TensorView, from_root: bool = False) -> dict[str, k.Node]:
    """The loop indices a bounds check of `tv` may take at 0: the inner index of a
    divisible split (a vector's lanes). With the factor dividing the extent,
    `outer * f + lane < extent` holds for every lane when it holds for lane 0, so the
    check is one per vector, which the compiler hoists out of the lane loop. Not through
    a pad, slice or cat, whose offsets need not be multiples of the factor; and only
    where the split input has the extent of the one the scheduler split (a replay onto a
    tensor that lacks an expanded axis of it splits a shorter axis, which need not divide)."""
    transforms = transforms_between(tv.logical, tv.loop)
    if from_root and tv.domain.has_root:  # an rfactor's checks of its root axes
        transforms = [*transforms_between(tv.root, tv.logical), *transforms]
    if any(isinstance(t, Resize) for t in transforms):
        return {}
    loop = {id(d) for d in tv.loop}
    lanes: dict[str, k.Node] = {}
    for t in transforms:
        if not (isinstance(t, Split) and id(t.outputs[1]) in loop and _promised_divisible(lowering, t)):
            continue
        lanes[loop_var(t.outputs[1]).name] = k.Const(INDEX, 0)  # type: ignore[arg-type]
    return lanes
