"""Scheduling steps every generated-kernel scheduler takes: caching global inputs and
outputs, ordering the reference by memory layout, then propagating, parallelizing
and inlining. Plus the sizing rules for vector width and unrolling."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fuser_core.errors import InternalError
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, ParallelType
from fuser_core.ir.tensor_exprs import LoadStoreOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.base import HintDrop
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.propagation import inline_most, parallelize_like_reference, propagate, propagation_steps
from fuser_core.scheduler.tensor_ops import cache_after, cache_before

MAX_VECTOR_BYTES = 16


def tensor_named(fusion: Fusion, name: int) -> TensorView:
    for tv in fusion.tensors():
        if tv.name == name:
            return tv
    raise InternalError(f"T{name} is not in the group's fusion")


@dataclass
class IoCaches:
    inputs: list[TensorView]  # local copies of global inputs (vectorized loads)
    outputs: list[TensorView]  # local tensors the outputs copy from (vectorized stores)


def vector_accessed(fusion: Fusion, input_caches: Sequence[TensorView], scalar_access: Sequence[int]) -> set[int]:
    """Names of the tensors accessed in vectors: the caches of the inputs among
    `input_caches` and the fusion's outputs, except those of `scalar_access` (read or
    written element by element)."""
    loads = {c.name for c in input_caches if c.definition.inputs[0].name not in scalar_access}  # type: ignore[union-attr]
    stores = {tv.name for tv in fusion.outputs if isinstance(tv, TensorView) and tv.name not in scalar_access}
    return loads | stores


def cache_io(fusion: Fusion) -> IoCaches:
    """Local copies of the global inputs and outputs. An output the group also reads (a
    reshape that is both returned and reduced) is read from its local cache: the kernel
    never reads back global memory it writes, and the output stays a store only (as
    nvFuser's cacheFork leaves it)."""
    inputs = [cache_after(tv) for tv in fusion.inputs if isinstance(tv, TensorView) and tv.uses]
    outputs = []
    for tv in fusion.outputs:
        if isinstance(tv, TensorView) and tv.definition is not None:
            uses = list(tv.uses)
            cache = cache_before(tv)
            for use in uses:
                use.replace_input(tv, cache)
            outputs.append(cache)
    return IoCaches(inputs, outputs)


def computed_tensor(fusion: Fusion, name: int) -> TensorView:
    """The tensor named `name` as the kernel computes it: an output's local cache after
    cache_io (the tensor a schedule holds, reads and inlines), else the tensor itself."""
    tv = tensor_named(fusion, name)
    expr = tv.definition
    source = expr.input if isinstance(expr, LoadStoreOp) else None
    if tv in fusion.outputs and isinstance(source, TensorView) and source.definition is not None:
        return source
    return tv


def layout_order(tv: TensorView) -> list[IterDomain]:
    """The tensor's axes outermost first in memory (its allocation domain when it has
    one), reductions last: the order a schedule merges them in."""
    dims = [d for d in tv.domain.maybe_allocation if not d.is_reduction]
    return dims + [d for d in tv.logical if d.is_reduction]


def reorder_to(tv: TensorView, order: Sequence[IterDomain]) -> None:
    positions = {id(d): p for p, d in enumerate(tv.loop)}
    tv.reorder({positions[id(d)]: new for new, d in enumerate(order)})


def merge_all(tv: TensorView, start: int, stop: int) -> None:
    """Merge loop axes [start, stop) into one at `start`."""
    for _ in range(stop - start - 1):
        tv.merge(start)


def finish(
    fusion: Fusion,
    reference: TensorView,
    *,
    vectorized: set[int],
    limits: dict[int, int],
    scheduled: Sequence[TensorView] = (),
) -> None:
    """Replay the reference onto every tensor, give each loop ID its reference's
    parallel type, and inline as deep as `limits` allow."""
    propagate_from(fusion, reference, vectorized=vectorized, scheduled=scheduled)
    inline(fusion, limits)


def propagate_from(
    fusion: Fusion, reference: TensorView, *, vectorized: set[int], scheduled: Sequence[TensorView] = ()
) -> None:
    steps = propagation_steps(reference, lambda e: True, scheduled)
    propagate(reference, steps)
    tensors = scheduled_tensors(fusion)
    parallelize_like_reference(tensors, vectorized)
    inputs = {tv.name for tv in fusion.inputs if isinstance(tv, TensorView)}
    for tv in tensors:
        if tv.name in inputs:
            for dim in tv.loop:
                dim.parallel_type = ParallelType.Serial


def inline(fusion: Fusion, limits: dict[int, int]) -> None:
    inputs = {tv.name for tv in fusion.inputs if isinstance(tv, TensorView)}
    inline_most(scheduled_tensors(fusion), limits, inputs)


def scheduled_tensors(fusion: Fusion) -> list[TensorView]:
    """The tensors a kernel computes: those reaching an output, and their siblings (a
    Welford's count that nothing reads is still written by the op)."""
    found = {id(tv): tv for tv in fusion.used_tensors()}
    for expr in fusion.exprs():
        for out in expr.outputs:
            if isinstance(out, TensorView):
                found.setdefault(id(out), out)
    return list(found.values())


def position_of(tv: TensorView, kind: ParallelType) -> int | None:
    for pos, dim in enumerate(tv.loop):
        if dim.parallel_type == kind:
            return pos
    return None


def vector_width(
    group: GroupView, info: RuntimeInfo, inner_extents: Sequence[int], among: Sequence[TensorView] | None = None
) -> int:
    """The widest power of two whose accesses fit 16 bytes for every global tensor (or
    every one of `among`, those accessed in vectors) and divide every innermost
    contiguous extent."""
    if not info.vectorize:
        return 1
    tensors = list(among) if among is not None else [*group.inputs, *group.outputs]
    widest = max((tv.dtype.itemsize for tv in tensors), default=4)
    width = max(1, MAX_VECTOR_BYTES // max(widest, 1))
    while width > 1 and any(e % width for e in inner_extents):
        width //= 2
    return width


def inner_extent(group: GroupView, info: RuntimeInfo, tv: TensorView, inner_set: int) -> int | None:
    """The extent of `tv`'s innermost allocation axis when it is the axis `inner_set`
    and contiguous; None when the tensor cannot be read in vectors along it."""
    alloc = tv.domain.maybe_allocation
    for dim, contiguous in reversed(list(zip(alloc, tv.domain.contiguity, strict=True))):
        if dim.is_broadcast or dim.is_reduction:
            continue
        if group.id_map.exact(dim) != inner_set or not contiguous:
            return None
        return info.extent(dim)
    return 1


def unroll_factor(elements: int, per_block: int, sm_count: int) -> int:
    """Several loads in flight per thread, unless that leaves too few blocks for a few
    waves of the GPU."""
    for factor in (4, 2):
        if elements // (per_block * factor) >= 4 * sm_count:
            return factor
    return 1


def drop_output_hints(outputs: Sequence[TensorView], scheduler: str) -> list[HintDrop]:
    """Drop the inferred allocation domains of what a kernel writes in logical order."""
    drops = []
    for tv in outputs:
        if tv.domain.allocation_is_hint:
            tv.domain.drop_allocation_hint()
            drops.append(HintDrop(f"T{tv.name}", f"the {scheduler} scheduler writes outputs in logical order"))
    return drops
