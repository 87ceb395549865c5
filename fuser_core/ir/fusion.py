"""The Fusion: a container of IR statements with inputs, outputs and the math between.

It numbers what it holds, orders its expressions, and clones itself with names
intact, so a concretized or scheduled copy prints with the same names as the
original.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from fuser_core.errors import InternalError
from fuser_core.ir.base import Expr, Statement, Val, fusion_guard
from fuser_core.ir.dtype import DataType
from fuser_core.ir.scalar import Scalar
from fuser_core.ir.tensor_view import MemoryType, TensorView


class Fusion:
    def __init__(self) -> None:
        self.inputs: list[Val] = []
        self.outputs: list[Val] = []
        # A user's `add_output(tv, stride_order=...)`: a requirement, unlike inferred
        # allocation domains, which are hints a scheduler may drop.
        self.output_stride_order: dict[TensorView, list[int]] = {}
        # Set by a definition with its own schedule(): one kernel, the user scheduler.
        self.user_scheduled = False
        # Set by a scheduler that sized its kernel for a register budget (nvFuser's
        # maxrregcount): blocks per SM `__launch_bounds__` asks the compiler to fit; 0: none.
        self.min_blocks_per_sm = 0
        # Set by a scheduler whose grid is one wave at min_blocks_per_sm blocks an SM: every
        # block is resident at once, so its grid reductions may wait for all of them at a grid
        # barrier (codegen then asks for a cooperative launch, which checks it).
        self.cooperative_grid = False
        # Set by a scheduler whose kernel reads its rows again after their reductions (an
        # inner normalization that re-reads, scheduler.rereading): the outputs (by name) it
        # stores evict-first, so that they do not push the rows still to be re-read out of L2.
        self.streaming_stores: frozenset[int] = frozenset()
        self._statements: list[Statement] = []
        self._counters = {"tv": 0, "id": 0, "scalar": 0, "expr": 0, "td": 0}
        self._zero: Scalar | None = None
        self._one: Scalar | None = None
        self._walk: list[Statement] | None = None  # cached traversal, dropped on any change
        self._position_map: dict[int, int] = {}
        self._position_count = -1

    # -- construction ----------------------------------------------------------------
    def guard(self) -> Any:
        """`with fusion.guard():` makes new IR statements belong to this fusion."""
        return fusion_guard(self)

    def register_statement(self, stmt: Statement, category: str) -> int:
        self.invalidate()
        name = self._counters[category]
        self._counters[category] = name + 1
        self._statements.append(stmt)
        return name

    def zero_val(self) -> Scalar:
        """The shared Index constant 0, created on first use (it takes the next name)."""
        if self._zero is None:
            with self.guard():
                self._zero = Scalar(DataType.Index, 0)
        return self._zero

    def one_val(self) -> Scalar:
        if self._one is None:
            with self.guard():
                self._one = Scalar(DataType.Index, 1)
        return self._one

    def add_input(self, val: Val) -> None:
        if val.definition is not None:
            raise InternalError(f"{val} has a definition and cannot be a fusion input")
        if isinstance(val, TensorView):
            val.memory_type = MemoryType.Global
        self.inputs.append(val)

    def add_output(self, val: Val) -> None:
        self.invalidate()
        if isinstance(val, TensorView):
            val.memory_type = MemoryType.Global
        self.outputs.append(val)

    # -- traversal -------------------------------------------------------------------
    def invalidate(self) -> None:
        """Forget the cached traversal: the graph changed."""
        self._walk = None

    def exprs(self) -> list[Expr]:
        """Expressions reaching an output, producers first (depth first from outputs)."""
        return [s for s in self._walked() if isinstance(s, Expr)]

    def used_vals(self) -> list[Val]:
        """Values reaching an output, in the same order as `exprs` visits them."""
        return [s for s in self._walked() if isinstance(s, Val)]

    def _walked(self) -> list[Statement]:
        if self._walk is None:
            self._walk = list(self._walk_from_outputs())
        return self._walk

    def used_tensors(self) -> list[TensorView]:
        return [v for v in self.used_vals() if isinstance(v, TensorView)]

    def _walk_from_outputs(self) -> Iterator[Statement]:
        done: set[int] = set()
        for out in self.outputs:
            stack: list[tuple[Val, bool]] = [(out, False)]
            while stack:
                val, expanded = stack.pop()
                if id(val) in done:
                    continue
                expr = val.definition
                if expanded or expr is None:
                    done.add(id(val))
                    if expr is not None and id(expr) not in done:
                        done.add(id(expr))
                        yield expr
                    yield val
                    continue
                stack.append((val, True))
                stack.extend((inp, False) for inp in reversed(expr.inputs) if id(inp) not in done)

    def _positions(self) -> dict[int, int]:
        """Creation index of each statement (by id), rebuilt only when statements were added."""
        if self._position_count != len(self._statements):
            self._position_map = {id(s): i for i, s in enumerate(self._statements)}
            self._position_count = len(self._statements)
        return self._position_map

    def statements(self) -> list[Statement]:
        return list(self._statements)

    def statement_count(self) -> int:
        return len(self._statements)

    def statements_since(self, count: int) -> list[Statement]:
        """The statements created after the first `count` (in creation order)."""
        return self._statements[count:]

    def tensors(self) -> list[TensorView]:
        return [s for s in self._statements if isinstance(s, TensorView)]

    # -- mutation --------------------------------------------------------------------
    def replace_val(self, old: Val, new: Val) -> None:
        """Make every use of `old` (and the output list) refer to `new`."""
        self.invalidate()
        for expr in list(old.uses):
            expr.replace_input(old, new)
        self.outputs = [new if o is old else o for o in self.outputs]
        if isinstance(old, TensorView) and old in self.output_stride_order:
            self.output_stride_order[new] = self.output_stride_order.pop(old)  # type: ignore[index]
        if isinstance(new, TensorView) and new in self.outputs:
            new.memory_type = MemoryType.Global

    def remove_expr(self, expr: Expr) -> None:
        self.invalidate()
        for inp in expr.inputs:
            if expr in inp.uses:
                inp.uses.remove(expr)
        for out in expr.outputs:
            if out.definition is expr:
                out.definition = None

    def mark(self) -> tuple[int, dict[str, int]]:
        """Where statement creation stands now, for `discard_since`."""
        return len(self._statements), dict(self._counters)

    def discard_since(self, mark: tuple[int, dict[str, int]]) -> None:
        """Forget the statements created after `mark` and give their names back: a
        tentative change undone (the caller has detached them from everything kept)."""
        count, counters = mark
        del self._statements[count:]
        self._counters = dict(counters)
        self._position_count = -1
        self.invalidate()

    # -- cloning ---------------------------------------------------------------------
    def clone(self) -> tuple[Fusion, dict[int, Any]]:
        """A deep copy with the same names and counters; returns it and a map from
        `id(original statement)` to its copy."""
        new = Fusion()
        mapping: dict[int, Any] = {}
        for stmt in self._statements:
            mapping[id(stmt)] = object.__new__(type(stmt))
        for stmt in self._statements:
            copy = mapping[id(stmt)]
            for key, value in vars(stmt).items():
                setattr(copy, key, _remap(value, mapping, self, new))
        new._statements = [mapping[id(s)] for s in self._statements]
        new._counters = dict(self._counters)
        new.inputs = [mapping[id(v)] for v in self.inputs]
        new.outputs = [mapping[id(v)] for v in self.outputs]
        new.output_stride_order = {mapping[id(tv)]: list(order) for tv, order in self.output_stride_order.items()}
        new.user_scheduled = self.user_scheduled
        new.min_blocks_per_sm = self.min_blocks_per_sm
        new.cooperative_grid = self.cooperative_grid
        new.streaming_stores = self.streaming_stores
        new._zero = mapping[id(self._zero)] if self._zero is not None else None
        new._one = mapping[id(self._one)] if self._one is not None else None
        return new, mapping

    def clone_subset(self, exprs: list[Expr], inputs: list[Val], outputs: list[Val]) -> tuple[Fusion, dict[int, Any]]:
        """A fusion of only `exprs` (a segment), with the given inputs and outputs, names
        and counters kept. Work is proportional to the segment, not to this fusion:
        references to statements outside it are dropped (`uses`) or cut (`definition`)."""
        keep = _closure(exprs, inputs)
        new = Fusion()
        positions = self._positions()
        kept = sorted(keep.values(), key=lambda s: positions[id(s)])
        mapping: dict[int, Any] = {id(s): object.__new__(type(s)) for s in kept}
        for stmt in kept:
            copy = mapping[id(stmt)]
            for key, value in vars(stmt).items():
                setattr(copy, key, _remap_subset(key, value, mapping, self, new))
        new._statements = [mapping[id(s)] for s in kept]
        new._counters = dict(self._counters)
        scalars = [v for v in self.inputs if not isinstance(v, TensorView) and id(v) in keep and v not in inputs]
        new.inputs = [mapping[id(v)] for v in [*inputs, *scalars]]
        new.outputs = [mapping[id(v)] for v in outputs]
        for val in new.inputs:
            val.definition = None
        for tv, order in self.output_stride_order.items():
            if id(tv) in keep and any(tv is o for o in outputs):
                new.output_stride_order[mapping[id(tv)]] = list(order)
        new._zero = mapping.get(id(self._zero)) if self._zero is not None else None
        new._one = mapping.get(id(self._one)) if self._one is not None else None
        for val in new.outputs:
            if isinstance(val, TensorView):
                val.memory_type = MemoryType.Global
        for val in new.inputs:
            if isinstance(val, TensorView):
                val.memory_type = MemoryType.Global
        return new, mapping


def _closure(exprs: list[Expr], inputs: list[Val]) -> dict[int, Statement]:
    """Every statement a segment needs, by id: its exprs, their values, the tensors'
    domains and IterDomains, and the scalar expressions extents are built from."""
    keep: dict[int, Statement] = {}
    stack: list[Statement] = [*exprs, *inputs]
    input_ids = {id(v) for v in inputs}
    while stack:
        stmt = stack.pop()
        if id(stmt) in keep:
            continue
        keep[id(stmt)] = stmt
        stack.extend(_needed_by(stmt, input_ids))
    return keep


def _needed_by(stmt: Statement, input_ids: set[int]) -> list[Statement]:
    if isinstance(stmt, Expr):
        return [*stmt.inputs, *stmt.outputs]
    if isinstance(stmt, TensorView):
        return [stmt.domain, *stmt.domain.all_ids()]
    needed: list[Statement] = []
    for attr in ("start", "extent", "expanded_extent"):
        value = getattr(stmt, attr, None)
        if isinstance(value, Statement):
            needed.append(value)
    definition = getattr(stmt, "definition", None)
    # A tensor input of the segment is computed elsewhere; IterDomains and scalars keep
    # their definitions (transforms, extent arithmetic).
    if definition is not None and id(stmt) not in input_ids and not isinstance(stmt, TensorView):
        needed.append(definition)
    return needed


def _remap_subset(key: str, value: Any, mapping: dict[int, Any], old: Fusion, new: Fusion) -> Any:
    if key in ("definition", "replayed_from"):
        return mapping.get(id(value)) if value is not None else None
    if key == "uses":
        return [mapping[id(e)] for e in value if id(e) in mapping]
    return _remap(value, mapping, old, new)


def _remap(value: Any, mapping: dict[int, Any], old: Fusion, new: Fusion) -> Any:
    if isinstance(value, Statement):
        try:
            return mapping[id(value)]
        except KeyError:
            raise InternalError(f"{value!r} is not part of the fusion being cloned") from None
    if value is old:
        return new
    if isinstance(value, list):
        return [_remap(v, mapping, old, new) for v in value]
    if isinstance(value, tuple):
        return tuple(_remap(v, mapping, old, new) for v in value)
    if isinstance(value, dict):
        return {_remap(k, mapping, old, new): _remap(v, mapping, old, new) for k, v in value.items()}
    return value
