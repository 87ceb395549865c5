"""Tensors: a TensorDomain of IterDomains (root, logical, allocation, loop) and a dtype."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence

from fuser_core.errors import FuserError, InternalError
from fuser_core.ir import iter_domain as idx
from fuser_core.ir.base import Expr, Statement, Val, current_fusion
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.scalar import Scalar

Contiguity = bool | None  # None for broadcast and reduction axes

# The most axes (not counting reductions) a tensor may have: NumPy's limit, which the
# reference backend cannot exceed (PyTorch's dim bitsets are 64 wide too). The op
# builders check it first, to name the op; the TensorDomain check catches any path
# that did not.
MAX_TENSOR_RANK = 64


class MemoryType(enum.Enum):
    Global = "_g"
    Local = "_l"
    Shared = "_s"


class TensorDomain(Statement):
    """The axes of one tensor.

    root -> logical through reshape/resize transforms (`rf` IDs), logical -> loop
    through scheduling transforms. `allocation` is the memory order when it differs
    from logical; `contiguity` has one entry per allocation (or logical) axis.
    """

    def __init__(
        self,
        logical: Sequence[IterDomain],
        *,
        root: Sequence[IterDomain] | None = None,
        allocation: Sequence[IterDomain] | None = None,
        contiguity: Sequence[Contiguity] | None = None,
    ) -> None:
        self.fusion = current_fusion()
        self.logical = list(logical)
        rank = len(no_reductions(self.logical))
        if rank > MAX_TENSOR_RANK:
            raise FuserError(f"a tensor may have at most {MAX_TENSOR_RANK} axes; this one would have {rank}")
        self.root = list(root) if root is not None else None
        self.allocation = list(allocation) if allocation is not None else None
        self.loop = list(logical)
        alloc = self.maybe_allocation
        if contiguity is None:
            contiguity = filled_contiguity(alloc, True)
        if len(contiguity) != len(alloc):
            raise InternalError(f"contiguity {list(contiguity)} does not fit {len(alloc)} axes")
        self.contiguity: list[Contiguity] = list(contiguity)
        # An allocation domain is a requirement (an input's layout, a user's stride_order)
        # unless a pass only proposed it: a hint, which a scheduler may drop (#2425).
        self.allocation_is_hint = False
        self.name = self.fusion.register_statement(self, "td")

    @property
    def maybe_root(self) -> list[IterDomain]:
        return self.root if self.root is not None else self.logical

    @property
    def maybe_allocation(self) -> list[IterDomain]:
        return self.allocation if self.allocation is not None else self.logical

    def set_allocation(
        self, allocation: Sequence[IterDomain] | None, contiguity: Sequence[Contiguity], *, hint: bool
    ) -> None:
        """Lay the tensor out as `allocation` (None: logical order). `hint` marks a
        proposal of a pass, kept apart from requirements."""
        alloc = list(allocation) if allocation is not None else list(self.logical)
        if len(contiguity) != len(alloc):
            raise InternalError(f"contiguity {list(contiguity)} does not fit {len(alloc)} axes")
        self.allocation = list(allocation) if allocation is not None else None
        self.contiguity = list(contiguity)
        self.allocation_is_hint = hint and allocation is not None

    def drop_allocation_hint(self) -> None:
        """Back to logical order; only a hint may be dropped."""
        if self.allocation is not None and not self.allocation_is_hint:
            raise InternalError("a required allocation domain cannot be dropped")
        if self.allocation is not None:
            self.set_allocation(None, filled_contiguity(self.logical, True), hint=False)

    @property
    def has_root(self) -> bool:
        return self.root is not None

    def all_ids(self) -> list[IterDomain]:
        """Every IterDomain this tensor holds, the intermediate transform ones included."""
        sources = list(self.maybe_root)
        found = {id(i): i for i in sources}
        for exprs in (transforms_between(sources, self.logical), transforms_between(self.logical, self.loop)):
            for expr in exprs:
                for v in expr.inputs + expr.outputs:
                    if isinstance(v, IterDomain):
                        found.setdefault(id(v), v)
        for group in (self.logical, self.loop, self.maybe_allocation):
            for i in group:
                found.setdefault(id(i), i)
        return list(found.values())

    def replace_id(self, old: IterDomain, new: IterDomain) -> None:
        """Put `new` in place of `old`; an axis that becomes (or stops being) a
        broadcast gets the contiguity that goes with it."""
        for pos, item in enumerate(self.maybe_allocation):
            if item is old:
                if new.is_broadcast or new.is_reduction:
                    self.contiguity[pos] = None
                elif self.contiguity[pos] is None:
                    self.contiguity[pos] = True
        for group in (self.root, self.logical, self.allocation, self.loop):
            if group is not None:
                for pos, item in enumerate(group):
                    if item is old:
                        group[pos] = new

    def contiguity_string(self) -> str:
        return " ".join("n" if c is None else ("t" if c else "f") for c in self.contiguity)

    def to_string(self) -> str:
        if not self.loop:
            return "[ ]"
        return "[ " + ", ".join(i.to_string() for i in self.loop) + " ]"


def tensors_of(exprs: Iterable[Expr]) -> list[TensorView]:
    """The tensors the expressions read or write, each once, in order of appearance."""
    found = {id(v): v for e in exprs for v in (*e.inputs, *e.outputs) if isinstance(v, TensorView)}
    return list(found.values())


def no_reductions(ids: Sequence[IterDomain]) -> list[IterDomain]:
    return [i for i in ids if not i.is_reduction]


def filled_contiguity(ids: Sequence[IterDomain], value: bool) -> list[Contiguity]:
    return [None if (i.is_broadcast or i.is_reduction) else value for i in ids]


def transforms_between(sources: Sequence[IterDomain], targets: Sequence[IterDomain]) -> list[Expr]:
    """The ID expressions leading from `sources` to `targets`, in creation order."""
    stop = {id(s) for s in sources}
    seen: dict[int, Expr] = {}
    stack = [t for t in targets if id(t) not in stop]
    while stack:
        val = stack.pop()
        expr = val.definition
        if expr is None or id(expr) in seen:
            continue
        seen[id(expr)] = expr
        stack.extend(v for v in expr.inputs if isinstance(v, IterDomain) and id(v) not in stop)
    return sorted(seen.values(), key=lambda e: e.name)


class TensorView(Val):
    """A tensor value of the fusion: `T3_l[ iS7{i2}, bS8{1} ]`."""

    name_category = "tv"

    def __init__(self, domain: TensorDomain, dtype: DataType) -> None:
        self.domain = domain
        self.memory_type = MemoryType.Local
        self.compute_at_pos = 0
        self.max_producer_pos = 0
        super().__init__(dtype, domain.fusion)

    @property
    def logical(self) -> list[IterDomain]:
        return self.domain.logical

    @property
    def root(self) -> list[IterDomain]:
        return self.domain.maybe_root

    @property
    def loop(self) -> list[IterDomain]:
        return self.domain.loop

    @property
    def ndim(self) -> int:
        """Rank as the user sees it: logical axes that are not reductions."""
        return len(no_reductions(self.domain.logical))

    def logical_no_reductions(self) -> list[IterDomain]:
        return no_reductions(self.domain.logical)

    def axis(self, pos: int) -> IterDomain:
        return self.domain.loop[pos]

    def to_string(self) -> str:
        text = f"T{self.name}{self.memory_type.value}{self.domain.to_string()}"
        if self.compute_at_pos > 0:
            text += f" ca_pos( {self.compute_at_pos} )"
        if self.max_producer_pos > 0:
            text += f" produce_pos( {self.max_producer_pos} )"
        return text

    # -- scheduling transforms on the loop domain -------------------------------------
    def split(self, axis: int, factor: Scalar | int, inner_split: bool = True, divisible: bool = False) -> TensorView:
        axis = self._loop_axis(axis)
        outer, inner = idx.split(self.loop[axis], factor, inner_split, divisible)
        self.domain.loop[axis : axis + 1] = [outer, inner]
        return self

    def merge(self, axis_outer: int, axis_inner: int | None = None) -> TensorView:
        outer_pos = self._loop_axis(axis_outer)
        inner_pos = outer_pos + 1 if axis_inner is None else self._loop_axis(axis_inner)
        merged = idx.merge(self.loop[outer_pos], self.loop[inner_pos])
        loop = [i for p, i in enumerate(self.loop) if p not in (outer_pos, inner_pos)]
        loop.insert(min(outer_pos, inner_pos), merged)
        self.domain.loop = loop
        return self

    def reorder(self, old_to_new: dict[int, int]) -> TensorView:
        n = len(self.loop)
        moves = {self._loop_axis(o): self._loop_axis(p) for o, p in old_to_new.items()}
        result: list[IterDomain | None] = [None] * n
        for old, new in moves.items():
            result[new] = self.loop[old]
        rest = iter(i for p, i in enumerate(self.loop) if p not in moves)
        self.domain.loop = [r if r is not None else next(rest) for r in result]
        return self

    def parallelize(self, axis: int, parallel_type: idx.ParallelType) -> TensorView:
        self.loop[self._loop_axis(axis)].parallel_type = parallel_type
        return self

    def _loop_axis(self, axis: int) -> int:
        n = len(self.loop)
        if not -n <= axis < n:
            raise InternalError(f"axis {axis} out of range for {self}")
        return axis % n
