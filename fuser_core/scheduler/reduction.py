"""Reduction and persistent-normalization schedulers.

Both make the first reduction tensor the reference, merge its iteration axes into I
and its reduced axes into R, split them, rfactor the per-thread serial part into its
own tensor, and propagate from that partial result. They differ in R's split:

- inner (R is the fastest axis): `[BIDx, TIDy | (BIDy) rS, rUR, rTIDx, rV]`, threads
  along the reduction, and blockIdx.y over R (a grid reduction) when there are too few
  rows to fill the GPU;
- outer (R is slower than I): `[BIDx, (BIDy), rS, rTIDy, TIDx, V]`, threads along the
  iteration axis, each accumulating down its columns;
- persistent (inner or outer): R is split into a persistent batch held in registers or
  shared memory, so the row is read once and reused after the reduction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, ParallelType
from fuser_core.ir.tensor_exprs import LoadStoreOp, ReductionOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler import common
from fuser_core.scheduler.base import HeuristicParams, RejectCategory, Rejection, ScheduleRecord, SchedulerType, reject
from fuser_core.scheduler.checks import (
    covering_output,
    expr_eval_rejection,
    is_inner_reduction,
    needs_persistence,
    persistent_buffers,
    propagation_rejection,
    reduction_signature_rejection,
    uncovered_message,
    uncovered_numbers,
)
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.tensor_ops import rfactor

# Per-thread register budget for a persistent batch: what is left of 255 registers
# after indexing and temporaries, in bytes.
REGISTER_BUDGET_BYTES = 160 * 4
MAX_THREADS = 512
PERSISTENT_VECTORS = 4  # vector loads per thread a persistent row is aimed at


@dataclass(frozen=True)
class ReductionParams(HeuristicParams):
    reference: int
    inner: bool
    persistent: bool
    vectorize: int
    threads_reduction: int  # TIDx (inner) or TIDy (outer) along R
    threads_iteration: int  # TIDy (inner) or TIDx (outer) along I
    grid_reduction: int  # blockIdx.y blocks along R (1: none)
    persistent_batch: int  # serial R elements per thread held across the reduction (persistent)
    unroll: int
    # For the dump (a runtime is reused for other sizes as long as the rest agrees):
    rows: int = field(compare=False)  # product of iteration extents
    row_length: int = field(compare=False)  # product of reduced extents
    buffer_bytes_per_row: int = field(default=0, compare=False)
    buffer_in_shared_memory: bool = False
    buffers: tuple[int, ...] = ()  # persistent tensors, by name


class ReductionScheduler:
    type = SchedulerType.reduction
    persistent = False
    inner: bool | None = None  # None: either
    drops_output_hints = True  # it writes outputs in logical order

    def compile_time_check(self, group: GroupView) -> Rejection | None:
        rejection = expr_eval_rejection(self.type, group)
        if rejection is not None:
            return rejection
        if not group.reductions:
            return reject(self.type, "No reduction op to schedule")
        rejection = reduction_signature_rejection(self.type, group)
        if rejection is not None:
            return rejection
        reference = group.reduction_tvs()[0]
        if covering_output(group, [reference]) is None:
            return reject(
                self.type,
                uncovered_message(group, [reference]),
                RejectCategory.disjoint_domains,
                uncovered_numbers(group, [reference]),
            )
        persistent = needs_persistence(group)
        if persistent and not self.persistent:
            return reject(self.type, "need persistent buffers that reduction scheduler doesn't handle")
        if not persistent and self.persistent:
            return reject(self.type, "no persistent buffer: the reduced axes are not used after the reduction")
        if self.inner is not None and is_inner_reduction(group, reference) != self.inner:
            where = "outer" if self.inner else "inner"
            return reject(self.type, f"the reduction is an {where} reduction")
        return propagation_rejection(self.type, group, reference)

    def run_time_check(self, group: GroupView, info: RuntimeInfo) -> Rejection | None:
        if not self.persistent:
            return None
        row_bytes = _buffer_bytes_per_row(group, info)
        if row_bytes > info.device.shared_memory_per_block:
            return reject(
                self.type,
                f"not enough registers or shared memory for persistence: {row_bytes} bytes per row, "
                f"{info.device.shared_memory_per_block} bytes of shared memory per block",
                RejectCategory.persistent_buffer_too_large,
                (
                    ("persistent buffer bytes per row", str(row_bytes)),
                    ("budget: shared memory per block", str(info.device.shared_memory_per_block)),
                    ("persistent buffers", ", ".join(f"T{tv.name}" for tv in persistent_buffers(group))),
                ),
            )
        return None

    def heuristics(self, group: GroupView, info: RuntimeInfo) -> ReductionParams:
        reference = group.reduction_tvs()[0]
        inner = is_inner_reduction(group, reference)
        rows = max(1, info.numel(reference))
        length = max(1, info.numel(reference, include_reductions=True) // rows)
        vectorize = _vector_width(group, info, reference, inner, length, rows)
        if inner:
            return self._inner_params(group, info, reference, rows, length, vectorize)
        return self._outer_params(group, info, reference, rows, length, vectorize)

    def _inner_params(
        self, group: GroupView, info: RuntimeInfo, ref: TensorView, rows: int, length: int, vec: int
    ) -> ReductionParams:
        lanes = -(-length // vec)
        if self.persistent:
            # A few vectors per thread keep loads in flight and make the reductions cheap
            # (a row of up to 128 vectors reduces within one warp: shuffles, no barrier).
            threads = min(MAX_THREADS, _pow2_at_least(-(-lanes // PERSISTENT_VECTORS), 32))
        else:
            threads = min(MAX_THREADS, _pow2_at_least(min(lanes, MAX_THREADS), 32))
        rows_per_block = max(1, min(MAX_THREADS // threads, _pow2_floor(max(1, 128 // threads))))
        batch = -(-lanes // threads)
        grid = 1
        row_bytes = _buffer_bytes_per_row(group, info) if self.persistent else 0
        if not self.persistent and rows < info.device.sm_count and batch > 8:
            grid = min(_pow2_floor(batch // 8), 4 * info.device.sm_count // max(rows, 1), 65535)
            grid = max(grid, 1)
            batch = -(-batch // grid)
        unroll = _pow2_floor(min(4, batch)) if not self.persistent else 1
        return ReductionParams(
            self.type, ref.name, True, self.persistent, vec, threads, rows_per_block, grid, batch, unroll,
            rows, length, row_bytes, row_bytes // max(threads, 1) > REGISTER_BUDGET_BYTES,
            _buffers(group, self.persistent),
        )  # fmt: skip

    def _outer_params(
        self, group: GroupView, info: RuntimeInfo, ref: TensorView, rows: int, length: int, vec: int
    ) -> ReductionParams:
        lanes = -(-rows // vec)
        threads_x = min(128, _pow2_at_least(min(lanes, 128), 32))
        threads_y = max(1, min(MAX_THREADS // threads_x, _pow2_floor(length)))
        blocks = -(-lanes // threads_x)
        batch = -(-length // threads_y)
        grid = 1
        row_bytes = _buffer_bytes_per_row(group, info) if self.persistent else 0
        if not self.persistent and blocks < info.device.sm_count and batch > 16:
            grid = max(1, min(info.device.sm_count * 2 // blocks, batch // 16, 65535))
            batch = -(-batch // grid)
        unroll = 1 if self.persistent else min(4, _pow2_floor(max(batch, 1)))
        return ReductionParams(
            self.type, ref.name, False, self.persistent, vec, threads_y, threads_x, grid, batch, unroll,
            rows, length, row_bytes, row_bytes * threads_x // max(rows, 1) > REGISTER_BUDGET_BYTES * threads_x,
            _buffers(group, self.persistent),
        )  # fmt: skip

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord:
        assert isinstance(params, ReductionParams)
        caches = common.cache_io(fusion)
        reference = _reduction_tensor(common.tensor_named(fusion, params.reference))
        iteration_positions = _schedule_reference(reference, params)
        serial = [p for p, d in enumerate(reference.loop) if d.is_reduction and _is_serial(d.parallel_type)]
        partial = rfactor(reference, serial) if isinstance(reference.definition, ReductionOp) and serial else reference
        scheduled = [reference] if partial is not reference else []
        limits = {tv.name: iteration_positions for tv in caches.inputs if self.persistent}
        limits.update(dict.fromkeys(params.buffers, iteration_positions))
        # Global loads and stores both go in vectors (16-byte stores, not one store per element).
        vectorized = {tv.name for tv in caches.inputs} | {
            tv.name for tv in fusion.outputs if isinstance(tv, TensorView)
        }
        common.propagate_from(fusion, partial, vectorized=vectorized, scheduled=scheduled)
        _limit_to_own_iteration_loops(fusion, partial, iteration_positions, limits)
        for tv in caches.inputs:  # a vector load fills a register buffer; its elements are read from there
            if tv.loop and tv.loop[-1].parallel_type == ParallelType.Vectorize:
                limits[tv.name] = min(limits.get(tv.name, len(tv.loop)), len(tv.loop) - 1)
        common.inline(fusion, limits)
        _rfactor_siblings(fusion, partial, reference)
        return ScheduleRecord(reference=f"T{partial.name}")


class InnerPersistentScheduler(ReductionScheduler):
    type = SchedulerType.inner_persistent
    persistent = True
    inner = True


class OuterPersistentScheduler(ReductionScheduler):
    type = SchedulerType.outer_persistent
    persistent = True
    inner = False


def _limit_to_own_iteration_loops(
    fusion: Fusion, reference: TensorView, positions: int, limits: dict[int, int]
) -> None:
    """A persistent tensor is computed inside the row loops it has: a weight without the
    row axes is loaded once per thread, before them, and reused for every row."""
    rows = {id(_replay_root(d)) for d in reference.loop[:positions]}
    for tv in fusion.used_tensors():
        if tv.name not in limits:
            continue
        own = 0
        for dim in tv.loop:
            if id(_replay_root(dim)) not in rows:
                break
            own += 1
        limits[tv.name] = min(limits[tv.name], own)


def _replay_root(dim: IterDomain) -> IterDomain:
    while dim.replayed_from is not None:
        dim = dim.replayed_from
    return dim


def _is_serial(kind: ParallelType) -> bool:
    return kind in (ParallelType.Serial, ParallelType.Unroll, ParallelType.Unswitch, ParallelType.Vectorize)


def _reduction_tensor(tv: TensorView) -> TensorView:
    """The tensor the reduction op writes: the local cache when the output was cached."""
    expr = tv.definition
    if isinstance(expr, LoadStoreOp) and isinstance(expr.input, TensorView) and expr.input.definition is not None:
        return expr.input
    return tv


def _schedule_reference(tv: TensorView, params: ReductionParams) -> int:
    """Transform the reduction tensor; returns how many outer loop axes are iteration."""
    iteration = [d for d in common.layout_order(tv) if not d.is_reduction]
    reduced = [d for d in tv.logical if d.is_reduction]
    common.reorder_to(tv, iteration + reduced)
    n_iter = len(iteration)
    common.merge_all(tv, n_iter, len(tv.loop))
    if n_iter:
        common.merge_all(tv, 0, n_iter)
    if params.inner:
        return _inner_loops(tv, params, n_iter > 0)
    return _outer_loops(tv, params, n_iter > 0)


def _inner_loops(tv: TensorView, params: ReductionParams, has_iteration: bool) -> int:
    r = 1 if has_iteration else 0
    tv.split(r, params.vectorize)
    if params.persistent:  # [.., batch, ceilDiv(R/V, batch), V]: a register buffer of a constant size
        tv.split(r, params.persistent_batch, inner_split=False)
    else:
        tv.split(r, params.threads_reduction)  # [.., R/(V*T), T, V]
    _parallelize_reduction(tv, r, [ParallelType.Serial, ParallelType.TIDx, ParallelType.Vectorize], params)
    if not has_iteration:
        return 0
    tv.split(0, params.threads_iteration)
    tv.parallelize(0, ParallelType.BIDx)
    tv.parallelize(1, ParallelType.TIDy)
    return 2


def _outer_loops(tv: TensorView, params: ReductionParams, has_iteration: bool) -> int:
    if has_iteration:  # [I, R] -> [I/(V*T), T, V, R]
        tv.split(0, params.vectorize)
        tv.split(0, params.threads_iteration)
    r = 3 if has_iteration else 0
    if params.persistent:  # R -> [batch, ceilDiv(R, batch)]: a register buffer of a constant size
        tv.split(r, params.persistent_batch, inner_split=False)
    else:
        tv.split(r, params.threads_reduction)  # R -> [R/TY, TY]
    _parallelize_reduction(tv, r, [ParallelType.Serial, ParallelType.TIDy], params)
    if not has_iteration:
        return 0
    tv.parallelize(0, ParallelType.BIDx)
    tv.parallelize(1, ParallelType.TIDx)
    tv.parallelize(2, ParallelType.Vectorize)
    n_red = len(tv.loop) - 3
    tv.reorder({1: 1 + n_red, 2: 2 + n_red, **{3 + k: 1 + k for k in range(n_red)}})
    return 1


def _parallelize_reduction(tv: TensorView, r: int, kinds: list[ParallelType], params: ReductionParams) -> None:
    """Bind the reduction's loop axes from `r` on; with a grid reduction, an outer split
    of blockIdx.y blocks comes first."""
    if params.grid_reduction > 1:
        tv.split(r, params.grid_reduction, inner_split=False)
        kinds = [ParallelType.BIDy, *kinds]
    for offset, kind in enumerate(kinds):
        tv.parallelize(r + offset, kind)
    if params.unroll > 1:  # several independent loads in flight per thread before they are summed
        serial = r + kinds.index(ParallelType.Serial)
        tv.split(serial, params.unroll)
        tv.parallelize(serial + 1, ParallelType.Unroll)


def _rfactor_siblings(fusion: Fusion, partial: TensorView, reference: TensorView) -> None:
    """Every other reduction of the kernel gets the same serial/parallel split."""
    done = {partial.name, reference.name}
    for tv in fusion.used_tensors():
        expr = tv.definition
        if tv.name in done or not isinstance(expr, ReductionOp) or expr.outputs[0] is not tv:
            continue
        if isinstance(expr.input, TensorView) and expr.input.name == partial.name:
            continue
        serial = [p for p, d in enumerate(tv.loop) if d.is_reduction and _is_serial(d.parallel_type)]
        has_parallel = any(d.is_reduction and not _is_serial(d.parallel_type) for d in tv.loop)
        if serial and has_parallel:
            rfactor(tv, serial)


def _buffers(group: GroupView, persistent: bool) -> tuple[int, ...]:
    return tuple(tv.name for tv in persistent_buffers(group)) if persistent else ()


def _buffer_bytes_per_row(group: GroupView, info: RuntimeInfo) -> int:
    """Bytes of every persistent buffer for one row (one iteration of the outer axes)."""
    reference = group.reduction_tvs()[0]
    rows = max(1, info.numel(reference))
    total = 0
    for tv in persistent_buffers(group):
        total += info.numel(tv) // rows * tv.dtype.itemsize
    return total


def _vector_width(group: GroupView, info: RuntimeInfo, ref: TensorView, inner: bool, length: int, rows: int) -> int:
    """Vectors run along the merged fastest axis (R for an inner reduction, I for an
    outer one): only the part of it that is contiguous in memory, the trailing axes of
    the merged set before another axis comes between them, can be read in vectors."""
    if inner:
        vector_axis = [d for d in ref.logical if d.is_reduction][-1]
    else:
        iteration = [d for d in common.layout_order(ref) if not d.is_reduction]
        if not iteration:  # an outer-classified reduction to a scalar: no iteration axis to vectorize
            return 1
        vector_axis = iteration[-1]
    vector_set = group.id_map.exact(vector_axis)
    if _reached_through_transforms(group, vector_set):
        return 1
    for tv in group.inputs:  # each global tensor along that axis must hold it innermost, contiguous
        holds = any(group.id_map.exact(d) == vector_set for d in tv.logical)
        if holds and common.inner_extent(group, info, tv, vector_set) is None:
            return 1
    for tv in group.outputs:  # written in logical order (the schedule drops layout hints)
        dims = [d for d in tv.logical if not d.is_broadcast and not d.is_reduction]
        holds = any(group.id_map.exact(d) == vector_set for d in dims)
        if holds and group.id_map.exact(dims[-1]) != vector_set:
            return 1
    reduced = [d.is_reduction for d in ref.logical]
    contiguous = 1
    for dim, is_reduced in reversed(list(zip(ref.logical, reduced, strict=True))):
        if dim.is_broadcast:
            continue
        if is_reduced != inner:
            break
        contiguous *= max(1, info.extent(dim))
    return common.vector_width(group, info, [length if inner else rows, contiguous])


def _reached_through_transforms(group: GroupView, vector_set: int) -> bool:
    """Whether a global tensor runs along the vector axis only through a pad, slice or
    cat on the way (a cat of run-time extents, test_cat_symbolic): its vector accesses
    start at offsets (piece boundaries, pad widths) that nothing here proves aligned, so
    they stay scalar. A reshape alone keeps them vectorized: the inner-extent checks
    below cover its splits and merges."""
    resized = group.id_map.resized_sets()
    made: set[int] = set()
    stack = [vector_set]
    while stack:
        key = stack.pop()
        if key not in made:
            made.add(key)
            stack.extend(group.id_map.made_from(key))
    if not made & resized:
        return False
    made.discard(vector_set)
    return any(group.id_map.exact(d) in made for tv in (*group.inputs, *group.outputs) for d in tv.logical)


def _pow2_at_least(n: int, floor: int) -> int:
    value = floor
    while value < n:
        value *= 2
    return value


def _pow2_floor(n: int) -> int:
    value = 1
    while value * 2 <= n:
        value *= 2
    return value
