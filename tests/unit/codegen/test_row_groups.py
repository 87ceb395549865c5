"""Rows of an inner-outer kernel grouped in twos (ReductionParams.row_group, ParallelType
Group): their buffers held as the 16-bit inputs they are computed from, their block
reductions in one call (codegen/lower/row_groups.py), every kernel checked on the
kernel-IR interpreter against the reference."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from kernels_check import SAMPLES_DIR, check_generated_kernels, runtime_and_inputs

from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen.lower import lower_group
from fuser_core.codegen.lower.row_groups import _loads_first, group_loop_reductions
from fuser_core.ir.dtype import DataType
from fuser_core.runtime.group_lowering import generates_kernel, index_dtype

IDX = DataType.Int32
F32 = DataType.Float

RMS_NORM_BACKWARD = """
import torch
from nvfuser import FusionDefinition, DataType
def rms_bwd(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.{dtype}, is_cpu=False)
    T1 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.{dtype}, is_cpu=False)
    T2 = fd.define_tensor(shape=[-1, 1], contiguity=[True, None], dtype=DataType.Float, is_cpu=False)
    T3 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.{dtype}, is_cpu=False)
    T4 = fd.ops.cast(T0, dtype=DataType.Float)
    T5 = fd.ops.cast(T1, dtype=DataType.Float)
    T6 = fd.ops.broadcast_in_dim(T2, shape=[{rows}, {hidden}], broadcast_dims=[0, 1])
    T7 = fd.ops.broadcast_in_dim(T3, shape=[{rows}, {hidden}], broadcast_dims=[1])
    T8 = fd.ops.cast(T7, dtype=DataType.Float)
    T9 = fd.ops.mul(T4, T8)
    T10 = fd.ops.mul(T5, T6)
    T11 = fd.ops.mul(T9, T10)
    T12 = fd.ops.sum(T11, dims=[1], keepdim=False, dtype=DataType.Null)
    T13 = fd.ops.broadcast_in_dim(T12, shape=[{rows}, {hidden}], broadcast_dims=[0])
    T14 = fd.ops.mul(T10, T13)
    S15 = fd.define_scalar({hidden}.0, dtype=DataType.Double)
    T16 = fd.ops.div(T14, S15)
    T17 = fd.ops.sub(T9, T16)
    T18 = fd.ops.mul(T6, T17)
    T19 = fd.ops.cast(T18, dtype=DataType.{dtype})
    T20 = fd.ops.mul(T4, T10)
    T21 = fd.ops.sum(T20, dims=[0], keepdim=False, dtype=DataType.Null)
    T22 = fd.ops.cast(T21, dtype=DataType.{dtype})
    fd.add_output(T19)
    fd.add_output(T22)

inputs = [
    torch.randn({rows}, {hidden}, dtype=torch.{torch_dtype}, device="cuda"),
    torch.randn({rows}, {hidden}, dtype=torch.{torch_dtype}, device="cuda"),
    torch.rand({rows}, 1, dtype=torch.float32, device="cuda"),
    torch.randn({hidden}, dtype=torch.{torch_dtype}, device="cuda"),
]
"""


def _layer_norm_backward(rows: int, hidden: int, dtype: str = "BFloat16") -> str:
    text = (SAMPLES_DIR / "layer_norm_bwd.py").read_text().replace("16384", str(rows)).replace("4096", str(hidden))
    if dtype == "Float":
        text = text.replace("DataType.BFloat16", "DataType.Float").replace("torch.bfloat16", "torch.float32")
    return text


def _only_kernel(script: str) -> tuple[object, k.Kernel, object, list[object]]:
    runtime, inputs = runtime_and_inputs(script)
    (group,) = [g for g in runtime.segmented.groups if generates_kernel(g)]
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    return group, kernel, runtime, inputs


def _grouped_reductions(kernel: k.Kernel) -> list[k.ParallelReduce]:
    return [s for s in k.walk(kernel.body) if isinstance(s, k.ParallelReduce) and s.grouped]


def test_layer_norm_backward_holds_two_rows_as_bf16_and_reduces_their_four_sums_at_once():
    # 2,001 rows over the blocks: an odd share in some blocks, whose second row of a group
    # lies past it (the group's own check), and rows past N in the last blocks.
    group, kernel, runtime, inputs = _only_kernel(_layer_norm_backward(2001, 1024))
    params = group.params
    assert (params.row_group, params.buffers_projected_to_inputs) == (2, True)
    assert params.buffers == (1,)  # x, as the bf16 input; x_hat computed again where read
    (joined, paired) = [s for s in k.walk(kernel.body) if isinstance(s, k.ParallelReduce) and not s.block_dims][:2]
    assert joined.joined and paired.paired is joined
    assert _grouped_reductions(kernel) == [joined, paired]
    assert (joined.count, paired.count, paired.warps) == (2, 2, 4)  # 128 threads: 1024 / 8
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_rms_norm_backward_groups_its_one_row_sum():
    script = RMS_NORM_BACKWARD.format(rows=1999, hidden=1024, dtype="BFloat16", torch_dtype="bfloat16")
    group, kernel, runtime, inputs = _only_kernel(script)
    assert group.params.row_group == 2
    (grouped,) = _grouped_reductions(kernel)
    assert grouped.paired is None and not grouped.joined and grouped.count == 2
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_float_rows_are_not_grouped():
    # x_hat as float takes the bytes of float x: nothing to project, so two rows would hold twice.
    group, kernel, runtime, inputs = _only_kernel(_layer_norm_backward(2000, 512, "Float"))
    assert group.params.row_group == 1
    assert _grouped_reductions(kernel) == []
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


# -- the pass on hand-built kernel IR ---------------------------------------------------------


def _row_loop(body: list[k.Stmt]) -> k.For:
    return k.For(k.Var(IDX, "g"), k.Const(IDX, 2), k.LoopKind.group, body, label="iG0{2}")


def _reduce(buffer: str) -> k.ParallelReduce:
    return k.ParallelReduce("add", (buffer,), k.Const(IDX, 0), (F32,), ("threadIdx.x",), workspace=("scratch",))


def _launch(threads: int) -> list[k.LaunchDim]:
    return [k.LaunchDim("threadIdx.x", k.Const(IDX, threads))]


def test_the_loop_splits_at_its_reduction_and_its_arrays_grow_by_the_group():
    g = k.Var(IDX, "g")
    red = _reduce("s")
    loop = _row_loop(
        [
            k.Alloc("s", F32, 1, k.Memory.local, init=k.Const(F32, 0)),
            k.Store("s", k.Const(IDX, 0), k.Read(F32, "x", g)),
            red,
            k.Store("out", g, k.Read(F32, "s", k.Const(IDX, 0))),
        ]
    )
    body: list[k.Stmt] = [loop]
    group_loop_reductions(body, _launch(256), set())
    (alloc, first, reduce, second) = body
    assert isinstance(alloc, k.Alloc) and alloc.size == 2
    assert isinstance(first, k.For) and isinstance(second, k.For) and first.kind == second.kind == k.LoopKind.group
    assert reduce is red and (red.count, red.grouped, red.warps) == (2, True, 8)
    (store,) = first.body
    assert isinstance(store, k.Store) and k.expr_text(store.index) == "g"
    (write,) = second.body
    assert isinstance(write, k.Store) and k.expr_text(write.value.index) == "g"  # type: ignore[attr-defined]


def test_a_loop_whose_scalar_crosses_the_reduction_is_left_as_it_is():
    g = k.Var(IDX, "g")
    v = k.Var(F32, "v")
    loop = _row_loop(
        [
            k.Alloc("s", F32, 1, k.Memory.local, init=k.Const(F32, 0)),
            k.Define(v, k.Read(F32, "x", g)),
            k.Store("s", k.Const(IDX, 0), v),
            _reduce("s"),
            k.Store("out", g, k.Bin(F32, "+", k.Read(F32, "s", k.Const(IDX, 0)), v)),
        ]
    )
    body: list[k.Stmt] = [loop]
    group_loop_reductions(body, _launch(256), set())
    assert body == [loop] and not any(isinstance(s, k.ParallelReduce) and s.grouped for s in k.walk(body))


def test_a_launch_without_a_fixed_block_leaves_the_warps_to_the_kernel():
    loop = _row_loop(
        [
            k.Alloc("s", F32, 1, k.Memory.local, init=k.Const(F32, 0)),
            _reduce("s"),
        ]
    )
    body: list[k.Stmt] = [loop]
    group_loop_reductions(body, [k.LaunchDim("threadIdx.x", k.TensorField(IDX, "T0", "logical_size", 1))], set())
    (red,) = [s for s in k.walk(body) if isinstance(s, k.ParallelReduce)]
    assert (red.grouped, red.warps) == (True, 0)


SOFTMAX_BESIDE_A_COLUMN_SUM = """
import torch
from nvfuser import FusionDefinition, DataType
def softmax_colsum(fd : FusionDefinition) -> None :
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.BFloat16, is_cpu=False)
    T1 = fd.ops.cast(T0, dtype=DataType.Float)
    T2 = fd.ops.max(T1, dims=[1], keepdim=False, dtype=DataType.Null)
    T3 = fd.ops.broadcast_in_dim(T2, shape=[2113, 512], broadcast_dims=[0])
    T4 = fd.ops.sub(T1, T3)
    T5 = fd.ops.exp(T4)
    T6 = fd.ops.sum(T5, dims=[1], keepdim=False, dtype=DataType.Null)
    T7 = fd.ops.broadcast_in_dim(T6, shape=[2113, 512], broadcast_dims=[0])
    T8 = fd.ops.div(T5, T7)
    T9 = fd.ops.cast(T8, dtype=DataType.BFloat16)
    T10 = fd.ops.sum(T8, dims=[0], keepdim=False, dtype=DataType.Null)
    fd.add_output(T9)
    fd.add_output(T10)

inputs = [torch.randn(2113, 512, dtype=torch.bfloat16, device="cuda")]
"""


def test_a_sum_that_reads_another_reduction_keeps_its_rows_one_at_a_time():
    # softmax's sum reads its max: the two cannot reduce in one call, so holding two rows
    # would buy nothing (and halve the row blocks)
    group, kernel, runtime, inputs = _only_kernel(SOFTMAX_BESIDE_A_COLUMN_SUM)
    assert group.scheduler.value == "inner_outer_persistent" and group.params.row_group == 1
    assert _grouped_reductions(kernel) == []
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_rows_that_would_go_to_shared_memory_are_not_grouped():
    # layer norm backward at 9216 wide: two rows' buffers need shared memory, where codegen
    # keeps no projected input (it crashed lowering: the review's KeyError); one row fits
    # the registers as before
    group, kernel, _, _ = _only_kernel(_layer_norm_backward(2048, 9216))
    assert (group.params.row_group, group.params.buffer_in_shared_memory) == (1, False)
    assert _grouped_reductions(kernel) == []


def test_a_buffer_allocated_outside_the_group_loop_keeps_the_loop_whole():
    # `t` carries each row's value across the reduction but is not one of the loop's own
    # arrays (a row in shared memory is allocated at the kernel's top): split, the second
    # row would overwrite it before the first row's outputs read it
    g, tx = k.Var(IDX, "g"), k.Var(IDX, "tx")
    row = k.Bin(IDX, "+", k.Bin(IDX, "*", g, k.Const(IDX, 32)), tx)
    loop = _row_loop(
        [
            k.For(
                tx,
                k.Const(IDX, 32),
                k.LoopKind.thread,
                [
                    k.Alloc("s", F32, 1, k.Memory.local, init=k.Const(F32, 0)),
                    k.Store("t", k.Const(IDX, 0), k.Read(F32, "T0", row)),
                    k.Store("s", k.Const(IDX, 0), k.Read(F32, "t", k.Const(IDX, 0))),
                    _reduce("s"),
                    k.Store(
                        "T1", row, k.Bin(F32, "+", k.Read(F32, "s", k.Const(IDX, 0)), k.Read(F32, "t", k.Const(IDX, 0)))
                    ),
                ],
                hardware="threadIdx.x",
            )
        ]
    )
    body: list[k.Stmt] = [k.Alloc("t", F32, 1, k.Memory.local), loop]
    group_loop_reductions(body, _launch(32), set())
    assert body[1] is loop and not any(isinstance(s, k.ParallelReduce) and s.grouped for s in k.walk(body))


# -- every row's loads before any row's arithmetic ------------------------------------------


def _group_loops(kernel: k.Kernel) -> list[k.For]:
    return [s for s in k.walk(kernel.body) if isinstance(s, k.For) and s.kind == k.LoopKind.group]


def _global_reads(stmts: list[k.Stmt], globals_: set[str]) -> set[str]:
    from fuser_core.codegen.lower.grid_groups import stmt_reads

    return {name for s in stmts for name in stmt_reads(s)} & globals_


def test_layer_norm_backward_loads_both_rows_before_summing_either():
    # H100, bf16 [16384, 4096]: 202.1 -> 187.6 us, outputs bit-identical (RESULTS.md). The
    # loads loop reads dy, x, mean and rstd; the sums loop reads no global tensor but the
    # weight's (loaded once per block, before the row loop)
    _, kernel, runtime, inputs = _only_kernel(_layer_norm_backward(2001, 1024))
    globals_ = {t.name for t in kernel.tensors}
    loads, sums, outputs = _group_loops(kernel)
    assert _global_reads(loads.body, globals_) == {"T0", "T1", "T2", "T3"}
    assert _global_reads(sums.body, globals_) <= {"T0", "T3"}  # only their sizes, in checks
    assert not any(isinstance(s, k.Store) and s.buffer in globals_ for s in k.walk(loads.body))
    assert loads.index == sums.index == outputs.index
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


def test_layer_norm_backward_sums_each_element_under_one_check():
    # the partial row sums (checked against rstd's rows) and the column sums (against dy's)
    # were two branches: the same rows, spelled through two tensors' sizes. In one branch the
    # compiler computes x_hat once for both
    _, kernel, _, _ = _only_kernel(_layer_norm_backward(2001, 1024))
    _, sums, _ = _group_loops(kernel)
    (element_loop,) = [s for s in k.walk(sums.body) if isinstance(s, k.For) and k.expr_text(s.extent) == "8"]
    (branch,) = element_loop.body
    assert isinstance(branch, k.If)
    written = {s.buffer for s in k.walk(branch.then) if isinstance(s, k.Store)}
    assert len(written) == 4  # two row sums and two column sums


def _load(dst: str, src: str, g: k.Var) -> k.Store:
    return k.Store(dst, g, k.Read(F32, src, g))


def test_loads_go_first_only_when_they_read_nothing_the_loop_writes():
    g = k.Var(IDX, "g")

    def split_loops(statements: list[k.Stmt]) -> list[k.For]:
        loop = _row_loop(
            [
                k.Alloc("a", F32, 1, k.Memory.local),
                k.Alloc("b", F32, 1, k.Memory.local),
                k.Alloc("s", F32, 1, k.Memory.local, init=k.Const(F32, 0)),
                *statements,
                _reduce("s"),
                k.Store("out", g, k.Read(F32, "s", k.Const(IDX, 0))),
            ]
        )
        body: list[k.Stmt] = [loop]
        group_loop_reductions(body, _launch(256), {"x", "y", "out"})
        return [s for s in body if isinstance(s, k.For)]

    zero = k.Const(IDX, 0)
    add_a = k.Store("s", zero, k.Read(F32, "a", zero))
    add_b = k.Store("s", zero, k.Bin(F32, "+", k.Read(F32, "s", zero), k.Read(F32, "b", zero)))
    # b's load reads nothing the loop writes: it goes ahead of a's sum, with a's load
    loads, sums, _ = split_loops([_load("a", "x", g), add_a, _load("b", "y", g), add_b])
    assert [s.buffer for s in loads.body] == ["a", "b"] and [s.buffer for s in sums.body] == ["s", "s"]  # type: ignore[attr-defined]
    # an index read from a value the loop computed: that load waits for it
    dependent = k.Store("b", k.Const(IDX, 0), k.Read(F32, "y", k.Cast(IDX, k.Read(F32, "a", k.Const(IDX, 0)))))
    loads, sums, _ = split_loops([_load("a", "x", g), add_a, dependent, add_b])
    assert [s.buffer for s in loads.body] == ["a"] and [s.buffer for s in sums.body] == ["s", "b", "s"]  # type: ignore[attr-defined]


def test_a_load_of_a_global_the_row_stores_stays_after_the_store():
    # the review's case: out[g] stored, then read back; hoisted, the read would come first
    g = k.Var(IDX, "g")
    store_out = k.Store("out", g, k.Const(F32, 1.0))
    load_back = k.Store("a", k.Const(IDX, 0), k.Read(F32, "out", g))
    assert _loads_first([store_out, load_back], {"a"}, {"out", "x"}) == ([], [store_out, load_back])


def test_an_array_initialized_from_a_scalar_of_the_first_part_keeps_the_loop_whole():
    # the review of the row groups: an Alloc's initial value read a Define of the part before
    # the reduction, unseen by the crossing check. Split, it would read the group's last row's
    g, v = k.Var(IDX, "g"), k.Var(F32, "v")
    loop = _row_loop(
        [
            k.Alloc("s", F32, 1, k.Memory.local, init=k.Const(F32, 0)),
            k.Define(v, k.Read(F32, "x", g)),
            k.Store("s", k.Const(IDX, 0), v),
            _reduce("s"),
            k.Alloc("t", F32, 1, k.Memory.local, init=v),
            k.Store("out", g, k.Bin(F32, "+", k.Read(F32, "s", k.Const(IDX, 0)), k.Read(F32, "t", k.Const(IDX, 0)))),
        ]
    )
    body: list[k.Stmt] = [loop]
    group_loop_reductions(body, _launch(256), set())
    assert body == [loop] and not any(isinstance(s, k.ParallelReduce) and s.grouped for s in k.walk(body))
