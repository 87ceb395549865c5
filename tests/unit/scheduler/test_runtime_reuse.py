"""A runtime is reused for new sizes only if every kernel's scheduler still takes them
with the same parameters; otherwise the miss says which kernel and what changed."""

import numpy as np

from fuser_core import DataType, FusionDefinition, use_options


def exp_fusion() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        fd.add_output(fd.ops.exp(t0))
    return fd


def softmax_fusion() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=[True, True], dtype=DataType.Float)
        m = fd.ops.max(t0, dims=[1], keepdim=True)
        e = fd.ops.exp(fd.ops.sub(t0, m))
        fd.add_output(fd.ops.div(e, fd.ops.sum(e, dims=[1], keepdim=True)))
    return fd


def rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape, dtype=np.float32) + 0.5


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_new_sizes_with_the_same_heuristics_reuse_the_runtime():
    fd = exp_fusion()
    fd.execute([rand(4, 8)])
    (out,) = fd.execute([rand(6, 16)])
    np.testing.assert_allclose(out, np.exp(rand(6, 16)), rtol=1e-6)
    event = fd.executor_cache.events[-1]
    assert event.hit and event.level == "concretization"
    assert event.reasons == ("input 0 shape [4, 8] -> [6, 16]",)
    assert len(fd.executor_cache.runtimes) == 1


def test_new_sizes_that_change_a_heuristic_build_a_new_runtime_and_say_why():
    fd = exp_fusion()
    fd.execute([rand(4, 8)])
    (out,) = fd.execute([rand(4, 5)])  # 5 floats per row: no 16-byte vectors
    np.testing.assert_allclose(out, np.exp(rand(4, 5)), rtol=1e-6)
    event = fd.executor_cache.events[-1]
    assert not event.hit and event.level == "runtime"
    assert event.reasons == ("f0_c1_r0: g0 pointwise heuristics changed: vectorize 4 -> 1",)
    assert [g.params.vectorize for r in fd.executor_cache.runtimes for g in r.segmented.groups] == [4, 1]


def test_a_row_too_long_to_keep_is_refused_by_the_persistent_kernel_and_segmented():
    fd = softmax_fusion()
    fd.execute([rand(8, 256)])
    (first,) = fd.executor_cache.last_runtime.segmented.groups
    assert first.scheduler.value == "inner_persistent"
    x = rand(2, 1 << 17)  # 512 KiB of float per row: more than a block's shared memory
    (out,) = fd.execute([x])
    np.testing.assert_allclose(out, softmax(x), rtol=1e-5, atol=1e-9)
    event = fd.executor_cache.events[-1]
    assert not event.hit and event.level == "runtime"
    assert "g0 inner_persistent rejects the new sizes: not enough registers or shared memory" in event.reasons[0]
    segmented = fd.executor_cache.last_runtime.segmented
    assert len(segmented.groups) > 1
    whole = {r.scheduler.value: r for r in segmented.whole_fusion_rejections}
    assert whole["inner_persistent"].category.value == "persistent buffer too large"


def test_another_device_model_is_another_runtime():
    fd = exp_fusion()
    x = rand(4, 8)
    fd.execute([x])
    with use_options(device_model="h200"):
        fd.execute([x])
    event = fd.executor_cache.events[-1]
    assert not event.hit and event.level == "runtime"
    assert [r.compiled.device.name for r in fd.executor_cache.runtimes] == ["NVIDIA H100 SXM5", "NVIDIA H200"]
