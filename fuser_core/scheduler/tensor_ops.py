"""Scheduling operations that add tensors: cache_after, cache_before and rfactor.

A cached load or store becomes its own TensorView defined by `Set`, as nvFuser prints
it (`T5_l = Set( T1_g )`), so vectorized global accesses are separate expressions. An
rfactor splits a reduction into a per-thread partial result (its own TensorView, the
rfactored axes marked `rf`) and the reduction of those partials across threads.
"""

from __future__ import annotations

from fuser_core.errors import InternalError
from fuser_core.ir import iter_domain as idx
from fuser_core.ir.base import Expr
from fuser_core.ir.dtype import DataType
from fuser_core.ir.iter_domain import IterDomain, IterType, Merge, ParallelType, Resize, Split
from fuser_core.ir.tensor_exprs import LoadStoreOp, ReductionOp
from fuser_core.ir.tensor_view import TensorDomain, TensorView, filled_contiguity, transforms_between


def _fresh(dim: IterDomain, **changes: object) -> IterDomain:
    return dim.clone_with(parallel_type=ParallelType.Serial, is_rfactor_product=False, **changes)


def cache_after(tv: TensorView) -> TensorView:
    """A local copy of `tv` that every current use of `tv` reads instead."""
    with tv.fusion.guard():
        cache = TensorView(TensorDomain([_fresh(d) for d in tv.logical_no_reductions()]), tv.dtype)
        uses = list(tv.uses)
        LoadStoreOp(cache, tv)
        for use in uses:
            use.replace_input(tv, cache)
    return cache


def cache_before(tv: TensorView) -> TensorView:
    """`tv`'s definition now writes a new local tensor, which `tv` copies: the output
    keeps its name and layout, the cache takes its domain (reduction axes included)."""
    expr = tv.definition
    if expr is None:
        raise InternalError(f"cache_before: {tv} has no definition")
    fusion = tv.fusion
    with fusion.guard():
        old = tv.domain
        kept = [_fresh(d) for d in old.logical if not d.is_reduction]
        by_old = {id(d): n for d, n in zip([d for d in old.logical if not d.is_reduction], kept, strict=True)}
        new_domain = TensorDomain(kept)
        if old.allocation is not None:
            alloc = [by_old[id(d)] for d in old.allocation if id(d) in by_old]
            contiguity = [c for d, c in zip(old.allocation, old.contiguity, strict=True) if id(d) in by_old]
            new_domain.set_allocation(alloc, contiguity, hint=old.allocation_is_hint)
        elif any(d.is_reduction for d in old.logical):
            new_domain.set_allocation(None, filled_contiguity(kept, True), hint=False)
        cache = TensorView(old, tv.dtype)
        old.set_allocation(None, filled_contiguity(old.logical, True), hint=False)
        tv.domain = new_domain
        position = next(i for i, o in enumerate(expr.outputs) if o is tv)
        expr.outputs[position] = cache
        cache.definition = expr
        tv.definition = None
        LoadStoreOp(tv, cache)
    fusion.invalidate()
    return cache


def replay_transforms(exprs: list[Expr], mapped: dict[int, IterDomain]) -> None:
    """Apply `exprs` (Split/Merge/Resize of a source tensor, in order) to the target
    IterDomains in `mapped` (source id -> target IterDomain), adding their outputs to it.
    A merge with one side missing forwards the other: the target lacks that axis."""
    for expr in exprs:
        if isinstance(expr, Split):
            source = expr.inputs[0]
            if id(source) in mapped:
                outer, inner = idx.split(mapped[id(source)], expr.inputs[1], expr.inner_split, expr.divisible)  # type: ignore[arg-type]
                mapped[id(expr.outputs[0])], mapped[id(expr.outputs[1])] = outer, inner
        elif isinstance(expr, Merge):
            merged_outer, merged_inner = (mapped.get(id(v)) for v in expr.inputs)
            if merged_outer is not None and merged_inner is not None:
                mapped[id(expr.output)] = idx.merge(merged_outer, merged_inner)
            elif merged_outer is not None or merged_inner is not None:
                mapped[id(expr.output)] = merged_outer if merged_outer is not None else merged_inner  # type: ignore[assignment]
        elif isinstance(expr, Resize):
            source = expr.inputs[0]
            if id(source) in mapped:
                out: IterDomain = expr.output  # type: ignore[assignment]
                target = mapped[id(source)]
                if target.is_broadcast and target.expanded_extent is None:
                    # a producer broadcast before its expand: its one element stands for every
                    # position of the slice or pad, so the axis stays a broadcast (resizing
                    # extent 1 by the consumer's widths would give a negative extent)
                    mapped[id(out)] = target
                    continue
                mapped[id(out)] = idx.resize(
                    mapped[id(source)], expr.left, expr.right, mark_rfactor=False, iter_type=out.iter_type
                )


def rfactor(tv: TensorView, axes: list[int]) -> TensorView:
    """Split the reduction defining `tv`: a new tensor reduces the loop axes `axes`
    (per thread, serially) and `tv` reduces what is left of the partial results."""
    expr = tv.definition
    if not isinstance(expr, ReductionOp):
        raise InternalError(f"rfactor needs a reduction, {tv} is defined by {expr}")
    positions = {a % len(tv.loop) for a in axes}
    if not positions or any(not tv.loop[p].is_reduction for p in positions):
        raise InternalError(f"rfactor axes {axes} of {tv} must be reduction loop axes")
    fusion = tv.fusion
    with fusion.guard():
        partial = _partial_tensor(tv, positions)
        final = _final_domain(tv, partial, positions)
        tv.domain = final
        expr.outputs[0] = partial
        partial.definition = expr
        tv.definition = None
        ReductionOp(expr.op_type, tv, partial, expr.init)
    fusion.invalidate()
    return partial


def _partial_tensor(tv: TensorView, positions: set[int]) -> TensorView:
    root = [_fresh(d) for d in tv.logical]
    iteration_roots = [r for r in root if not r.is_reduction]
    mapped = {id(d): r for d, r in zip(tv.logical, root, strict=True)}
    replay_transforms(transforms_between(tv.logical, tv.loop), mapped)
    loop = [mapped[id(d)] for d in tv.loop]
    for pos, (old, new) in enumerate(zip(tv.loop, loop, strict=True)):
        new.parallel_type = old.parallel_type
        new.replayed_from = old.replayed_from
        if new.is_reduction:
            new.is_rfactor_product = True
            if pos not in positions:
                new.iter_type = IterType.Iteration
    reduction_leaves = [d for d in loop if d.is_rfactor_product]
    logical = iteration_roots + [d for d in reduction_leaves if all(d is not r for r in iteration_roots)]
    domain = TensorDomain(logical, root=root)
    domain.loop = loop
    # A partial is the reduction's accumulator: a Half or BFloat16 reduction adds in
    # float, and rounding its partials would round the result twice.
    return TensorView(domain, DataType.Float if tv.dtype.is_reduced_float else tv.dtype)


def _final_domain(tv: TensorView, partial: TensorView, positions: set[int]) -> TensorDomain:
    """`tv` over the partial's axes: iteration axes as before, the partial's
    non-rfactored reduction axes as its reductions, in the old loop order."""
    sources = [d for d in partial.logical]
    logical: list[IterDomain] = []
    mapped: dict[int, IterDomain] = {}
    for dim in sources:
        if dim.is_reduction:
            continue
        was_reduction = dim.is_rfactor_product
        new = _fresh(dim, iter_type=IterType.Reduction if was_reduction else dim.iter_type)
        logical.append(new)
        mapped[id(dim)] = new
    replay_transforms(transforms_between(partial.logical, partial.loop), mapped)
    domain = TensorDomain(logical)
    domain.loop = [mapped[id(d)] for d in partial.loop if id(d) in mapped]
    for source in partial.loop:
        if id(source) in mapped:
            mapped[id(source)].parallel_type = source.parallel_type
            mapped[id(source)].replayed_from = source
    return domain
