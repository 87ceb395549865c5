"""The inner-outer persistent scheduler: a normalization's backward in one kernel.

Layer norm's backward reduces each row (two sums over H, for the input gradient) and
each column (the weight and bias gradients, sums over N) of the same [N, H] inputs. As
two kernels, both read x and grad_out. Here one kernel reads them once (nvFuser's
InnerOuterPersistent, Inductor's mix-order reduction):

- a wave of blocks along the rows, each looping serially over its share of them
  (`[BIDx, serial rows, TIDy | batch, TIDx, V]`, the row split as an inner persistent
  kernel's, against a register budget that counts the column sums too);
- per row, the inner persistent normalization, as `InnerPersistentScheduler` does it;
- the column sums accumulate in registers across the block's rows (the rfactor of the
  outer reductions over the serial row loop), then one grid reduction over the blocks
  combines them. The wave's blocks are all resident, so they meet at a grid barrier and
  each folds a share (`cooperative_grid`, a cooperative launch); folded in the last blocks
  to arrive, the partials went through one SM after the last row (H100, layer norm
  backward of bf16 [16384, 4096]: 172.4 -> 158.3 us).
"""

from __future__ import annotations

import dataclasses

from fuser_core.ir.fusion import Fusion
from fuser_core.ir.tensor_exprs import ReductionOp
from fuser_core.ir.tensor_view import TensorView
from fuser_core.scheduler.base import HeuristicParams, RejectCategory, Rejection, ScheduleRecord, SchedulerType, reject
from fuser_core.scheduler.checks import (
    a_reduction_reads_another,
    expr_eval_rejection,
    is_inner_reduction,
    persistent_buffers,
    projected_buffers,
    propagation_rejection,
)
from fuser_core.scheduler.group_view import REDUCTION_OPS, GroupView, RuntimeInfo
from fuser_core.scheduler.id_map import concrete_sets, reduction_sets
from fuser_core.scheduler.reduction import InnerPersistentScheduler, ReductionParams

# Blocks along the rows: one wave at the blocks per SM the registers allow, each block
# looping over its rows; at least this many rows per block, or the column partials each
# block writes cost more than the re-read they save.
MIN_ROWS_PER_BLOCK = 8
ROW_GROUP = 2  # rows of a block's loop reduced together where the registers allow (_grouped_rows)


class InnerOuterPersistentScheduler:
    type = SchedulerType.inner_outer_persistent
    drops_output_hints = True

    def compile_time_check(self, group: GroupView) -> Rejection | None:
        rejection = expr_eval_rejection(self.type, group)
        if rejection is not None:
            return rejection
        split = _split(group)
        if isinstance(split, str):
            return reject(self.type, split, RejectCategory.unsupported)
        inner_view, reference, _ = split
        rejection = InnerPersistentScheduler().compile_time_check(inner_view)
        if rejection is not None:
            return dataclasses.replace(rejection, scheduler=self.type, reason=f"its inner part: {rejection.reason}")
        return propagation_rejection(self.type, group, reference)

    def run_time_check(self, group: GroupView, info: RuntimeInfo) -> Rejection | None:
        split = _split(group)
        assert not isinstance(split, str)
        inner_view, reference, _ = split
        rejection = InnerPersistentScheduler().run_time_check(inner_view, info)
        if rejection is not None:
            return dataclasses.replace(rejection, scheduler=self.type, reason=f"its inner part: {rejection.reason}")
        rows = max(1, info.numel(reference))
        if rows < MIN_ROWS_PER_BLOCK * info.device.sm_count:
            return reject(
                self.type,
                f"{rows} rows: too few to loop over ({MIN_ROWS_PER_BLOCK} per block on "
                f"{info.device.sm_count} SMs at least)",
            )
        return None

    def heuristics(self, group: GroupView, info: RuntimeInfo) -> ReductionParams:
        split = _split(group)
        assert not isinstance(split, str)
        inner_view, reference, outer = split
        # Each outer sum keeps a float per element of a thread's batch across the rows.
        # Its row blocks follow the target occupancy: more blocks per SM than the kernel's
        # registers then reach would send a tail wave (not measured raised: layer norm
        # backward at 8192 x 1536 asked for 6 blocks an SM, ptxas gave 5).
        params = InnerPersistentScheduler().heuristics(inner_view, info, accumulators=4 * len(outer), most_blocks=False)
        grouped = _grouped_rows(inner_view, info, params, 4 * len(outer))
        params = grouped or params
        rows = max(1, info.numel(reference))
        per_block = params.threads_iteration * params.row_group
        units = -(-rows // per_block)  # row-loop iterations of the whole grid
        most = min(
            units,
            max(1, params.min_blocks_per_sm) * info.device.sm_count,
            max(1, rows // (MIN_ROWS_PER_BLOCK * per_block)),
        )
        # As few blocks as give the busiest one no more iterations than `most` blocks would:
        # every block then runs the same count (16384 rows in pairs: 256 blocks of 32, not
        # 261 of 32 and three idle of 264), and fewer partials are folded. H100, layer_norm_bwd:
        # 161.1 -> 159.6 us.
        busiest = -(-units // most)  # iterations of the busiest block at `most` blocks
        blocks = -(-units // busiest)
        # One wave (blocks <= most, at most min_blocks_per_sm an SM): every block is resident
        # while the others finish their rows, so the column sums can wait for all at a grid
        # barrier and fold in every block (codegen checks that the kernel's registers still
        # allow min_blocks_per_sm). Without a register target the wave is not known.
        cooperative = info.cooperative_grid and params.min_blocks_per_sm > 0
        return dataclasses.replace(params, scheduler=self.type, row_blocks=blocks, cooperative_grid=cooperative)

    def schedule(self, fusion: Fusion, params: HeuristicParams) -> ScheduleRecord:
        assert isinstance(params, ReductionParams)
        record = InnerPersistentScheduler().schedule(fusion, params)
        fusion.cooperative_grid = params.cooperative_grid
        return record


def _grouped_rows(
    inner_view: GroupView, info: RuntimeInfo, single: ReductionParams, accumulators: int
) -> ReductionParams | None:
    """The split with ROW_GROUP rows held and reduced at once, where that costs no
    occupancy: the rows' buffers held as the 16-bit inputs they are computed from (layer
    norm backward's x, not (x - mean) * rstd as float), at the same threads, batch and
    blocks per SM as one row. Else None. H100, layer norm backward of bf16 [16384, 4096]:
    generated 205.5 -> 187.6 us (with every row's loads first: row_groups._loads_first);
    two rows held as float spilled (246.6 us, hand-written) or halved the blocks (218.8)."""
    if projected_buffers(inner_view, through_pointwise=True) == persistent_buffers(inner_view):
        return None
    if single.buffer_in_shared_memory or not _reductions_reduce_together(inner_view):
        return None
    grouped = InnerPersistentScheduler().heuristics(
        inner_view, info, accumulators=accumulators, most_blocks=False, row_group=ROW_GROUP
    )
    same_split = (grouped.threads_reduction, grouped.threads_iteration, grouped.persistent_batch) == (
        single.threads_reduction,
        single.threads_iteration,
        single.persistent_batch,
    )
    if (
        not same_split
        or not grouped.fits_in_registers
        or grouped.buffer_in_shared_memory  # codegen keeps a projected input's rows in registers only
        or grouped.min_blocks_per_sm < single.min_blocks_per_sm
    ):
        return None
    return grouped


def _reductions_reduce_together(inner_view: GroupView) -> bool:
    """Whether the row's reductions are sums (or the like) none of which reads another's
    result: then codegen reduces a group's rows in one call (row_groups.py). A softmax's
    sum reads its max, a Welford divides as it goes: their rows would be held in twos for
    nothing."""
    if any(not isinstance(tv.definition, ReductionOp) for tv in inner_view.reduction_tvs()):
        return False
    return not a_reduction_reads_another(inner_view)


def _split(group: GroupView) -> tuple[GroupView, TensorView, list[TensorView]] | str:
    """The group's inner part (its view without the outer reductions and what only they
    need or compute), its reference (the first inner reduction) and its outer reductions;
    or why the group is no inner-outer normalization."""
    return group.memo("inner-outer split", lambda: _split_of(group))  # type: ignore[no-any-return]


def _split_of(group: GroupView) -> tuple[GroupView, TensorView, list[TensorView]] | str:
    tvs = group.reduction_tvs()
    if not tvs:
        return "no reduction op to schedule"
    if any(not isinstance(tv.definition, REDUCTION_OPS) for tv in tvs):
        return "a reduction it cannot split"
    inner_tvs = [tv for tv in tvs if is_inner_reduction(group, tv)]
    if not inner_tvs:
        return "no inner reduction"
    reference = inner_tvs[0]
    rows, reduced = concrete_sets(group.id_map, reference), reduction_sets(group.id_map, reference)
    inner, outer = [], []
    for tv in tvs:
        sets = (reduction_sets(group.id_map, tv), concrete_sets(group.id_map, tv))
        if sets == (reduced, rows):
            inner.append(tv)
        elif sets == (frozenset(rows), set(reduced)) and isinstance(tv.definition, ReductionOp):
            outer.append(tv)
        else:
            return f"T{tv.name} reduces neither the rows' axes of T{reference.name} nor its own"
    if not outer:
        return "no outer reduction beside the inner ones"
    for tv in group.tensors:  # a 2-d problem: every tensor iterates rows, row elements, or both
        if not concrete_sets(group.id_map, tv) <= rows | reduced:
            return f"T{tv.name} iterates an axis that is neither a row nor a row's element"
    after = _after(group, outer)
    outer_exprs = _outer_only(group, outer, after)
    for expr in group.exprs:  # an outer sum exists once every row is done: no row reads it
        if id(expr) in after and any(
            isinstance(out, TensorView) and concrete_sets(group.id_map, out) & rows for out in expr.outputs
        ):
            return "a row reads the result of an outer reduction"
    fusion_outputs = {id(tv) for tv in group.outputs}
    inner_exprs = [e for e in group.exprs if id(e) not in outer_exprs]
    view = GroupView.of(inner_exprs, fusion_outputs)
    # What the outer sums read of it (x cast to float) is no output of the inner part.
    inner_view = GroupView(
        view.exprs, view.inputs, [tv for tv in view.outputs if id(tv) in fusion_outputs], view.id_map
    )
    if not any(tv is reference for tv in inner_view.reduction_tvs()):
        return "its inner reductions need the outer ones"
    return inner_view, reference, outer


def _outer_only(group: GroupView, outer: list[TensorView], after: set[int]) -> set[int]:
    """The expressions that are an outer reduction, come after one (`after`), or compute
    only what the outer reductions read (and no output of the group)."""
    members = {id(e) for e in group.exprs}
    outputs = {id(tv) for tv in group.outputs}
    found = {id(tv.definition) for tv in outer} | after
    for expr in reversed(group.exprs):  # only feeding them
        if id(expr) in found:
            continue
        uses = [u for out in expr.outputs for u in out.uses if id(u) in members]
        leaves = any(id(out) in outputs for out in expr.outputs)
        if uses and not leaves and all(id(u) in found for u in uses):
            found.add(id(expr))
    return found


def _after(group: GroupView, outer: list[TensorView]) -> set[int]:
    """The expressions computed from an outer reduction's result."""
    found: set[int] = set()
    results = {id(tv) for tv in outer}
    for expr in group.exprs:
        if any(id(v) in results for v in expr.inputs):
            found.add(id(expr))
            results.update(id(v) for v in expr.outputs)
    return found
