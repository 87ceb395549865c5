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

from dataclasses import dataclass, field, replace

from fuser_core.ir.evaluator import UnboundValue
from fuser_core.ir.fusion import Fusion
from fuser_core.ir.iter_domain import IterDomain, ParallelType
from fuser_core.ir.tensor_exprs import LoadStoreOp, ReductionOp, feeds_reduction
from fuser_core.ir.tensor_view import MemoryType, TensorView, filled_contiguity
from fuser_core.scheduler import common
from fuser_core.scheduler.base import HeuristicParams, RejectCategory, Rejection, ScheduleRecord, SchedulerType, reject
from fuser_core.scheduler.checks import (
    costly_between_reductions,
    covering_output,
    expr_eval_rejection,
    is_inner_reduction,
    needs_persistence,
    outputs_beyond_reference,
    persistent_buffers,
    projected_buffers,
    propagation_rejection,
    read_after_reductions,
    read_before_reductions,
    reduction_signature_rejection,
    uncovered_message,
    uncovered_numbers,
)
from fuser_core.scheduler.group_view import GroupView, RuntimeInfo
from fuser_core.scheduler.id_map import IdMap, concrete_sets, reduction_sets
from fuser_core.scheduler.persistent_budget import (
    REGISTER_OVERHEAD,
    REGISTER_OVERHEAD_EXP,
    PersistentSplit,
    choose_split,
    with_most_blocks,
)
from fuser_core.scheduler.rereading import has_exp, why_hold
from fuser_core.scheduler.tensor_ops import rfactor
from fuser_core.scheduler.welford_translation import translatable_in, translate_welfords

# Per-thread register budget for a persistent batch: what is left of 255 registers
# after indexing and temporaries, in bytes.
REGISTER_BUDGET_BYTES = 160 * 4
MAX_THREADS = 512
INNER_SERIAL_VECTORS = 4  # vectors a thread sums serially in a non-persistent inner reduction
SHARED_ROWS_PER_BLOCK = 8  # most rows a block takes because they read one input row
SHARED_ROWS_BLOCK = 256  # threads of a block of such rows
# Elements of each input a thread of a looping outer reduction loads per step (unroll x
# vector): four rows of 4-wide vectors, two of 8-wide bf16 ones (four of those took 109
# registers, one block per SM, on layer norm backward's columns: 186 -> 345 us on the H100).
OUTER_UNROLLED_ELEMENTS = 16
# Persistent buffers go to shared memory when registers would spill, unless the disable
# option `shared_persistence` is set (RuntimeInfo.shared_persistence). H100 A/B
# (2026-11-26): cross_entropy_bwd 556 us spilling registers, 614 us with the tile laid out
# [batch, TIDx, V] (8-way bank conflicts), 461 us laid out [batch, V, TIDx] (_lanes_innermost).
SHARED_SCRATCH_BYTES = 1024 * 8  # a block reduction's shared scratch, at most (1024 threads, 8 bytes)


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
    # Inner persistent only (0 elsewhere): blockDim.x padded to a warp multiple (the lanes
    # past the row are predicated off), and the blocks per SM the registers are sized for.
    padded_threads: int = 0
    min_blocks_per_sm: int = 0
    registers_per_thread: int = field(default=0, compare=False)  # the budget `__launch_bounds__` asks for
    buffer_registers_per_thread: int = field(default=0, compare=False)  # what a thread holds across the row
    occupancy_warps_per_sm: int = field(default=0, compare=False)
    # False where what a thread holds in registers outgrows those of the largest block:
    # the kernel will spill (with the buffers in registers, it goes to shared memory first).
    fits_in_registers: bool = field(default=True, compare=False)
    # Inner persistent: its Welfords run as two block sums over the row in registers
    # (welford_translation), not one division per element.
    welford_translated: bool = False
    # Inner persistent: transcendental results between two reductions kept in registers
    # rather than computed twice (checks.costly_between_reductions), by name.
    kept_results: tuple[int, ...] = ()
    # Inner persistent: float buffers cast from 16-bit inputs held as those inputs (`buffers`
    # names the inputs; checks.projected_buffers).
    buffers_projected_to_inputs: bool = False
    # Inner-outer persistent only (0 elsewhere): blocks along the rows, each looping over
    # its share of them serially while its column sums accumulate (inner_outer).
    row_blocks: int = 0
    # Rows of a block's loop (inner_outer) held and reduced together: one round of barriers
    # for the group's block reductions (ParallelType.Group; codegen/lower/row_groups.py).
    row_group: int = 1
    # Inner-outer persistent: its row blocks are one wave, so its column sums fold in every
    # block after a grid barrier (a cooperative launch), not serially in the last blocks.
    # Asked of codegen, which keeps the tree where the kernel's registers do not allow the
    # blocks per SM the wave assumed (the kernel_ir dump says which it did).
    cooperative_grid: bool = False
    # An inner normalization that re-reads its row after the reduction (rereading): the
    # outputs (by name) it stores evict-first (`st.global.cs`, vectorized stores), keeping L2
    # for the rows. Those that no later kernel reads: a reader would want them in L2.
    streaming_stores: tuple[int, ...] = ()

    def shown(self) -> list[tuple[str, object]]:
        """Every parameter; the inner persistent ones only for an inner persistent kernel,
        the row blocks only for an inner-outer one."""
        shown = super().shown()
        if not self.row_blocks:
            shown = [(name, value) for name, value in shown if name not in _INNER_OUTER_ONLY]
        if self.padded_threads:
            return shown
        return [(name, value) for name, value in shown if name not in _INNER_PERSISTENT_ONLY]


_INNER_OUTER_ONLY = ("row_blocks", "row_group", "cooperative_grid")
_INNER_PERSISTENT_ONLY = (
    "padded_threads",
    "min_blocks_per_sm",
    "registers_per_thread",
    "buffer_registers_per_thread",
    "occupancy_warps_per_sm",
    "fits_in_registers",
    "welford_translated",
    "kept_results",
    "buffers_projected_to_inputs",
)


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
        rejection = _broadcast_along_own_reduction(self.type, group, reference)
        if rejection is not None:
            return rejection
        only_broadcast = outputs_beyond_reference(group, reference)
        if only_broadcast is not None:
            return reject(self.type, only_broadcast, RejectCategory.disjoint_domains)
        persistent = needs_persistence(group)
        # An inner normalization may re-read its row instead (rereading): sizes decide.
        if persistent and not self.persistent and not is_inner_reduction(group, reference):
            return reject(self.type, "need persistent buffers that reduction scheduler doesn't handle")
        if not persistent and self.persistent:
            return reject(self.type, "no persistent buffer: the reduced axes are not used after the reduction")
        if self.inner is not None and is_inner_reduction(group, reference) != self.inner:
            where = "outer" if self.inner else "inner"
            return reject(self.type, f"the reduction is an {where} reduction")
        return propagation_rejection(self.type, group, reference)

    def run_time_check(self, group: GroupView, info: RuntimeInfo) -> Rejection | None:
        rejection = _resized_onto_own_reduction(self.type, group, group.reduction_tvs()[0], info)
        if rejection is not None:
            return rejection
        if not self.persistent:
            if not needs_persistence(group):
                return None
            hold = why_hold(group, info, group.reduction_tvs()[0])
            if hold is None:
                return None
            return reject(self.type, f"need persistent buffers that reduction scheduler doesn't handle: {hold}")
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

    def heuristics(
        self,
        group: GroupView,
        info: RuntimeInfo,
        accumulators: int = 0,
        most_blocks: bool = True,
        row_group: int = 1,
    ) -> ReductionParams:
        """`accumulators`: bytes a thread holds per element of its row besides the row's
        own (an inner-outer kernel's column sums); `most_blocks`: a persistent split takes
        the blocks per SM its registers allow (persistent_budget.with_most_blocks);
        `row_group`: rows a thread holds at once (an inner-outer kernel's grouped rows),
        their buffers projected to the inputs where they can be."""
        return self._params(group, info, None, accumulators, most_blocks, row_group)

    def with_grid_split(self, group: GroupView, info: RuntimeInfo, grid: int) -> ReductionParams:
        """The non-persistent schedule of `group` with `grid` blocks along the reduction
        (1: no grid split), whatever the heuristic would choose: a candidate for the kernel
        choice at run time (a normalization re-reads its inputs after each reduction)."""
        return ReductionScheduler()._params(group, info, grid)

    def _params(
        self,
        group: GroupView,
        info: RuntimeInfo,
        grid: int | None,
        accumulators: int = 0,
        most_blocks: bool = True,
        row_group: int = 1,
    ) -> ReductionParams:
        reference = group.reduction_tvs()[0]
        inner = is_inner_reduction(group, reference)
        rows = max(1, info.numel(reference))
        length = max(1, info.numel(reference, include_reductions=True) // rows)
        # A normalization re-reading its row (rereading) sizes its vectors as a persistent one.
        normalization = self.persistent or needs_persistence(group)
        vectorize = _vector_width(group, info, reference, inner, length, rows, normalization)
        if grid is None and normalization:
            grid = 1  # a row re-read after its reduction needs the whole row's result in its block
        if inner and self.persistent:
            return _inner_persistent_params(
                group, info, reference, rows, length, vectorize, accumulators, most_blocks, row_group
            )
        if inner:
            params = self._inner_params(group, info, reference, rows, length, vectorize, grid)
            # cross_entropy_bwd's rows of 32,064: 256.4 -> 253.1 us on the H100 (RESULTS,
            # twenty-fourth part); a pointwise kernel's streaming stores lost 9% (sixteenth).
            return replace(params, streaming_stores=_final_outputs(group) if normalization else ())
        return self._outer_params(group, info, reference, rows, length, vectorize, grid)

    def _inner_params(
        self, group: GroupView, info: RuntimeInfo, ref: TensorView, rows: int, length: int, vec: int, grid: int | None
    ) -> ReductionParams:
        lanes = -(-length // vec)
        threads = min(MAX_THREADS, _pow2_at_least(min(lanes, MAX_THREADS), 32))
        # With rows to fill every SM, a row takes fewer threads, each summing several
        # vectors: one block reduction per row costs more than a thread's serial adds
        # (nvFuser's inner reduction targets an unroll of about four vectors too).
        filling = _pow2_at_least(-(-info.device.sm_count * info.device.max_threads_per_sm // rows), 32)
        threads = min(threads, max(filling, _pow2_at_least(-(-lanes // INNER_SERIAL_VECTORS), 32)))
        rows_per_block = max(1, min(MAX_THREADS // threads, _pow2_floor(max(1, 128 // threads))))
        shared = _pow2_floor(min(_rows_sharing_an_input(group, info, ref), SHARED_ROWS_PER_BLOCK))
        if shared > rows_per_block and rows >= shared * info.device.sm_count:
            # Consecutive rows read one row of an input (x of x @ w.T meets w's rows): one
            # block takes them all, a warp a row, and the rows after the first find it in L1
            # (linear_output_order: 44.8 -> 37.7 us on the H100, against 2 rows of 64 threads).
            rows_per_block = shared
            threads = max(32, min(threads, SHARED_ROWS_BLOCK // shared))
        batch = -(-lanes // threads)
        if grid is None:  # blockIdx.y along the row when there are too few rows to fill the GPU
            grid = 1
            if rows < info.device.sm_count and batch > 8:
                grid = max(1, min(_pow2_floor(batch // 8), 4 * info.device.sm_count // max(rows, 1), 65535))
        batch = -(-batch // grid)
        unroll = _pow2_floor(min(4, batch))
        return ReductionParams(
            self.type, ref.name, True, False, vec, threads, rows_per_block, grid, batch, unroll, rows, length
        )  # fmt: skip

    def _outer_params(
        self, group: GroupView, info: RuntimeInfo, ref: TensorView, rows: int, length: int, vec: int, grid: int | None
    ) -> ReductionParams:
        lanes = -(-rows // vec)
        threads_x = min(128, _pow2_at_least(min(lanes, 128), 32))
        threads_y = max(1, min(MAX_THREADS // threads_x, _pow2_floor(length)))
        blocks = -(-lanes // threads_x)
        batch = -(-length // threads_y)
        row_bytes = _buffer_bytes_per_row(group, info) if self.persistent else 0
        if grid is None:  # blockIdx.y down the columns when too few blocks fill the GPU
            grid = 1
            if not self.persistent and blocks < info.device.sm_count and batch > 16:
                grid = max(1, min(info.device.sm_count * 2 // blocks, batch // 16, 65535))
        batch = -(-batch // grid)
        unroll = 1 if self.persistent else min(max(1, OUTER_UNROLLED_ELEMENTS // vec), 4, _pow2_floor(max(batch, 1)))
        return ReductionParams(
            self.type, ref.name, False, self.persistent, vec, threads_y, threads_x, grid, batch, unroll,
            rows, length, row_bytes, row_bytes * threads_x // max(rows, 1) > REGISTER_BUDGET_BYTES * threads_x,
            _buffers(group, self.persistent),
        )  # fmt: skip

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord:
        assert isinstance(params, ReductionParams)
        sums_of = translate_welfords(fusion) if params.welford_translated else {}
        caches = common.cache_io(fusion)
        fusion.min_blocks_per_sm = params.min_blocks_per_sm
        fusion.streaming_stores = frozenset(params.streaming_stores)
        reference = sums_of.get(params.reference) or _reduction_tensor(common.tensor_named(fusion, params.reference))
        sources = {cache.name: cache.definition.inputs[0] for cache in caches.inputs}  # type: ignore[union-attr]
        # (before the reference is transformed and rfactored: its logical axes are the group's)
        outputs = [tv for tv in fusion.outputs if isinstance(tv, TensorView)]
        scalar = _broadcast_along_vectors(fusion, reference, params.inner, [*sources.values(), *outputs])  # type: ignore[list-item]
        iteration_positions = _schedule_reference(reference, params)
        serial = [p for p, d in enumerate(reference.loop) if d.is_reduction and _is_serial(d.parallel_type)]
        partial = rfactor(reference, serial) if isinstance(reference.definition, ReductionOp) and serial else reference
        _pad_threads(partial, params.padded_threads)
        scheduled = [reference] if partial is not reference else []
        # A persistent kernel loads its rows before the reductions; an input read only
        # after them (layer norm's weight and bias) is loaded where it is used, so its
        # registers are not held across the reductions.
        limits = {tv.name: iteration_positions for tv in caches.inputs if self.persistent and feeds_reduction(tv)}
        held = (common.computed_tensor(fusion, name).name for name in (*params.buffers, *params.kept_results))
        limits.update(dict.fromkeys(held, iteration_positions))
        # Global loads and stores both go in vectors (16-byte stores, not one store per element).
        # An output holding no axis of the vector's chain (a [rows, 2] input's pointwise
        # result beside an outer sum whose vector walks another axis) has its lanes on
        # other axes, elements apart: it is stored element by element (seed 25 case 662).
        vectorized = {name for name, source in sources.items() if source.name not in scalar} | {
            tv.name for tv in outputs if tv.name not in scalar
        }
        common.propagate_from(fusion, partial, vectorized=vectorized, scheduled=scheduled)
        _limit_to_own_iteration_loops(fusion, partial, iteration_positions, limits)
        for tv in caches.inputs:  # a vector load fills a register buffer; its elements are read from there
            if tv.loop and tv.loop[-1].parallel_type == ParallelType.Vectorize:
                limits[tv.name] = min(limits.get(tv.name, len(tv.loop)), len(tv.loop) - 1)
        if not self.persistent:  # every unrolled step's loads are issued before the first is summed
            for tv in caches.inputs:
                unrolled = [p for p, d in enumerate(tv.loop) if d.parallel_type == ParallelType.Unroll]
                if unrolled:
                    limits[tv.name] = min(limits.get(tv.name, len(tv.loop)), unrolled[0])
        common.inline(fusion, limits)
        _rfactor_siblings(fusion, partial, reference)
        # Inner persistent only: the outer scheduler's flag is its estimate that the buffers
        # would outgrow registers; its kernels keep them there (shared memory not done).
        in_shared = params.buffer_in_shared_memory and params.inner
        notes = _buffers_to_shared_memory(fusion, params) if in_shared else []
        return ScheduleRecord(reference=f"T{partial.name}", notes=notes)


def _buffers_to_shared_memory(fusion: Fusion, params: ReductionParams) -> list[str]:
    """The persistent buffers in shared memory. Each one keeps the reference's loops, so the
    thread that stores an element is the one that reads it back after the reduction (its
    tile spans the block's rows and threads: codegen allocates thread axes of shared tensors),
    and is laid out with its lanes innermost (_lanes_innermost)."""
    buffers = [common.computed_tensor(fusion, name) for name in params.buffers]
    for tv in buffers:
        tv.memory_type = MemoryType.Shared
        _lanes_innermost(tv)
    return [f"persistent buffers in shared memory: {', '.join(f'T{tv.name}' for tv in buffers)}"]


def _lanes_innermost(tv: TensorView) -> None:
    """Allocate `tv` over its loop IDs with the threadIdx.x axis innermost: [.., TIDy,
    batch, V, TIDx]. At each of a thread's batch and vector positions, a warp's lanes then
    address consecutive elements (no bank conflict); in loop order [.., batch, TIDx, V] they
    would lie V elements apart (8 floats: every access 8-way conflicted). blockDim.x is a
    warp multiple (padded_threads), so a warp never spans two TIDy rows."""
    lanes = [d for d in tv.loop if d.parallel_type == ParallelType.TIDx]
    alloc = [d for d in tv.loop if d.parallel_type != ParallelType.TIDx] + lanes
    tv.domain.set_allocation(alloc, filled_contiguity(alloc, True), hint=False)


def _inner_persistent_params(
    group: GroupView,
    info: RuntimeInfo,
    ref: TensorView,
    rows: int,
    length: int,
    vec: int,
    accumulators: int = 0,
    most_blocks: bool = True,
    row_group: int = 1,
) -> ReductionParams:
    """The persistent batch, threads and rows per block against the register budget
    (persistent_budget.choose_split); where the buffers would spill out of registers but a
    block's rows fit in shared memory, the buffers go there and only the loaded inputs stay
    in registers (all buffers together: nvFuser may keep some of them in registers)."""
    lanes = -(-length // vec)
    per_row_inputs = _per_row_inputs(group, ref)
    buffers = persistent_buffers(group)
    if row_group > 1:  # several rows at once: each row's buffers as the inputs they are computed from
        buffers = projected_buffers(group, through_pointwise=True)
    held = row_group * _register_bytes_per_element(group, ref, per_row_inputs, buffers) + accumulators
    per_row = row_group * sum(-(-tv.dtype.itemsize // 4) for tv in per_row_inputs)  # registers, whatever the batch
    split = choose_split(lanes, rows, held * vec, has_exp(group), info.device, row_registers=per_row)
    row_bytes = _buffer_bytes_per_row(group, info, buffers if row_group > 1 else None)
    # A buffer that is an input as read (float logits, no cast) would be its vector-loaded
    # copy in shared memory, which codegen does not make yet: such rows stay in registers.
    inputs = {id(tv) for tv in group.inputs}
    in_shared = (
        info.shared_persistence
        and split.spare_registers < REGISTER_OVERHEAD
        and row_bytes <= info.device.shared_memory_per_block
        and not any(id(tv) in inputs for tv in persistent_buffers(group))
    )
    if in_shared:
        buffer_bytes = sum(tv.dtype.itemsize for tv in persistent_buffers(group))
        shared = choose_split(
            lanes,
            rows,
            max(1, held - buffer_bytes) * vec,
            has_exp(group),
            info.device,
            shared_bytes_per_row=row_bytes,
            row_registers=per_row,
        )
        # The tile spans every launched thread's batch (past the row's end too).
        tile = shared.rows_per_block * shared.padded_x * shared.batch * vec * buffer_bytes
        in_shared = tile + SHARED_SCRATCH_BYTES <= info.device.shared_memory_per_block
        if in_shared:
            split, held = shared, max(1, held - buffer_bytes)
    # Where the registers allow one block per SM, a float row cast from 16-bit inputs is
    # held as those inputs instead (cast again where read). H100, layer norm of bf16 rows of
    # 16384: 194 -> 128 us; where more blocks fit already, it measured 0-5% slower (RMS
    # norm of bf16 rows of 4096 and 8192). A row in shared memory stays there (layer norm
    # at 32768 measured 6% faster projected: not taken, not measured further).
    projected = projected_buffers(group)
    projecting = projected != buffers and split.blocks_per_sm <= 1 and not in_shared and row_group == 1
    if projecting:
        held = _register_bytes_per_element(group, ref, per_row_inputs, projected) + accumulators
        split = choose_split(lanes, rows, held * vec, has_exp(group), info.device, row_registers=per_row)
        buffers = projected
        row_bytes = _buffer_bytes_per_row(group, info, projected)
    kept = _kept_results(group, split, vec)
    if most_blocks and not in_shared:  # (shared memory caps the blocks of a split held there)
        split = with_most_blocks(split, has_exp(group), info.device, rows, _kept_registers(kept, split, vec))
    return ReductionParams(
        SchedulerType.inner_persistent, ref.name, True, True, vec, split.padded_x, split.rows_per_block, 1,
        split.batch, 1, rows, length, row_bytes, in_shared, tuple(tv.name for tv in buffers),
        padded_threads=split.padded_x, min_blocks_per_sm=split.blocks_per_sm,
        registers_per_thread=split.registers,
        buffer_registers_per_thread=-(-split.batch * held * vec // 4),
        occupancy_warps_per_sm=split.warps_per_sm,
        fits_in_registers=split.spare_registers >= REGISTER_OVERHEAD,
        welford_translated=bool(translatable_in(group.exprs, group.outputs)),
        kept_results=tuple(tv.name for tv in kept),
        buffers_projected_to_inputs=projecting or (row_group > 1 and buffers != persistent_buffers(group)),
        row_group=row_group,
    )  # fmt: skip


def _kept_results(group: GroupView, split: PersistentSplit, vec: int) -> list[TensorView]:
    """The costly results to keep (checks.costly_between_reductions), where their
    registers fit beside the buffers the split was sized for; else none (recomputing
    beats spilling: cross-entropy's 50k-wide rows)."""
    kept = costly_between_reductions(group)
    overhead = REGISTER_OVERHEAD_EXP if has_exp(group) else REGISTER_OVERHEAD
    if not kept or split.spare_registers - _kept_registers(kept, split, vec) < overhead:
        return []
    return list(kept)


def _kept_registers(kept: list[TensorView], split: PersistentSplit, vec: int) -> int:
    return -(-split.batch * vec * sum(tv.dtype.itemsize for tv in kept) // 4)


def _register_bytes_per_element(
    group: GroupView, ref: TensorView, per_row_inputs: list[TensorView], buffers: list[TensorView]
) -> int:
    """Register bytes a thread holds at once per element of the row it owns: every
    persistent buffer; the copies of the weights (inputs without the rows' axes) the
    reductions read, loaded once before the rows and held throughout; and the copies either
    of the row inputs the reductions read or of the inputs read only after the reductions,
    whichever take more. A thread issues all its loads of a row before the first use, so
    the first copies are live at once; they are dead once the buffers are computed, before
    a weight read only after the reductions is loaded where it is used (bias + residual +
    layer norm: 10 bytes an element, not 14, so 256 x 2 runs at four blocks per SM, not
    512 x 1 at two). An input read neither on the way to a reduction nor after one counts
    with the first loads. An input that is itself a buffer counts once. A per-row input
    ([N, 1] mean or rstd) is held once per row, not per element, and is left out."""
    left_out = {id(tv) for tv in per_row_inputs} | {id(tv) for tv in buffers}
    rows = _row_sets(group, ref)
    held = sum(tv.dtype.itemsize for tv in buffers)
    weights = before = after = 0
    for tv in group.inputs:
        if not isinstance(tv, TensorView) or tv.ndim == 0 or id(tv) in left_out:
            continue
        if read_after_reductions(group, tv) and not read_before_reductions(group, tv):
            after += tv.dtype.itemsize
        elif any(group.id_map.exact(d) in rows for d in tv.logical if not d.is_broadcast):
            before += tv.dtype.itemsize
        else:
            weights += tv.dtype.itemsize
    return max(held + weights + max(before, after), 1)


def _rows_sharing_an_input(group: GroupView, info: RuntimeInfo, ref: TensorView) -> int:
    """How many consecutive rows read one same row of an input along the reduction: the
    extent of the innermost iteration axes that input lacks (is broadcast along), the most
    over the inputs. x [b, m, k] summed against w [n, k] over k gives rows [b, m, n]: each
    run of n consecutive rows reads one row of x."""
    exact = group.id_map.exact
    reduced = {exact(d) for d in ref.logical if d.is_reduction}
    iteration = [d for d in common.layout_order(ref) if not d.is_reduction and not d.is_broadcast]
    most = 1
    for tv in group.inputs:
        if not isinstance(tv, TensorView):
            continue
        own = {exact(d) for d in tv.logical if not d.is_broadcast}
        if not own & reduced:
            continue
        run = 1
        for dim in reversed(iteration):
            if exact(dim) in own:
                most = max(most, run)
                break
            run *= max(1, info.extent(dim))
        # (an input with no iteration axis at all, a weight every row reads, is read by
        # every block anyway: it asks for nothing)
    return most


def _row_sets(group: GroupView, ref: TensorView) -> set[int]:
    """Exact sets of the rows' axes: the reduction's iterated (not broadcast) axes."""
    return {group.id_map.exact(d) for d in ref.logical if not d.is_reduction and not d.is_broadcast}


def _per_row_inputs(group: GroupView, ref: TensorView) -> list[TensorView]:
    """Tensor inputs each of whose axes is one of the rows' (an axis that cannot be matched
    to the rows' counts as along the row)."""
    rows = _row_sets(group, ref)
    return [
        tv
        for tv in group.inputs
        if isinstance(tv, TensorView)
        and tv.ndim > 0
        and all(group.id_map.exact(d) in rows for d in tv.logical if not d.is_broadcast)
    ]


def _pad_threads(tv: TensorView, padded: int) -> None:
    """blockDim.x padded to `padded` threads (a warp multiple) on the axis bound to TIDx."""
    if padded <= 0:
        return
    for dim in tv.loop:
        if dim.parallel_type == ParallelType.TIDx:
            dim.padded_to = padded


class InnerPersistentScheduler(ReductionScheduler):
    type = SchedulerType.inner_persistent
    persistent = True
    inner = True


class OuterPersistentScheduler(ReductionScheduler):
    type = SchedulerType.outer_persistent
    persistent = True
    inner = False


def _broadcast_along_own_reduction(kind: SchedulerType, group: GroupView, reference: TensorView) -> Rejection | None:
    """A broadcast axis the reduction carries through (a size-1 axis of its input) that the
    group then broadcasts along the reduced axis itself: the schedule merges it into the
    iteration axes, so the tensors it reaches would iterate the reduced axis there as
    extent 1 and be left partly unwritten."""
    reduced = reduction_sets(group.id_map, reference)
    links = group.links
    for dim in reference.logical:
        if dim.is_broadcast and not dim.is_reduction and reduced & set(links.get(group.id_map.exact(dim), ())):
            return reject(
                kind,
                f"the broadcast axis {dim} of T{reference.name} is broadcast along its own reduced axis",
                RejectCategory.self_mapping,
            )
    return None


def _resized_onto_own_reduction(
    kind: SchedulerType, group: GroupView, reference: TensorView, info: RuntimeInfo
) -> Rejection | None:
    """An iteration axis of the reduction whose index a pad, slice, cat or reshape carries
    into its reduced axis (each row's min padded, or reshaped and reshaped back, to the
    rows' length and added along them): an element would need another row's result, which
    the block computing it does not hold. A run-time check: whether a reshape's split
    falls on an axis's digits needs the extents."""
    id_map = group.id_map
    if not id_map.reshaped_or_resized:
        return None
    reduced = reduction_sets(id_map, reference)

    def extent_of(dim: IterDomain) -> int | None:
        try:
            return info.extent(dim)
        except UnboundValue:  # an axis no input's size gives a value
            return None

    extents = id_map.set_extents(extent_of)
    for dim in reference.logical:
        if dim.is_reduction or dim.is_broadcast:
            continue
        if id_map.index_flows(id_map.exact(dim), extents) & reduced:
            return reject(
                kind,
                f"the iteration axis {dim} of T{reference.name} is resized or reshaped onto its own reduced axis",
                RejectCategory.self_mapping,
            )
    return None


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
    return kind in (
        ParallelType.Serial,
        ParallelType.Unroll,
        ParallelType.Unswitch,
        ParallelType.Vectorize,
        ParallelType.Group,
    )


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
    tv.split(r, params.vectorize, divisible=True)  # the width divides the row (_vector_width)
    if params.persistent:  # [.., batch, ceilDiv(R/V, batch), V]: a register buffer of a constant size
        tv.split(r, params.persistent_batch, inner_split=False)
    else:
        tv.split(r, params.threads_reduction)  # [.., R/(V*T), T, V]
    _parallelize_reduction(tv, r, [ParallelType.Serial, ParallelType.TIDx, ParallelType.Vectorize], params)
    if not has_iteration:
        return 0
    if params.row_blocks:  # [BIDx, rows, TIDy]: each block loops over its rows (inner_outer)
        tv.split(0, params.row_blocks, inner_split=False)
        tv.split(1, params.threads_iteration)
        tv.parallelize(0, ParallelType.BIDx)
        tv.parallelize(2, ParallelType.TIDy)
        if params.row_group == 1:
            return 3
        tv.split(1, params.row_group)  # [BIDx, rows / G, G, TIDy]: G rows reduced at once
        tv.parallelize(2, ParallelType.Group)
        return 4
    tv.split(0, params.threads_iteration)
    tv.parallelize(0, ParallelType.BIDx)
    tv.parallelize(1, ParallelType.TIDy)
    return 2


def _outer_loops(tv: TensorView, params: ReductionParams, has_iteration: bool) -> int:
    if has_iteration:  # [I, R] -> [I/(V*T), T, V, R]
        tv.split(0, params.vectorize, divisible=True)  # the width divides the rows (_vector_width)
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
            sibling = rfactor(tv, serial)
            # Inlined as the reference's partial is (up to its serial reduction loops), so
            # both accumulate in the loops their input is loaded in.
            sibling.compute_at_pos = next((p for p, d in enumerate(sibling.loop) if d.is_reduction), 0)
            tv.max_producer_pos = max(tv.max_producer_pos, sibling.compute_at_pos)


def _buffers(group: GroupView, persistent: bool) -> tuple[int, ...]:
    return tuple(tv.name for tv in persistent_buffers(group)) if persistent else ()


def _buffer_bytes_per_row(group: GroupView, info: RuntimeInfo, buffers: list[TensorView] | None = None) -> int:
    """Bytes of every persistent buffer (of `buffers`, if given) for one row (one iteration
    of the outer axes)."""
    reference = group.reduction_tvs()[0]
    rows = max(1, info.numel(reference))
    total = 0
    for tv in persistent_buffers(group) if buffers is None else buffers:
        total += info.numel(tv) // rows * tv.dtype.itemsize
    return total


def _final_outputs(group: GroupView) -> tuple[int, ...]:
    """The group's outputs (by name) that no other kernel reads: fusion outputs only."""
    members = {id(expr) for expr in group.exprs}
    return tuple(tv.name for tv in group.outputs if all(id(use) in members for use in tv.uses))


def _vector_width(
    group: GroupView, info: RuntimeInfo, ref: TensorView, inner: bool, length: int, rows: int, persistent: bool = False
) -> int:
    """Vectors run along the merged fastest axis (R for an inner reduction, I for an
    outer one): only the part of it that is contiguous in memory, the trailing axes of
    the merged set before another axis comes between them, can be read in vectors."""
    vector_axis = _vector_axis(ref, inner)
    if vector_axis is None:  # an outer-classified reduction to a scalar: no iteration axis to vectorize
        return 1
    vector_set = group.id_map.exact(vector_axis)
    if _reached_through_transforms(group, vector_set):
        return 1
    held: list[int] = []  # a vector stays within each tensor's contiguous run along the axis
    chain = _inner_chain(group.id_map, vector_set)
    walked = group.id_map.overlapping({vector_set})  # every axis holding elements the vector walks
    for tv in group.inputs:  # each global tensor along that axis must hold it innermost, contiguous
        own = {group.id_map.exact(d) for d in tv.logical}
        key = next((k for k in chain if k in own), None)  # through a reshape: its innermost component
        if key is None:
            # constant along the vector axis, or along it only through a reshape's outer
            # part (lanes apart in memory): read element by element (_broadcast_along_vectors)
            continue
        extent = common.inner_extent(group, info, tv, key)
        if extent is None:
            return 1
        held += [extent, *_chain_extents(group, info, chain, key)]
    for tv in group.outputs:  # written in logical order (the schedule drops layout hints)
        expanded = [group.id_map.exact(d) for d in tv.logical if d.is_broadcast and d.has_expanded_extent]
        if any(k in chain or any(t in chain for t in group.links.get(k, ())) for k in expanded):
            return 1  # its lanes run along an axis the output stores once (seed 10 case 2000)
        dims = [d for d in tv.logical if not d.is_broadcast and not d.is_reduction]
        # through a reshape: the axis the vector walks in this output is its innermost
        # component (a transpose of the reshaped input holds it, but not innermost)
        own = {group.id_map.exact(d) for d in dims}
        key = next((k for k in chain if k in own), None)
        if key is None:
            if own & walked:  # it varies along the vector, but not in consecutive elements
                return 1  # (x beside a sum whose vector walks x's reshape's outer part: seed 19 case 2619)
            continue
        if group.id_map.exact(dims[-1]) != key:
            return 1
        held += _chain_extents(group, info, chain, key)
        if tv.domain.allocation is not None and not tv.domain.allocation_is_hint:
            # the user's stride order is kept: the axis the vector walks (the reshape's
            # innermost component too, seed 16 case 839) must be innermost in it
            extent = common.inner_extent(group, info, tv, key)
            if extent is None:
                return 1
            held.append(extent)
    reduced = [d.is_reduction for d in ref.logical]
    contiguous = 1
    for dim, is_reduced in reversed(list(zip(ref.logical, reduced, strict=True))):
        if dim.is_broadcast:
            continue
        if is_reduced != inner:
            break
        contiguous *= max(1, info.extent(dim))
    # A normalization (`persistent`: one that holds its row or re-reads it) sizes its vectors
    # by the tensors it reads and writes along the row (bf16 rows in 8-wide vectors even
    # with float mean and rstd outputs, or beside cross-entropy's int64 labels), a
    # looping outer reduction by those along its columns (layer norm backward's bf16
    # columns 8 wide beside the float per-row mean: 16-byte loads; _outer_params then
    # unrolls fewer rows, so a thread's loads in flight keep their registers).
    along = [tv for tv in (*group.inputs, *group.outputs) if vector_set in concrete_sets(group.id_map, tv)]
    sized_by_axis = persistent if inner else not persistent
    among = along if along and sized_by_axis else None
    return common.vector_width(group, info, [length if inner else rows, contiguous, *held], among)


def _vector_axis(ref: TensorView, inner: bool) -> IterDomain | None:
    """The axis vectors run along: the innermost reduced (or kept) axis that has more
    than one element. A reduced size-1 axis (a reduction over a broadcast) is no vector
    axis: the tensors' checks would find no tensor holding it and pass any layout."""
    if inner:
        reduced = [d for d in ref.logical if d.is_reduction]
        wide = [d for d in reduced if not d.extent.is_one_int()]
        return (wide or reduced)[-1]
    iteration = [d for d in common.layout_order(ref) if not d.is_reduction and not d.extent.is_one_int()]
    return iteration[-1] if iteration else None


def _inner_chain(id_map: IdMap, key: int) -> list[int]:
    """Set `key`, the set its consecutive elements come from through a reshape or resize,
    and so on: the axes a vector along `key` walks in each tensor it was made from."""
    chain: list[int] = []
    current: int | None = key
    while current is not None and current not in chain:
        chain.append(current)
        current = id_map.inner_source(current)
    return chain


def _chain_extents(group: GroupView, info: RuntimeInfo, chain: list[int], key: int) -> list[int]:
    """The extents of the axes of `chain` from the vector axis down to `key`: a vector
    walks consecutive elements of the next axis only within one run of the axis a merge
    took as its inner part, so the width divides every one of them (a sum over [a, q]
    merged, q the inner 6 of a split of x's 12 columns: a vector of 4 crossed from one a
    to the next, and in x from one run of 6 to another)."""
    return [info.extent(group.id_map.member(k)) for k in chain[: chain.index(key) + 1]]


def _broadcast_along_vectors(fusion: Fusion, ref: TensorView, inner: bool, inputs: list[TensorView]) -> set[int]:
    """The inputs or outputs (by name) holding no axis of the vector's chain, read element by
    element: constant along the vector axis (one element stands for a whole vector of the
    others), or along it only through a reshape's outer part (its lanes lie apart)."""
    vector_axis = _vector_axis(ref, inner)
    if vector_axis is None:
        return set()
    id_map = IdMap(fusion.exprs())
    chain = set(_inner_chain(id_map, id_map.exact(vector_axis)))
    return {tv.name for tv in inputs if not {id_map.exact(d) for d in tv.logical} & chain}


def _reached_through_transforms(group: GroupView, vector_set: int) -> bool:
    """Whether a global tensor runs along the vector axis through a pad, slice or
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
    # Any resize on the way counts, even where a tensor also runs along the axis directly
    # (a cat of two slices of an input beside the input itself reads it at both offsets).
    return bool(made & resized)


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
