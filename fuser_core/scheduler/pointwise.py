"""The pointwise scheduler: element-wise math, broadcasts, casts, pad/slice/cat.

The reference is the output covering every axis, ordered by its memory layout. The
1-D form merges all axes and splits `[BIDx, US, UR, TIDx, V]`; when some input is
broadcast along the outer (or inner) axes, the 2-D form merges the axes left and
right of a break point separately, `[BIDy, BIDx, US, UR, TIDx, V]`, so a bias is
read once per block row instead of once per element.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, ParallelType, Resize
from fuser_core.ir.tensor_exprs import SliceOp, downstream_uses
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler import common
from fuser_core.scheduler.base import (
    HeuristicParams,
    RejectCategory,
    Rejection,
    ScheduleRecord,
    SchedulerType,
    reject,
)
from fuser_core.scheduler.checks import (
    broadcast_rejection,
    covering_output,
    expr_eval_rejection,
    outputs_beyond_reference,
    propagation_rejection,
    uncovered_message,
    uncovered_numbers,
)
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.id_map import ancestor_sets, concrete_sets

THREADS_X = 128
MAX_GRID_Y = 65535
MIN_INNER_2D = THREADS_X * 8  # elements right of a 2-D break point: one block's worth


@dataclass(frozen=True)
class PointwiseParams(HeuristicParams):
    reference: int  # tensor name
    break_point: int  # 0: 1-D schedule; else axes [0, break_point) go to blockIdx.y
    vectorize: int
    unroll: int
    threads_x: int
    elements: int = field(compare=False)  # for the dump: what the schedule covers here
    scalar_access: tuple[int, ...] = ()  # global tensors not read or written in vectors


class PointwiseScheduler:
    type = SchedulerType.pointwise
    drops_output_hints = False

    def compile_time_check(self, group: GroupView) -> Rejection | None:
        rejection = expr_eval_rejection(self.type, group)
        if rejection is not None:
            return rejection
        if group.reductions:
            return reject(self.type, "no support for reduction ops", RejectCategory.unsupported)
        reference = covering_output(group, group.outputs)
        if reference is None:
            return reject(
                self.type,
                uncovered_message(group, group.outputs),
                RejectCategory.disjoint_domains,
                uncovered_numbers(group, group.outputs),
            )
        sliced = _sliced_away(group, reference)
        if sliced is not None:
            return reject(self.type, sliced, RejectCategory.disjoint_domains)
        only_broadcast = outputs_beyond_reference(group, reference)
        if only_broadcast is not None:
            return reject(self.type, only_broadcast, RejectCategory.disjoint_domains)
        return broadcast_rejection(self.type, group) or propagation_rejection(self.type, group, reference)

    def run_time_check(self, group: GroupView, info: RuntimeInfo) -> Rejection | None:
        return None

    def heuristics(self, group: GroupView, info: RuntimeInfo) -> PointwiseParams:
        reference = covering_output(group, group.outputs)
        assert reference is not None
        dims = [d for d in common.layout_order(reference) if not d.is_reduction]
        elements = max(1, info.numel(reference))
        break_point = _break_point(group, reference, dims)
        if break_point and _product(info, dims[:break_point]) > MAX_GRID_Y:
            break_point = 0
        if break_point and _product(info, dims[break_point:]) < MIN_INNER_2D:
            break_point = 0  # a block row would leave most of its threads idle
        inner_set = group.id_map.exact(dims[-1]) if dims else -1
        resized = _resize_links(group)
        amounts = _inner_resize_amounts(group, inner_set, resized)
        inner: list[int] = []
        scalar_access: list[int] = []
        through_resize = False
        for tv in (*group.inputs, *group.outputs):
            if _broadcast_downstream(group, tv, inner_set):
                scalar_access.append(tv.name)  # one of its reads is constant along the lanes
                continue
            extent = _inner(group, info, tv, inner_set)
            if extent is None and amounts is not None:
                # Along the inner axis only through pads, slices and cats: vectors stay
                # whole where every offset is a multiple of the width (RoPE's halves).
                extent = _inner_through_resizes(group, info, tv, inner_set, resized)
                through_resize = through_resize or extent is not None
            if extent is None:
                scalar_access.append(tv.name)
            else:
                inner.append(extent)
        right = _product(info, dims[break_point:])
        # A tensor read both straight and through a slice or pad of the inner axis is read
        # at every offset: the width divides all of them, and a run-time offset allows none.
        offsets = amounts or []
        vectorize = common.vector_width(group, info, [*inner, *offsets, right]) if dims and amounts is not None else 1
        unroll = common.unroll_factor(elements, THREADS_X * vectorize, info.device.sm_count)
        if through_resize:
            # Each offset read is its own register array: keep them few. Measured on the H100
            # (2026-12-07): RoPE at issue 2795's sizes with two 8-byte vectors a thread ran
            # 6.82 us against 6.30 with one (56 against 27 registers, half the blocks).
            unroll = 1
        return PointwiseParams(
            self.type, reference.name, break_point, vectorize, unroll, THREADS_X, elements, tuple(scalar_access)
        )

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord:
        assert isinstance(params, PointwiseParams)
        caches = common.cache_io(fusion)
        reference = common.tensor_named(fusion, params.reference)
        dims = [d for d in common.layout_order(reference) if not d.is_reduction]
        common.reorder_to(reference, dims)
        _schedule_reference(reference, params, len(dims))
        unswitch = common.position_of(reference, ParallelType.Unswitch)
        vectorized = common.vector_accessed(fusion, caches.inputs, params.scalar_access)
        common.propagate_from(fusion, reference, vectorized=vectorized)
        # Cached loads and stores are computed at the unswitch loop, so a thread issues all
        # its loads before the first use; the position is the tensor's own, which is fewer
        # loops than the reference's when it lacks a broadcast axis (a bias).
        # A cache written element by element gains nothing from its own loop nest (and
        # would repeat the index math there): it is inlined like the math. Loads read
        # element by element get their own nest where the loop is unrolled: each is a
        # separate load in flight before the first use (resize_pad's non-contiguous input,
        # on the H100: 63.2 -> 58.0 us end to end, against a load, a multiply and a store
        # per step).
        limits = {
            tv.name: _through(tv, reference.loop[unswitch]) if unswitch is not None else len(tv.loop)
            for tv in (*caches.inputs, *caches.outputs)
            if (params.vectorize > 1 and _vector_access(tv, vectorized, fusion))
            or (params.unroll > 1 and tv in caches.inputs)
        }
        common.inline(fusion, limits)
        return ScheduleRecord(reference=f"T{reference.name}")


def _vector_access(cache: TensorView, vectorized: set[int], fusion: Fusion) -> bool:
    """Whether a cache is the local side of a vector load or store."""
    if cache.name in vectorized:
        return True
    return any(out.name in vectorized for use in cache.uses for out in use.outputs if out in fusion.outputs)


def _through(tv: TensorView, target: IterDomain) -> int:
    """How many of the tensor's loops reach the one replayed from `target`, inclusive."""
    for pos, dim in enumerate(tv.loop):
        while dim is not None:
            if dim is target:
                return pos + 1
            dim = dim.replayed_from  # type: ignore[assignment]
    return len(tv.loop)


def _schedule_reference(tv: TensorView, params: PointwiseParams, rank: int) -> None:
    if rank == 0:
        return
    if params.break_point == 0:
        common.merge_all(tv, 0, rank)
        _split_inner(tv, 0, params)
        tv.split(0, 1)  # unswitch
        _parallelize(tv, [ParallelType.BIDx, ParallelType.Unswitch])
        return
    common.merge_all(tv, params.break_point, rank)
    common.merge_all(tv, 0, params.break_point)
    _split_inner(tv, 1, params)
    tv.split(1, 1)
    _parallelize(tv, [ParallelType.BIDy, ParallelType.BIDx, ParallelType.Unswitch])


def _split_inner(tv: TensorView, axis: int, params: PointwiseParams) -> None:
    """`axis` -> [rest, UR, TIDx, V]."""
    tv.split(axis, params.vectorize)
    tv.split(axis, params.threads_x)
    tv.split(axis, params.unroll)


def _parallelize(tv: TensorView, outer: list[ParallelType]) -> None:
    kinds = [*outer, ParallelType.Unroll, ParallelType.TIDx, ParallelType.Vectorize]
    for axis, kind in enumerate(kinds):
        tv.parallelize(axis, kind)


def _break_point(group: GroupView, reference: TensorView, dims: list) -> int:  # type: ignore[type-arg]
    """Where to cut the reference's axes for a 2-D schedule: at the boundary of an
    input that covers only the outer or only the inner axes (a bias or a row scale)."""
    sets = [group.id_map.exact(d) for d in dims]
    resized = _resize_links(group)
    for tv in group.inputs:
        have = _through_resizes(concrete_sets(group.id_map, tv), resized)
        if not have or have == set(sets):
            continue
        flags = [s in have for s in sets]
        for cut in range(1, len(sets)):
            if flags == [False] * cut + [True] * (len(sets) - cut) or flags == [True] * cut + [False] * (
                len(sets) - cut
            ):
                return cut
    return 0


def _sliced_away(group: GroupView, reference: TensorView) -> str | None:
    """Why `reference` cannot be the schedule's reference: it iterates a slice of an axis
    another output needs whole (issue 2395: `x[..., 16:]` and `where(m, 0, x)` both
    outputs). Loops over the slice would leave the rest of that output unwritten."""
    covered = ancestor_sets(group.id_map, reference, group.links)
    own = concrete_sets(group.id_map, reference)
    for expr in group.exprs:
        for tv in expr.outputs:
            if not isinstance(tv, TensorView):
                continue
            for dim in tv.logical:
                resize = dim.definition
                if not isinstance(resize, Resize) or not _may_shrink(expr, resize):
                    continue
                source = resize.inputs[0]
                assert isinstance(source, IterDomain)
                whole = group.id_map.exact(source)
                if group.id_map.exact(dim) not in covered or whole in own:
                    continue
                for out in group.outputs:
                    if out is not reference and whole in concrete_sets(group.id_map, out):
                        return (
                            f"reference T{reference.name} iterates a slice of an axis output T{out.name} "
                            f"needs whole (T{tv.name})"
                        )
    return None


def _may_shrink(expr: object, resize: Resize) -> bool:
    if isinstance(expr, SliceOp):
        return True
    return any(a.is_const and int(a.value) < 0 for a in (resize.left, resize.right))  # type: ignore[arg-type]


def _resizes(group: GroupView) -> Iterator[tuple[IterDomain, Resize]]:
    """Every axis a pad, slice or cat makes in the group, with its Resize."""
    for expr in group.exprs:
        for tv in expr.outputs:
            if isinstance(tv, TensorView):
                for dim in tv.logical:
                    if isinstance(dim.definition, Resize):
                        yield dim, dim.definition


def _resize_links(group: GroupView) -> dict[int, set[int]]:
    """Exact set -> the sets a pad, slice or cat makes of it (RoPE's half-width axis
    becomes the full head axis): an input varies along those too. Made once per group."""
    return group.memo("resize_links", lambda: _make_resize_links(group))


def _make_resize_links(group: GroupView) -> dict[int, set[int]]:
    links: dict[int, set[int]] = {}
    for dim, resize in _resizes(group):
        source = resize.inputs[0]
        assert isinstance(source, IterDomain)
        links.setdefault(group.id_map.exact(source), set()).add(group.id_map.exact(dim))
    return links


def _through_resizes(have: set[int], links: dict[int, set[int]]) -> set[int]:
    found, stack = set(have), list(have)
    while stack:
        for nxt in links.get(stack.pop(), ()):
            if nxt not in found:
                found.add(nxt)
                stack.append(nxt)
    return found


def _inner_resize_amounts(group: GroupView, inner_set: int, links: dict[int, set[int]]) -> list[int] | None:
    """The pad/slice offsets on the way into the reference's inner axis (absolute,
    non-zero); None when one of them is only known at run time."""
    amounts: list[int] = []
    for _dim, resize in _resizes(group):
        source = resize.inputs[0]
        assert isinstance(source, IterDomain)
        if inner_set not in _through_resizes({group.id_map.exact(source)}, links):
            continue
        for amount in (resize.left, resize.right):
            if not amount.is_const:
                return None
            if int(amount.value):  # type: ignore[arg-type]
                amounts.append(abs(int(amount.value)))  # type: ignore[arg-type]
    return amounts


def _inner_through_resizes(
    group: GroupView, info: RuntimeInfo, tv: TensorView, inner_set: int, links: dict[int, set[int]]
) -> int | None:
    """The inner extent of a tensor whose innermost axis becomes the reference's inner
    axis through resizes; None when it is not contiguous there or does not reach it."""
    own = next((d for d in reversed(tv.domain.maybe_allocation) if not d.is_broadcast and not d.is_reduction), None)
    if own is None or inner_set not in _through_resizes({group.id_map.exact(own)}, links):
        return None
    return common.inner_extent(group, info, tv, group.id_map.exact(own))


def _inner(group: GroupView, info: RuntimeInfo, tv: TensorView, inner_set: int) -> int | None:
    """The inner extent a vector access of `tv` must divide; None when `tv` is not
    accessed in vectors (it does not run along the reference's inner axis)."""
    if inner_set not in concrete_sets(group.id_map, tv):
        return None
    return common.inner_extent(group, info, tv, inner_set)


def _broadcast_downstream(group: GroupView, tv: TensorView, inner_set: int) -> bool:
    """Whether a tensor computed from `tv` is broadcast along the reference's inner axis
    while `tv` runs along it (directly or through resizes). Each use path is its own read of `tv` at the reference's
    loop: on that path all lanes of a vector stand for one element of `tv` (a [3, 2] x
    reshaped to [6] and broadcast to [1, 6, 1] beside x broadcast to [3, 1, 2]: the
    lanes walk the inner 2, the reshaped read stays put), so a vector load there reads
    neighbours it must not (past the end at the last element: fuzz seed 25 case 811)."""
    if not _through_resizes(concrete_sets(group.id_map, tv), _resize_links(group)) & {inner_set}:
        return False
    members = group.memo("expr_ids", lambda: {id(e) for e in group.exprs})
    return any(
        inner_set not in concrete_sets(group.id_map, out)
        and any(inner_set in group.links.get(group.id_map.exact(d), ()) for d in out.logical if d.is_broadcast)
        for _, out in downstream_uses(tv, within=members)
    )


def _product(info: RuntimeInfo, dims: list) -> int:  # type: ignore[type-arg]
    total = 1
    for d in dims:
        total *= info.extent(d)
    return total
