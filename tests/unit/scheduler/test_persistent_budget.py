"""The inner persistent split against the register budget (persistent_budget), and what
the samples' kernels get from it: warp-multiple blocks, several rows per block for short
rows, `__launch_bounds__` sized for the registers, and no spills where the row fits."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.codegen import lower_group, print_kernel, translation_unit
from fuser_core.runtime import nvrtc, nvrtc_library
from fuser_core.runtime.group_lowering import generates_kernel, index_dtype
from fuser_core.scheduler.device import H100_SXM
from fuser_core.scheduler.persistent_budget import (
    choose_split,
    registers_per_thread,
    threads_per_sm,
    with_most_blocks,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from kernels_check import SAMPLES_DIR, check_generated_kernels, runtime_and_inputs


def test_register_file_arithmetic_matches_the_occupancy_calculator():
    # 64K registers, four partitions, 256-register granules per warp.
    assert registers_per_thread(2048, H100_SXM) == 32
    assert registers_per_thread(1024, H100_SXM) == 64
    assert registers_per_thread(896, H100_SXM) == 72  # 28 warps: 7 per partition
    assert registers_per_thread(128, H100_SXM) == 255
    assert threads_per_sm(64, H100_SXM) == 1024
    assert threads_per_sm(72, H100_SXM) == 896
    assert threads_per_sm(255, H100_SXM) == 256


def test_layer_norm_row_takes_two_vectors_per_thread_at_half_occupancy():
    # 4096 bf16 in 8-wide vectors; a float buffer plus three bf16 inputs per element.
    split = choose_split(512, 16384, 10 * 8, False, H100_SXM)
    assert (split.batch, split.threads_x, split.padded_x, split.rows_per_block) == (2, 256, 256, 1)
    assert (split.registers, split.warps_per_sm, split.blocks_per_sm) == (64, 32, 4)


def test_the_chosen_split_takes_the_blocks_its_registers_allow():
    """The target occupancy is a floor: 4 blocks of 256 reach it, and the buffers' 32
    registers and the overhead's 16 leave room for a fifth at 48 a thread."""
    split = choose_split(512, 16384, 8 * 8, False, H100_SXM)
    assert (split.padded_x, split.batch, split.blocks_per_sm, split.registers) == (256, 2, 4, 64)
    more = with_most_blocks(split, False, H100_SXM, rows=16384)
    assert (more.padded_x, more.batch, more.blocks_per_sm, more.registers) == (256, 2, 5, 48)
    assert more.spare_registers == 16 and more.warps_per_sm == 40
    # exp's longer live ranges (32 of overhead) leave 4 blocks; registers kept for results
    # beside the buffers count too
    assert with_most_blocks(split, True, H100_SXM, rows=16384) == split
    assert with_most_blocks(split, False, H100_SXM, rows=16384, reserved_registers=16) == split


def test_the_raise_stays_within_the_sms_blocks_and_the_rows():
    # blocks of one warp (a row each): 32 an SM at most, though 64 would fit the threads
    # and the registers (asked of a split sized for 100 rows, as if there were more)
    split = choose_split(16, 100, 4 * 8, True, H100_SXM)
    assert split.threads == 32 and split.blocks_per_sm < H100_SXM.max_blocks_per_sm
    raised = with_most_blocks(split, True, H100_SXM, rows=1_000_000)
    assert raised.blocks_per_sm == H100_SXM.max_blocks_per_sm == 32
    # never more blocks an SM than the rows give it: 100 rows, a block each
    assert with_most_blocks(split, True, H100_SXM, rows=100) == split
    # a floor of 40 registers a thread: small buffers do not squeeze the kernel to 32
    small = choose_split(256, 16384, 2 * 8, False, H100_SXM)
    assert with_most_blocks(small, False, H100_SXM, rows=16384).registers >= 40


@pytest.mark.parametrize("lanes", [4008, 16032, 501, 1000, 33, 7])
def test_blocks_are_warp_multiples_and_cover_the_row(lanes):
    split = choose_split(lanes, 4096, 24, True, H100_SXM)
    assert split.padded_x % 32 == 0 and split.threads % 32 == 0
    assert split.threads_x <= split.padded_x < split.threads_x + 32
    assert split.threads_x * split.batch >= lanes > (split.threads_x - 1) * split.batch
    assert split.threads <= 1024


def test_short_rows_share_a_block():
    split = choose_split(32, 65536, 32, False, H100_SXM)  # 256 floats a row, 8-wide: one warp
    assert split.padded_x == 32 and split.rows_per_block == 4


def test_few_rows_get_big_blocks():
    split = choose_split(4096, 64, 32, False, H100_SXM)  # fewer rows than SMs
    assert split.threads >= 512


def _kernels(name, edits=()):
    text = (SAMPLES_DIR / f"{name}.py").read_text()
    for old, new in edits:
        text = text.replace(old, new, 1)
    runtime, _ = runtime_and_inputs(text)
    for group in runtime.segmented.groups:
        if generates_kernel(group) and group.params.scheduler.value == "inner_persistent":
            yield group, lower_group(group.fusion, f"k_{name}", index_dtype(runtime.signature.index_type))


# float logits: a persistent kernel (its bf16 logits are re-read instead: scheduler.rereading)
FLOAT_LOGITS = (
    (
        "dtype=DataType.BFloat16, is_cpu=False, stride_order=[1, 0]",
        "dtype=DataType.Float, is_cpu=False, stride_order=[1, 0]",
    ),
    ("torch.randn(4096, 32064, dtype=torch.bfloat16", "torch.randn(4096, 32064, dtype=torch.float32"),
)


def test_cross_entropy_runs_a_warp_multiple_block_with_its_lanes_predicated():
    (group, kernel), *_ = list(_kernels("cross_entropy_bwd", FLOAT_LOGITS))
    assert group.params.padded_threads % 32 == 0  # never 501 threads
    padded = [d for d in kernel.launch if d.hardware == "threadIdx.x" and d.padded]
    assert [int(d.extent.value) for d in padded] == [group.params.padded_threads]
    assert kernel.max_threads == group.params.padded_threads
    text = print_kernel(kernel)
    vector = group.params.vectorize
    # The guard of padded lanes (the vocabulary's 32064 is static: the iota meets the logits).
    lanes = -(-32064 // vector)
    used = -(-lanes // group.params.persistent_batch)
    assert used < group.params.padded_threads
    assert re.search(rf"if \(i\d+ < {used}\) {{", text)


def test_layer_norm_asks_for_the_blocks_its_registers_allow():
    ((group, kernel),) = list(_kernels("layer_norm_fwd"))
    assert group.params.vectorize == 8  # bf16 rows in 16-byte vectors despite float mean/rstd outputs
    # 4 blocks of 256 reach the target occupancy; the buffers (32 registers) and the
    # overhead (16) allow a fifth (48 registers a thread).
    assert group.params.min_blocks_per_sm == 5 and group.params.registers_per_thread == 48
    # The kernel's own arrays (40 words) and 8 registers of slack fit those 48: it stands.
    assert kernel.min_blocks == 5
    assert print_kernel(kernel).startswith('extern "C" __global__ void __launch_bounds__(256, 5) ')


def test_launch_bounds_never_squeeze_the_kernels_own_arrays():
    """A target beyond what the arrays leave room for is lowered: 8 blocks of 256 would
    leave 32 registers, under the 30 words of layer norm's arrays live at once (of 40 in
    all: the output's vector is filled after the loaded row's last use); those and the 8
    of slack (40 registers) allow 6."""
    runtime, _ = runtime_and_inputs(SAMPLES_DIR / "layer_norm_fwd.py")
    (group,) = runtime.segmented.groups
    group.fusion.min_blocks_per_sm = 8
    kernel = lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type))
    assert kernel.min_blocks == 6


def test_inputs_read_after_the_reductions_are_not_counted_with_those_read_before():
    """bias + residual + layer norm: per element a float sum (4 bytes) and either the three
    bf16 inputs it is summed from (6) or the two bf16 weights read after the reductions
    (4), not all five (10): 10 bytes, so two 8-wide vectors a thread take 40 registers and
    four blocks of 256 fit an SM (counting all five, two blocks of 512: 259 -> 216 us on
    the H100)."""
    ((group, kernel),) = list(_kernels("bias_residual_layer_norm"))
    params = group.params
    assert (params.padded_threads, params.persistent_batch, params.vectorize) == (256, 2, 8)
    assert params.buffer_registers_per_thread == 40
    assert params.min_blocks_per_sm == 4 and kernel.min_blocks == 4


@pytest.mark.parametrize("name", ["layer_norm_fwd", "rms_norm_fwd", "softmax", "var_mean", "bias_residual_layer_norm"])
def test_persistent_sample_kernels_compile_without_spills(name):
    for _, kernel in _kernels(name):
        try:
            module = nvrtc.compile_program(
                translation_unit(kernel), [kernel.name], arch="sm_90", options=(*nvrtc.DEFAULT_OPTIONS, "-Xptxas", "-v")
            )
        except nvrtc_library.NvrtcNotFoundError:
            pytest.skip("no NVRTC")
        assert "Used " in module.log, module.log
        assert "0 bytes spill stores, 0 bytes spill loads" in module.log, module.log


@pytest.mark.parametrize("width", [1000, 4100, 97])
def test_padded_lanes_of_an_odd_row_are_predicated_on_the_interpreter(width):
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        m = fd.ops.broadcast_in_dim(fd.ops.max(x, dims=[1]), shape=fd.ops.shape(x), broadcast_dims=[0])
        e = fd.ops.exp(fd.ops.sub(x, m))
        s = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[1]), shape=fd.ops.shape(x), broadcast_dims=[0])
        fd.add_output(fd.ops.div(e, s))
    inputs = [np.random.default_rng(3).standard_normal((5, width)).astype(np.float32)]
    with use_options(device_model="h100_sxm", backend="reference"):
        runtime = fd.runtime_for(inputs)
    (group,) = runtime.segmented.groups
    params = group.params
    assert params.scheduler.value == "inner_persistent"
    lanes = -(-width // params.vectorize)
    assert params.padded_threads % 32 == 0 and params.padded_threads >= -(-lanes // params.persistent_batch)
    assert check_generated_kernels(runtime, inputs) == ["kernel_g0"]
