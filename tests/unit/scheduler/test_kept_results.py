"""An inner persistent kernel keeps a transcendental result that a later reduction and
the epilogue both read (softmax's exp) instead of computing it twice; a cheap one (the
subtraction before it) is still recomputed. Values checked on the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.codegen import lower_group, print_kernel
from fuser_core.runtime.group_lowering import index_dtype

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from kernels_check import SAMPLES_DIR, check_generated_kernels, runtime_and_inputs


def _softmax(fd, log: bool = False):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
    shifted = fd.ops.sub(x, fd.ops.broadcast_in_dim(fd.ops.max(x, dims=[1]), shape=fd.ops.shape(x), broadcast_dims=[0]))
    e = fd.ops.exp(shifted)
    total = fd.ops.broadcast_in_dim(fd.ops.sum(e, dims=[1]), shape=fd.ops.shape(x), broadcast_dims=[0])
    fd.add_output(fd.ops.sub(shifted, fd.ops.log(total)) if log else fd.ops.div(e, total))


def _group_and_text(build, x):
    with FusionDefinition() as fd:
        build(fd)
    with use_options(device_model="h100_sxm", backend="reference"):
        (expected,) = fd.execute([x])
        runtime = fd.runtime_for([x])
    (group,) = runtime.segmented.groups
    text = print_kernel(lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type)))
    return runtime, group, text, expected


def test_softmax_computes_each_exp_once():
    x = np.random.default_rng(5).standard_normal((6, 700)).astype(np.float32)
    runtime, group, text, expected = _group_and_text(_softmax, x)
    assert group.params.scheduler.value == "inner_persistent"
    (kept,) = group.params.kept_results
    assert text.count("expf(") == 1
    assert f"T{kept}[" in text  # read from its register buffer by the sum and the division
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, [x], vectorize=vectorize) == ["kernel_g0"]
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(expected, e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_log_softmax_keeps_nothing_it_does_not_read_twice():
    # exp(x - max) is read only by the sum: nothing to keep; log of the sum is one per row
    x = np.random.default_rng(6).standard_normal((3, 300)).astype(np.float32)
    runtime, group, _, _ = _group_and_text(lambda fd: _softmax(fd, log=True), x)
    assert group.params.kept_results == ()
    assert check_generated_kernels(runtime, [x]) == ["kernel_g0"]


def test_the_softmax_sample_keeps_its_exp_where_it_holds_its_rows():
    # rows of 512: held (at its own 1024, bf16 rows are re-read: scheduler.rereading)
    text = (SAMPLES_DIR / "softmax.py").read_text().replace("1024, 1024", "1024, 512")
    runtime, _ = runtime_and_inputs(text)
    (group,) = runtime.segmented.groups
    assert group.scheduler.value == "inner_persistent"
    assert len(group.params.kept_results) == 1
    assert ("kept_results", group.params.kept_results) in group.params.shown()
