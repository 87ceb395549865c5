"""What a definition tells about its runs: `profile()` after `execute(profile=True)`,
`debug_output()` after `execute(capture_debug_output=True)`, the generated kernels'
CUDA and scheduled IR of the last run or of compiled inputs, and nvFuser's layout
helpers. On the reference backend (no GPU) the kernels are generated and printed but run
by the host reference: their profiles say so."""

from __future__ import annotations

import numpy as np
import pytest

from fuser_core import FuserError, FusionDefinition, use_options
from fuser_core.ir.layout import compute_contiguity, compute_tensor_descriptor

SEGMENTS = [
    "===== g0 reduction: nvfuser_reduction_f0_c1_r0_g0 =====",
    "===== g1 pointwise: nvfuser_pointwise_f0_c1_r0_g1 =====",
]


def sum_and_pow() -> FusionDefinition:
    """Two segments (issue 785's shape): a sum over the outer axes and an unrelated pow."""
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True])
        t1 = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True])
        fd.add_output(fd.ops.sum(t0, dims=[0, 1]))
        fd.add_output(fd.ops.pow(t1, fd.define_scalar(3.0)))
    return fd


@pytest.fixture
def inputs():
    rng = np.random.default_rng(785)
    return [rng.standard_normal((4, 8, 64)).astype(np.float32) for _ in range(2)]


def headers(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("=====")]


def test_before_any_run_every_question_about_runs_is_a_clear_error(inputs):
    fd = sum_and_pow()
    with pytest.raises(FuserError, match=r"last_cuda_code\(\): nothing has been executed yet"):
        fd.last_cuda_code()
    with pytest.raises(FuserError, match=r"last_scheduled_fusion_ir\(\): nothing has been executed yet"):
        fd.last_scheduled_fusion_ir()
    with pytest.raises(FuserError, match=r"cuda_code_for\(\): the fusion has not been executed"):
        fd.cuda_code_for(inputs)
    with pytest.raises(ValueError, match=r"profile\(\) needs an earlier execute\(\.\.\., profile=True\)"):
        fd.profile()
    assert fd.debug_output() is None


def test_profile_names_each_segments_kernel_and_says_the_host_ran_it(inputs):
    fd = sum_and_pow()
    total, cube = fd.execute(inputs, profile=True)
    np.testing.assert_allclose(total, inputs[0].sum(axis=(0, 1)), rtol=1e-4)
    np.testing.assert_allclose(cube, inputs[1] ** 3, rtol=1e-5)
    profile = fd.profile()
    assert profile.fusion_id == 0 and profile.segments == 2
    assert [(k.name, k.segment_id, k.scheduler) for k in profile.kernel_profiles] == [
        ("nvfuser_reduction_f0_c1_r0_g0", 0, "reduction"),
        ("nvfuser_pointwise_f0_c1_r0_g1", 1, "pointwise"),
    ]
    for kernel in profile.kernel_profiles:  # the reference backend launches no kernel
        assert kernel.on_host and kernel.time_ms is None and kernel.effective_bandwidth_gbs is None
        assert kernel.bytes_read == kernel.bytes_written == 0
    assert profile.kernel_time_ms == 0.0 and profile.host_time_ms > 0.0


def test_capture_debug_output_keeps_the_dumps_instead_of_printing_them(inputs, capsys):
    fd = sum_and_pow()
    fd.execute(inputs)
    with use_options(dump=["cache_events", "fusion_args"]):
        fd.execute(inputs, capture_debug_output=True)
    assert capsys.readouterr().out == ""
    assert fd.debug_output() == (
        "Arguments:\n"
        "  0: T0 DataType.Float shape [4, 8, 64] strides [512, 64, 1] (numpy)\n"
        "  1: T1 DataType.Float shape [4, 8, 64] strides [512, 64, 1] (numpy)\n"
        "cache: hit at input key -> f0_c1_r0\n"
    )
    with use_options(dump=["cache_events"]):
        fd.execute(inputs)
    assert capsys.readouterr().out == "cache: hit at input key -> f0_c1_r0\n"
    assert "Arguments:" in fd.debug_output()  # the last capture is kept until the next one


def test_the_last_cuda_code_is_each_generated_kernel_in_launch_order(inputs):
    fd = sum_and_pow()
    fd.execute(inputs)
    code = fd.last_cuda_code()
    assert headers(code) == SEGMENTS
    assert 'extern "C" __global__ void __launch_bounds__(' in code
    assert "nvfuser_reduction_f0_c1_r0_g0(Tensor<float, 3, 3> T0, Tensor<float, 1, 1> T2)" in code
    whole = fd.last_cuda_code(intrinsic_code=True)
    assert headers(whole) == SEGMENTS and len(whole) > len(code)
    assert code.split("\n", 2)[1] in whole  # each kernel inside its translation unit


def test_the_code_and_ir_for_inputs_are_what_an_earlier_run_compiled_for_them(inputs):
    fd = sum_and_pow()
    fd.execute(inputs)
    assert fd.cuda_code_for(inputs) == fd.last_cuda_code()
    scheduled = fd.scheduled_fusion_ir_for(inputs)
    assert scheduled == fd.last_scheduled_fusion_ir()
    assert headers(scheduled) == SEGMENTS and "ithreadIdx.x" in scheduled and "%kernel_math {" in scheduled
    with_transforms = fd.scheduled_fusion_ir_for(inputs, tensor_transforms=True)
    assert headers(with_transforms) == SEGMENTS and "%kernel {" in with_transforms
    rng = np.random.default_rng(1)
    others = [rng.standard_normal((3, 5, 7)).astype(np.float32) for _ in range(2)]
    with pytest.raises(FuserError, match=r"Fusion is not compiled! cuda_code_for\(\)"):
        fd.cuda_code_for(others)


def test_fusion_ir_is_the_math_and_with_transforms_adds_the_transform_printer():
    fd = sum_and_pow()
    math = fd.fusion_ir()
    assert math.startswith("Inputs:\n  T0_g[ iS0{i0}, iS1{i1}, iS2{i2} ], float\n")
    assert "= reduction( T0_g[ iS0{i0}, iS1{i1}, iS2{i2} ], op = add, initial value = float(0)" in math
    transforms = fd.fusion_ir_with_transforms()
    assert "%kernel {" in transforms and "TransformPrinter : " in transforms


@pytest.mark.parametrize(
    ("sizes", "strides", "contiguity"),
    [
        ([2, 3, 4], [12, 4, 1], [True, True, True]),
        ([2, 1, 4], [4, 4, 1], [True, None, True]),  # size 1: a broadcast
        ([3, 4], [0, 1], [None, True]),  # stride 0: an expanded axis
        ([3, 4], [8, 1], [False, True]),  # a padded row
        ([4, 3], [1, 4], [False, False]),  # transposed: logical order is not the layout
    ],
)
def test_compute_contiguity_is_per_logical_axis(sizes, strides, contiguity):
    assert compute_contiguity(sizes, strides) == contiguity


@pytest.mark.parametrize(
    ("sizes", "strides", "descriptor"),
    [
        ([2, 3, 4], [12, 4, 1], ([True, True, True], [2, 1, 0])),
        ([4, 3], [1, 4], ([True, True], [0, 1])),  # transposed: dense in its own order
        ([2, 3, 4], [1, 8, 2], ([True, True, True], [0, 2, 1])),
        ([3, 4], [0, 1], ([None, True], [1, 0])),  # an expand keeps its logical place
    ],
)
def test_compute_tensor_descriptor_gives_allocation_contiguity_and_stride_order(sizes, strides, descriptor):
    assert compute_tensor_descriptor(sizes, strides) == descriptor


def test_the_layout_helpers_refuse_mismatched_or_negative_strides():
    with pytest.raises(ValueError, match="must have the same number of dimensions"):
        compute_contiguity([2, 3], [1])
    with pytest.raises(ValueError, match="negative strides are not supported"):
        compute_tensor_descriptor([2, 3], [-3, 1])


def test_a_definition_made_from_strides_matches_the_tensor_descriptor():
    sizes, strides = [4, 6, 5], [1, 20, 4]
    contiguity, order = compute_tensor_descriptor(sizes, strides)
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.define_tensor(sizes=sizes, strides=strides)))
    assert f"contiguity={contiguity}, dtype=DataType.Float, is_cpu=False, stride_order={order})" in repr(fd)
