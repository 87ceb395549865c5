"""A candidate kernel as the schedulers' checks see it: some expressions of a fusion,
the tensors that enter and leave them, and the sizes they will run with.

Checks run on views of the one complete fusion (no copies), so the segmenter can ask
about many candidate merges cheaply; only an accepted group is copied and scheduled.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from fuser_core.ir.base import Expr
from fuser_core.ir.evaluator import ExpressionEvaluator
from fuser_core.ir.indexing import LibraryOp
from fuser_core.ir.iter_domain import IterDomain
from fuser_core.ir.tensor_exprs import MatmulOp, ReductionOp, WelfordOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.device import DeviceProperties
from fuser_core.scheduler.id_map import IdMap

# Ops no generated kernel computes: the backend runs them with its library.
EXPR_EVAL_OPS: tuple[type, ...] = (MatmulOp, LibraryOp)
REDUCTION_OPS: tuple[type, ...] = (ReductionOp, WelfordOp)


@dataclass
class GroupView:
    exprs: list[Expr]  # tensor expressions, producers first
    inputs: list[TensorView]
    outputs: list[TensorView]
    id_map: IdMap

    @staticmethod
    def of(exprs: Sequence[Expr], fusion_outputs: set[int]) -> GroupView:
        """The view of a candidate group, with an ID map of its own expressions."""
        members = {id(e) for e in exprs}
        produced: dict[int, TensorView] = {}
        inputs: dict[int, TensorView] = {}
        for expr in exprs:
            for val in expr.inputs:
                if isinstance(val, TensorView) and id(val) not in produced:
                    inputs.setdefault(id(val), val)
            for val in expr.outputs:
                if isinstance(val, TensorView):
                    produced[id(val)] = val
        outputs = [tv for tv in produced.values() if _leaves_group(tv, members, fusion_outputs)]
        return GroupView(list(exprs), list(inputs.values()), outputs, IdMap(exprs))

    @cached_property
    def tensors(self) -> list[TensorView]:
        seen: dict[int, TensorView] = {id(tv): tv for tv in self.inputs}
        for expr in self.exprs:
            for val in expr.outputs:
                if isinstance(val, TensorView):
                    seen.setdefault(id(val), val)
        return list(seen.values())

    @cached_property
    def self_mapping(self) -> str | None:
        """Why no kernel can hold this group: a tensor whose two axes it ties together."""
        found = self.id_map.self_mapping(self.tensors)
        if found is None:
            return None
        tv, a, b = found
        return f"T{tv.name} has two axes mapped to each other ({a} and {b}): a self mapping"

    @cached_property
    def links(self) -> dict[int, list[int]]:
        return self.id_map.links_of(self.exprs)

    @cached_property
    def references(self) -> dict[tuple[int, ...], TensorView | None]:
        """Memo of the reference tensor found among each candidate list (checks.covering_output)."""
        return {}

    @cached_property
    def _memo(self) -> dict[str, Any]:
        return {}

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """A derived fact about this group, computed once however many checks ask."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    @cached_property
    def reductions(self) -> list[Expr]:
        return [e for e in self.exprs if isinstance(e, REDUCTION_OPS)]

    @cached_property
    def expr_eval_ops(self) -> list[Expr]:
        return [e for e in self.exprs if isinstance(e, EXPR_EVAL_OPS)]

    def reduction_tvs(self) -> list[TensorView]:
        return [e.outputs[0] for e in self.reductions]  # type: ignore[misc]


def _leaves_group(tv: TensorView, members: set[int], fusion_outputs: set[int]) -> bool:
    return id(tv) in fusion_outputs or any(id(use) not in members for use in tv.uses)


@dataclass
class RuntimeInfo:
    """Sizes of a run: every extent evaluated from the inputs, the device model, and
    the index type the inputs need."""

    evaluator: ExpressionEvaluator
    device: DeviceProperties
    index_type: str = "int32"
    vectorize: bool = True  # False: the vectorization option is disabled
    shared_persistence: bool = True  # False: the shared_persistence disable option is set
    rereading: bool = True  # False: the rereading disable option is set
    cooperative_grid: bool = True  # False: the cooperative_grid disable option is set
    _cache: dict[int, int] = field(default_factory=dict)

    def extent(self, dim: IterDomain) -> int:
        key = id(dim)
        if key not in self._cache:
            if dim.is_broadcast and dim.expanded_extent is None:
                self._cache[key] = 1
            else:
                self._cache[key] = int(self.evaluator.evaluate(dim.maybe_expanded_extent))
        return self._cache[key]

    def numel(self, tv: TensorView, include_reductions: bool = False) -> int:
        total = 1
        for dim in tv.logical:
            if dim.is_reduction and not include_reductions:
                continue
            total *= self.extent(dim)
        return total
