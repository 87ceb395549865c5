"""Which inner normalizations re-read their row instead of holding it (scheduler.rereading):
exp normalizations of 16-bit rows of 1024 elements or more go to the reduction scheduler's
non-persistent schedule; the others stay persistent, and the reduction scheduler's
run-time rejection says why. The re-reading kernels are checked on the interpreter."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.runtime.arguments import convert_inputs
from fuser_core.scheduler.candidates import heuristic_candidates
from fuser_core.scheduler.group_view import GroupView
from fuser_core.scheduler.reduction import ReductionScheduler
from fuser_core.scheduler.registry import verdict

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from kernels_check import check_generated_kernels

RNG = np.random.default_rng(5)


def softmax(dtype: DataType) -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        x = fd.ops.cast(t0, DataType.Float) if dtype != DataType.Float else t0
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
        fd.add_output(fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), dtype))
    return fd


def layer_norm(dtype: DataType) -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        x = fd.ops.cast(t0, DataType.Float)
        var, mean = fd.ops.var_mean(x, dims=[1], correction=0, keepdim=True)
        y = fd.ops.mul(fd.ops.sub(x, mean), fd.ops.rsqrt(fd.ops.add(var, fd.define_scalar(1e-5))))
        fd.add_output(fd.ops.cast(fd.ops.exp(y), dtype))
    return fd


def rms_norm(dtype: DataType) -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=dtype)
        x = fd.ops.cast(t0, DataType.Float)
        fd.add_output(
            fd.ops.cast(fd.ops.mul(x, fd.ops.rsqrt(fd.ops.sum(fd.ops.mul(x, x), dims=[1], keepdim=True))), dtype)
        )
    return fd


def data(shape: list[int], dtype: DataType) -> np.ndarray:
    values = RNG.standard_normal(shape).astype(np.float32)
    return values.astype(ml_dtypes.bfloat16) if dtype == DataType.BFloat16 else values


def runtime_of(fd: FusionDefinition, x: np.ndarray, enable: tuple[str, ...] = ()) -> Any:
    with use_options(device_model="h100_sxm", backend="reference", enable=list(enable)):
        return fd.runtime_for([x])


def view_and_info(runtime: Any, x: np.ndarray) -> tuple[GroupView, Any]:
    (group,) = runtime.segmented.groups
    info = runtime.runtime_info(convert_inputs(runtime.segmented.complete, [x]))
    return runtime.segmented.view(group), info


def reduction_rejection(runtime: Any, x: np.ndarray) -> str:
    """Why the reduction scheduler left the group to the persistent one."""
    rejection = verdict(ReductionScheduler(), *view_and_info(runtime, x))
    assert rejection is not None and rejection.at_run_time
    return rejection.reason


def test_a_bf16_softmax_over_long_rows_re_reads_them():
    runtime = runtime_of(softmax(DataType.BFloat16), data([4, 2048], DataType.BFloat16))
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "reduction"
    assert not group.params.persistent and group.params.inner and group.params.vectorize == 8
    assert group.params.buffers == ()


def test_few_long_rows_re_read_get_no_grid_split():
    # two rows would take blockIdx.y along a plain reduction; a row re-read after its
    # reductions needs their results in its own block
    runtime = runtime_of(softmax(DataType.BFloat16), data([2, 40000], DataType.BFloat16))
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "reduction" and group.params.grid_reduction == 1


@pytest.mark.parametrize(
    ("make", "dtype", "shape", "reason"),
    [
        (softmax, DataType.Float, [4, 2048], "T0 read in 4-byte elements"),
        (softmax, DataType.BFloat16, [4, 512], "rows of 512 elements, under 1024"),
        (layer_norm, DataType.BFloat16, [4, 2048], "a Welford"),
        (rms_norm, DataType.BFloat16, [4, 2048], "no exp"),
    ],
)
def test_the_others_hold_their_row_and_say_why(make, dtype, shape, reason):
    x = data(shape, dtype)
    runtime = runtime_of(make(dtype), x)
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["inner_persistent"]
    text = reduction_rejection(runtime, x)
    assert text.startswith("need persistent buffers that reduction scheduler doesn't handle: ")
    assert reason in text


def test_new_sizes_under_the_threshold_go_back_to_holding_the_row():
    fd = softmax(DataType.BFloat16)
    with use_options(device_model="h100_sxm", backend="reference"):
        for shape, expected in (([3, 1024], "reduction"), ([3, 256], "inner_persistent")):
            x = data(shape, DataType.BFloat16)
            (out,) = fd.execute([x])
            (group,) = fd.executor_cache.last_report.runtime.segmented.groups
            assert group.scheduler.value == expected
            wide = x.astype(np.float32)
            e = np.exp(wide - wide.max(axis=1, keepdims=True))
            np.testing.assert_allclose(out.astype(np.float32), e / e.sum(axis=1, keepdims=True), rtol=1e-2, atol=1e-3)


def test_the_kernel_choice_offers_the_persistent_schedule_as_the_alternative():
    runtime = runtime_of(softmax(DataType.BFloat16), data([4, 2048], DataType.BFloat16), ("kernel_choice",))
    (group,) = runtime.segmented.groups
    assert [(c.label, c.scheduler.value) for c in group.candidates] == [
        ("non-persistent", "reduction"),
        ("persistent", "inner_persistent"),
    ]
    assert group.candidates[1].params.persistent


def test_no_persistent_alternative_where_the_row_outgrows_shared_memory():
    fd = softmax(DataType.BFloat16)
    x = data([2, 160000], DataType.BFloat16)  # 625 KiB of float row: more than a block's shared memory
    runtime = runtime_of(fd, x)
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "reduction"
    assert heuristic_candidates(group.scheduler, *view_and_info(runtime, x), group.params) == ()


@pytest.mark.parametrize("shape", [[3, 1040], [2, 1100]])
def test_the_re_reading_kernel_agrees_with_the_reference(shape):
    x = data(shape, DataType.BFloat16)
    runtime = runtime_of(softmax(DataType.BFloat16), x)
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["reduction"]
    assert check_generated_kernels(runtime, [x]) == ["kernel_g0"]


# -- projection of persistent buffers onto their inputs (checks.projected_buffers) --------


def held_params(make: Any, shape: list[int]) -> tuple[Any, np.ndarray, Any]:
    """The persistent schedule (re-reading disabled) of `make` on bf16 rows of `shape`;
    shapes of many rows are scheduled on zeros (no values are computed)."""
    many = shape[0] >= 132
    x = np.zeros(shape, ml_dtypes.bfloat16) if many else data(shape, DataType.BFloat16)
    with use_options(device_model="h100_sxm", backend="reference", disable=["rereading"]):
        runtime = make(DataType.BFloat16).runtime_for([x])
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "inner_persistent"
    return runtime, x, group.params


def test_a_float_row_cast_from_bf16_is_held_as_bf16_where_one_block_per_sm_fits():
    # 16384 floats a row leave one block of 1024 threads per SM; held as bf16, two of 512
    _, _, params = held_params(layer_norm, [4096, 16384])
    assert params.buffers_projected_to_inputs and params.buffers == (0,)  # T0, the bf16 input
    assert params.min_blocks_per_sm == 2 and params.padded_threads == 512
    assert params.buffer_bytes_per_row == 16384 * 2
    assert ("buffers_projected_to_inputs", True) in params.shown()


def test_the_projected_kernel_casts_the_held_input_again_and_agrees_with_the_reference():
    runtime, x, params = held_params(layer_norm, [2, 16384])
    assert params.buffers_projected_to_inputs
    assert check_generated_kernels(runtime, [x]) == ["kernel_g0"]


def test_rows_that_already_fit_several_blocks_keep_their_float_buffer():
    _, _, params = held_params(rms_norm, [16384, 4096])
    assert not params.buffers_projected_to_inputs and params.buffers != (0,)
    assert params.min_blocks_per_sm == 6  # the float row's 24 registers and 16 more: 40


# -- the later passes' loads (codegen: Compute._reread_vector) -----------------------------


def kernel_text(runtime: Any) -> str:
    from fuser_core.codegen.cuda import print_kernel
    from fuser_core.codegen.lower import lower_group

    (group,) = runtime.segmented.groups
    return print_kernel(lower_group(group.fusion, "kernel_g0", DataType.Int32))


def softmax_minus_one_hot() -> FusionDefinition:
    """Cross-entropy's backward in small: its quotient is not only cast to bf16, so the
    division stays an IEEE division per element."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        x = fd.ops.cast(t0, DataType.Float)
        e = fd.ops.exp(fd.ops.sub(x, fd.ops.max(x, dims=[1], keepdim=True)))
        p = fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True))
        fd.add_output(fd.ops.cast(fd.ops.sub(p, fd.define_scalar(1.0)), DataType.BFloat16))
    return fd


def test_each_later_pass_loads_the_row_again_in_vectors_before_its_loop():
    x = data([3, 1040], DataType.BFloat16)
    text = kernel_text(runtime_of(softmax(DataType.BFloat16), x))
    # the first pass's vector loads, then one vector load per vector in each of the two
    # later passes, and no load of an element alone
    assert len(re.findall(r"vectorCopy<__bfloat, 8>\(&T\d+(_\d+_reread)?\[[^\]]*\], &T0\[", text)) == 3
    assert len(re.findall(r"__bfloat T\d+_\d+_reread\[\d+\];", text)) == 2
    assert not re.search(r"= T0\[", text)
    # loaded before the loop that reads them: each pass's loads come before its exp
    second_pass = text.index("_1_reread")
    assert second_pass < text.index("expf(", second_pass)


def test_a_per_element_division_keeps_each_element_loaded_where_it_is_read():
    x = data([3, 1040], DataType.BFloat16)
    runtime = runtime_of(softmax_minus_one_hot(), x)
    assert [g.scheduler.value for g in runtime.segmented.groups] == ["reduction"]
    text = kernel_text(runtime)
    assert "_reread" not in text and re.search(r"= T0\[", text)
    assert check_generated_kernels(runtime, [x]) == ["kernel_g0"]


# -- the outputs of a re-reading kernel are stored evict-first (fusion.streaming_stores) ---


def test_a_re_reading_kernel_stores_its_outputs_evict_first_and_loads_as_before():
    x = data([3, 1040], DataType.BFloat16)
    runtime = runtime_of(softmax(DataType.BFloat16), x)
    (group,) = runtime.segmented.groups
    (output,) = runtime.segmented.complete.outputs
    assert group.params.streaming_stores == (output.name,)
    assert ("streaming_stores", (output.name,)) in group.params.shown()
    text = kernel_text(runtime)
    (store,) = re.findall(r"(\w+)<__bfloat, 8>\(&T\d+\[[^;]*_vec\[0\]\);", text)
    assert store == "vectorStoreStreaming"
    # every load of the row (the first pass and both re-reads) stays a plain vector copy
    assert len(re.findall(r"vectorCopy<__bfloat, 8>\([^;]*&T0\[", text)) == 3
    assert text.count("vectorStoreStreaming<") == 1
    assert check_generated_kernels(runtime, [x]) == ["kernel_g0"]


def test_the_kernel_ir_dump_says_which_stores_are_evict_first():
    from fuser_core.codegen.kernel_ir import print_kernel_ir
    from fuser_core.codegen.lower import lower_group

    runtime = runtime_of(softmax(DataType.BFloat16), data([3, 1040], DataType.BFloat16))
    (group,) = runtime.segmented.groups
    dump = print_kernel_ir(lower_group(group.fusion, "kernel_g0", DataType.Int32))
    (line,) = [line for line in dump.splitlines() if "(evict-first)" in line]
    assert line.strip().startswith("VECTOR x8 T") and "_vec[0]" in line


@pytest.mark.parametrize(
    ("make", "shape", "disable"),
    [
        (softmax, [3, 512], ()),  # rows held: nothing left to re-read
        (softmax, [3, 1040], ("rereading",)),
        (rms_norm, [3, 2048], ()),
    ],
)
def test_kernels_that_hold_their_rows_store_as_before(make, shape, disable):
    x = data(shape, DataType.BFloat16)
    with use_options(device_model="h100_sxm", backend="reference", disable=list(disable)):
        runtime = make(DataType.BFloat16).runtime_for([x])
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "inner_persistent" and not group.params.streaming_stores
    assert "vectorStoreStreaming<" not in kernel_text(runtime)


def test_a_plain_reduction_stores_as_before():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        fd.add_output(fd.ops.cast(fd.ops.sum(fd.ops.cast(t0, DataType.Float), dims=[1]), DataType.BFloat16))
    runtime = runtime_of(fd, data([64, 4096], DataType.BFloat16))
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "reduction" and not group.params.streaming_stores
    assert not group.fusion.streaming_stores


def test_an_output_another_kernel_reads_is_stored_as_before():
    """A softmax returned and also read by the next kernel (across a segment_set): what
    that kernel reads is stored as before (it would want it in L2); the fusion outputs
    that nothing after reads (the softmax and x - max) are stored evict-first."""
    from fuser_core.codegen.cuda import print_kernel
    from fuser_core.codegen.lower import lower_group

    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.BFloat16)
        x = fd.ops.cast(t0, DataType.Float)
        m = fd.ops.max(x, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(x, m))
        p = fd.ops.cast(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)), DataType.BFloat16)
        fd.add_output(p)
        fd.add_output(fd.ops.cast(fd.ops.sub(x, m), DataType.BFloat16))
        fd.add_output(fd.ops.mul(fd.ops.segment_set(p), p))
    runtime = runtime_of(fd, data([3, 1040], DataType.BFloat16))
    first, second = runtime.segmented.groups
    assert (first.scheduler.value, second.scheduler.value) == ("reduction", "pointwise")
    read_later = {tv.name for tv in second.fusion.inputs}
    returned = {tv.name for tv in runtime.segmented.complete.outputs[:2]}
    written = {tv.name for tv in first.fusion.outputs}
    assert read_later and read_later <= written and returned <= written
    assert set(first.params.streaming_stores) == returned
    text = print_kernel(lower_group(first.fusion, "kernel_g0", DataType.Int32))
    stores = dict((int(t), how) for how, t in re.findall(r"(\w+)<\w+, \d>\(&T(\d+)\[[^;]*_vec\[0\]\);", text))
    assert stores == {**dict.fromkeys(read_later, "vectorCopy"), **dict.fromkeys(returned, "vectorStoreStreaming")}


def test_the_kernel_choices_re_reading_candidate_stores_evict_first_too():
    runtime = runtime_of(softmax(DataType.BFloat16), data([4, 512], DataType.BFloat16), ("kernel_choice",))
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "inner_persistent" and not group.params.streaming_stores
    labels = {c.label: c for c in group.candidates}
    rereading = labels["non-persistent"]
    assert rereading.params.streaming_stores == (runtime.segmented.complete.outputs[0].name,)


def test_a_clone_of_a_scheduled_fusion_keeps_its_evict_first_outputs():
    runtime = runtime_of(softmax(DataType.BFloat16), data([3, 1040], DataType.BFloat16))
    (group,) = runtime.segmented.groups
    clone, _ = group.fusion.clone()
    assert clone.streaming_stores == group.fusion.streaming_stores != frozenset()


def test_the_scalar_fallback_of_a_re_reading_kernel_stores_element_by_element():
    from fuser_core.codegen.cuda import print_kernel
    from fuser_core.codegen.lower import lower_group

    runtime = runtime_of(softmax(DataType.BFloat16), data([3, 1040], DataType.BFloat16))
    (group,) = runtime.segmented.groups
    text = print_kernel(lower_group(group.fusion, "kernel_g0", DataType.Int32, vectorize=False))
    assert "vectorStoreStreaming<" not in text and "vectorCopy<" not in text.split('extern "C"')[-1]


@pytest.mark.parametrize(
    ("ctype", "width"), [("__bfloat", 8), ("float", 4), ("float", 2), ("__half", 2), ("float", 1), ("__bfloat", 1)]
)
def test_the_evict_first_store_compiles_at_every_vector_size(ctype, width):
    nvrtc = pytest.importorskip("fuser_core.runtime.nvrtc")
    from fuser_core.codegen.cuda import runtime_prelude

    source = (
        runtime_prelude(DataType.Int32)  # the runtime header as every kernel has it
        + f'extern "C" __global__ void k({ctype}* out, const {ctype}* in) {{\n'
        + f"  {ctype} v[{width}];\n  vectorCopy<{ctype}, {width}>(v, &in[threadIdx.x * {width}]);\n"
        + f"  vectorStoreStreaming<{ctype}, {width}>(&out[threadIdx.x * {width}], v);\n}}\n"
    )
    module = nvrtc.compile_program(source, ["k"], arch="sm_90")
    bytes_ = {"__bfloat": 2, "__half": 2, "float": 4}[ctype] * width
    # 4 to 16 bytes in one evict-first store; a lone 16-bit element as a plain one
    assert ("st.global.cs" in module.ptx) == (bytes_ >= 4), module.ptx[-800:]
    assert module.ptx.count("st.global") == 1, module.ptx[-800:]
