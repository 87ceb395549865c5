"""The kernel-IR interpreter on hand-written kernels: results against NumPy, and the
faults (out of bounds, misaligned vectors, races, missing syncs) it must catch."""

import ml_dtypes
import numpy as np
import pytest

from fuser_core.codegen.interpreter import KernelFault, LaneWrites, TensorBinding, interpret, launch_dims
from fuser_core.codegen.kernel_ir import (
    Alloc,
    Bin,
    Call,
    Cast,
    Const,
    Define,
    For,
    If,
    Kernel,
    LaunchDim,
    LoopKind,
    Memory,
    Node,
    ParallelReduce,
    Read,
    ScalarArg,
    ScalarParam,
    Stmt,
    Store,
    Sync,
    TensorArg,
    TensorField,
    Un,
    Var,
    VectorCopy,
)
from fuser_core.ir.dtype import DataType

IDX = DataType.Int32
I64 = DataType.Int
F32 = DataType.Float
F16 = DataType.Half
BOOL = DataType.Bool


# -- tiny builders ---------------------------------------------------------------------


def c(value, dtype=IDX) -> Const:
    return Const(dtype, value)


def var(name, dtype=IDX) -> Var:
    return Var(dtype, name)


def bin_(op, a, b, dtype=None) -> Bin:
    if dtype is None:
        dtype = BOOL if op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||") else a.dtype
    return Bin(dtype, op, a, b)


def size(tensor, axis=0) -> TensorField:
    return TensorField(IDX, tensor, "logical_size", axis)


def stride(tensor, axis) -> TensorField:
    return TensorField(IDX, tensor, "alloc_stride", axis)


def ceil_div(a, b) -> Call:
    return Call(IDX, "ceilDiv", (a, b))


def tensor(name, dtype=F32, ndim=1, output=False, position=0) -> TensorArg:
    return TensorArg(name, dtype, ndim, ndim, output, position)


def grid_1d(tile: int, extent: Node, body: list[Stmt], guarded=False) -> list[Stmt]:
    """`i = blockIdx.x * tile + threadIdx.x` around `body`."""
    i = bin_("+", bin_("*", var("bx"), c(tile)), var("tx"))
    return [
        For(
            var("bx"),
            ceil_div(extent, c(tile)),
            LoopKind.block,
            hardware="blockIdx.x",
            body=[For(var("tx"), c(tile), LoopKind.thread, [Define(var("i"), i), *body], "threadIdx.x", guarded)],
        )
    ]


def bind(*arrays) -> dict[str, TensorBinding]:
    return {f"T{n}": TensorBinding.of(a) for n, a in enumerate(arrays)}


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def rand(rng, *shape, dtype=np.float32):
    """Random values away from zero, so that a zero-filled result can never pass."""
    values = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return values.astype(dtype)


# -- 1-D pointwise with a tail predicate -------------------------------------------------


def pointwise_kernel(predicated=True) -> Kernel:
    """T1[i] = T0[i] * 2 + s0 for i < T0.size, 128 threads a block."""
    i = var("i")
    value = bin_("+", bin_("*", Read(F32, "T0", i), c(2.0, F32)), ScalarParam(F32, "s0"))
    store: Stmt = Store("T1", i, value)
    if predicated:
        store = If(bin_("<", i, size("T0")), [store])
    return Kernel(
        "pointwise",
        [tensor("T0"), tensor("T1", output=True)],
        [ScalarArg("s0", F32, 0)],
        grid_1d(128, size("T0"), [store]),
        [LaunchDim("blockIdx.x", ceil_div(size("T0"), c(128))), LaunchDim("threadIdx.x", c(128))],
        IDX,
    )


def test_pointwise_with_tail_predicate(rng):
    x = rand(rng, 1000)
    out = np.full(1000, np.nan, np.float32)
    kernel = pointwise_kernel()
    assert launch_dims(kernel, bind(x, out), {"s0": 0.25}) == ((8, 1, 1), (128, 1, 1))
    interpret(kernel, bind(x, out), {"s0": 0.25})
    np.testing.assert_array_equal(out, x * np.float32(2) + np.float32(0.25))


def test_missing_tail_predicate_is_an_out_of_bounds_read_naming_buffer_index_and_lane(rng):
    x, out = rand(rng, 1000), np.zeros(1000, np.float32)
    # 1000 = 7 * 128 + 104: the first lane past the end is thread 104 of block 7.
    lane = r"blockIdx=\(7, 0, 0\) threadIdx=\(104, 0, 0\)"
    with pytest.raises(KernelFault, match=r"pointwise: read of T0\[1000\] out of bounds .*" + lane):
        interpret(pointwise_kernel(predicated=False), bind(x, out), {"s0": 1.0})


def test_out_of_bounds_write_on_an_active_lane(rng):
    x, out = rand(rng, 128), np.zeros(100, np.float32)  # the output is shorter than the input
    with pytest.raises(KernelFault, match=r"write to T1\[100\] out of bounds .*threadIdx=\(100, 0, 0\)"):
        interpret(pointwise_kernel(), bind(x, out), {"s0": 1.0})


def test_lane_writes_record_which_thread_wrote_each_element(rng):
    x, out = rand(rng, 300), np.full(300, np.nan, np.float32)
    writes = LaneWrites()
    interpret(pointwise_kernel(), bind(x, out), {"s0": 1.0}, lane_writes=writes)
    assert set(writes.lane) == {"T1"}  # outputs only
    np.testing.assert_array_equal(writes.count["T1"], np.ones(300))
    coords = writes.coordinates("T1")
    e = np.arange(300)
    np.testing.assert_array_equal(coords[:, 0], e // 128)
    np.testing.assert_array_equal(coords[:, 3], e % 128)
    np.testing.assert_array_equal(coords[:, [1, 2, 4, 5]], 0)
    assert writes.writer("T1", 130) == ((1, 0, 0), (2, 0, 0))


def test_lane_writes_leave_unwritten_elements_unattributed(rng):
    x, out = rand(rng, 10), np.full(20, np.nan, np.float32)  # the kernel covers T0's 10 elements
    writes = LaneWrites()
    interpret(pointwise_kernel(), bind(x, out), {"s0": 1.0}, lane_writes=writes)
    assert writes.writer("T1", 9) == ((0, 0, 0), (9, 0, 0))
    assert writes.writer("T1", 10) is None
    assert np.isnan(out[10:]).all()


def test_writing_an_input_is_a_fault(rng):
    x = rand(rng, 8)
    kernel = Kernel(
        "writes_input",
        [tensor("T0"), tensor("T1", output=True)],
        [],
        grid_1d(8, size("T0"), [Store("T0", var("i"), c(1.0, F32))]),
        [],
        IDX,
    )
    with pytest.raises(KernelFault, match="writes to input T0"):
        interpret(kernel, bind(x, np.zeros(8, np.float32)), grid=(1, 1, 1), block=(8, 1, 1))


def test_two_threads_writing_different_values_to_one_element_is_a_race(rng):
    x, out = rand(rng, 8), np.zeros(4, np.float32)
    store = Store("T1", bin_("/", var("i"), c(2)), Read(F32, "T0", var("i")))
    kernel = Kernel("race", [tensor("T0"), tensor("T1", output=True)], [], grid_1d(8, c(8), [store]), [], IDX)
    with pytest.raises(KernelFault, match=r"data race: .*threadIdx=\(0, 0, 0\) and .*threadIdx=\(1, 0, 0\).*T1\[0\]"):
        interpret(kernel, bind(x, out), grid=(1, 1, 1), block=(8, 1, 1))


# -- vectorized copies -------------------------------------------------------------------


def vector_kernel(offset: int) -> Kernel:
    """Each thread: 4 elements T0[4t + offset ..] -> registers, times 3, -> T1[4t ..]."""
    t = var("tx")
    j = var("j")
    return Kernel(
        "vector_copy",
        [tensor("T0"), tensor("T1", output=True)],
        [],
        [
            For(
                t,
                c(16),
                LoopKind.thread,
                hardware="threadIdx.x",
                body=[
                    Alloc("T2", F32, 4, Memory.local),
                    VectorCopy("T2", c(0), "T0", bin_("+", bin_("*", t, c(4)), c(offset)), 4, F32),
                    For(j, c(4), LoopKind.unroll, [Store("T2", j, bin_("*", Read(F32, "T2", j), c(3.0, F32)))]),
                    VectorCopy("T1", bin_("*", t, c(4)), "T2", c(0), 4, F32),
                ],
            )
        ],
        [LaunchDim("threadIdx.x", c(16))],
        IDX,
        vectorized=True,
    )


def test_vectorized_copy_through_registers(rng):
    x, out = rand(rng, 64), np.full(64, np.nan, np.float32)
    writes = LaneWrites()
    interpret(vector_kernel(0), bind(x, out), lane_writes=writes)
    np.testing.assert_array_equal(out, x * np.float32(3))
    np.testing.assert_array_equal(writes.coordinates("T1")[:, 3], np.arange(64) // 4)


def test_unaligned_vector_access_is_a_fault_naming_kernel_buffer_and_index(rng):
    x, out = rand(rng, 68), np.zeros(64, np.float32)  # in bounds, but 2 elements off alignment
    with pytest.raises(KernelFault, match=r"vector_copy: vector x4 access to T0\[2\] is not aligned to 4"):
        interpret(vector_kernel(2), bind(x, out))


def test_vector_access_straddling_the_end_is_out_of_bounds(rng):
    x, out = rand(rng, 66), np.zeros(64, np.float32)  # thread 15 would read T0[64 .. 67]
    with pytest.raises(KernelFault, match=r"vector x4 access to T0\[64 \.\. 67\] out of bounds .*threadIdx=\(15"):
        interpret(vector_kernel(4), bind(x, out))


# -- pad: a predicated load and `where` ---------------------------------------------------


def pad_kernel(left: int, guarded_load: bool) -> Kernel:
    """T1 = pad(T0, [left, ...], 7.5): nvFuser's shape, a zeroed register loaded under the
    in-range predicate, then `where(in_range, register, pad value)`."""
    i = var("i")
    src = bin_("-", i, c(left))
    in_range = bin_("&&", bin_(">=", src, c(0)), bin_("<", src, size("T0")))
    if guarded_load:
        load = [
            Alloc("T2", F32, 1, Memory.local, zero=True),
            If(var("in_range", BOOL), [Store("T2", c(0), Read(F32, "T0", src))]),
        ]
        value: Node = Read(F32, "T2", c(0))
    else:  # `where` evaluates both arguments, as a C function call does
        load, value = [], Read(F32, "T0", src)
    body = [
        Define(var("in_range", BOOL), in_range),
        *load,
        Store("T1", i, Call(F32, "where", (var("in_range", BOOL), value, c(7.5, F32)))),
    ]
    return Kernel(
        "pad",
        [tensor("T0"), tensor("T1", output=True, position=0)],
        [],
        grid_1d(32, size("T1"), [If(bin_("<", i, size("T1")), body)]),
        [LaunchDim("blockIdx.x", ceil_div(size("T1"), c(32))), LaunchDim("threadIdx.x", c(32))],
        IDX,
    )


def test_pad_with_where_and_an_out_of_range_predicate(rng):
    x = rand(rng, 37)
    out = np.full(37 + 3 + 5, np.nan, np.float32)
    interpret(pad_kernel(3, guarded_load=True), bind(x, out))
    np.testing.assert_array_equal(out, np.pad(x, (3, 5), constant_values=7.5))


def test_pad_with_if_else(rng):
    x = rand(rng, 37)
    out = np.full(45, np.nan, np.float32)
    i = var("i")
    src = bin_("-", i, c(3))
    in_range = bin_("&&", bin_(">=", src, c(0)), bin_("<", src, size("T0")))
    body = If(in_range, [Store("T1", i, Read(F32, "T0", src))], [Store("T1", i, c(-7.5, F32))])
    kernel = Kernel(
        "pad_if_else",
        [tensor("T0"), tensor("T1", output=True)],
        [],
        grid_1d(32, size("T1"), [If(bin_("<", i, size("T1")), [body])]),
        [LaunchDim("blockIdx.x", ceil_div(size("T1"), c(32))), LaunchDim("threadIdx.x", c(32))],
        IDX,
    )
    interpret(kernel, bind(x, out))
    np.testing.assert_array_equal(out, np.pad(x, (3, 5), constant_values=-7.5))


def test_where_does_not_protect_an_unpredicated_read(rng):
    x, out = rand(rng, 37), np.zeros(45, np.float32)
    with pytest.raises(KernelFault, match=r"read of T0\[-3\] out of bounds .*threadIdx=\(0, 0, 0\)"):
        interpret(pad_kernel(3, guarded_load=False), bind(x, out))


def test_and_short_circuits_a_read_the_left_side_rules_out(rng):
    x = rand(rng, 10)
    out = np.zeros(16, bool)
    i = var("i")
    # i < 10 && T0[i] > 0: the read runs only for i < 10, as in C.
    positive = bin_("&&", bin_("<", i, size("T0")), bin_(">", Read(F32, "T0", i), c(0.0, F32)))
    kernel = Kernel(
        "short_circuit",
        [tensor("T0"), tensor("T1", BOOL, output=True)],
        [],
        grid_1d(16, c(16), [Store("T1", i, positive)]),
        [],
        IDX,
    )
    interpret(kernel, bind(x, out), grid=(1, 1, 1), block=(16, 1, 1))
    np.testing.assert_array_equal(out, np.concatenate([x > 0, np.zeros(6, bool)]))


# -- 2-D tile transpose through shared memory ----------------------------------------------

TILE = 8


def transpose_kernel(sync=True, sync_inside_guard=False) -> Kernel:
    """T1[c, r] = T0[r, c] by 8x8 tiles on 16x8 blocks: threadIdx.x is guarded to 8."""
    bx, by, tx, ty = var("bx"), var("by"), var("tx"), var("ty")
    rows, cols = size("T0", 0), size("T0", 1)

    def threads(body: list[Stmt]) -> For:
        inner = For(tx, c(TILE), LoopKind.thread, body, "threadIdx.x", guarded=True)
        return For(ty, c(TILE), LoopKind.thread, [inner], "threadIdx.y")

    r = bin_("+", bin_("*", by, c(TILE)), ty)
    col = bin_("+", bin_("*", bx, c(TILE)), tx)
    load = If(
        bin_("&&", bin_("<", r, rows), bin_("<", col, cols)),
        [
            Store(
                "S",
                bin_("+", bin_("*", ty, c(TILE)), tx),
                Read(F32, "T0", bin_("+", bin_("*", r, stride("T0", 0)), bin_("*", col, stride("T0", 1)))),
            )
        ],
    )
    out_row = bin_("+", bin_("*", bx, c(TILE)), ty)  # an input column
    out_col = bin_("+", bin_("*", by, c(TILE)), tx)  # an input row
    store = If(
        bin_("&&", bin_("<", out_row, cols), bin_("<", out_col, rows)),
        [
            Store(
                "T1",
                bin_("+", bin_("*", out_row, stride("T1", 0)), bin_("*", out_col, stride("T1", 1))),
                Read(F32, "S", bin_("+", bin_("*", tx, c(TILE)), ty)),
            )
        ],
    )
    first = threads([load, Sync()] if sync_inside_guard else [load])
    tile: list[Stmt] = [Alloc("S", F32, TILE * TILE, Memory.shared), first]
    if sync:
        tile.append(Sync())
    tile.append(threads([store]))
    blocks = For(
        bx,
        ceil_div(cols, c(TILE)),
        LoopKind.block,
        [For(by, ceil_div(rows, c(TILE)), LoopKind.block, tile, "blockIdx.y")],
        "blockIdx.x",
    )
    return Kernel(
        "transpose",
        [tensor("T0", ndim=2), tensor("T1", ndim=2, output=True, position=0)],
        [],
        [blocks],
        [
            LaunchDim("blockIdx.x", ceil_div(cols, c(TILE))),
            LaunchDim("blockIdx.y", ceil_div(rows, c(TILE))),
            LaunchDim("threadIdx.x", c(TILE)),
            LaunchDim("threadIdx.x", c(2 * TILE)),  # a wider sibling loop would need 16
            LaunchDim("threadIdx.y", c(TILE)),
        ],
        IDX,
    )


def test_tile_transpose_through_shared_memory(rng):
    x = rand(rng, 19, 21)
    out = np.full((21, 19), np.nan, np.float32)
    kernel = transpose_kernel()
    assert launch_dims(kernel, bind(x, out)) == ((3, 3, 1), (16, 8, 1))
    writes = LaneWrites()
    interpret(kernel, bind(x, out), lane_writes=writes)
    np.testing.assert_array_equal(out, x.T)
    np.testing.assert_array_equal(writes.count["T1"], 1)
    # T1[c, r] is written by threadIdx=(r % 8, c % 8) of blockIdx=(c // 8, r // 8).
    assert writes.writer("T1", 10 * 19 + 13) == ((1, 1, 0), (5, 2, 0))


def test_reading_another_threads_shared_write_without_sync_is_a_fault(rng):
    x, out = rand(rng, 19, 21), np.zeros((21, 19), np.float32)
    with pytest.raises(KernelFault, match=r"reads shared S\[8\] written by threadIdx=\(0, 1, 0\) with no Sync"):
        interpret(transpose_kernel(sync=False), bind(x, out))


def test_sync_reached_by_part_of_a_block_is_a_fault(rng):
    x, out = rand(rng, 19, 21), np.zeros((21, 19), np.float32)
    with pytest.raises(KernelFault, match=r"Sync reached by only part of a block .*threadIdx=\(8, 0, 0\)"):
        interpret(transpose_kernel(sync_inside_guard=True), bind(x, out))


def test_every_hardware_index_binds_its_own_axis():
    """A (2, 1, 3) x (2, 3, 2) launch: each thread writes the coordinates it sees, at the
    element its coordinates select, so a swapped or mis-unravelled axis shows."""
    names = ("bx", "by", "bz", "tx", "ty", "tz")
    hardware = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")
    dims = (2, 1, 3, 2, 3, 2)
    element: Node = c(0)
    for name, dim in zip(names, dims, strict=True):  # row-major over (bx, by, bz, tx, ty, tz)
        element = bin_("+", bin_("*", element, c(dim)), var(name))
    body: list[Stmt] = [
        Store("T0", bin_("+", bin_("*", element, c(6)), c(k)), Cast(DataType.Int, var(name)))
        for k, name in enumerate(names)
    ]
    for name, hw, dim in reversed(list(zip(names, hardware, dims, strict=True))):
        kind = LoopKind.block if hw.startswith("block") else LoopKind.thread
        body = [For(var(name), c(dim), kind, body, hw)]
    kernel = Kernel("axes", [tensor("T0", DataType.Int, output=True)], [], body, [], IDX)
    out = np.full(72 * 6, -1, np.int64)
    writes = LaneWrites()
    interpret(kernel, bind(out), grid=(2, 1, 3), block=(2, 3, 2), lane_writes=writes)
    expected = np.stack(np.unravel_index(np.arange(72), dims), axis=1)
    np.testing.assert_array_equal(out.reshape(72, 6), expected)
    np.testing.assert_array_equal(writes.coordinates("T0")[::6], expected)


def test_unguarded_binding_narrower_than_the_launch_is_a_fault(rng):
    x, out = rand(rng, 64), np.zeros(64, np.float32)
    with pytest.raises(KernelFault, match=r"threadIdx\.x loop tx has extent 16 < launched 32 but is not guarded"):
        interpret(vector_kernel(0), bind(x, out), grid=(1, 1, 1), block=(32, 1, 1))


def test_launch_too_small_for_a_bound_loop_is_a_fault(rng):
    x, out = rand(rng, 64), np.zeros(64, np.float32)
    with pytest.raises(KernelFault, match=r"threadIdx\.x loop tx needs 16 but the launch has 8"):
        interpret(vector_kernel(0), bind(x, out), grid=(1, 1, 1), block=(8, 1, 1))


# -- C semantics ---------------------------------------------------------------------------


def int_kernel(guard_zero: bool) -> Kernel:
    """T2 = T0 / T1, T3 = T0 % T1, T4 = (T0 < T1) || (T0 == 0), T5 = -T0 >> 1 (int32)."""
    i = var("i")
    a, b = Read(IDX, "T0", i), Read(IDX, "T1", i)
    body: list[Stmt] = [
        Store("T2", i, bin_("/", a, b)),
        Store("T3", i, bin_("%", a, b)),
        Store("T4", i, bin_("||", bin_("<", a, b), bin_("==", a, c(0)))),
        Store("T5", i, bin_(">>", Un(IDX, "-", a), c(1))),
    ]
    if guard_zero:
        body = [If(bin_("!=", b, c(0)), body)]
    n = size("T0")
    return Kernel(
        "integers",
        [
            tensor("T0", IDX),
            tensor("T1", IDX),
            *(tensor(f"T{k}", BOOL if k == 4 else IDX, output=True, position=k - 2) for k in range(2, 6)),
        ],
        [],
        grid_1d(16, n, [If(bin_("<", i, n), body)]),
        [LaunchDim("blockIdx.x", ceil_div(n, c(16))), LaunchDim("threadIdx.x", c(16))],
        IDX,
    )


def test_integer_division_and_modulo_truncate_toward_zero(rng):
    a = np.array([7, -7, 7, -7, 0, 1, -1, 2**31 - 1, -(2**31) + 1, 13, -13, 5], np.int32)
    b = np.array([2, 2, -2, -2, 3, -1, 5, 2, 3, 13, 4, -4], np.int32)
    a = np.concatenate([a, rng.integers(-1000, 1000, 40, dtype=np.int32)])
    b = np.concatenate([b, rng.integers(1, 50, 40, dtype=np.int32) * rng.choice(np.array([-1, 1], np.int32), 40)])
    outs = [np.full(a.size, -99, np.int32) for _ in range(2)] + [np.zeros(a.size, bool), np.zeros(a.size, np.int32)]
    interpret(int_kernel(guard_zero=False), bind(a, b, *outs))
    quotient = np.fix(a.astype(np.float64) / b).astype(np.int32)
    np.testing.assert_array_equal(outs[0], quotient)
    np.testing.assert_array_equal(outs[1], a - b * quotient)
    np.testing.assert_array_equal(outs[0][:4], [3, -3, -3, 3])
    np.testing.assert_array_equal(outs[1][:4], [1, -1, 1, -1])
    np.testing.assert_array_equal(outs[2], (a < b) | (a == 0))
    np.testing.assert_array_equal(outs[3], (-a) >> 1)  # arithmetic shift: -7 >> 1 == -4


def test_integer_division_by_zero_fails_on_active_lanes_only(rng):
    a = rng.integers(-100, 100, 20, dtype=np.int32)
    b = rng.integers(1, 9, 20, dtype=np.int32)
    b[[3, 17]] = 0
    outs = [np.full(20, -99, np.int32), np.full(20, -99, np.int32), np.zeros(20, bool), np.zeros(20, np.int32)]
    with pytest.raises(KernelFault, match=r"integer division by zero .*threadIdx=\(3, 0, 0\)"):
        interpret(int_kernel(guard_zero=False), bind(a, b, *outs))
    interpret(int_kernel(guard_zero=True), bind(a, b, *outs))  # the If masks those lanes off
    ok = b != 0
    np.testing.assert_array_equal(outs[0][ok], np.fix(a[ok] / b[ok]).astype(np.int32))
    assert (outs[0][~ok] == -99).all()


def test_bfloat16_input_computes_in_float_and_rounds_on_store(rng):
    bf16 = DataType.BFloat16
    x = rand(rng, 50).astype(ml_dtypes.bfloat16)
    out = np.zeros(50, ml_dtypes.bfloat16)
    i = var("i")
    # T1 = bf16(float(T0) * 1.1f + 0.3f); T2 = float(bf16(float(T0) * 1.1f)) (float storage)
    product = bin_("*", Cast(F32, Read(bf16, "T0", i)), c(1.1, F32))
    value = Cast(bf16, bin_("+", product, c(0.3, F32)))
    rounded = Cast(F32, Cast(bf16, product))
    kernel = Kernel(
        "bf16",
        [tensor("T0", bf16), tensor("T1", bf16, output=True), tensor("T2", output=True, position=1)],
        [],
        grid_1d(32, size("T0"), [If(bin_("<", i, size("T0")), [Store("T1", i, value), Store("T2", i, rounded)])]),
        [LaunchDim("blockIdx.x", ceil_div(size("T0"), c(32))), LaunchDim("threadIdx.x", c(32))],
        IDX,
    )
    out_rounded = np.full(50, np.nan, np.float32)
    interpret(kernel, bind(x, out, out_rounded))
    expected = (x.astype(np.float32) * np.float32(1.1) + np.float32(0.3)).astype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(out.view(np.uint16), expected.view(np.uint16))
    expected_rounded = (x.astype(np.float32) * np.float32(1.1)).astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(out_rounded, expected_rounded)
    assert (out_rounded != x.astype(np.float32) * np.float32(1.1)).any()
    # The float intermediate is not bf16: rounding it first would differ somewhere.
    twice_rounded = (x.astype(np.float32) * np.float32(1.1)).astype(ml_dtypes.bfloat16).astype(np.float32)
    assert (out != (twice_rounded + np.float32(0.3)).astype(ml_dtypes.bfloat16)).any()


def test_float_to_int_cast_truncates(rng):
    x = np.array([2.7, -2.7, 0.5, -0.5, 1e3 + 0.9], np.float32)
    out = np.zeros(5, np.int32)
    i = var("i")
    kernel = Kernel(
        "cast_int",
        [tensor("T0"), tensor("T1", IDX, output=True)],
        [],
        grid_1d(8, c(8), [If(bin_("<", i, size("T0")), [Store("T1", i, Cast(IDX, Read(F32, "T0", i)))])]),
        [],
        IDX,
    )
    interpret(kernel, bind(x, out), grid=(1, 1, 1), block=(8, 1, 1))
    np.testing.assert_array_equal(out, [2, -2, 0, 0, 1000])


@pytest.mark.parametrize(
    ("fn", "reference"),
    [
        ("tanh", lambda x, y: np.tanh(x)),
        ("tanhf", lambda x, y: np.tanh(x)),  # the float spelling the printer may use
        ("fmax", np.maximum),
        ("rsqrt", lambda x, y: np.float32(1) / np.sqrt(np.abs(x))),
        ("lerp", lambda x, y: np.where(x < np.float32(0.5), x + x * (y - x), y - (y - x) * (np.float32(1) - x))),
    ],
)
def test_call_evaluates_ops_by_their_printed_names(rng, fn, reference):
    x, y, out = rand(rng, 40), rand(rng, 40), np.full(40, np.nan, np.float32)
    i = var("i")
    a, b = Read(F32, "T0", i), Read(F32, "T1", i)
    args: tuple[Node, ...] = {
        "fmax": (a, b),
        "rsqrt": (Call(F32, "abs", (a,)),),
        "lerp": (a, b, a),
    }.get(fn, (a,))
    kernel = Kernel(
        "call",
        [tensor("T0"), tensor("T1"), tensor("T2", output=True)],
        [],
        grid_1d(64, c(64), [If(bin_("<", i, size("T0")), [Store("T2", i, Call(F32, fn, args))])]),
        [],
        IDX,
    )
    interpret(kernel, bind(x, y, out), grid=(1, 1, 1), block=(64, 1, 1))
    np.testing.assert_allclose(out, reference(x, y), rtol=1e-6)


def test_unknown_device_function_is_named(rng):
    x, out = rand(rng, 4), np.zeros(4, np.float32)
    kernel = Kernel(
        "call",
        [tensor("T0"), tensor("T1", output=True)],
        [],
        grid_1d(4, c(4), [Store("T1", var("i"), Call(F32, "frobnicate", (Read(F32, "T0", var("i")),)))]),
        [],
        IDX,
    )
    with pytest.raises(KernelFault, match="unknown device function 'frobnicate'"):
        interpret(kernel, bind(x, out), grid=(1, 1, 1), block=(4, 1, 1))


# -- registers and loops -----------------------------------------------------------------


def test_unwritten_register_reads_poison_not_zero(rng):
    x, out = rand(rng, 4), np.zeros(4, np.float32)
    i = var("i")
    body: list[Stmt] = [
        Alloc("T2", F32, 2, Memory.local),
        Store("T2", c(0), Read(F32, "T0", i)),
        Store("T1", i, bin_("+", Read(F32, "T2", c(0)), Read(F32, "T2", c(1)))),  # T2[1] never written
    ]
    kernel = Kernel("poison", [tensor("T0"), tensor("T1", output=True)], [], grid_1d(4, c(4), body), [], IDX)
    interpret(kernel, bind(x, out), grid=(1, 1, 1), block=(4, 1, 1))
    assert np.isnan(out).all()


def test_serial_loop_extent_must_be_uniform(rng):
    x, out = rand(rng, 4), np.zeros(4, np.float32)
    loop = For(var("j"), var("tx"), LoopKind.serial, [Store("T1", var("i"), c(1.0, F32))])
    kernel = Kernel("ragged", [tensor("T0"), tensor("T1", output=True)], [], grid_1d(4, c(4), [loop]), [], IDX)
    with pytest.raises(KernelFault, match=r"extent of serial loop j \(tx\) differs across lanes: 0 on .*, 1 on"):
        interpret(kernel, bind(x, out), grid=(1, 1, 1), block=(4, 1, 1))


def test_serial_loop_accumulates_in_a_register(rng):
    """Each thread sums a row of T0 [rows, 5] with a serial loop over a register."""
    x, out = rand(rng, 6, 5), np.full(6, np.nan, np.float32)
    i, j = var("i"), var("j")
    element = Read(F32, "T0", bin_("+", bin_("*", i, stride("T0", 0)), j))
    body: list[Stmt] = [
        If(
            bin_("<", i, size("T0", 0)),
            [
                Alloc("acc", F32, 1, Memory.local, zero=True),
                For(
                    j, size("T0", 1), LoopKind.serial, [Store("acc", c(0), bin_("+", Read(F32, "acc", c(0)), element))]
                ),
                Store("T1", i, Read(F32, "acc", c(0))),
            ],
        )
    ]
    kernel = Kernel("row_sum", [tensor("T0", ndim=2), tensor("T1", output=True)], [], grid_1d(8, c(8), body), [], IDX)
    interpret(kernel, bind(x, out), grid=(1, 1, 1), block=(8, 1, 1))
    expected = np.zeros(6, np.float32)
    for k in range(5):
        expected += x[:, k]
    np.testing.assert_array_equal(out, expected)


def test_unbound_arguments_are_reported(rng):
    with pytest.raises(KernelFault, match="tensor argument T1 is not bound"):
        interpret(pointwise_kernel(), {"T0": TensorBinding.of(rand(rng, 4))}, {"s0": 1.0})
    with pytest.raises(KernelFault, match="scalar argument s0 is not given"):
        interpret(pointwise_kernel(), bind(rand(rng, 4), np.zeros(4, np.float32)))


# -- Alloc.init ----------------------------------------------------------------------------


def test_alloc_init_fills_registers_per_lane_and_shared_memory_converted_to_the_buffer_type(rng):
    """`init` wins over `zero`; a register array takes each lane's value, an int buffer
    the value converted as a cast would (truncated)."""
    offset = float(rand(rng, 1)[0])
    tx, k = var("tx"), var("k")
    per_lane = bin_("+", Cast(F32, tx), ScalarParam(F32, "s0"))
    body: list[Stmt] = [
        Alloc("a", F32, 3, Memory.local, zero=True, init=per_lane),
        Alloc("b", IDX, 2, Memory.shared, init=c(-2.7, F32)),
        Alloc("h", F16, 1, Memory.local, init=c(1.0 / 3.0, F32)),
        For(k, c(3), LoopKind.unroll, [Store("T0", bin_("+", bin_("*", tx, c(3)), k), Read(F32, "a", k))]),
        Store("T1", tx, Read(IDX, "b", c(1))),
        Store("T2", tx, Read(F16, "h", c(0))),
    ]
    kernel = Kernel(
        "init",
        [
            tensor("T0", output=True),
            tensor("T1", IDX, output=True, position=1),
            tensor("T2", F16, output=True, position=2),
        ],
        [ScalarArg("s0", F32, 0)],
        [For(tx, c(8), LoopKind.thread, body, "threadIdx.x")],
        [LaunchDim("threadIdx.x", c(8))],
        IDX,
    )
    out_a, out_b, out_h = np.full(24, np.nan, np.float32), np.zeros(8, np.int32), np.zeros(8, np.float16)
    interpret(kernel, bind(out_a, out_b, out_h), {"s0": offset})
    np.testing.assert_array_equal(
        out_a.reshape(8, 3), np.repeat(np.arange(8, dtype=np.float32) + np.float32(offset), 3).reshape(8, 3)
    )
    np.testing.assert_array_equal(out_b, -2)
    np.testing.assert_array_equal(out_h, np.float16(1.0 / 3.0))


# -- block and grid reductions ---------------------------------------------------------------

HW_NAMES = {
    "blockIdx.x": "bx",
    "blockIdx.y": "by",
    "blockIdx.z": "bz",
    "threadIdx.x": "tx",
    "threadIdx.y": "ty",
    "threadIdx.z": "tz",
}


def launch_nest(grid, block, body: list[Stmt]) -> list[Stmt]:
    """`body` inside one bound loop per hardware index, exactly as wide as the launch."""
    for (hw, name), dim in reversed(list(zip(HW_NAMES.items(), (*grid, *block), strict=True))):
        kind = LoopKind.block if hw.startswith("block") else LoopKind.thread
        body = [For(var(name), c(dim), kind, body, hw)]
    return body


def lane_index(grid, block) -> Node:
    """The lane's number, block-major with x fastest: one input and output element per lane."""
    b = bin_("+", bin_("*", bin_("+", bin_("*", var("bz"), c(grid[1])), var("by")), c(grid[0])), var("bx"))
    t = bin_("+", bin_("*", bin_("+", bin_("*", var("tz"), c(block[1])), var("ty")), c(block[0])), var("tx"))
    return bin_("+", bin_("*", b, c(int(np.prod(block)))), t)


def lane_coords(grid, block) -> dict[str, np.ndarray]:
    threads = int(np.prod(block))
    lane = np.arange(int(np.prod(grid)) * threads)
    coords = {}
    for kind, linear, dims in (("blockIdx", lane // threads, grid), ("threadIdx", lane % threads, block)):
        x, y, z = np.unravel_index(linear, dims[::-1])[::-1]
        coords.update({f"{kind}.x": x, f"{kind}.y": y, f"{kind}.z": z})
    return coords


def group_reduce(values, grid, block, reduced, reduce) -> np.ndarray:
    """Every lane's value combined over the lanes that differ from it only along `reduced`."""
    coords = lane_coords(grid, block)
    keys = np.stack([coords[hw] for hw in HW_NAMES if hw not in reduced], axis=1)
    _, group = np.unique(keys, axis=0, return_inverse=True)
    group = group.reshape(-1)
    result = np.empty_like(values)
    for g in range(group.max() + 1):
        result[group == g] = reduce(values[group == g])
    return result


def reduce_kernel(op, dtype, grid, block, thread_dims, block_dims=(), last=None, stored=None) -> Kernel:
    """acc = T0[lane]; reduce acc; T1[lane] = acc (under `stored` if given)."""
    lane = var("lane")
    store: Stmt = Store("T1", lane, Read(dtype, "acc", c(0)))
    body: list[Stmt] = [
        Define(lane, lane_index(grid, block)),
        Alloc("acc", dtype, 1, Memory.local),
        Store("acc", c(0), Read(dtype, "T0", lane)),
        ParallelReduce(op, ("acc",), c(0), (dtype,), thread_dims, block_dims, last=last),
        store if stored is None else If(stored, [store]),
    ]
    return Kernel(
        f"reduce_{op}",
        [tensor("T0", dtype), tensor("T1", dtype, output=True)],
        [],
        launch_nest(grid, block, body),
        [],
        IDX,
    )


def test_block_sum_over_threadIdx_x_stored_by_thread_0(rng):
    """Blocks of 8 x 2 threads, 6 blocks: each (block, threadIdx.y) row of 8 sums T0 and
    its squares (count 2); thread 0 of the row stores, every thread holds the result."""
    grid, block = (3, 2, 1), (8, 2, 1)
    n = 6 * 16
    x = rand(rng, n)
    lane, tx = var("lane"), var("tx")
    row = bin_("/", lane, c(8))
    body: list[Stmt] = [
        Define(lane, lane_index(grid, block)),
        Alloc("acc", F32, 2, Memory.local),
        Store("acc", c(0), Read(F32, "T0", lane)),
        Store("acc", c(1), bin_("*", Read(F32, "T0", lane), Read(F32, "T0", lane))),
        ParallelReduce("add", ("acc",), c(0), (F32,), ("threadIdx.x",), count=2),
        If(
            bin_("==", tx, c(0)),
            [Store("T1", row, Read(F32, "acc", c(0))), Store("T2", row, Read(F32, "acc", c(1)))],
        ),
        Store("T3", lane, Read(F32, "acc", c(0))),
    ]
    kernel = Kernel(
        "block_sum",
        [tensor("T0"), *(tensor(f"T{k}", output=True, position=k - 1) for k in (1, 2, 3))],
        [],
        launch_nest(grid, block, body),
        [],
        IDX,
    )
    sums, squares, every = (
        np.full(12, np.nan, np.float32),
        np.full(12, np.nan, np.float32),
        np.full(n, np.nan, np.float32),
    )
    writes = LaneWrites()
    interpret(kernel, bind(x, sums, squares, every), grid=grid, block=block, lane_writes=writes)
    rows = x.reshape(12, 8)
    np.testing.assert_allclose(sums, rows.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(squares, (rows * rows).sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(every, np.repeat(rows.sum(axis=1), 8), rtol=1e-5)
    np.testing.assert_array_equal(writes.coordinates("T1")[:, 3], 0)  # threadIdx.x == 0 stored


@pytest.mark.parametrize("op", ["max", "fmax", "min", "fmin"])
def test_max_and_min_reductions_propagate_nan(rng, op):
    grid, block = (4, 1, 1), (16, 1, 1)
    x = rand(rng, 64)
    x[[5, 17, 30]] = np.nan  # blocks 0 and 1 hold a NaN, 2 and 3 none
    out = np.zeros(64, np.float32)
    interpret(reduce_kernel(op, F32, grid, block, ("threadIdx.x",)), bind(x, out), grid=grid, block=block)
    ufunc = np.maximum if "max" in op else np.minimum
    expected = np.repeat(ufunc.reduce(x.reshape(4, 16), axis=1), 16)
    np.testing.assert_array_equal(out, expected)
    assert np.isnan(out[:32]).all() and not np.isnan(out[32:]).any()


def test_y_reduction_groups_threads_by_threadIdx_x(rng):
    """thread_dims threadIdx.y: each column (block, threadIdx.x, threadIdx.z) of 8 threads."""
    grid, block = (2, 1, 2), (4, 8, 2)
    x = rand(rng, 4 * 64)
    out = np.full(x.size, np.nan, np.float32)
    stored = bin_("==", var("ty"), c(0))
    kernel = reduce_kernel("add", F32, grid, block, ("threadIdx.y",), stored=stored)
    interpret(kernel, bind(x, out), grid=grid, block=block)
    lanes = x.reshape(4, 2, 8, 4)  # block, tz, ty, tx
    expected = np.full_like(lanes, np.nan)
    expected[:, :, 0, :] = lanes.sum(axis=2)
    np.testing.assert_allclose(out, expected.reshape(-1), rtol=1e-5)


@pytest.mark.parametrize(
    ("op", "dtype", "reference"),
    [
        ("add", F32, np.add.reduce),
        ("mul", F32, np.multiply.reduce),
        ("add", F16, lambda v: np.add.reduce(v.astype(np.float32))),  # computed in float
        ("bitwise_and", IDX, np.bitwise_and.reduce),
        ("bitwise_or", IDX, np.bitwise_or.reduce),
        ("bitwise_xor", IDX, np.bitwise_xor.reduce),
        ("logical_and", BOOL, np.logical_and.reduce),
        ("logical_or", BOOL, np.logical_or.reduce),
        ("max", I64, np.maximum.reduce),
    ],
)
@pytest.mark.parametrize("thread_dims", [("threadIdx.x",), ("threadIdx.x", "threadIdx.y"), ("threadIdx.z",)])
def test_block_reduction_ops_and_dimensions(rng, op, dtype, reference, thread_dims):
    grid, block = (3, 1, 1), (4, 2, 3)
    n = 3 * 24
    if dtype == BOOL:
        x = rng.random(n) < (0.85 if op == "logical_and" else 0.15)
    elif dtype.is_integral:
        x = rng.integers(1, 1 << 20, n).astype(dtype.numpy)
    else:
        x = rand(rng, n, dtype=dtype.numpy)
    out = np.zeros(n, dtype.numpy)
    interpret(reduce_kernel(op, dtype, grid, block, thread_dims), bind(x, out), grid=grid, block=block)
    expected = group_reduce(x, grid, block, thread_dims, reference)
    if dtype.is_floating:
        np.testing.assert_allclose(
            out.astype(np.float32), expected.astype(np.float32), rtol=2e-3 if dtype == F16 else 1e-5
        )
    else:
        np.testing.assert_array_equal(out, expected)
    if dtype == BOOL:
        assert out.any() and not out.all()


@pytest.mark.parametrize("thread_dims", [("threadIdx.x",), ()])
def test_grid_reduction_over_blockIdx_y_lands_in_the_last_block(rng, thread_dims):
    """Blocks along y (and threads along x, or none) combine; the last block (blockIdx.y
    == 4) holds the result and `last`; the store is predicated on it (and threadIdx.x == 0)."""
    grid, block = (2, 5, 1), (8, 1, 1)
    x = rand(rng, 80)
    out = np.full(80, np.nan, np.float32)
    last = var("last", BOOL)
    stored: Node = last
    if thread_dims:
        stored = bin_("&&", last, bin_("==", var("tx"), c(0)))
    kernel = reduce_kernel("add", F32, grid, block, thread_dims, ("blockIdx.y",), last=last, stored=stored)
    writes = LaneWrites()
    interpret(kernel, bind(x, out), grid=grid, block=block, lane_writes=writes)
    reduced = (*thread_dims, "blockIdx.y")
    expected = group_reduce(x, grid, block, reduced, np.add.reduce)
    coords = lane_coords(grid, block)
    stores = coords["blockIdx.y"] == 4
    if thread_dims:
        stores &= coords["threadIdx.x"] == 0
    np.testing.assert_allclose(out[stores], expected[stores], rtol=1e-5)
    assert np.isnan(out[~stores]).all()
    np.testing.assert_array_equal(writes.count["T1"], stores)
    if thread_dims:  # one sum per blockIdx.x, over its 5 blocks of 8 threads
        np.testing.assert_allclose(out[stores], x.reshape(5, 2, 8).sum(axis=(0, 2)), rtol=1e-5)


def test_grid_reduction_some_blocks_never_reach_is_a_fault(rng):
    grid, block = (1, 5, 1), (4, 1, 1)
    x, out = rand(rng, 20), np.zeros(20, np.float32)
    kernel = reduce_kernel("add", F32, grid, block, ("threadIdx.x",), ("blockIdx.y",))
    reduce_stmt = kernel.body[0]
    # Wrap everything under blockIdx.y in `by < 3`: blocks 3 and 4 never arrive.
    assert isinstance(reduce_stmt, For)
    by_loop = reduce_stmt.body[0]
    assert isinstance(by_loop, For) and by_loop.hardware == "blockIdx.y"
    by_loop.body = [If(bin_("<", var("by"), c(3)), by_loop.body)]
    with pytest.raises(
        KernelFault, match=r"grid reduction of acc over blockIdx\.y is not reached by blockIdx=\(0, 3, 0\)"
    ):
        interpret(kernel, bind(x, out), grid=grid, block=block)


def test_welford_block_reduction_of_serial_partials(rng):
    """Each of 16 threads folds up to 5 elements of its block's row into (avg, M2, N) with
    Welford's update; the block combines the partials. Rows of 70: threads 14 and 15 hold
    N == 0, the identity."""
    rows, per_thread, threads, length = 3, 5, 16, 70
    x = rand(rng, rows, length) + np.float32(3)
    bx, tx, j = var("bx"), var("tx"), var("j")
    col = bin_("+", bin_("*", tx, c(per_thread)), j)
    value = Read(F32, "T0", bin_("+", bin_("*", bx, stride("T0", 0)), col))
    avg, m2, n = (Read(F32, "avg", c(0)), Read(F32, "M2", c(0)), Read(I64, "N", c(0)))
    delta = var("delta", F32)
    update: list[Stmt] = [
        Define(var("x", F32), value),
        Store("N", c(0), bin_("+", n, c(1, I64))),
        Define(delta, bin_("-", var("x", F32), avg)),
        Store("avg", c(0), bin_("+", avg, bin_("/", delta, Cast(F32, n)))),
        Store("M2", c(0), bin_("+", m2, bin_("*", delta, bin_("-", var("x", F32), avg)))),
    ]
    body: list[Stmt] = [
        Alloc("avg", F32, 1, Memory.local, init=c(0.0, F32)),
        Alloc("M2", F32, 1, Memory.local, init=c(0.0, F32)),
        Alloc("N", I64, 1, Memory.local, zero=True),
        For(j, c(per_thread), LoopKind.serial, [If(bin_("<", col, size("T0", 1)), update)]),
        ParallelReduce("welford", ("avg", "M2", "N"), c(0), (F32, F32, I64), ("threadIdx.x",)),
        If(
            bin_("==", tx, c(0)),
            [Store("T1", bx, avg), Store("T2", bx, m2), Store("T3", bx, n)],
        ),
    ]
    kernel = Kernel(
        "welford",
        [
            tensor("T0", ndim=2),
            tensor("T1", output=True),
            tensor("T2", output=True, position=1),
            tensor("T3", I64, output=True, position=2),
        ],
        [],
        [For(bx, c(rows), LoopKind.block, [For(tx, c(threads), LoopKind.thread, body, "threadIdx.x")], "blockIdx.x")],
        [LaunchDim("blockIdx.x", c(rows)), LaunchDim("threadIdx.x", c(threads))],
        IDX,
    )
    mean, var_sum, count = (
        np.full(rows, np.nan, np.float32),
        np.full(rows, np.nan, np.float32),
        np.zeros(rows, np.int64),
    )
    interpret(kernel, bind(x, mean, var_sum, count))
    np.testing.assert_array_equal(count, length)
    np.testing.assert_allclose(mean, x.mean(axis=1), rtol=1e-5)
    expected_m2 = ((x.astype(np.float64) - x.mean(axis=1, dtype=np.float64)[:, None]) ** 2).sum(axis=1)
    np.testing.assert_allclose(var_sum, expected_m2, rtol=1e-4)


def test_parallel_reduce_reached_by_part_of_a_block_is_a_fault(rng):
    grid, block = (2, 1, 1), (8, 1, 1)
    x, out = rand(rng, 16), np.zeros(16, np.float32)
    kernel = reduce_kernel("add", F32, grid, block, ("threadIdx.x",))
    tx_loop = kernel.body[0]
    while isinstance(tx_loop, For) and tx_loop.hardware != "threadIdx.x":
        tx_loop = tx_loop.body[0]
    assert isinstance(tx_loop, For)
    tx_loop.body = [If(bin_("<", var("tx"), c(4)), tx_loop.body)]  # half of each block reduces
    with pytest.raises(
        KernelFault,
        match=r"reduce_add: ParallelReduce \(block reduction of acc\) reached by only part of a block "
        r"\(not by blockIdx=\(0, 0, 0\) threadIdx=\(4, 0, 0\)\): divergent barrier",
    ):
        interpret(kernel, bind(x, out), grid=grid, block=block)
