"""The transpose scheduler: inputs and outputs disagree on their innermost axis.

Reading one tensor along its fast axis means writing the other across its slow one,
so the data goes through a 32 x 32 tile in shared memory (64 x 64 for large
transposes): the reference (an output) splits both inner axes by the tile, merges the
tile's outer parts and every other axis into blockIdx.x, and walks the tile with
threadIdx.x along its own fast axis; each staged input (a shared-memory cache) walks
the same tile with threadIdx.x along *its* fast axis. Both sides of global memory are
then accessed in whole lines.

The reference's side (its outputs and the inputs read along its fast axis) moves in
vectors of up to 16 bytes along that axis, as nvFuser's transpose scheduler does: a
thread takes `vectorize` consecutive elements of a tile row. The staged side stays
element-wise: its shared-memory tile keeps one element of padding a row, so the
reference's reads of a vector's elements (one a row) fall in different banks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, ParallelType
from fuser_core.ir.tensor_exprs import CatOp, PadOp, SliceOp
from fuser_core.ir.tensor_view import MemoryType, TensorView
from fuser_core.scheduler import common
from fuser_core.scheduler.base import HeuristicParams, Rejection, ScheduleRecord, SchedulerType, reject
from fuser_core.scheduler.checks import broadcast_rejection, covering_output, expr_eval_rejection
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.id_map import IdMap, concrete_sets

TILE = 32
THREADS = 128
# Large transposes take 64 x 64 tiles, 256 threads (16 elements a thread): the barrier and
# the tile's index math amortized over four times the elements. H100, transpose_add
# (4096 x 8192 floats, 16-byte vectors): 190.8 -> 187.9 us; 32 x 32 tiles with 256
# threads ran 235.8. Inductor's autotuner picks the same 64 x 64 x 256 for that shape.
LARGE_TILE = 64
LARGE_TILE_THREADS = 256
LARGE_TILE_MIN_TILES_PER_SM = 8  # enough 64 x 64 tiles for every SM several times over
LARGE_TILE_MIN_BLOCKS_PER_SM = 4  # the staged tiles' shared memory must leave room for these
RESIZE_OPS = (PadOp, SliceOp, CatOp)


@dataclass(frozen=True)
class TransposeParams(HeuristicParams):
    reference: int
    tile: int
    threads: int
    staged: tuple[int, ...]  # inputs read along the other inner axis, through shared memory
    vectorize: int = 1  # elements a vector access along the reference's fast axis
    scalar_access: tuple[int, ...] = ()  # unstaged inputs and outputs accessed element-wise


class TransposeScheduler:
    type = SchedulerType.transpose
    drops_output_hints = False

    def compile_time_check(self, group: GroupView) -> Rejection | None:
        rejection = expr_eval_rejection(self.type, group)
        if rejection is not None:
            return rejection
        if group.reductions:
            return reject(self.type, "no support for reduction ops")
        if any(isinstance(e, RESIZE_OPS) for e in group.exprs):
            return reject(self.type, "pad, slice and cat are scheduled by the pointwise scheduler")
        reference = covering_output(group, group.outputs)
        if reference is None or not _staged(group, reference):
            return reject(self.type, "cannot find two mismatching inner most dimensions")
        ref_sets = concrete_sets(group.id_map, reference)
        for tv in _staged(group, reference):
            if not ref_sets <= concrete_sets(group.id_map, tv):
                # Its tile's block index is its own axes' decomposition: an axis it only
                # broadcasts would be missing from it, and the blocks past the first of
                # that axis would load no tile (seed 7 case 1769).
                return reject(
                    self.type,
                    f"staged input T{tv.name} broadcasts an axis the reference T{reference.name} iterates",
                )
        return broadcast_rejection(self.type, group)

    def run_time_check(self, group: GroupView, info: RuntimeInfo) -> Rejection | None:
        reference = covering_output(group, group.outputs)
        assert reference is not None
        staged = _staged(group, reference)
        small = [d for d in (_inner(reference), _inner(staged[0])) if d is not None and info.extent(d) < TILE]
        if small:
            return reject(self.type, f"transposed inner dimension {small[0]} is shorter than a {TILE}-wide tile")
        shared = _tiles_bytes(TILE, staged)
        if shared > info.device.shared_memory_per_block:
            return reject(
                self.type,
                f"its {len(staged)} staged inputs need {shared} bytes of shared memory as {TILE} x {TILE} "
                f"tiles, more than a block's {info.device.shared_memory_per_block}",
            )
        return None

    def heuristics(self, group: GroupView, info: RuntimeInfo) -> TransposeParams:
        reference = covering_output(group, group.outputs)
        assert reference is not None
        staged_tvs = _staged(group, reference)
        staged = tuple(tv.name for tv in staged_tvs)
        ref_inner = _inner(reference)
        assert ref_inner is not None
        inner_set = group.id_map.exact(ref_inner)
        along, extents, scalar = [], [], []
        for tv in (*group.inputs, *group.outputs):
            if tv in staged_tvs:
                continue
            extent = common.inner_extent(group, info, tv, inner_set)
            if extent is None or extent == 1:  # another fast axis, or constant along this one
                scalar.append(tv.name)
            else:
                along.append(tv)
                extents.append(extent)
        width = common.vector_width(group, info, extents, among=along) if along else 1
        tile, threads = TILE, THREADS
        staged_inner = _inner(staged_tvs[0])
        assert staged_inner is not None
        elements = math.prod(info.extent(d) for d in reference.logical if not d.is_reduction)
        large = min(info.extent(ref_inner), info.extent(staged_inner)) >= LARGE_TILE
        many = elements >= LARGE_TILE * LARGE_TILE * LARGE_TILE_MIN_TILES_PER_SM * info.device.sm_count
        shared = _tiles_bytes(LARGE_TILE, staged_tvs)
        if large and many and shared * LARGE_TILE_MIN_BLOCKS_PER_SM <= info.device.shared_memory_per_sm:
            tile, threads = LARGE_TILE, LARGE_TILE_THREADS
        vectorize = max(1, min(width, tile * tile // threads))  # every thread keeps a vector
        return TransposeParams(self.type, reference.name, tile, threads, staged, vectorize, tuple(scalar))

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord:
        assert isinstance(params, TransposeParams)
        caches = common.cache_io(fusion)
        id_map = IdMap([e for e in fusion.exprs() if e.is_tensor_op()])
        reference = common.tensor_named(fusion, params.reference)
        staged = [c for c in caches.inputs if c.definition.inputs[0].name in params.staged]  # type: ignore[union-attr]
        source_inner = _inner(staged[0].definition.inputs[0])  # type: ignore[arg-type, union-attr]
        assert source_inner is not None
        inner_sets = (id_map.exact(source_inner), id_map.exact(_inner(reference)))  # type: ignore[arg-type]
        # Every side merges the axes outside the tile into blockIdx in the reference's
        # order, so that a block index names the same tile on both sides.
        outer_order = [id_map.exact(d) for d in common.layout_order(reference) if not d.is_reduction]
        _tile(reference, id_map, inner_sets, params, fast_second=True, outer_order=outer_order)
        vectorized: set[int] = set()
        if params.vectorize > 1:
            unstaged = [c for c in caches.inputs if c not in staged]
            vectorized = common.vector_accessed(fusion, unstaged, params.scalar_access)
        common.propagate_from(fusion, reference, vectorized=vectorized)
        for cache in staged:
            cache.memory_type = MemoryType.Shared
            cache.domain.loop = list(cache.logical)
            _tile(cache, id_map, inner_sets, params, fast_second=False, outer_order=outer_order)
            cache.loop[0].replayed_from = reference.loop[0]  # the same block: tiles meet in shared memory
        # The other inputs' loads get their own nest in the tile's second pass: all of a
        # thread's loads in flight before its first store (a store may alias a later load).
        limits = {c.name: 1 for c in caches.inputs if c not in staged}
        # A vector stored from a local cache: the cache is filled in its own loops (inside
        # the tile's serial loop), then stored a vector at a time.
        stored_in_vectors = [c for c in caches.outputs if any(o.name in vectorized for u in c.uses for o in u.outputs)]
        limits.update({c.name: 2 for c in stored_in_vectors})
        common.inline(fusion, limits)
        names = ", ".join(f"T{c.name}" for c in staged)
        return ScheduleRecord(reference=f"T{reference.name}", notes=[f"staged through shared memory: {names}"])


def _tiles_bytes(tile: int, staged: list[TensorView]) -> int:
    """The shared memory of the staged inputs' tiles (a padding element a row)."""
    return sum(tile * (tile + 1) * tv.dtype.itemsize for tv in staged)


def _inner(tv: TensorView) -> IterDomain | None:
    for dim in reversed(tv.domain.maybe_allocation):
        if not dim.is_broadcast and not dim.is_reduction:
            return dim
    return None


def _staged(group: GroupView, reference: TensorView) -> list[TensorView]:
    """Inputs whose innermost axis is another axis of the reference than its own."""
    ref_inner = _inner(reference)
    if ref_inner is None:
        return []
    ref_sets = {group.id_map.exact(d) for d in reference.logical}
    found = []
    for tv in group.inputs:
        inner = _inner(tv)
        if inner is None:
            continue
        key = group.id_map.exact(inner)
        holds_both = group.id_map.exact(ref_inner) in concrete_sets(group.id_map, tv)
        if key != group.id_map.exact(ref_inner) and key in ref_sets and holds_both:
            found.append(tv)
    return found


def _tile(
    tv: TensorView,
    id_map: IdMap,
    inner_sets: tuple[int, int],
    params: TransposeParams,
    fast_second: bool,
    outer_order: list[int],
) -> None:
    """[others..., in1, in2] -> [BIDx, serial, TIDx] over `params.tile`-wide tiles; threadIdx.x
    runs along in2 (the reference's fast axis) when `fast_second`, else along in1.
    The reference's side ends in a vector along in2: [BIDx, serial, TIDx, V]."""
    dims = [d for d in common.layout_order(tv) if not d.is_reduction]
    by_set = {id_map.exact(d): d for d in dims}
    first, second = by_set[inner_sets[0]], by_set[inner_sets[1]]
    others = [d for d in dims if d is not first and d is not second]
    rank = {key: pos for pos, key in enumerate(outer_order)}
    others.sort(key=lambda d: rank.get(id_map.exact(d), len(rank)))  # stable: unknown ones keep their order
    common.reorder_to(tv, [*others, first, second])
    n = len(others)
    tv.split(n + 1, params.tile)  # [.., in1, in2o, in2i]
    tv.split(n, params.tile)  # [.., in1o, in1i, in2o, in2i]
    tv.reorder({n + 1: n + 2, n + 2: n + 1})  # [.., in1o, in2o, in1i, in2i]
    if not fast_second:
        tv.reorder({n + 2: n + 3, n + 3: n + 2})
    vector = params.vectorize if fast_second else 1
    if vector > 1:
        tv.split(n + 3, vector)  # [.., in1o, in2o, in1i, in2i / V, V]
    common.merge_all(tv, 0, n + 2)  # [blocks, tile rows, tile columns(, V)]
    tv.merge(1)
    tv.split(1, params.threads)  # [blocks, serial, TIDx(, V)]
    tv.parallelize(0, ParallelType.BIDx)
    tv.parallelize(2, ParallelType.TIDx)
    if vector > 1:
        tv.parallelize(3, ParallelType.Vectorize)
