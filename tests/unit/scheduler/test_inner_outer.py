"""The inner-outer persistent scheduler (scheduler.inner_outer): a normalization's backward,
inner (per-row) and outer (per-column) reductions of the same rows, in one kernel that
reads its inputs once. Which groups it takes, why it refuses the others, its parameters,
and the kernel on the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition, use_options
from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.cuda import print_kernel
from fuser_core.codegen.lower.grid_groups import make_cooperative
from fuser_core.runtime.arguments import convert_inputs
from fuser_core.runtime.group_lowering import lowered_groups
from fuser_core.scheduler.base import SchedulerType
from fuser_core.scheduler.group_view import GroupView
from fuser_core.scheduler.inner_outer import MIN_ROWS_PER_BLOCK, InnerOuterPersistentScheduler
from fuser_core.scheduler.registry import verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from kernels_check import check_generated_kernels
from test_grouped_reductions import _layer_norm_backward_inputs, layer_norm_backward

RNG = np.random.default_rng(11)


def _definition(build) -> FusionDefinition:
    with FusionDefinition() as fd:
        build(fd)
    return fd


def _runtime(fd: FusionDefinition, inputs: list[np.ndarray]):
    with use_options(device_model="h100_sxm", backend="reference"):
        return fd.runtime_for(inputs)


def _whole_fusion_verdict(fd: FusionDefinition, inputs: list[np.ndarray]):
    """The inner-outer scheduler's answer for the whole fusion as one group."""
    runtime = _runtime(fd, inputs)
    complete = runtime.segmented.complete
    exprs = [e for e in complete.exprs() if e.is_tensor_op()]
    view = GroupView.of(exprs, {id(v) for v in complete.outputs})
    info = runtime.runtime_info(convert_inputs(complete, inputs))
    return verdict(InnerOuterPersistentScheduler(), view, info)


def test_layer_norm_backward_is_one_kernel_that_loops_over_rows():
    fd = _definition(layer_norm_backward)
    inputs = _layer_norm_backward_inputs()
    runtime = _runtime(fd, inputs)
    (group,) = runtime.segmented.groups
    assert group.scheduler == SchedulerType.inner_outer_persistent
    params = group.params
    # one wave: the blocks the registers allow on 132 SMs, or fewer where rows run short
    assert 0 < params.row_blocks <= params.min_blocks_per_sm * 132
    assert ("row_blocks", params.row_blocks) in params.shown()
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]
    assert check_generated_kernels(runtime, inputs, vectorize=False) == ["kernel_g0"]


def _kernel(fd: FusionDefinition, inputs: list[np.ndarray], disable: tuple[str, ...] = ()) -> k.Kernel:
    with use_options(device_model="h100_sxm", backend="reference", disable=list(disable)):
        runtime = fd.runtime_for(inputs)
    (kernel,) = lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[0].values()
    return kernel


def test_its_column_sums_fold_in_every_block_after_a_grid_barrier():
    """Its row blocks are one wave, all resident at once: the column sums' grid reductions
    meet at a grid barrier and every block folds a share of the partials, in a kernel launched
    cooperatively. With the disable option `cooperative_grid`, the last blocks to arrive fold
    them in a two-level tree, as before."""
    fd = _definition(layer_norm_backward)
    inputs = _layer_norm_backward_inputs()
    kernel = _kernel(fd, inputs)
    grids = [s for s in k.walk(kernel.body) if isinstance(s, k.ParallelReduce) and s.block_dims]
    assert kernel.cooperative and len(grids) == 2 and all(g.cooperative for g in grids)
    cuda = print_kernel(kernel)
    assert cuda.count("gridFold<") == 2 and "gridSync<" in cuda and "gridArriveFolded<" in cuda
    assert "gridArriveGroup" not in cuda and "gridCombine" not in cuda
    assert "folded by every block after a grid barrier" in k.print_kernel_ir(kernel)
    tree = _kernel(fd, inputs, disable=("cooperative_grid",))
    assert not tree.cooperative and not any(getattr(s, "cooperative", False) for s in k.walk(tree.body))
    assert "gridArriveGroup<" in print_kernel(tree) and "gridSync" not in print_kernel(tree)


def test_a_grid_welford_keeps_its_tree():
    """The cooperative fold is written for an op's combine, not Welford's triples."""
    welford = k.ParallelReduce(
        "welford", ("a", "m", "n"), k.Const(DataType.Int, 0), (DataType.Float,) * 2 + (DataType.Int,), (),
        ("blockIdx.x",),
    )  # fmt: skip
    add = k.ParallelReduce("add", ("s",), k.Const(DataType.Int, 0), (DataType.Float,), (), ("blockIdx.x",))
    assert not make_cooperative([welford, add]) and not welford.cooperative and not add.cooperative
    assert make_cooperative([add]) and add.cooperative
    nested = k.ParallelReduce("add", ("s",), k.Const(DataType.Int, 0), (DataType.Float,), (), ("blockIdx.x",))
    loop = k.For(k.Var(DataType.Int, "i"), k.Const(DataType.Int, 2), k.LoopKind.serial, [nested])
    assert not make_cooperative([loop]) and not nested.cooperative  # met twice: its barrier count would not reset


def test_each_input_is_loaded_once_per_row():
    """x is read by the row sums and by a column sum through consumers that spell its row
    count through different inputs (x's, the mean's): one load all the same."""
    fd = _definition(layer_norm_backward)
    inputs = _layer_norm_backward_inputs()
    runtime = _runtime(fd, inputs)
    (kernel,) = lowered_groups(runtime.segmented, runtime.name, runtime.signature.index_type)[0].values()
    loads: dict[str, int] = {}
    for stmt in k.walk(kernel.body):
        if isinstance(stmt, k.VectorCopy) and stmt.src.startswith("T") and not stmt.dst.endswith("_vec"):
            loads[stmt.src] = loads.get(stmt.src, 0) + 1
    full = {
        f"T{tv.name}" for tv in runtime.segmented.groups[0].fusion.inputs if tv.ndim == 2 and tv.dtype.itemsize == 2
    }
    assert full and all(loads.get(name) == 1 for name in full), loads


def test_too_few_rows_stay_two_kernels():
    fd = _definition(layer_norm_backward)
    inputs = _layer_norm_backward_inputs(rows=300)
    rejection = _whole_fusion_verdict(fd, inputs)
    assert rejection is not None and rejection.at_run_time
    assert "300 rows: too few to loop over" in rejection.reason
    runtime = _runtime(fd, inputs)
    assert SchedulerType.inner_outer_persistent not in [g.scheduler for g in runtime.segmented.groups]
    assert len(runtime.segmented.groups) == 2


def _normalized_by_column_sum(fd):
    t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
    rows = fd.ops.sum(t0, [1], keepdim=True)
    cols = fd.ops.sum(t0, [0], keepdim=True)
    fd.add_output(fd.ops.sub(fd.ops.sub(t0, rows), cols))


def _three_axes(fd):
    t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=True, dtype=DataType.Float)
    fd.add_output(fd.ops.sub(t0, fd.ops.sum(t0, [2], keepdim=True)))
    fd.add_output(fd.ops.sum(t0, [0]))


@pytest.mark.parametrize(
    "build, shape, reason",
    [
        (_normalized_by_column_sum, [2000, 64], "a row reads the result of an outer reduction"),
        (_three_axes, [2000, 4, 64], "reduces neither the rows' axes"),
    ],
)
def test_refused_with_a_reason(build, shape, reason):
    fd = _definition(build)
    rejection = _whole_fusion_verdict(fd, [RNG.standard_normal(shape).astype(np.float32)])
    assert rejection is not None and reason in rejection.reason


def test_mapped_axes_of_different_sizes_are_an_error_naming_the_op():
    """Kernels index axes the ops map together by one extent, so inputs whose sizes differ
    there are refused before any runs (nvFuser refuses them too)."""
    fd = _definition(layer_norm_backward)
    inputs = _layer_norm_backward_inputs()
    inputs[2] = inputs[2][:-1]  # one mean short
    with pytest.raises(FuserError) as err, use_options(backend="reference"):
        fd.execute(inputs)
    # dy (input 0) meets the mean first where g multiplies x_hat
    assert err.value.op == "mul" and "has size 2199" in str(err.value) and "size 2200" in str(err.value)


def test_its_row_blocks_follow_the_target_occupancy_not_the_raised_one():
    """The inner persistent split's raise to the blocks its registers allow is not taken
    here: at 8192 x 1536 bf16 it asked for 6 blocks an SM (792 row blocks), of which the
    kernel's registers let 5 reside, and the 132 past them ran as a second wave."""
    fd = _definition(layer_norm_backward)
    runtime = _runtime(fd, _layer_norm_backward_inputs(rows=8192, width=1536))
    (group,) = runtime.segmented.groups
    assert group.scheduler == SchedulerType.inner_outer_persistent
    # 5 x 132 = 660 blocks at most; 8192 rows over 660 is 13 rows for the busiest block,
    # and 631 blocks of 13 (the last with 2) take no longer
    assert (group.params.min_blocks_per_sm, group.params.row_blocks) == (5, 631)


def test_its_row_blocks_balance_the_rows():
    """As few blocks as give the busiest one no more row-loop iterations than the most the
    wave holds would (bf16 layer_norm_bwd's 16384 rows in pairs: 256 blocks of 32 pairs, not
    264 blocks of 63 rows, each 32 iterations with the last half empty, three blocks idle).
    Float rows of 4096, one a block iteration: 63 rows for the busiest of 264 blocks, so
    261 blocks of 63 (the last with 4)."""
    fd = _definition(layer_norm_backward)
    runtime = _runtime(fd, _layer_norm_backward_inputs(rows=16384, width=4096))
    (group,) = runtime.segmented.groups
    p = group.params
    assert (p.min_blocks_per_sm, p.row_group, p.row_blocks, p.cooperative_grid) == (2, 1, 261, True)
    for rows in (16384, 16000, 9000, 4000):
        runtime = _runtime(fd, _layer_norm_backward_inputs(rows=rows, width=4096))
        (group,) = runtime.segmented.groups
        p = group.params
        per_block = p.threads_iteration * p.row_group
        units = _ceil_div(rows, per_block)
        most = min(units, p.min_blocks_per_sm * 132, rows // (MIN_ROWS_PER_BLOCK * per_block))
        iterations = _ceil_div(_ceil_div(rows, p.row_blocks), per_block)  # the busiest block's
        assert p.row_blocks <= most and iterations == _ceil_div(units, most)
        assert p.row_blocks == 1 or _ceil_div(_ceil_div(rows, p.row_blocks - 1), per_block) > iterations


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)
