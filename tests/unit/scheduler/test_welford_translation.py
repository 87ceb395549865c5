"""Welford as two block sums in an inner persistent kernel (scheduler/welford_translation):
which Welfords are translated, that the scheduled kernel has no Welford left and no
division per element, and that its values agree with the reference on the interpreter."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from fuser_core import DataType, FusionDefinition, use_options
from fuser_core.codegen import lower_group, print_kernel
from fuser_core.ir.tensor_exprs import ReductionOp, WelfordOp
from fuser_core.runtime.group_lowering import index_dtype
from fuser_core.scheduler.welford_translation import translate_welfords

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
from kernels_check import check_generated_kernels
from test_nvfuser_regressions import _runtime  # the reference run and the runtime, on the h100 model

RNG = np.random.default_rng(1906)


def _layer_norm(fd, width_dtype=DataType.BFloat16):
    x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=width_dtype)
    xf = fd.ops.cast(x, dtype=DataType.Float)
    var, mean = fd.ops.var_mean(xf, dims=[1], correction=0, keepdim=False)
    rstd = fd.ops.rsqrt(fd.ops.add(fd.ops.broadcast_in_dim(var, shape=fd.ops.shape(x), broadcast_dims=[0]), 1e-5))
    centered = fd.ops.sub(xf, fd.ops.broadcast_in_dim(mean, shape=fd.ops.shape(x), broadcast_dims=[0]))
    fd.add_output(fd.ops.cast(fd.ops.mul(centered, rstd), dtype=width_dtype))
    fd.add_output(mean)
    fd.add_output(var)


def test_a_layer_norm_kernel_sums_twice_instead_of_dividing_per_element():
    x = (RNG.standard_normal((6, 1000)) * 3 + 5).astype(DataType.BFloat16.numpy)
    runtime, expected = _runtime(_layer_norm, [x])
    (group,) = runtime.segmented.groups
    assert group.params.scheduler.value == "inner_persistent"
    assert group.params.welford_translated
    assert ("welford_translated", True) in group.params.shown()
    assert not any(isinstance(e, WelfordOp) for e in group.fusion.exprs())
    assert sum(isinstance(e, ReductionOp) for e in group.fusion.exprs()) >= 2
    text = print_kernel(lower_group(group.fusion, "k", index_dtype(runtime.signature.index_type)))
    assert "_delta" not in text and "blockWelford" not in text
    assert text.count("blockReduce<") == 2
    for vectorize in (True, False):
        assert check_generated_kernels(runtime, [x], vectorize=vectorize) == ["kernel_g0"]
    _, mean, var = expected
    wide = x.astype(np.float64)
    np.testing.assert_allclose(mean, wide.mean(axis=1), rtol=1e-5)
    np.testing.assert_allclose(var, wide.var(axis=1), rtol=1e-4)


def test_a_welford_whose_count_is_read_stays_a_welford():
    def build(fd):
        x = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        avg, var_sum, n = fd.ops.welford(x, dims=[1])
        fd.add_output(fd.ops.div(var_sum, fd.ops.cast(n, dtype=DataType.Float)))
        fd.add_output(avg)

    x = RNG.standard_normal((4, 300)).astype(np.float32)
    runtime, (var, _) = _runtime(build, [x])
    groups = runtime.segmented.groups
    assert not any(getattr(g.params, "welford_translated", False) for g in groups)
    assert any(isinstance(e, WelfordOp) for g in groups for e in g.fusion.exprs())
    assert check_generated_kernels(runtime, [x])
    np.testing.assert_allclose(var, x.astype(np.float64).var(axis=1), rtol=1e-5)


def test_translation_replaces_the_outputs_and_keeps_their_dtypes():
    with FusionDefinition() as fd:
        x = fd.define_tensor(shape=[-1, -1, -1], contiguity=[True, True, True], dtype=DataType.Double)
        var, mean = fd.ops.var_mean(x, dims=[1, 2], correction=1)
        fd.add_output(var)
        fd.add_output(mean)
    fusion = fd.fusion
    welford = next(e for e in fusion.exprs() if isinstance(e, WelfordOp))
    names = [o.name for o in fusion.outputs]
    avg_name = welford.outputs[0].name
    sums = translate_welfords(fusion)
    assert list(sums) == [avg_name]
    assert [o.name for o in fusion.outputs] == names  # the results keep the outputs' names
    assert not any(isinstance(e, WelfordOp) for e in fusion.exprs())
    assert [o.dtype for o in fusion.outputs] == [DataType.Double, DataType.Double]
    x = RNG.standard_normal((3, 4, 5))
    with use_options(backend="reference"):
        got_var, got_mean = fd.execute([x])
    np.testing.assert_allclose(got_var, x.reshape(3, -1).var(axis=1, ddof=1), rtol=1e-12)
    np.testing.assert_allclose(got_mean, x.reshape(3, -1).mean(axis=1), rtol=1e-12)


def test_the_translated_group_writes_the_outputs_the_complete_fusion_names():
    # the backend binds a group's outputs to the complete fusion's tensors by name: the
    # translated mean and variance keep the Welford outputs' names (they got new ones,
    # and the cuda backend found no T1 to return)
    x = RNG.standard_normal((4, 256)).astype(np.float32)

    def build(fd):
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        var, mean = fd.ops.var_mean(t0, dims=[1], correction=1)
        fd.add_output(var)
        fd.add_output(mean)
        fd.add_output(fd.ops.sub(t0, fd.ops.broadcast_in_dim(mean, shape=fd.ops.shape(t0), broadcast_dims=[0])))

    runtime, _ = _runtime(build, [x])
    (group,) = runtime.segmented.groups
    assert group.params.welford_translated
    complete = {tv.name for tv in runtime.segmented.complete.outputs}
    assert {tv.name for tv in group.fusion.outputs} == complete
    assert check_generated_kernels(runtime, [x])
