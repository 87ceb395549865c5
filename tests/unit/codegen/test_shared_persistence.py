"""Inner persistent kernels whose row does not fit the registers but fits the block's
shared memory: the scheduler's choice by row size and dtype, and the kernel it makes
(values on the kernel-IR interpreter, which also flags a thread reading another's
unsynchronized shared write; NVRTC compiles it with no spills)."""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Iterator

import numpy as np
import pytest
from kernels_check import SAMPLES_DIR, check_generated_kernels, runtime_and_inputs

from fuser_core import DataType, FusionDefinition, load_repro, use_options
from fuser_core.codegen import kernel_ir as k
from fuser_core.codegen import lower_group, translation_unit
from fuser_core.ir.tensor_view import MemoryType
from fuser_core.runtime.group_lowering import index_dtype

SOFTMAX = """
import torch
from nvfuser import FusionDefinition, DataType
def fusion(fd: FusionDefinition) -> None:
    T0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.{dtype}, is_cpu=False)
    T1 = fd.ops.cast(T0, dtype=DataType.Float)
    T2 = fd.ops.max(T1, dims=[1], keepdim=False, dtype=DataType.Null)
    T3 = fd.ops.broadcast_in_dim(T2, shape=[{rows}, {cols}], broadcast_dims=[0])
    T4 = fd.ops.sub(T1, T3)
    T5 = fd.ops.exp(T4)
    T6 = fd.ops.sum(T5, dims=[1], keepdim=False, dtype=DataType.Null)
    T7 = fd.ops.broadcast_in_dim(T6, shape=[{rows}, {cols}], broadcast_dims=[0])
    T8 = fd.ops.div(T5, T7)
    T9 = fd.ops.cast(T8, dtype=DataType.{dtype})
    fd.add_output(T9)
inputs = [torch.randn({rows}, {cols}, dtype=torch.{torch_dtype}, device="cuda")]
with FusionDefinition() as fd:
    fusion(fd)
"""


def cross_entropy(rows: int, cols: int) -> str:
    """The bundled cross_entropy_bwd sample (softmax minus a one-hot from iota == label,
    times grad) at `rows` tokens of a `cols`-wide vocabulary."""
    text = (SAMPLES_DIR / "cross_entropy_bwd.py").read_text()
    return text.replace("4096", str(rows)).replace("32064", str(cols))


TORCH = {"Float": "float32", "BFloat16": "bfloat16"}


@pytest.fixture(autouse=True)
def shared_persistence(monkeypatch):
    """The shared-memory path is on unless disabled: none of these tests disables it. Each
    holds its rows: bf16 exp normalizations of long rows would re-read them instead
    (scheduler.rereading), so that is disabled."""
    monkeypatch.setenv("FUSER_DISABLE", "rereading")
    monkeypatch.delenv("NVFUSER_DISABLE", raising=False)


def softmax(dtype: str, rows: int, cols: int) -> str:
    return SOFTMAX.format(dtype=dtype, torch_dtype=TORCH[dtype], rows=rows, cols=cols)


@pytest.mark.parametrize(
    ("dtype", "cols", "where"),
    [
        ("Float", 1024, "registers"),
        ("Float", 16384, "registers"),  # 64 KiB a row: 16 floats a thread in 1024 threads
        # 128 KiB a row would spill, but the buffer is the input as read: its vector-loaded
        # copy in shared memory is not generated yet, so it stays in registers
        ("Float", 32768, "registers"),
        ("BFloat16", 32768, "registers"),  # a bf16 input cast to float: fits with fewer registers held
        ("BFloat16", 49152, "shared"),  # 192 KiB of float a row: it would spill; one row per block fits
        ("Float", 65536, "segmented"),  # 256 KiB a row: past the 227 KiB of shared memory a block has
    ],
)
def test_persistent_buffers_go_to_shared_memory_only_when_registers_would_spill(dtype, cols, where):
    runtime, _ = runtime_and_inputs(softmax(dtype, 4096, cols))
    groups = runtime.segmented.groups
    if where == "segmented":
        assert "inner_persistent" not in [g.scheduler.value for g in groups]
        return
    (group,) = groups
    params = group.params
    assert params.buffer_in_shared_memory == (where == "shared")
    if where == "shared":
        # a block's rows fit its shared memory, and what stays in registers fits them
        assert params.threads_iteration * params.buffer_bytes_per_row <= 227 * 1024
        assert params.fits_in_registers
        assert group.record.notes == [f"persistent buffers in shared memory: T{params.buffers[0]}"]


def test_shared_persistence_is_on_by_default_and_a_disable_option_keeps_rows_in_registers():
    (loaded,) = load_repro(cross_entropy(3, 32064)).definitions
    inputs = loaded.materialize_inputs(seed=0)
    with use_options(device_model="h100_sxm", backend="reference"):
        loaded.fd.execute(inputs)
        with use_options(disable=["shared_persistence"]):
            loaded.fd.execute(inputs)
    cache = loaded.fd.executor_cache
    kept = [r.runtime.segmented.groups[0].params.buffer_in_shared_memory for r in cache.reports]
    assert kept == [True, False]
    assert "shared-memory persistence off" in cache.events[-1].reasons


@pytest.mark.parametrize(("cols", "where"), [(16384, "registers"), (32064, "shared")])
def test_a_per_row_input_takes_one_register_not_one_per_element(cols, where):
    """The label and the gradient are one value per row: counted once, a 16k-wide row of
    cross-entropy fits the registers (it went to shared memory when they were counted per
    element), and a 32k-wide one still goes to shared memory; neither spills."""
    nvrtc = pytest.importorskip("fuser_core.runtime.nvrtc")
    runtime, _ = runtime_and_inputs(cross_entropy(4096, cols))
    (group,) = runtime.segmented.groups
    assert group.params.buffer_in_shared_memory == (where == "shared")
    kernel = lower_group(group.fusion, "ce", index_dtype(runtime.signature.index_type))
    options = (*nvrtc.DEFAULT_OPTIONS, "-Xptxas", "-v")
    log = nvrtc.compile_program(translation_unit(kernel), [kernel.name], arch="sm_90", options=options).log
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert spills is not None and spills.groups() == ("0", "0"), log


def _kernel(script: str) -> k.Kernel:
    runtime, _ = runtime_and_inputs(script)
    (group,) = runtime.segmented.groups
    assert group.params.buffer_in_shared_memory
    return lower_group(group.fusion, "smem_persistent", index_dtype(runtime.signature.index_type))


def test_a_shared_persistent_row_is_read_back_by_the_threads_that_wrote_it():
    script = cross_entropy(3, 32064)
    runtime, inputs = runtime_and_inputs(script)
    # The interpreter fails a read of another thread's shared write made since the last
    # barrier: the kernel has none (block reductions sync their own scratch).
    kernel = _kernel(script)
    assert not any(isinstance(s, k.Sync) for s in k.walk(kernel.body))
    shared = [s for s in k.walk(kernel.body) if isinstance(s, k.Alloc) and s.memory == k.Memory.shared]
    assert any(s.buffer == "T3" and s.size == 4 * 1024 * 8 for s in shared)  # batch x threads x vector
    assert kernel.dynamic_shared_bytes == kernel.shared_bytes > 48 * 1024  # past the static limit
    assert check_generated_kernels(runtime, inputs)


def test_a_shared_persistent_kernel_compiles_without_spills():
    nvrtc = pytest.importorskip("fuser_core.runtime.nvrtc")
    kernel = _kernel(cross_entropy(4096, 32064))
    source = translation_unit(kernel)
    assert "extern __shared__" in source and "__syncthreads" not in source.split("smem_persistent(")[1]
    options = (*nvrtc.DEFAULT_OPTIONS, "-Xptxas", "-v")
    log = nvrtc.compile_program(source, [kernel.name], arch="sm_90", options=options).log
    spills = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    assert spills is not None and spills.groups() == ("0", "0"), log


def _reads(node: k.Node, buffer: str, lane: str | None) -> Iterator[tuple[k.Node, str | None]]:
    if isinstance(node, k.Read) and node.buffer == buffer:
        yield node.index, lane
    for value in vars(node).values():
        for part in value if isinstance(value, tuple) else (value,):
            if isinstance(part, k.Node):
                yield from _reads(part, buffer, lane)


def _accesses(stmts: list[k.Stmt], buffer: str, lane: str | None = None) -> Iterator[tuple[k.Node, str | None]]:
    """(index, the variable threadIdx.x binds around it) of every store and read of `buffer`."""
    for stmt in stmts:
        if isinstance(stmt, k.Store) and stmt.buffer == buffer:
            yield stmt.index, lane
        for field in dataclasses.fields(stmt):
            value = getattr(stmt, field.name)
            if isinstance(value, k.Node):
                yield from _reads(value, buffer, lane)
        if isinstance(stmt, k.For):
            inner = stmt.index.name if stmt.hardware == "threadIdx.x" else lane
            yield from _accesses(stmt.body, buffer, inner)
        elif isinstance(stmt, k.If):
            yield from _accesses(stmt.then, buffer, lane)
            yield from _accesses(stmt.orelse, buffer, lane)


def _evaluate(node: k.Node, env: dict[str, int]) -> int:
    if isinstance(node, k.Const):
        return int(node.value)
    if isinstance(node, k.Var):
        return env[node.name]
    assert isinstance(node, k.Bin) and node.op in ("+", "*", "/", "%"), node
    a, b = _evaluate(node.a, env), _evaluate(node.b, env)
    if node.op == "+":
        return a + b
    if node.op == "*":
        return a * b
    return a // b if node.op == "/" else a % b


def test_a_warps_lanes_address_consecutive_words_of_the_shared_row():
    # The tile is allocated [batch, V, TIDx] (TIDx innermost): at each of a thread's batch
    # and vector positions, lanes 0..31 store and re-read 32 consecutive floats, one per
    # bank. Laid out in loop order [batch, TIDx, V], they were V = 8 floats apart: 4 banks,
    # every access 8-way conflicted.
    kernel = _kernel(cross_entropy(3, 32064))
    (alloc,) = [s for s in k.walk(kernel.body) if isinstance(s, k.Alloc) and s.buffer == "T3"]
    assert alloc.memory == k.Memory.shared and alloc.dtype.itemsize == 4
    accesses = list(_accesses(kernel.body, "T3"))
    stores = [s for s in k.walk(kernel.body) if isinstance(s, k.Store) and s.buffer == "T3"]
    assert stores and len(accesses) > len(stores)  # the store after the load, and the re-reads
    for index, lane in accesses:
        assert lane is not None  # inside the threadIdx.x binding
        others = sorted(v for v in k.node_reads(index, with_vars=True) if v != lane)
        for values in itertools.product(range(3), repeat=len(others)):
            env = dict(zip(others, values, strict=True))
            words = [_evaluate(index, {**env, lane: t}) for t in range(32)]
            assert [b - a for a, b in itertools.pairwise(words)] == [1] * 31, (index, env)


def test_a_float_input_kept_as_read_stays_in_registers():
    # With float logits there is no cast: the persistent buffer is the input itself. The
    # scheduler marked the global input shared (nothing moved, and with the lanes-innermost
    # layout its global indexing broke: a KeyError on the GPU); such rows stay in registers.
    script = cross_entropy(3, 32064).replace("BFloat16", "Float").replace("bfloat16", "float32")
    runtime, inputs = runtime_and_inputs(script)
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "inner_persistent" and not group.params.buffer_in_shared_memory
    assert check_generated_kernels(runtime, inputs)


# -- a buffer broadcast along part of the row ------------------------------------------------

RNG = np.random.default_rng(26)


def _shared_kernel_matches(build, inputs) -> list:
    """One inner persistent kernel with its buffers in shared memory, interpreted
    (vectorized and scalar) against the reference; returns the reference's outputs."""
    with FusionDefinition() as fd:
        build(fd)
    with use_options(device_model="h100_sxm", backend="reference"):
        expected = fd.execute(inputs)
        runtime = fd.runtime_for(inputs)
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "inner_persistent" and group.params.buffer_in_shared_memory
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, inputs, vectorize=vectorize)  # generated, not refused
    return expected


def test_a_weight_broadcast_along_the_merged_row_fills_its_shared_tile_where_it_is_read():
    # Fuzzer seed 26 case 40: rows merged from [1025, 8] (a stride-0 batch axis, so the
    # sum over it is a squeeze times 2), and a weight [8] broadcast along them kept as a
    # shared-memory buffer. The weight's merge takes in the broadcast 1025 axis, so its
    # loops span 8 elements of the 8200 the row's loops run: its tile was filled at those
    # coordinates and read back at the row's (20.3 for 54.3).
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, 1025, -1], contiguity=[None, True, True], dtype=DataType.Double)
        t1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Double)
        t2 = fd.ops.sinh(t0)
        _, mean = fd.ops.var_mean(t2, dims=[1, 2], correction=0, keepdim=False)
        rows = fd.ops.broadcast_in_dim(
            mean, shape=[2, fd.ops.size(t2, dim=1), fd.ops.size(t2, dim=2)], broadcast_dims=[0]
        )
        shape = [fd.ops.size(t2, dim=0), 1025, fd.ops.size(t2, dim=2)]
        weighted = fd.ops.mul(fd.ops.sub(t2, rows), fd.ops.broadcast_in_dim(t1, shape=shape, broadcast_dims=[2]))
        fd.add_output(fd.ops.max(fd.ops.sum(weighted, dims=[0], keepdim=True), dims=[0, 1, 2], keepdim=False))

    x = np.broadcast_to(RNG.standard_normal((1, 1025, 8)), (2, 1025, 8))
    w = RNG.standard_normal(8)
    (out,) = _shared_kernel_matches(build, [x, w])
    row = np.sinh(x[0])
    np.testing.assert_allclose(out, (2 * (row - row.mean()) * w).max(), rtol=1e-12)


@pytest.mark.parametrize("expanded", [False, True])
def test_a_weight_broadcast_along_the_row_read_before_and_after_the_sum(expanded):
    # A true persistent buffer of the same kind: read by the sum and again after it (two
    # consumers filling one tile), as a plain broadcast [1, 1, 8] and as an expanded one.
    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Double)
        t1 = fd.define_tensor(shape=[-1], contiguity=[True], dtype=DataType.Double)
        x = fd.ops.sinh(t0)
        if expanded:
            wb = fd.ops.broadcast_in_dim(t1, shape=fd.ops.shape(x), broadcast_dims=[2])
        else:
            wb = fd.ops.broadcast(t1, [True, True, False])
        total = fd.ops.sum(fd.ops.mul(x, wb), dims=[1, 2], keepdim=False)
        fd.add_output(
            fd.ops.add(fd.ops.mul(wb, fd.ops.broadcast_in_dim(total, shape=fd.ops.shape(x), broadcast_dims=[0])), x)
        )

    x, w = RNG.standard_normal((3, 1025, 8)), RNG.standard_normal(8)
    (out,) = _shared_kernel_matches(build, [x, w])
    s = np.sinh(x)
    np.testing.assert_allclose(out, w * (s * w).sum(axis=(1, 2))[:, None, None] + s, rtol=1e-9)


def test_a_value_per_row_expanded_along_it_is_no_persistent_buffer():
    """RMS norm backward at 16384 wide (the review of the row groups found it): rstd, one
    value a row, is expanded along the row and read on both sides of the row sum. As a
    persistent buffer in shared memory it was written to one slot a thread and read from
    all of them: the input gradient came out all NaN. It is read again where used instead;
    only x * rstd and dy * w are held."""
    from test_row_groups import RMS_NORM_BACKWARD

    script = RMS_NORM_BACKWARD.format(rows=1056, hidden=16384, dtype="BFloat16", torch_dtype="bfloat16")
    runtime, inputs = runtime_and_inputs(script)
    (group,) = runtime.segmented.groups
    assert group.params.buffer_in_shared_memory and group.params.buffers == (10, 11)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]


RETURNED_AND_REDUCED = """
import torch
from nvfuser import FusionDefinition, DataType
def fusion(fd: FusionDefinition) -> None:
    T0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Float, is_cpu=False)
    T1 = fd.ops.reshape(T0, new_shape=[{rows}, {cols}])
    T2, T3 = fd.ops.var_mean(T1, dims=[0, 1], correction=0, keepdim=False)
    T4 = fd.ops.broadcast_in_dim(T2, shape=[{rows}, {cols}], broadcast_dims=[])
    T5 = fd.ops.mul(T1, T4)
    T6 = fd.ops.reshape(T5, new_shape=[{numel}])
    fd.add_output(T6)
    fd.add_output(T1)
inputs = [torch.randn({outer}, {rows} // {outer}, {cols}, dtype=torch.float32, device="cuda")]
with FusionDefinition() as fd:
    fusion(fd)
"""


@pytest.mark.parametrize(("outer", "rows", "cols", "where"), [(2, 64, 7, "registers"), (32, 4064, 7, "shared")])
def test_an_output_the_kernel_also_holds_is_stored_from_its_local_copy(outer, rows, cols, where):
    """GPU fuzzer seed 62 case 46: a reshape both returned and reduced (var_mean over the
    whole tensor) is the persistent buffer. Its row of 28448 floats goes to shared memory,
    and the output itself went there: lowering its global store crashed (KeyError). The
    group reads an output from the output's local cache, so the buffer is that cache and
    the output stays a global store that nothing reads back."""
    script = RETURNED_AND_REDUCED.format(outer=outer, rows=rows, cols=cols, numel=rows * cols)
    runtime, inputs = runtime_and_inputs(script)
    (persistent,) = [g for g in runtime.segmented.groups if g.scheduler.value == "inner_persistent"]
    assert persistent.params.buffer_in_shared_memory == (where == "shared")
    fusion = persistent.fusion
    for tv in fusion.outputs:
        assert tv.memory_type == MemoryType.Global and not tv.uses
    assert "kernel_g0" in check_generated_kernels(runtime, inputs)
