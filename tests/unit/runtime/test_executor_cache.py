"""FusionExecutorCache: hits, misses, the level that answered, the reasons, the ids."""

import numpy as np
import pytest

from fuser_core import DataType, FuserError, FusionDefinition
from fuser_core.options import dump_sink, use_options
from fuser_core.runtime import executor_cache


def pointwise() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=False, dtype=DataType.Float)
        fd.add_output(fd.ops.exp(t0))
    return fd


def reshape_fusion() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1, -1, -1], contiguity=True, dtype=DataType.Float)
        s0 = fd.define_scalar(None, dtype=DataType.Int)
        s1 = fd.define_scalar(None, dtype=DataType.Int)
        t1 = fd.ops.reshape(t0, [t0.size(0), s0, s1, t0.size(3)])
        fd.add_output(fd.ops.mul(t1, 2.0))
    return fd


def pad_fusion() -> FusionDefinition:
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        left = fd.define_scalar(None, dtype=DataType.Int)
        right = fd.define_scalar(None, dtype=DataType.Int)
        fd.add_output(fd.ops.pad(t0, [left, right]))
    return fd


def events(fd: FusionDefinition) -> list[str]:
    return [e.line() for e in fd.executor_cache.events]


def rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(sum(shape)).standard_normal(shape, dtype=np.float32)


def test_the_same_input_twice_is_a_hit_at_the_input_key():
    fd = pointwise()
    x = rand(4, 5)
    fd.execute([x])
    fd.execute([x])
    first, second = fd.executor_cache.events
    assert not first.hit and first.level == "concretization"
    assert first.reasons == ("first execution: nothing cached",)
    assert second.hit and second.level == "input key" and second.runtime == "f0_c1_r0"
    assert events(fd)[1] == "cache: hit at input key -> f0_c1_r0"


def test_a_static_fusion_reuses_its_runtime_for_new_sizes():
    fd = pointwise()
    fd.execute([rand(4, 5)])
    (out,) = fd.execute([rand(7, 3)])
    np.testing.assert_allclose(out, np.exp(rand(7, 3)), rtol=1e-6)
    assert fd.executor_cache.events[-1].hit
    assert len(fd.executor_cache.runtimes) == 1


def test_a_new_stride_order_is_a_miss_at_runtime_level_with_its_reason():
    fd = pointwise()
    x = rand(4, 5)
    fd.execute([x])
    (out,) = fd.execute([np.asfortranarray(x)])
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)
    event = fd.executor_cache.events[-1]
    assert not event.hit and event.level == "runtime"
    assert event.reasons == ("input 0 stride order changed [1, 0] -> [0, 1]",)
    assert event.runtime == "f0_c1_r1"


def test_reshape_misses_when_the_decomposition_changes_and_says_how():
    fd = reshape_fusion()
    x = rand(8, 3, 35, 9)
    fd.execute([x, 3, 35])
    (out,) = fd.execute([x, 5, 21])
    np.testing.assert_allclose(out, 2 * x.reshape(8, 5, 21, 9))
    event = fd.executor_cache.events[-1]
    assert not event.hit and event.level == "concretization"
    assert event.reasons == ("reshape T1: [8, 3, 35, 9] -> [8, 5, 21, 9]",)
    assert event.runtime == "f0_c2_r0"


def test_pr215_no_stale_hit_when_inputs_need_a_new_concretization():
    """A cache hit where there should be none: new input sizes, same scalars."""
    fd = reshape_fusion()
    fd.execute([rand(2, 4, 6, 3), 4, 6])  # an identity reshape
    (out,) = fd.execute([rand(2, 6, 4, 3), 4, 6])  # now a merge and a split
    np.testing.assert_allclose(out, 2 * rand(2, 6, 4, 3).reshape(2, 4, 6, 3))
    assert not fd.executor_cache.events[-1].hit
    assert fd.executor_cache.last_runtime.info.reshapes[0].in_sizes == (2, 6, 4, 3)


def test_pr215_a_reshape_that_depends_only_on_scalars_is_not_short_circuited():
    """Same tensor, only the scalar inputs change: the reshape must follow them."""
    fd = reshape_fusion()
    x = rand(8, 3, 35, 9)
    fd.execute([x, 3, 35])
    (out,) = fd.execute([x, 15, 7])
    assert out.shape == (8, 15, 7, 9)
    np.testing.assert_allclose(out, 2 * x.reshape(8, 15, 7, 9))
    assert not fd.executor_cache.events[-1].hit


def test_with_the_option_off_extent_only_resize_changes_hit_the_cache():
    fd = pad_fusion()
    off = ["concretize_resize_extents"]
    x = rand(4, 6)
    fd.execute([x, 1, 2], _disable_options=off)
    (out,) = fd.execute([x, 2, 3], _disable_options=off)
    np.testing.assert_array_equal(out, np.pad(x, [(0, 0), (2, 3)]))
    event = fd.executor_cache.events[-1]
    assert event.hit and event.level == "concretization"
    assert event.reasons == ("scalar i3 1 -> 2", "scalar i4 2 -> 3")


def test_with_the_option_on_each_resize_extent_is_a_new_runtime():
    fd = pad_fusion()
    x = rand(4, 6)
    fd.execute([x, 1, 2])
    fd.execute([x, 2, 3])
    event = fd.executor_cache.events[-1]
    assert not event.hit
    assert event.reasons == ("resize T1 axis 1: (6, 1, 2) -> (6, 2, 3)",)


def test_ids_number_concretizations_from_one_and_runtimes_from_zero():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=False, dtype=DataType.Float)
        fd.add_output(fd.ops.pad(t0, [fd.define_scalar(None, DataType.Int), fd.define_scalar(None, DataType.Int)]))
    x = rand(4, 6)
    fd.execute([x, 1, 2])
    fd.execute([x, 2, 2])
    fd.execute([np.asfortranarray(x), 2, 2])
    assert [e.runtime for e in fd.executor_cache.events] == ["f0_c1_r0", "f0_c2_r0", "f0_c2_r1"]


def test_fusion_id_comes_from_the_fusion_cache():
    pointwise().execute([rand(2, 2)])  # fusion 0
    with FusionDefinition() as fd:
        fd.add_output(fd.ops.neg(fd.define_tensor(shape=[-1], contiguity=True)))
    fd.execute([rand(3)])
    assert fd.id() == 1
    assert fd.executor_cache.events[0].runtime == "f1_c1_r0"


def test_cache_events_dump_prints_one_line_per_execution():
    fd = pointwise()
    lines: list[str] = []
    with dump_sink(lambda option, text: lines.append(text)), use_options(dump="cache_events"):
        fd.execute([rand(2, 2)])
        fd.execute([rand(2, 2)])
    assert len(lines) == 2
    assert lines[0].startswith("cache: miss") and lines[1].startswith("cache: hit")


def test_unknown_option_in_execute_lists_the_valid_names():
    fd = pointwise()
    with pytest.raises(FuserError) as err:
        fd.execute([rand(2, 2)], _disable_options=["no_such_option"])
    assert "concretize_resize_extents" in str(err.value)


def test_the_input_key_level_is_an_lru(monkeypatch):
    monkeypatch.setattr(executor_cache, "INPUT_KEY_CAPACITY", 2)
    fd = pad_fusion()
    off = ["concretize_resize_extents"]
    x = rand(4, 6)
    for widths in ((1, 1), (1, 2), (1, 3)):
        fd.execute([x, *widths], _disable_options=off)
    fd.execute([x, 1, 1], _disable_options=off)  # evicted from level 1: found at level 2
    event = fd.executor_cache.events[-1]
    assert event.hit and event.level == "concretization"
    fd.execute([x, 1, 3], _disable_options=off)
    assert fd.executor_cache.events[-1].level == "input key"


def test_each_run_leaves_a_report():
    fd = pointwise()
    fd.execute([rand(2, 3)])
    report = fd.executor_cache.last_report
    assert report.index == 0 and report.event.runtime == "f0_c1_r0"
    assert report.arguments == ("0: T0 DataType.Float shape [2, 3] strides [3, 1] (numpy)",)
    assert report.runtime.fusion is fd.fusion  # a static fusion runs as defined
    assert report.seconds >= 0


def test_compile_summary_counts_kernels_only():
    from fuser_core.runtime.executor_cache import RunReport

    def report(compiles):
        return RunReport(0, executor_cache.CacheEvent(False, "input key", "f0_c1_r0"), None, (), 0.0, (), compiles)

    assert report(()).compile_summary() == "no kernels compiled in this run"
    host = "g1 reduction: on the host reference (CUDA codegen part 2 will generate reduction groups)"
    assert report((host,)).compile_summary() == "no kernels compiled in this run"
    warm = ("nvfuser_pointwise_f0_c1_r0_g0: disk (0.021 s to compile)", host)
    assert report(warm).compile_summary() == "warm start: compiled nothing (1 kernels from the kernel cache)"
    cold = ("nvfuser_pointwise_f0_c1_r0_g0: compiled (0.021 s to compile)", host)
    assert report(cold).compile_summary() == "compiled 1 of 1 kernels"


def _pointwise_fd():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        t1 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        fd.add_output(fd.ops.mul(fd.ops.exp(t0), t1))
    return fd


def test_compile_options_change_the_schedule_and_are_cache_keys():
    fd = _pointwise_fd()
    x = np.random.default_rng(0).standard_normal((64, 1024)).astype(np.float32)
    with use_options(device_model="h100_sxm", backend="reference"):
        fd.execute([x, x])
        first = fd.executor_cache.last_runtime
        fd.execute([x, x], _disable_options=["vectorization"])
        scalar = fd.executor_cache.last_runtime
        fd.execute([x, x], _enable_options=["int64_index"])
        wide = fd.executor_cache.last_runtime
    assert first.segmented.groups[0].params.vectorize == 4
    assert scalar is not first and scalar.segmented.groups[0].params.vectorize == 1
    events = fd.executor_cache.events
    assert "vectorization off" in events[1].reasons
    assert wide.signature.index_type == "int64" and events[2].reasons == ("index type int32 -> int64",)
    assert "long long" in translation_unit_of(wide)


def translation_unit_of(runtime):
    from fuser_core.runtime.dumps import full_source

    return full_source(runtime, 0)


def test_allocation_order_inference_can_be_skipped_and_says_so():
    fd = _pointwise_fd()
    x = np.random.default_rng(1).standard_normal((8, 16)).astype(np.float32)
    with use_options(backend="reference", disable=["allocation_order_inference"]):
        runtime = fd.runtime_for([x, x])
    (record,) = [r for r in runtime.compiled.passes if r.name == "allocation_order_inference"]
    assert record.skipped and not record.changed


def test_disabled_segmentation_refuses_a_fusion_that_needs_two_kernels():
    with FusionDefinition() as fd:
        t0 = fd.define_tensor(shape=[-1, -1], contiguity=True, dtype=DataType.Float)
        s = fd.ops.sum(t0, dims=[0])
        fd.add_output(fd.ops.add(fd.ops.sum(fd.ops.exp(t0), dims=[1]), fd.ops.sum(s, dims=[0])))
    x = np.random.default_rng(2).standard_normal((8, 16)).astype(np.float32)
    with use_options(backend="reference"):
        assert len(fd.runtime_for([x]).segmented.groups) > 1
        with pytest.raises(FuserError, match="does not fit one kernel and segmentation is disabled: "):
            fd.execute([x], _disable_options=["segmentation"])
