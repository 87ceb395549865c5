"""Every candidate schedule the kernel choice may keep computes what the reference
computes: each is lowered on its own and run by the kernel-IR interpreter, for every
thread of every block, on the samples (at the shrunk sizes) and on reductions sized near
the grid-split thresholds."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
import pytest
from kernels_check import SAMPLES, check_generated_kernels, reduction_fusion, shrunk_sample

from fuser_core import DataType, load_repro, use_options
from fuser_core.codegen.kernel_ir import print_kernel_ir
from fuser_core.codegen.lower import lower_group
from fuser_core.ir.dtype import DataType as IrDataType

# The samples whose groups have candidates at the shrunk sizes (the others have none: no
# reduction, or only pointwise and library groups), and the labels of each group's
# candidates, the heuristic's own first.
EXPECTED = {
    "softmax": {0: ["persistent", "non-persistent"]},
    "layer_norm_fwd": {0: ["persistent", "non-persistent"]},
    "rms_norm_fwd": {0: ["persistent", "non-persistent"]},
    "bias_residual_layer_norm": {0: ["persistent", "non-persistent"]},
    "issue785_reduction_pow": {0: ["no grid split", "grid split 3"]},
    "issue785_gelu_bias_bwd": {0: ["no grid split", "grid split 3"]},
    "layer_norm_bwd": {
        0: ["persistent", "non-persistent"],
        1: ["no grid split", "grid split 2"],
    },
    "cross_entropy_bwd": {0: ["non-persistent", "persistent"]},  # its 32064-wide bf16 rows re-read
    "dynamic_reshape": {0: ["persistent", "non-persistent"]},
    "segment_set_log_softmax": {1: ["persistent", "non-persistent"]},
    "var_mean": {0: ["persistent", "non-persistent"]},
}
# Smaller still than the codegen tests' sizes: every candidate of a group is interpreted.
SMALLER = {"dynamic_reshape": ("8, 2048, 2048", "2, 24, 64")}


def choice_runtime(fd: Any, inputs: list[Any]) -> Any:
    with use_options(device_model="h100_sxm", backend="reference", enable=["kernel_choice"]):
        return fd.runtime_for(inputs)


def check_every_candidate(runtime: Any, inputs: list[Any]) -> list[str]:
    """Each alternative of each group, checked against the reference (the heuristic's own
    is the group's kernel, which every codegen test checks); the kernels checked."""
    checked = []
    positions = max((len(g.candidates) for g in runtime.segmented.groups), default=0)
    for position in range(1, positions):

        def fusion_of(group: Any, position: int = position) -> Any:
            chosen = group.candidates[position] if position < len(group.candidates) else None
            return chosen.fusion if chosen is not None else group.fusion

        checked += check_generated_kernels(runtime, inputs, scheduled_fusion=fusion_of)
    return checked


@pytest.mark.parametrize("name", SAMPLES)
def test_every_candidate_of_every_sample_agrees_with_the_reference(name):
    text = shrunk_sample(name)
    if name in SMALLER:
        text = text.replace(*SMALLER[name])
    (loaded,) = load_repro(text).definitions
    inputs = loaded.materialize_inputs(seed=0)
    runtime = choice_runtime(loaded.fd, inputs)
    found = {g.id: [c.label for c in g.candidates] for g in runtime.segmented.groups if g.candidates}
    assert found == EXPECTED.get(name, {})
    for group in runtime.segmented.groups:
        for position, candidate in enumerate(group.candidates[1:], 1):
            assert candidate.fusion is not None and candidate.fusion is not group.fusion, (name, position)
    if found:
        assert check_every_candidate(runtime, inputs)


# Reductions near the thresholds: [rows, row] inner and [column, columns] outer, sized so
# that the heuristic splits the grid or does not, and the candidate does the other.
REDUCTIONS = [
    ([2, 20000], [1], "sum", DataType.Float, "no grid split", "grid split 8"),
    ([2, 36000], [1], "sum", DataType.Float, "grid split 2", "no grid split"),
    ([3, 8192], [1], "max", DataType.Half, "no grid split", "grid split 4"),
    ([3, 3000], [1], "var_mean", DataType.Float, "no grid split", "grid split 2"),
    ([700, 40], [0], "sum", DataType.Float, "grid split 2", "no grid split"),
    ([300, 64], [0], "var_mean", DataType.BFloat16, "no grid split", "grid split 4"),
]


@pytest.mark.parametrize(("shape", "axes", "op", "dtype", "own", "other"), REDUCTIONS)
def test_reductions_with_and_without_a_grid_split_agree_with_the_reference(shape, axes, op, dtype, own, other):
    fd = reduction_fusion(shape, axes, op, False, dtype, normalize=False)
    inputs = [_random(shape, dtype)]
    runtime = choice_runtime(fd, inputs)
    (group,) = runtime.segmented.groups
    assert [c.label for c in group.candidates] == [own, other]
    assert check_every_candidate(runtime, inputs) == ["kernel_g0"]


@pytest.mark.parametrize("shape", [[6, 200], [5, 1000], [2, 3000]])
def test_a_normalization_is_right_without_persistence_too(shape):
    fd = reduction_fusion(shape, [1], "sum", False, DataType.Half, normalize=True)
    inputs = [_random(shape, DataType.Half)]
    runtime = choice_runtime(fd, inputs)
    (group,) = runtime.segmented.groups
    assert [(c.label, c.scheduler.value) for c in group.candidates] == [
        ("persistent", "inner_persistent"),
        ("non-persistent", "reduction"),
    ]
    looped = group.candidates[1].params
    assert not looped.persistent and looped.grid_reduction == 1
    assert check_every_candidate(runtime, inputs) == ["kernel_g0"]
    # The persistent kernel reads its input once and keeps the row; the other reads it again
    # in each pass after a reduction.
    assert [_global_reads(c.fusion, "T0") for c in group.candidates] == [1, 2]


def _global_reads(fusion: Any, tensor: str) -> int:
    text = print_kernel_ir(lower_group(fusion, "k", IrDataType.Int32))
    return sum(f"= {tensor}[" in line for line in text.splitlines())


def _random(shape: list[int], dtype: Any) -> np.ndarray:
    values = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    if dtype == DataType.Half:
        return values.astype(np.float16)
    if dtype == DataType.BFloat16:
        return values.astype(ml_dtypes.bfloat16)
    return values
